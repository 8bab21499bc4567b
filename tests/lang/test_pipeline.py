"""StageRing (tirxpy/lang/pipeline.py): what it emits, that a kernel built on it computes right and keeps
its protocol (the simulator finds the deadlock when a release is missing), and its argument checks."""
import pytest
import torch

from tirxpy import T, sim
from tirxpy.lang import LangError, StageRing
from tirxpy.sim import SimReportError

from .ring_gemm import ring_gemm


def _ring_kernel(stages, cluster, body):
    """A kernel that allocates a ring and runs ``body(ring, g)`` for g in 0..5."""
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(cluster,), threads=128, cluster=(cluster,) if cluster > 1 else None)
        full = T.alloc_shared((stages,), "uint64")
        empty = T.alloc_shared((stages,), "uint64")
        ring = StageRing(full, empty, stages, cluster)
        for g in T.serial(6):
            body(ring, g)
    return k


@T.macro
def _consumer_side(ring, g):
    ring.wait_full(g)
    ring.release(g)


@T.macro
def _producer_side(ring, g):
    ring.wait_empty(g)
    ring.expect_bytes(g, 1024)


def test_a_one_stage_ring_folds_to_barrier_0():
    text = str(_ring_kernel(1, 1, _consumer_side))
    assert "T.ptx.mbarrier_wait_parity(full[0], g % 2)" in text and "T.ptx.mbarrier_arrive(empty[0])" in text


@pytest.mark.parametrize("stages", [2, 5])
def test_waits_use_stage_g_mod_stages_and_the_round_parity(stages):
    text = str(_ring_kernel(stages, 1, _consumer_side))
    assert f"T.ptx.mbarrier_wait_parity(full[g % {stages}], g // {stages} % 2)" in text
    assert f"T.ptx.mbarrier_arrive(empty[g % {stages}])" in text
    text = str(_ring_kernel(stages, 1, _producer_side))
    assert f"if g >= {stages}:" in text
    assert f"T.ptx.mbarrier_wait_parity(empty[g % {stages}], (g // {stages} + 1) % 2)" in text
    assert f"T.ptx.mbarrier_arrive_expect_tx(full[g % {stages}], 1024)" in text


def test_a_cluster_ring_releases_the_stage_in_every_cta():
    text = str(_ring_kernel(2, 2, _consumer_side))
    for r in range(2):
        assert f"T.ptx.mbarrier_arrive_cluster(T.ptx.mapa_shared(empty[g % 2], {r}))" in text


@pytest.mark.parametrize("cluster, cta_group, want", [
    (1, 1, "T.ptx.tcgen05_commit_cg1({bar}[g % 2])"),
    (1, 2, "T.ptx.tcgen05_commit_cg2({bar}[g % 2])"),
    (2, 1, "T.ptx.tcgen05_commit_cg1_multicast({bar}[g % 2], T.uint16(3))"),
    (2, 2, "T.ptx.tcgen05_commit_cg2_multicast({bar}[g % 2], T.uint16(3))"),
])
def test_tcgen05_commits_onto_empty_and_full_multicast_in_a_cluster(cluster, cta_group, want):
    @T.macro
    def commits(ring, g):
        ring.commit_empty(g, cta_group)
        ring.commit_full(g, cta_group)

    text = str(_ring_kernel(2, cluster, commits))
    assert want.format(bar="empty") in text and want.format(bar="full") in text, text


def test_release_to_arrives_on_one_ctas_empty_barrier_with_cluster_release():
    @T.macro
    def to_leader(ring, g):
        ring.release_to(g, 0)

    text = str(_ring_kernel(2, 2, to_leader))
    assert "T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(empty[g % 2], 0))" in text
    assert "mapa_shared(empty[g % 2], 1)" not in text


def test_a_commit_with_a_bad_cta_group_is_refused():
    from tirxpy.errors import TirxError

    @T.macro
    def bad(ring, g):
        ring.commit_empty(g, 4)

    with pytest.raises(TirxError, match="cta_group must be 1 or 2"):
        _ring_kernel(2, 1, bad)


def test_parities_match_a_reference_walk():
    ring = StageRing.__new__(StageRing)
    ring.stages = 3
    for g in range(20):
        assert ring.stage(g) == g % 3
        assert ring.parity(g) == (g // 3) % 2
    # the producer's empty wait at g is for round g // 3 - 1: same parity as (g // 3 + 1) % 2
    assert all(((g // 3 + 1) % 2) == ((g // 3 - 1) % 2) for g in range(3, 20))


@pytest.mark.parametrize("stages", [2, 3])
def test_a_gemm_on_the_ring_computes_a_times_b_transposed(stages):
    k = ring_gemm(128, 256, 512, STAGES=stages)
    a, b = torch.randn(128, 512).bfloat16(), torch.randn(256, 512).bfloat16()
    c = torch.full((128, 256), float("nan"))
    sim.run(k, a, b, c)
    ref = a.double() @ b.double().t()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_without_the_consumers_release_the_producer_deadlocks():
    k = ring_gemm(128, 128, 512, STAGES=2, release=False)
    a, b = torch.randn(128, 512).bfloat16(), torch.randn(128, 512).bfloat16()
    with pytest.raises(SimReportError) as e:
        sim.run(k, a, b, torch.zeros(128, 128))
    assert any(p.kind == "deadlock" for p in e.value.problems)
    # the wait sits in the ring's macro; the report also names the kernel line that expanded it
    assert "tirxpy/lang/pipeline.py" in str(e.value) and "expanded at " in str(e.value)
    assert "ring_gemm.py" in str(e.value) and "ring.wait_empty(k)" in str(e.value), str(e.value)


def test_bad_rings_are_refused_naming_the_argument():
    from tirxpy.errors import TirxError

    with pytest.raises(TirxError, match="empty must be a shared uint64 buffer of mbarriers"):
        @T.prim_func
        def k(A: T.Tensor((64,), "float32")):
            T.launch(grid=(1,), threads=32)
            full = T.alloc_shared((2,), "uint64")
            ring = StageRing(full, 3, 2)
    with pytest.raises(LangError, match="stages must be an int >= 1"):
        StageRing(None, None, 0)
    with pytest.raises(LangError, match="cluster must be an int >= 1"):
        StageRing(None, None, 2, cluster=True)
    for big in (17, 2**70):
        with pytest.raises(LangError, match=f"cluster = {big} CTAs; a thread-block cluster has at most 16"):
            StageRing(None, None, 2, cluster=big)


def _parse_bad_ring(full_shape, full_dtype, stages):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(1,), threads=32)
        full = T.alloc_shared(full_shape, full_dtype)
        empty = T.alloc_shared((4,), "uint64")
        ring = StageRing(full, empty, stages)
    return k


@pytest.mark.parametrize("shape, dtype, stages, msg", [
    ((4,), "uint32", 2, "mbarriers are a 1-D shared uint64 buffer"),
    ((2, 2), "uint64", 2, "mbarriers are a 1-D shared uint64 buffer"),
    ((2,), "uint64", 3, "holds 2 barriers, fewer than the ring's 3 stages"),
])
def test_barrier_buffers_are_checked(shape, dtype, stages, msg):
    from tirxpy.errors import TirxError

    with pytest.raises(TirxError, match=msg):
        _parse_bad_ring(shape, dtype, stages)
