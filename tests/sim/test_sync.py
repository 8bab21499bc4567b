"""tirxpy.sim.sync: named barriers count 32 per warp and complete at n threads; cluster barrier misuse."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _k(src):
    return T.parse_script(src)


_EXCHANGE = '''
@T.prim_func
def k(A: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=128)
    s = T.alloc_shared((128,), "int32")
    w = T.thread_id() // 32
    s[T.thread_id()] = T.thread_id() * 10
    if w < 2:
        T.ptx.barrier_sync(1, NT)
        A[T.thread_id()] = s[63 - T.thread_id()]
    else:
        T.ptx.barrier_sync(2, 64)
        A[T.thread_id()] = s[191 - T.thread_id()]
'''


def test_named_barriers_order_two_warp_pairs_independently():
    a = np.zeros(128, np.int32)
    run(_k(_EXCHANGE.replace("NT", "64")), a)
    t = np.arange(128)
    want = np.where(t < 64, (63 - t) * 10, (191 - t) * 10)
    assert a.tolist() == want.tolist()


def test_named_barrier_waiting_for_too_many_threads_deadlocks():
    with pytest.raises(SimReportError) as ei:
        run(_k(_EXCHANGE.replace("NT", "96")), np.zeros(128, np.int32))
    assert "deadlock" in ei.value.kinds()
    assert "named barrier 1 (64 of 96 threads arrived)" in str(ei.value)


# warp 0 writes and arrives on barrier 3 with ARRIVE threads; warp 1 waits for 64 and reads
_ARRIVE = '''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((32,), "int32")
    if T.thread_id() < 32:
        s[T.lane_id()] = T.lane_id() + 7
        T.ptx.barrier_arrive(3, ARRIVE)
    else:
        T.ptx.barrier_sync(3, 64)
        A[T.lane_id()] = s[31 - T.lane_id()]
'''


def test_barrier_arrive_does_not_wait_but_orders_the_producer():
    k = _k(_ARRIVE.replace("ARRIVE", "64"))
    a = np.zeros(32, np.int32)
    run(k, a)
    assert a.tolist() == [31 - l + 7 for l in range(32)]


_LANES = '''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((32,), "int32")
    s[T.lane_id()] = T.lane_id() * 3
    SYNC
    A[T.lane_id()] = s[READ]
'''


@pytest.mark.parametrize("sync,read,race", [
    ("T.evaluate(0)", "31 - T.lane_id()", True),                      # lane l reads what lane 31 - l wrote
    ("T.evaluate(0)", "T.lane_id()", False),                          # each lane its own bytes
    ("T.ptx.bar_warp_sync(T.uint32(0xffffffff))", "31 - T.lane_id()", False),
    ("T.ptx.syncthreads()", "31 - T.lane_id()", False),
    ("T.evaluate(T.ptx.shfl_sync_idx_b32(T.uint32(0), T.uint32(0), T.uint32(0xffffffff)))", "31 - T.lane_id()", False),
])
def test_lanes_of_one_warp_need_a_warp_sync_between_a_write_and_anothers_read(sync, read, race):
    """Under independent thread scheduling the lanes of a warp need not run together: a lane that reads shared
    bytes another lane of its warp wrote needs ``bar.warp.sync`` (``__syncwarp``), a barrier or a ``.sync``
    collective between them; a lane re-reading its own bytes does not."""
    a = np.zeros(32, np.int32)
    res = run(_k(_LANES.replace("SYNC", sync).replace("READ", read)), a, check=False)
    msgs = [str(p) for p in res.problems if p.kind == "race"]
    assert bool(msgs) == race, msgs
    if race:
        assert "not ordered after a write by lane" in msgs[0] and "of the same warp" in msgs[0]
        assert "bar_warp_sync" in msgs[0]


@pytest.mark.parametrize("arrive_count,reported", [(64, False), (96, True)])
def test_one_phase_of_a_named_barrier_takes_one_thread_count(arrive_count, reported):
    """The producer warp arrives with ``arrive_count`` and the consumer waits with 64: PTX leaves a phase whose
    threads give different counts undefined, which the run reports (the counts here still add up to a phase)."""
    k = _k(_ARRIVE.replace("ARRIVE", str(arrive_count)))
    res = run(k, np.zeros(32, np.int32), check=False)
    kinds = [p.kind for p in res.problems]
    assert ("barrier_count_mismatch" in kinds) == reported
    if reported:
        msg = next(str(p) for p in res.problems if p.kind == "barrier_count_mismatch")
        assert "named barrier 3" in msg and "64" in msg and "96" in msg


def test_missing_syncthreads_is_a_race_and_syncthreads_orders():
    src = '''
@T.prim_func
def k(A: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((64,), "int32")
    s[T.thread_id()] = T.thread_id()
    SYNC
    A[T.thread_id()] = s[(T.thread_id() + 32) % 64]
'''
    a = np.zeros(64, np.int32)
    run(_k(src.replace("SYNC", "T.ptx.syncthreads()")), a)
    assert a.tolist() == [(t + 32) % 64 for t in range(64)]
    res = run(_k(src.replace("SYNC", "T.ptx.bar_warp_sync(T.uint32(0xffffffff))")), a, check=False)
    assert "race" in [p.kind for p in res.problems]


def test_cluster_wait_without_arrive_is_misuse():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "int32")):
    T.launch(grid=(2,), threads=32, cluster=(2,))
    T.ptx.cluster_wait()
''')
    res = run(k, np.zeros(1, np.int32), arch="sm_90a", check=False)
    assert "cluster_barrier_misuse" in [p.kind for p in res.problems]


def test_cluster_sync_orders_dsmem_writes_across_ctas():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((2, 32), "uint32")):
    T.launch(grid=(2,), threads=32, cluster=(2,))
    s = T.alloc_shared((32,), "uint32")
    r = T.ptx.cluster_ctarank()
    peer = T.ptx.mapa_shared(s[T.lane_id()], T.uint32(1) - r)
    T.ptx.st_shared_cluster_u32(peer, r * T.uint32(1000) + T.cast(T.lane_id(), "uint32"))
    T.ptx.cluster_sync()
    A[r, T.lane_id()] = s[T.lane_id()]
''')
    a = np.zeros((2, 32), np.uint32)
    run(k, a, arch="sm_90a")
    l = np.arange(32)
    assert a[0].tolist() == (1000 + l).tolist() and a[1].tolist() == l.tolist()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_dsmem_write_not_ordered_before_the_peers_read_is_a_race(seed):
    """The peer's tile is initialised and cluster-synced, so only the ordering of the DSMEM store with the
    peer's own read (and its earlier write) is missing: a race, whichever CTA runs first."""
    k = _k('''
@T.prim_func
def k(A: T.Tensor((2, 32), "uint32")):
    T.launch(grid=(2,), threads=32, cluster=(2,))
    s = T.alloc_shared((32,), "uint32")
    s[T.lane_id()] = T.uint32(7)
    T.ptx.cluster_sync()
    r = T.ptx.cluster_ctarank()
    T.ptx.st_shared_cluster_u32(T.ptx.mapa_shared(s[T.lane_id()], T.uint32(1) - r), T.uint32(1))
    A[r, T.lane_id()] = s[T.lane_id()]
''')
    res = run(k, np.zeros((2, 32), np.uint32), arch="sm_90a", check=False, seed=seed)
    races = [p for p in res.problems if p.kind == "race"]
    assert races and {p.span.line for p in races} <= {9, 10}, res.problems


