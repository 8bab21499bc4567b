"""tirxpy.sim.wgmma: accumulator placement (PTX ISA wgmma D fragment for m64nNk16), tf32 truncation,
and an end-to-end m64nNk16 SS wgmma product checked against numpy."""
import numpy as np
import pytest

from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits
from tirxpy.sim.wgmma import _trunc_tf32, placement

from . import pipeline_kernels as pk


def test_accumulator_placement_matches_ptx_fragment():
    # PTX ISA wgmma .m64nNk16 D fragment: row r, col c is held by warp r // 16,
    # lane 4 * (r % 8) + (c % 8) // 2, register (c // 8) * 4 + ((r % 16) // 8) * 2 + c % 2
    n = 16
    w, lane, m = placement(wgmma_accumulator(n), (64, n))
    r, c = np.meshgrid(np.arange(64), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(w, r // 16)
    np.testing.assert_array_equal(lane, 4 * (r % 8) + (c % 8) // 2)
    np.testing.assert_array_equal(m, (c // 8) * 4 + ((r % 16) // 8) * 2 + c % 2)


def test_trunc_tf32_keeps_10_mantissa_bits():
    x = np.array([1 + 2.0 ** -10, 1 + 2.0 ** -11, -(1 + 2.0 ** -20), 3.0], np.float32)
    np.testing.assert_array_equal(_trunc_tf32(x), np.array([1 + 2.0 ** -10, 1.0, -1.0, 3.0], np.float32))


def test_wgmma_gemm_matches_numpy():
    rng = np.random.default_rng(0)
    a = to_bits(rng.standard_normal((64, 64)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((16, 64)).astype(np.float32), "bfloat16")
    c = np.zeros((64, 16), np.float32)
    res = run(pk.pipeline_gemm(M=64, N=16, K=64), a, b, c, seed=0)
    assert res.problems == []
    want = from_bits(a, "bfloat16").astype(np.float64) @ from_bits(b, "bfloat16").astype(np.float64).T
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("drop,kind", [("wgmma_wait", "wgmma_accumulator_before_wait"),
                                       ("wgmma_fence", "missing_wgmma_fence")])
def test_wgmma_sync_mistakes_are_reported(drop, kind):
    a = to_bits(np.ones((64, 64), np.float32), "bfloat16")
    b = to_bits(np.ones((16, 64), np.float32), "bfloat16")
    with pytest.raises(SimReportError) as ei:
        run(pk.pipeline_gemm(M=64, N=16, K=64, drop=drop), a, b, np.zeros((64, 16), np.float32), seed=0)
    assert kind in ei.value.kinds(), str(ei.value)
