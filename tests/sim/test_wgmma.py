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


def _stage_b_and_fill():
    """The RS kernels' prologue: ``stage(B, sb)`` (threads 0-15 copy the 16 x 16 ``B`` into shared ``sb``, then
    ``fence.proxy.async`` and a barrier) and ``fill(regs, word)`` (each of 4 registers set to ``word``: ``0x3F803F80``
    is two bf16 ones, ``0x3C003C00`` two f16 ones)."""
    from tirxpy import T

    @T.macro
    def stage(B, sb):
        row = T.thread_id()
        if row < 16:
            for j in T.serial(16):
                sb[row, j] = B[row, j]
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()

    @T.macro
    def fill(regs, word):
        for i in T.serial(4):
            regs[i] = T.uint32(word)
    return stage, fill


def _rs_kernel(write_a_in_flight=False, fence=True, read_a_in_flight=False, share_a=False, early_fence=True):
    """D (64 x 16) = A (64 x 16, ones, from registers) @ B (16 x 16)^T with one wgmma of register A; the kernel writes
    D out as fragment registers ``C[thread, i]``. ``write_a_in_flight``: an A register is overwritten between the
    commit and the wait; ``read_a_in_flight``: one is read there (into ``C[thread, 8]``); ``share_a``: a second
    wgmma takes the same A fragment (into ``e``) while the first is in flight; ``fence=False``: no wgmma.fence
    between writing A and the wgmma; ``early_fence=False``: none before writing A either."""
    from tirxpy import T
    from tirxpy.intrinsics import wgmma
    from tirxpy.layout.atoms import mma_smem_layout

    WG = wgmma.get(n=16, d="float32", a="bfloat16", b="bfloat16", a_from="reg")
    SB = mma_smem_layout(16, 16, "bf16", "K", 32)
    WRITE, FENCE, READ, SHARE, EARLY = write_a_in_flight, fence, read_a_in_flight, share_a, early_fence
    stage, fill = _stage_b_and_fill()

    @T.prim_func
    def k(B: T.Tensor((16, 16), "bfloat16"), C: T.Tensor((128, 9), "float32")):
        T.launch(grid=(1,), threads=128)
        sb = T.alloc_shared((16, 16), "bfloat16", layout=SB)
        a = T.alloc_local((4,), "uint32")
        d = T.alloc_local((8,), "float32")
        e = T.alloc_local((8,), "float32")
        t = T.thread_id()
        stage(B, sb)
        if EARLY:
            T.ptx.wgmma_fence()
        fill(a, 0x3F803F80)
        if FENCE:
            T.ptx.wgmma_fence()
        WG(d, a, sb[0:16, 0:16], False, 1, 1, 0)
        T.ptx.wgmma_commit_group()
        if SHARE:
            WG(e, a, sb[0:16, 0:16], False, 1, 1, 0)
            T.ptx.wgmma_commit_group()
        if WRITE:
            a[0] = T.uint32(0)
        if READ:
            C[t, 8] = T.cast(a[0], "float32")
        T.ptx.wgmma_wait_group(0)
        for i in T.serial(8):
            C[t, i] = d[i] + e[i] if SHARE else d[i]
    return k


@pytest.mark.parametrize("mutation,kind", [(None, None), ("share_a", None),
                                           ("write_a_in_flight", "wgmma_accumulator_before_wait"),
                                           ("read_a_in_flight", "wgmma_accumulator_before_wait"),
                                           ("no_fence", "missing_wgmma_fence"),
                                           ("no_fence_at_all", "missing_wgmma_fence")])
