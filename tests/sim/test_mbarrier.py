"""tirxpy.sim.mbarrier: phases, arrivals, transaction counts and parity waits (PTX ISA 9.7.13.15)."""
from types import SimpleNamespace

import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run
from tirxpy.sim.mbarrier import MBar, arrive, complete_tx, phase_of


def _ctx():
    reps = []
    return SimpleNamespace(report=lambda kind, msg, *a, **k: reps.append(kind), reps=reps)


def _machine():
    reps = []
    return SimpleNamespace(report=lambda kind, msg, *a, **k: reps.append(kind), reps=reps)


VC = np.zeros(2, np.int64)


def test_phase_completes_when_arrivals_and_tx_both_reach_zero():
    b = MBar(0x40, 2, None)
    ctx = _ctx()
    b.tx = 64                      # expect_tx announced 64 bytes
    arrive(ctx, b, 1, VC)
    arrive(ctx, b, 1, VC)
    assert b.phase == 0 and b.pending == 0     # bytes still outstanding
    cta = SimpleNamespace(mbarriers={0x40: b})
    m = _machine()
    complete_tx(m, cta, 0x40, 64, VC, None, "tma")
    assert b.phase == 1 and b.pending == 2 and b.tx == 0 and m.reps == [] and ctx.reps == []
    assert phase_of(cta, 0x40) == 1 and phase_of(cta, 0x48) is None


def test_over_arrival_is_reported_and_clamped():
    b, ctx = MBar(0, 1, None), _ctx()
    arrive(ctx, b, 3, VC)
    assert ctx.reps == ["mbarrier_over_arrive"] and b.phase == 1 and b.pending == 1


def test_bytes_before_their_expect_tx_are_legal_but_late_bytes_are_not():
    b = MBar(0, 1, None)
    cta, m = SimpleNamespace(mbarriers={0: b}), _machine()
    b.expect_seen = True
    complete_tx(m, cta, 0, 32, VC, None, "tma", issue_phase=0)   # lands before the arrive.expect_tx
    assert b.tx == -32 and b.early is not None and m.reps == []
    complete_tx(m, cta, 0, 16, VC, None, "tma", issue_phase=5)   # issued in a phase long completed
    assert m.reps == ["tx_underflow"]
    complete_tx(m, cta, 8, 16, VC, None, "tma")
    assert m.reps == ["tx_underflow", "mbarrier_uninitialized"]


def _k(body, threads=32):
    return T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads={threads})
    bar = T.alloc_shared((1,), "uint64")
{body}
''')


def test_two_phases_flip_parity_and_test_wait_reports_completion():
    k = _k('''
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
    T.ptx.syncthreads()
    A[0] = T.cast(T.ptx.mbarrier_test_wait_parity(bar[0], 0), "int32")
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
    T.ptx.mbarrier_wait_parity(bar[0], 0)
    if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
    T.ptx.mbarrier_wait_parity(bar[0], 1)
    A[1] = 7
''')
    a = np.zeros(4, np.int32)
    run(k, a)
    assert a.tolist() == [0, 7, 0, 0]


def test_wait_before_init_is_uninitialized():
    k = _k('''
    T.ptx.mbarrier_wait_parity(bar[0], 0)
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(4, np.int32))
    assert "mbarrier_uninitialized" in ei.value.kinds()


def test_arrive_count_completes_with_one_lane():
    k = _k('''
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 64)
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_arrive_count(bar[0], 64))
    T.ptx.mbarrier_wait_parity(bar[0], 0)
    A[T.thread_id() % 4] = 1
''', threads=64)
    a = np.zeros(4, np.int32)
    run(k, a)
    assert a.tolist() == [1, 1, 1, 1]