@pytest.mark.parametrize("fence,clean", [("T.evaluate(0)", False), ("T.ptx.fence_acq_rel_cluster()", True)])
def test_a_relaxed_cluster_arrive_releases_only_what_a_fence_ordered(fence, clean):
    """barrier.cluster.arrive.relaxed has no release semantics: a DSMEM store before it is not ordered before the
    peer's read after its cluster wait, unless a fence.acq_rel between them makes the pair a release."""
    k = _k(f'''
@T.prim_func
def k(A: T.Tensor((2, 32), "uint32")):
    T.launch(grid=(2,), threads=32, cluster=(2,))
    s = T.alloc_shared((32,), "uint32")
    r = T.ptx.cluster_ctarank()
    peer = T.ptx.mapa_shared(s[T.lane_id()], T.uint32(1) - r)
    T.ptx.st_shared_cluster_u32(peer, r * T.uint32(1000) + T.cast(T.lane_id(), "uint32"))
    {fence}
    T.ptx.cluster_arrive_relaxed()
    T.ptx.cluster_wait()
    A[r, T.lane_id()] = s[T.lane_id()]
''')
    a = np.zeros((2, 32), np.uint32)
    res = run(k, a, arch="sm_90a", check=False)
    assert (not res.problems) if clean else {p.kind for p in res.problems} == {"race"}, res.problems
    if clean:
        assert a[0].tolist() == (1000 + np.arange(32)).tolist()