def test_register_a_of_a_wgmma_is_fenced_and_not_touched_in_flight(mutation, kind):
    """PTX: the A fragment registers of a wgmma are neither written nor read by ordinary code before the
    wgmma.wait_group retiring it (another wgmma may take them as its A too), and are written by ordinary code only
    with a wgmma.fence before the wgmma; a warpgroup's first wgmma has a wgmma.fence before it."""
    rng = np.random.default_rng(5)
    b = to_bits(rng.standard_normal((16, 16)).astype(np.float32), "bfloat16")
    c = np.zeros((128, 9), np.float32)
    k = _rs_kernel(write_a_in_flight=mutation == "write_a_in_flight",
                   fence=mutation not in ("no_fence", "no_fence_at_all"),
                   read_a_in_flight=mutation == "read_a_in_flight", share_a=mutation == "share_a",
                   early_fence=mutation != "no_fence_at_all")
    res = run(k, b, c, check=False)
    assert [p.kind for p in res.problems] == ([kind] if kind else []), res.problems
    if kind is None:
        want = (2 if mutation == "share_a" else 1) * np.ones((64, 16)) @ from_bits(b, "bfloat16").astype(np.float64).T
        w, lane, m = placement(wgmma_accumulator(16), (64, 16))
        np.testing.assert_allclose(c[32 * w + lane, m], want, rtol=1e-5, atol=1e-5)
    if kind == "wgmma_accumulator_before_wait":
        what = "read" if mutation == "read_a_in_flight" else "write"
        assert f"{what} of register tile a while a wgmma using it (A fragment) is still in flight" in str(
            res.problems[0])
        assert "read them before issuing the wgmma" in str(res.problems[0])
    if mutation == "no_fence":
        assert "A fragment registers of a written by ordinary code" in str(res.problems[0])
    if mutation == "no_fence_at_all":
        assert "the warpgroup's first wgmma has no wgmma.fence before it" in str(res.problems[0])


def _accumulator_kernel(second, fence=False, wait=False):
    """A wgmma m64n16k16 (f16 inputs, A from registers ``a``, float32 accumulator ``d``) in flight, then a second
    wgmma: ``second="n8"`` accumulates m64n8k16 into the first 4 registers of ``d`` (another shape);
    ``second="a"`` accumulates m64n8k16 in float16 into the first 2 registers of ``a`` (the first one's A
    fragment). ``fence``: a wgmma.fence between them; ``wait``: a wgmma.wait_group(0) between them."""
    from tirxpy import T
    from tirxpy.intrinsics import wgmma
    from tirxpy.layout.atoms import mma_smem_layout

    W16 = wgmma.get(n=16, d="float32", a="float16", b="float16", a_from="reg")
    W8 = wgmma.get(n=8, d="float32", a="float16", b="float16", a_from="reg")
    W8H = wgmma.get(n=8, d="float16", a="float16", b="float16", a_from="reg")
    SB = mma_smem_layout(16, 16, "f16", "K", 32)
    SECOND, FENCE, WAIT = second, fence, wait
    stage, fill = _stage_b_and_fill()

    @T.prim_func
    def k(B: T.Tensor((16, 16), "float16"), C: T.Tensor((128, 8), "float32")):
        T.launch(grid=(1,), threads=128)
        sb = T.alloc_shared((16, 16), "float16", layout=SB)
        a = T.alloc_local((4,), "uint32")
        a2 = T.alloc_local((4,), "uint32")
        d = T.alloc_local((8,), "float32")
        t = T.thread_id()
        stage(B, sb)
        fill(a, 0x3C003C00)
        fill(a2, 0x3C003C00)
        T.ptx.wgmma_fence()
        W16(d, a, sb[0:16, 0:16], False, 1, 1, 0)
        T.ptx.wgmma_commit_group()
        if WAIT:
            T.ptx.wgmma_wait_group(0)
        if FENCE:
            T.ptx.wgmma_fence()
        if SECOND == "n8":
            W8(d[0:4], a2, sb[0:8, 0:16], True, 1, 1, 0)
        else:
            W8H(a[0:2], a2, sb[0:8, 0:16], True, 1, 1, 0)
        T.ptx.wgmma_commit_group()
        T.ptx.wgmma_wait_group(0)
        for i in T.serial(8):
            C[t, i] = d[i]
    return k