def test_unbalanced_barrier_at_exit_is_reported():
    k = _k('''
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 2)
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(4, np.int32))
    assert "mbarrier_unbalanced" in ei.value.kinds()


def test_an_mbarrier_off_8_bytes_is_reported_misaligned():
    """An mbarrier is a 64-bit object: initialising one at a shared address off an 8-byte boundary (an odd
    element of a float32 buffer) is reported where the GPU would fault; one at an 8-byte boundary is not."""
    def kernel(i):
        return T.parse_script(f'''
@T.prim_func
def k(X: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    bar = T.alloc_shared((4,), "float32")
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[{i}], 1)
        T.ptx.fence_mbarrier_init()
    T.ptx.syncthreads()
    X[T.thread_id()] = T.float32(1)
''')
    x = np.zeros(32, np.float32)
    with pytest.raises(SimReportError) as ei:
        run(kernel(1), x)
    assert ei.value.kinds() == {"misaligned"}
    assert "is not 8-byte aligned; an mbarrier is a 64-bit object" in str(ei.value)
    run(kernel(2), x)
    assert (x == 1).all()


@pytest.mark.parametrize("sync,clean", [("T.evaluate(0)", False), ("T.ptx.syncthreads()", True)])
def test_a_use_not_ordered_after_the_init_is_reported_in_every_schedule(sync, clean):
    """Warp 1 arrives on the mbarrier warp 0 initializes: without the barrier between them the arrive may run
    first; where it runs second it is still not ordered after the init, and is reported the same way."""
    k = _k(f'''
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
        T.ptx.fence_mbarrier_init()
    {sync}
    if T.thread_id() == 32:
        T.ptx.mbarrier_arrive(bar[0])
    if T.thread_id() < 32:
        T.ptx.mbarrier_wait_parity(bar[0], 0)
''', threads=64)
    for seed in range(6):
        res = run(k, np.zeros(4, np.int32), check=False, seed=seed)
        if clean:
            assert res.problems == []
        else:
            p = next(p for p in res.problems if p.kind == "mbarrier_uninitialized")
            assert "fence_mbarrier_init" in " ".join(p.notes)


@pytest.mark.parametrize("fence,clean", [("T.evaluate(0)", False), ("T.ptx.fence_mbarrier_init()", True)])
def test_fence_mbarrier_init_orders_the_init_before_a_peers_remote_arrive(fence, clean):
    """A relaxed cluster barrier orders an init before the peer CTA's remote arrive only with the initializing
    thread's fence.mbarrier_init before its arrive."""
    k = T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((2,), "int32")):
    T.launch(grid=(2,), threads=32, cluster=(2,))
    bar = T.alloc_shared((1,), "uint64")
    r = T.ptx.cluster_ctarank()
    if T.lane_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
        {fence}
    T.ptx.cluster_arrive_relaxed()
    T.ptx.cluster_wait()
    if T.lane_id() == 0:
        T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(bar[0], T.uint32(1) - r))
    T.ptx.mbarrier_wait_parity(bar[0], 0)
    T.ptx.cluster_sync()
''')
    for seed in range(3):
        res = run(k, np.zeros(2, np.int32), arch="sm_90a", check=False, seed=seed)
        kinds = {p.kind for p in res.problems}
        assert kinds == set() if clean else "mbarrier_uninitialized" in kinds, res.problems


@pytest.mark.parametrize("wait,clean", [("T.evaluate(0)", False), ("T.ptx.mbarrier_wait_parity(bar[0], 0)", True)])
def test_inval_with_a_copy_in_flight_is_reported(wait, clean):
    """mbarrier.inval while a TMA load still completes bytes on the barrier (or after it did, with no wait ordering
    that) is reported; after the wait it is clean."""
    k = T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((32,), "float32")
    bar = T.alloc_shared((1,), "uint64")
    if T.lane_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
        T.ptx.mbarrier_arrive_expect_tx(bar[0], 128)
        T.ptx.tma_load_1d(s, A[0:32], 0, bar[0])
        {wait}
        T.ptx.mbarrier_inval(bar[0])
''')
    for seed in range(4):
        res = run(k, np.zeros(32, np.float32), arch="sm_90a", check=False, seed=seed)
        if clean:
            assert res.problems == []
        else:
            assert "mbarrier_inval_in_use" in {p.kind for p in res.problems}, res.problems


def test_inval_while_a_warp_waits_is_reported():
    k = _k('''
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
    T.ptx.syncthreads()
    if T.thread_id() >= 32:
        T.ptx.mbarrier_wait_parity(bar[0], 0)
    if T.thread_id() == 0:
        T.ptx.mbarrier_inval(bar[0])
''', threads=64)
    res = [run(k, np.zeros(4, np.int32), check=False, seed=s) for s in range(8)]
    assert all(r.problems for r in res)
    assert any(p.kind == "mbarrier_inval_in_use" and "waits on it" in p.msg for r in res for p in r.problems)
