"""tirxpy_kernels/gemm_sm100.py: plan checks, NVRTC compile for sm_100a without spills, simulator runs vs
float64 (ragged edges, more tiles than CTAs so the persistent loop and the TMEM double buffer
turn over, several seeds = interleavings), and mutation tests (each dropped synchronization
step is reported by name)."""
import numpy as np
import pytest

from tirxpy_kernels.gemm_sm100 import gemm_sm100, plan
from tests.primitives.helpers import compile_ok
from tirxpy.primitives import explain
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits


def _inputs(M, N, K, rng, dtype="bfloat16"):
    a = to_bits(rng.standard_normal((M, K)).astype(np.float32), dtype)
    b = to_bits(rng.standard_normal((N, K)).astype(np.float32), dtype)
    return a, b


def _ref(a, b, dtype="bfloat16"):
    return from_bits(a, dtype).astype(np.float64) @ from_bits(b, dtype).astype(np.float64).T


def _sim(M, N, K, seed, dtype="bfloat16", **kw):
    rng = np.random.default_rng()  # fresh inputs every run
    a, b = _inputs(M, N, K, rng, dtype)
    c = np.full((M, N), np.nan, np.float32)  # poisoned: every element must be written
    out = run(gemm_sm100(M, N, K, dtype=dtype, **kw), a, b, c, arch="sm_100a", seed=seed)
    return a, b, c, out


def test_plan_counts_tiles_and_checks_inputs():
    p = plan(260, 100, 136, BN=64, STAGES=2, ctas=2)
    assert (p.mt, p.nt, p.tiles, p.grid, p.per_cta, p.KB, p.tmem_cols) == (3, 2, 6, 2, 3, 3, 128)
    p2 = plan(8192, 8192, 8192, STAGES=6, cta_group=2)
    assert (p2.BM, p2.tiles, p2.grid, p2.tmem_cols) == (256, 1024, 148, 512)
    with pytest.raises(ValueError, match="exceed the 232448-byte"):
        plan(8192, 8192, 8192, STAGES=8)
    with pytest.raises(ValueError, match="BN = 40 must be a multiple of 16"):
        plan(128, 128, 128, BN=40)
    with pytest.raises(ValueError, match="multiples of 8"):
        plan(128, 128, 100)
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        plan(128, 128, 128, dtype="float32")
    with pytest.raises(ValueError, match="unknown drop"):
        gemm_sm100(128, 128, 128, drop="nothing")


def test_defaults_follow_the_plan_rules():
    # BN: 256, 128 block-scaled; STAGES: the deepest ring that fits shared memory (and TMEM)
    for kw, bn, stages in [({}, 256, 4), (dict(cta_group=2), 256, 6), (dict(dtype="float8_e4m3"), 128, 5),
                           (dict(BN=64), 64, 8), (dict(BN=128, EPI=16, dtype="float8_e4m3"), 128, 6)]:
        p = plan(8192, 8192, 8192, **kw)
        assert (p.BN, p.STAGES) == (bn, stages), kw
        with pytest.raises(ValueError, match="exceed the 232448-byte"):
            plan(8192, 8192, 8192, **{**kw, "BN": bn}, STAGES=stages + 1)
    assert plan(8192, 8192, 8192).BK == 64 and plan(8192, 8192, 8192, dtype="float8_e5m2").BK == 128
    with pytest.raises(ValueError, match="STAGES = 0 must be an int >= 1"):
        plan(128, 128, 128, STAGES=0)
    with pytest.raises(ValueError, match="ctas = 0 must be an int >= 1"):
        plan(128, 128, 128, ctas=0)


def test_the_b200_presets_are_the_defaults():
    from tirxpy_kernels.gemm_sm100 import b200_bf16_cg1, b200_bf16_cg2, b200_mxfp8_cg1

    assert str(b200_bf16_cg1()) == str(gemm_sm100(8192, 8192, 8192, BN=256, STAGES=4))
    assert str(b200_bf16_cg2()) == str(gemm_sm100(8192, 8192, 8192, BN=256, STAGES=6, cta_group=2))
    assert str(b200_mxfp8_cg1()) == str(gemm_sm100(8192, 8192, 8192, BN=128, STAGES=5, dtype="float8_e4m3"))


def test_the_kernel_is_built_from_the_lang_rings():
    text = str(gemm_sm100(260, 100, 136, BN=64, STAGES=3, ctas=2, cta_group=2))
    # ring (3 stages, cluster 2): producer waits, MMA waits and multicasts its commit to both CTAs' empty
    assert "T.ptx.mbarrier_wait_parity(empty[g % 3], (g // 3 + 1) % 2)" in text
    assert "T.ptx.tcgen05_commit_cg2_multicast(empty[g_1 % 3], T.uint16(3))" in text
    # accs (2 accumulators): the epilogues release to the leader only, the MMA commits to both
    assert "T.ptx.tcgen05_commit_cg2_multicast(tmem_full[i_1 % 2], T.uint16(3))" in text
    assert "T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(tmem_empty[i_2 % 2], 0))" in text