@pytest.mark.parametrize("second,fence,wait,kind,text", [
    ("n8", False, False, "missing_wgmma_fence", "wgmma m64n8k16 accumulates into registers of d that a wgmma "
                                                "m64n16k16 still in flight accumulates into"),
    ("n8", True, False, None, None),
    ("a", True, False, "wgmma_accumulator_before_wait", "wgmma writes accumulator registers of a that an earlier "
                                                        "wgmma still in flight reads as its A fragment"),
    ("a", True, True, None, None)])
def test_a_wgmma_accumulating_into_registers_another_one_in_flight_uses(second, fence, wait, kind, text):
    """PTX (wgmma.fence): wgmmas in flight may share accumulator registers without a wgmma.fence only when they
    have one shape, and no wgmma accumulates into registers an earlier one in flight reads as its A fragment."""
    b = to_bits(np.random.default_rng(6).standard_normal((16, 16)).astype(np.float32), "float16")
    res = run(_accumulator_kernel(second, fence, wait), b, np.zeros((128, 8), np.float32), check=False)
    assert [p.kind for p in res.problems] == ([kind] if kind else []), res.problems
    if text:
        assert text in str(res.problems[0])


def _two_tiles(fence_between):
    """Two tiles through one float32 accumulator ``d``: a wgmma (A from registers) into ``d``, a wait, ``d``
    read out to ``C[0]``, then the second tile's wgmma (scale-d 0) into ``d`` and ``d`` to ``C[1]``;
    ``fence_between``: a wgmma.fence between the read and the second wgmma."""
    from tirxpy import T
    from tirxpy.intrinsics import wgmma
    from tirxpy.layout.atoms import mma_smem_layout

    WG = wgmma.get(n=16, d="float32", a="bfloat16", b="bfloat16", a_from="reg")
    SB = mma_smem_layout(16, 16, "bf16", "K", 32)
    FENCE = fence_between
    stage, fill = _stage_b_and_fill()

    @T.prim_func
    def k(B: T.Tensor((16, 16), "bfloat16"), C: T.Tensor((2, 128, 8), "float32")):
        T.launch(grid=(1,), threads=128)
        sb = T.alloc_shared((16, 16), "bfloat16", layout=SB)
        a = T.alloc_local((4,), "uint32")
        d = T.alloc_local((8,), "float32")
        t = T.thread_id()
        stage(B, sb)
        fill(a, 0x3F803F80)
        for tile in T.serial(2):
            if tile == 0 or FENCE:
                T.ptx.wgmma_fence()
            WG(d, a, sb[0:16, 0:16], False, 1, 1, 0)
            T.ptx.wgmma_commit_group()
            T.ptx.wgmma_wait_group(0)
            for i in T.serial(8):
                C[tile, t, i] = d[i]
    return k


@pytest.mark.parametrize("fence_between", [True, False])
def test_a_wgmma_into_an_accumulator_read_since_the_last_fence_is_reported(fence_between):
    """PTX (wgmma.fence): a thread's read of accumulator registers is ordered before a later wgmma writing them
    only by a wgmma.fence between the two (the second tile of a persistent loop fences again)."""
    b = to_bits(np.random.default_rng(7).standard_normal((16, 16)).astype(np.float32), "bfloat16")
    c = np.zeros((2, 128, 8), np.float32)
    res = run(_two_tiles(fence_between), b, c, check=False)
    if fence_between:
        assert res.problems == []
        np.testing.assert_array_equal(c[0], c[1])
        assert np.abs(c).sum() > 0
    else:
        assert [p.kind for p in res.problems] == ["missing_wgmma_fence"], res.problems
        assert "wgmma writes accumulator registers of d that ordinary code read since the last wgmma.fence" in str(
            res.problems[0])
