"""tirxpy_kernels/gemm_sm100.py, block-scaled FP8 (kind::mxf8f6f4, ue8m0 scales per 32 elements of K):
scale packing, plan checks, dispatch (TMA, tcgen05.cp, block-scaled tcgen05.mma, tcgen05.ld),
NVRTC compile for sm_100a without spills, simulator vs the dequantized float64 product (ragged
M / N / K, more tiles than CTAs), and the mutation tests."""
import numpy as np
import pytest

from tirxpy_kernels.gemm_sm100 import gemm_sm100, pack_scales, plan
from tests.primitives.helpers import compile_ok
from tirxpy.primitives import explain
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits

M, N, K = 260, 100, 208  # 3 x 2 tiles of 128 x 64 on 2 CTAs; K = 128 + 80 (ragged k-block and scale chunk)


def _inputs(rng, dtype, m=M, n=N, k=K):
    a = to_bits(rng.standard_normal((m, k)).astype(np.float32), dtype)
    b = to_bits(rng.standard_normal((n, k)).astype(np.float32), dtype)
    sa = rng.integers(117, 138, (m, -(-k // 32))).astype(np.uint8)  # 2^-10 .. 2^10
    sb = rng.integers(117, 138, (n, -(-k // 32))).astype(np.uint8)
    return a, b, sa, sb


def _ref(a, b, sa, sb, dtype):
    k = a.shape[1]
    A = from_bits(a, dtype).astype(np.float64) * np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1)[:, :k])
    B = from_bits(b, dtype).astype(np.float64) * np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=1)[:, :k])
    return A @ B.T


def test_pack_scales_tile_layout():
    sf = np.arange(130 * 5, dtype=np.uint16).reshape(130, 5).astype(np.uint8)
    p = pack_scales(sf).view(np.uint8).reshape(-1, 4, 4)  # (row, word j, byte c)
    assert p.shape == (2 * 2 * 32, 4, 4)
    # row r = 32 j + t of 128-row block rb, chunk 4 kb + c  ->  packed row (rb * 2 + kb) * 32 + t, word j, byte c
    for r, ch in [(0, 0), (37, 3), (127, 4), (129, 1)]:
        rb, rr = divmod(r, 128)
        kb, c = divmod(ch, 4)
        assert p[(rb * 2 + kb) * 32 + rr % 32, rr // 32, c] == sf[r, ch]
    assert p[(1 * 2 + 1) * 32 + 5, 0, 1] == 127  # padding: chunk 5 does not exist -> scale 1


def test_plan_checks():
    p = plan(M, N, K, BN=64, STAGES=2, ctas=2, dtype="float8_e4m3")
    assert (p.BK, p.KB, p.tiles, p.per_cta, p.tmem_cols) == (128, 2, 6, 3, 256)  # 128 + 16 -> 256
    with pytest.raises(ValueError, match="block-scaled fp8 runs with cta_group=1 and BN in"):
        plan(M, N, K, BN=256, dtype="float8_e4m3")
    with pytest.raises(ValueError, match="block-scaled fp8 runs with cta_group=1"):
        plan(M, N, K, BN=64, cta_group=2, dtype="float8_e5m2")


def test_dispatch():
    text = explain(gemm_sm100(M, N, K, BN=64, STAGES=2, ctas=2, dtype="float8_e4m3"), "sm_100a")
    for want in ("copy_async/tma_load", "copy_async/tcgen05_cp", "gemm_async/tcgen05", "copy/tcgen05_ld",
                 "copy_async/tma_store"):
        assert want in text, text


def test_compiles_for_sm100a_without_spills():
    ck = compile_ok(gemm_sm100(8192, 8192, 8192, BN=128, STAGES=5, dtype="float8_e4m3"), "sm_100a")
    assert "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X" in ck.ptx
    assert "tcgen05.cp.cta_group::1.32x128b.warpx4" in ck.ptx


@pytest.mark.parametrize("dtype,seed", [("float8_e4m3", 0), ("float8_e5m2", 1)])
def test_sim_ragged_persistent_matches_float64(dtype, seed):
    a, b, sa, sb = _inputs(np.random.default_rng(), dtype)  # fresh inputs every run
    c = np.full((M, N), np.nan, np.float32)
    out = run(gemm_sm100(M, N, K, BN=64, STAGES=2, ctas=2, dtype=dtype), a, b, pack_scales(sa), pack_scales(sb), c,
              arch="sm_100a", seed=seed)
    ref = _ref(a, b, sa, sb, dtype)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
    assert out.problems == []


def test_sim_bn32_scale_word_offsets():
    # BN = 32: B's tiles use words 0..3 of the 128-row scale tile in turn (sfb view at a dynamic column)
    m, n, k = 128, 160, 160
    a, b, sa, sb = _inputs(np.random.default_rng(), "float8_e4m3", m, n, k)
    c = np.full((m, n), np.nan, np.float32)
    run(gemm_sm100(m, n, k, BN=32, STAGES=2, EPI=16, ctas=1, dtype="float8_e4m3"), a, b, pack_scales(sa),
        pack_scales(sb), c, arch="sm_100a", seed=2)
    ref = _ref(a, b, sa, sb, "float8_e4m3")
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("drop, kinds", [
    ("full_wait", {"race"}),                                   # tcgen05.cp / mma read a stage TMA is still writing
    ("empty_wait", {"race", "mbarrier_over_arrive"}),
    ("tmem_full_wait", {"tmem_read_before_commit"}),
    ("tmem_empty_wait", {"tmem_overwrite_before_read"}),
    ("mma_commit", {"deadlock"}),
    ("fence_proxy_async", {"missing_fence_proxy_async"}),
    ("store_wait", {"race"}),
    ("dealloc", {"tmem_leak"}),
    ("tcgen05_fence", {"missing_tcgen05_fence"}),
])
def test_mutation_is_reported(drop, kinds):
    a, b, sa, sb = _inputs(np.random.default_rng(), "float8_e4m3")
    with pytest.raises(SimReportError) as ei:
        run(gemm_sm100(M, N, K, BN=64, STAGES=2, ctas=2, dtype="float8_e4m3", drop=drop), a, b, pack_scales(sa),
            pack_scales(sb), np.zeros((M, N), np.float32), arch="sm_100a", seed=0)
    assert kinds & ei.value.kinds(), str(ei.value)
    if drop != "dealloc":
        assert "gemm_sm100.py" in str(ei.value)
