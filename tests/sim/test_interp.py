"""tirxpy.sim.interp: per-warp statement execution (divergent if/for, while loops, budgets)."""
from types import SimpleNamespace

import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run
from tirxpy.sim.interp import Block, BudgetExceeded, charge


def _k(src):
    return T.parse_script(src)


def test_for_with_per_lane_bounds_and_if_else_masks():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    l = T.lane_id()
    A[l] = 0
    for i in T.serial(l, 2 * l):
        A[l] = A[l] + i
    if l % 2 == 0:
        A[l] = A[l] * 10
    else:
        A[l] = 0 - A[l]
''')
    a = np.zeros(32, np.int32)
    run(k, a)
    s = np.array([sum(range(x, 2 * x)) for x in range(32)])
    assert a.tolist() == np.where(np.arange(32) % 2 == 0, s * 10, -s).tolist()


def test_while_loop_counts_per_lane():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    l = T.lane_id()
    A[l] = 0
    while A[l] < l:
        A[l] = A[l] + 3
''')
    a = np.zeros(32, np.int32)
    run(k, a)
    assert a.tolist() == [-(-x // 3) * 3 for x in range(32)]


def test_while_that_changes_nothing_is_no_progress():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads=32)
    while A[0] == 0:
        T.evaluate(0)
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(1, np.int32))
    assert "no_progress" in ei.value.kinds()


def test_charge_raises_past_the_budget():
    m = SimpleNamespace(steps=0, max_steps=10)
    w = SimpleNamespace(cta=SimpleNamespace(machine=m))
    charge(w, "node", 10)
    assert m.steps == 10
    with pytest.raises(BudgetExceeded) as ei:
        charge(w, "node", 1, "one more")
    assert ei.value.node == "node" and ei.value.w is w and ei.value.what == "one more"


def test_block_holds_its_condition():
    b = Block(lambda: True, "x", spin=True)
    assert b.cond() and b.what == "x" and b.span is None and b.spin


ROLLED_VS_SERIAL = '''
@T.prim_func
def k(A: T.Tensor((32,), "int32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    l = T.lane_id()
    A[l] = 1
    for i in T.KIND(l % 5, n):
        A[l] = A[l] * 3 + i
'''


def test_rolled_loop_runs_as_the_serial_loop():
    """``T.rolled`` changes only the CUDA compiler's unrolling: the simulator runs it as ``T.serial``, per-lane
    bounds included."""
    out = {}
    for kind in ("rolled", "serial"):
        a = np.full(32, -7, np.int32)
        run(_k(ROLLED_VS_SERIAL.replace("KIND", kind)), a, 6)
        out[kind] = a.tolist()
    want = []
    for x in range(32):
        v = 1
        for i in range(x % 5, 6):
            v = v * 3 + i
        want.append(v)
    assert out["rolled"] == out["serial"] == want
