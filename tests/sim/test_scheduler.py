"""The simulator ends and tells: a loop whose iteration changed nothing is reported as ``no_progress``
at once (pointing at the loop, naming the warps), a loop that keeps changing state but never ends is
reported when the run's step budget (``max_steps``) is spent, a loop asking for more iterations than
the budget is reported before it starts; a spin-wait that another warp releases still completes."""
import time

import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _problem(k, *args, **kw):
    t0 = time.monotonic()
    with pytest.raises(SimReportError) as ei:
        run(k, *args, **kw)
    return ei.value, time.monotonic() - t0


def test_spin_on_a_flag_nobody_sets_is_no_progress_at_once():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads=64)
    while A[0] == 0:
        T.evaluate(0)
    A[1] = 1
''')
    e, took = _problem(k, np.zeros(4, np.int32))
    assert e.kinds() == {"no_progress"} and took < 5
    p = e.problems[0]
    assert p.span.line == 5 and "while A[0] == 0" in str(e)
    assert "warp 0" in p.threads and "warp 1" in p.threads


def test_spin_released_by_another_warp_completes():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32"), B: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=64)
    if T.warp_id() == 0:
        for i in T.serial(20):
            B[T.lane_id()] = B[T.lane_id()] + i
        A[0] = 1
    else:
        while A[0] == 0:
            T.evaluate(0)
        B[T.thread_id()] = A[0] + 5
''')
    a, b = np.zeros(4, np.int32), np.zeros(64, np.int32)
    for seed in range(4):
        a[:], b[:] = 0, 0
        run(k, a, b, seed=seed)
        assert (b[:32] == sum(range(20))).all() and (b[32:] == 6).all()


def test_endless_counter_loop_spends_the_budget():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads=32)
    c = T.alloc_local((1,), "int32")
    c[0] = 0
    while c[0] >= 0:
        c[0] = c[0] + 1
    A[0] = c[0]
''')
    e, took = _problem(k, np.zeros(4, np.int32), max_steps=3000)
    assert e.kinds() == {"no_progress"} and took < 5
    assert "budget of 3000 steps" in str(e) and "max_steps=" in str(e)
    assert "warp 0" in e.problems[0].threads


def test_loop_longer_than_the_budget_is_refused_before_it_runs():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    for i in T.serial(n):
        A[0] = i
''')
    e, took = _problem(k, np.zeros(4, np.int32), 2 ** 31 - 1)
    assert e.kinds() == {"no_progress"} and took < 5
    assert e.problems[0].span.line == 5 and "2147483647 loop iterations" in str(e)
    a = np.zeros(4, np.int32)
    run(k, a, 1000)
    assert a[0] == 999


def test_deadlock_is_still_a_deadlock():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads=32)
    bar = T.alloc_shared((1,), "uint64")
    if T.elect_one():
        T.ptx.mbarrier_init(bar[0], 1)
    T.ptx.syncthreads()
    while not T.ptx.mbarrier_try_wait_parity(bar[0], 0):
        T.evaluate(0)
''')
    e, _ = _problem(k, np.zeros(4, np.int32))
    assert e.kinds() == {"deadlock"} and "mbarrier" in str(e)
