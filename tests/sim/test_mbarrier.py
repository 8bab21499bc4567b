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
