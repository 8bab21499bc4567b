"""Transaction counts on mbarriers: bytes may land before the arrival that announces them (the
tx-count goes negative for a while, as PTX allows), but bytes nobody announces are reported."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_128B
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits

BYTES = 64 * 64 * 2


def _load_then_copy(announce):
    """One thread issues a TMA load of a 64 x 64 bf16 tile, then (``announce="after"``) arms the
    barrier with arrive.expect_tx, or (``"never"``) only arrives; everyone waits and copies out."""
    SL = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 64)]))

    @T.prim_func
    def k(A: T.Tensor((64, 64), "bfloat16"), C: T.Tensor((64, 64), "bfloat16")):
        T.launch(grid=(1,), threads=32)
        As = T.alloc_shared((64, 64), "bfloat16", layout=SL)
        bar = T.alloc_shared((1,), "uint64")
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.tma_load_2d(As, A[0:64, 0:64], 0, 0, bar[0])
            if announce == "after":
                T.ptx.mbarrier_arrive_expect_tx(bar[0], BYTES)
            else:
                T.ptx.mbarrier_arrive(bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        for i in T.serial(128):
            r = (i * 32 + T.lane_id()) // 64
            c = (i * 32 + T.lane_id()) % 64
            C[r, c] = As[r, c]

    return k


@pytest.mark.parametrize("seed", range(4))
def test_bytes_may_land_before_expect_tx(seed):
    a = to_bits(np.random.default_rng(seed).standard_normal((64, 64)).astype(np.float32), "bfloat16")
    c = np.zeros_like(a)
    res = run(_load_then_copy("after"), a, c, seed=seed)
    assert res.problems == []
    np.testing.assert_array_equal(from_bits(c, "bfloat16"), from_bits(a, "bfloat16"))


def test_bytes_never_announced_are_reported():
    a = to_bits(np.ones((64, 64), np.float32), "bfloat16")
    with pytest.raises(SimReportError) as ei:
        run(_load_then_copy("never"), a, np.zeros_like(a), seed=0)
    assert "tx_underflow" in ei.value.kinds(), str(ei.value)
    assert any(p.kind == "tx_underflow" and p.span is not None and "tma_load_2d" in p.span.source_line()
               for p in ei.value.problems), str(ei.value)