def test_every_tile_primitive_dispatches_to_tma_tcgen05_or_tmem():
    text = explain(gemm_sm100(256, 256, 128, BN=64, STAGES=2, ctas=2), "sm_100a")
    for want in ("copy_async/tma_load", "gemm_async/tcgen05", "copy/tcgen05_ld", "copy_async/tma_store"):
        assert want in text, text


@pytest.mark.parametrize("cta_group,stages", [(1, 4), (2, 6)])
def test_compiles_for_sm100a_without_spills(cta_group, stages):
    ck = compile_ok(gemm_sm100(8192, 8192, 8192, BN=256, STAGES=stages, cta_group=cta_group), "sm_100a")
    assert ck.resources.registers <= 168
    assert "tcgen05.mma.cta_group::%d.kind::f16" % cta_group in ck.ptx


@pytest.mark.parametrize("seed", [0, 1])
def test_sim_ragged_persistent_matches_float64(seed):
    # 3 x 2 tiles of 128 x 64 on 2 CTAs: 3 tiles each (accumulator 0 is reused after tmem_empty),
    # M, N and K ragged (TMA zero-fills loads and clips stores), 3 k-blocks through a 2-stage ring
    a, b, c, out = _sim(260, 100, 136, seed, BN=64, STAGES=2, ctas=2)
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
    assert out.problems == []


def test_sim_float16_one_cta_many_tiles():
    a, b, c, out = _sim(128, 192, 64, 3, dtype="float16", BN=32, STAGES=2, EPI=16, ctas=1)
    np.testing.assert_allclose(c, _ref(a, b, "float16"), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("drop, kinds", [
    ("full_wait", {"race"}),                                   # MMA reads a stage TMA is still writing
    ("empty_wait", {"race", "mbarrier_over_arrive"}),          # producer laps the ring
    ("tmem_full_wait", {"tmem_read_before_commit"}),           # epilogue reads TMEM before the commit
    ("tmem_empty_wait", {"tmem_overwrite_before_read"}),       # MMA overwrites an accumulator being drained
    ("mma_commit", {"deadlock"}),                              # tmem_full never arrives
    ("fence_proxy_async", {"missing_fence_proxy_async"}),      # st.shared -> TMA store without proxy fence
    ("store_wait", {"race"}),                                  # staging tile rewritten under a TMA store
    ("dealloc", {"tmem_leak"}),
    ("tcgen05_fence", {"missing_tcgen05_fence"}),              # no fence::after_thread_sync after the waits
])
def test_mutation_is_reported(drop, kinds):
    rng = np.random.default_rng()
    a, b = _inputs(260, 100, 136, rng)
    with pytest.raises(SimReportError) as ei:
        run(gemm_sm100(260, 100, 136, BN=64, STAGES=2, ctas=2, drop=drop), a, b, np.zeros((260, 100), np.float32),
            arch="sm_100a", seed=0)
    assert kinds & ei.value.kinds(), str(ei.value)
    if drop != "dealloc":  # a leak is found at CTA exit, not at a line
        assert "gemm_sm100.py" in str(ei.value)


@pytest.mark.parametrize("seed", [0, 1])
def test_sim_cta_pair_matches_float64(seed):
    # cta_group::2 on one 2-CTA cluster: 2 x 2 tiles of 256 x 64 (TMEM double buffer turns over),
    # ragged M / N / K; each CTA loads half of B, the leader's MMA reads both CTAs' shared memory
    # and writes both CTAs' TMEM, commits multicast to both; both epilogues arrive on the leader
    a, b, c, out = _sim(260, 100, 136, seed, BN=64, STAGES=2, ctas=2, cta_group=2)
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
    assert out.problems == []


@pytest.mark.parametrize("drop, kinds", [
    ("tmem_empty_wait", {"tmem_overwrite_before_read"}),  # the peer's accumulator is overwritten too
    ("full_wait", {"race"}),
])
def test_cta_pair_mutation_is_reported(drop, kinds):
    a, b = _inputs(260, 100, 136, np.random.default_rng())
    with pytest.raises(SimReportError) as ei:
        run(gemm_sm100(260, 100, 136, BN=64, STAGES=2, ctas=2, cta_group=2, drop=drop), a, b,
            np.zeros((260, 100), np.float32), arch="sm_100a", seed=0)
    assert kinds & ei.value.kinds(), str(ei.value)
