"""tirxpy.sim.expr: expressions evaluated for all 32 lanes at once."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _k(src):
    return T.parse_script(src)


def test_floor_div_mod_select_bitops_shifts_per_lane():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "int32"), B: T.Tensor((5, 32), "int32")):
    T.launch(grid=(1,), threads=32)
    l = T.lane_id()
    x = A[l]
    B[0, l] = x // 3
    B[1, l] = x % 3
    B[2, l] = T.select(x > 0, x, 0 - x)
    B[3, l] = (x & 12) ^ (x | 1)
    B[4, l] = (x << 2) >> 1
''')
    a = np.arange(-16, 16, dtype=np.int32)
    b = np.zeros((5, 32), np.int32)
    run(k, a, b)
    assert b[0].tolist() == (a // 3).tolist()          # floor division (Python / TIR semantics)
    assert b[1].tolist() == (a % 3).tolist()
    assert b[2].tolist() == np.abs(a).tolist()
    assert b[3].tolist() == ((a & 12) ^ (a | 1)).tolist()
    assert b[4].tolist() == ((a << 2) >> 1).tolist()


def test_hardware_ids_and_math_builtins():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((64,), "float32"), W: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=64)
    t = T.thread_id()
    W[t] = T.warp_id() * 100 + T.lane_id()
    A[t] = T.sqrt(T.cast(t, "float32")) + T.exp2(T.float32(1))
''')
    a, w = np.zeros(64, np.float32), np.zeros(64, np.int32)
    run(k, a, w)
    t = np.arange(64)
    assert w.tolist() == ((t // 32) * 100 + t % 32).tolist()
    np.testing.assert_allclose(a, np.sqrt(t.astype(np.float32)) + 2, rtol=1e-6)


def test_fp16_arithmetic_rounds_to_fp16():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "float16"), B: T.Tensor((32,), "float16")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = A[T.lane_id()] * A[T.lane_id()] + A[T.lane_id()]
''')
    a = (np.random.default_rng(0).standard_normal(32) * 3).astype(np.float16)
    b = np.zeros(32, np.float16)
    run(k, a, b)
    want = ((a * a).astype(np.float16) + a).astype(np.float16)
    assert b.tobytes() == want.tobytes()


def test_integer_division_by_zero_is_reported():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    A[T.lane_id()] = 7 // A[T.lane_id()]
''')
    a = np.ones(32, np.int32)
    a[5] = 0
    with pytest.raises(SimReportError) as ei:
        run(k, a)
    assert "division_by_zero" in ei.value.kinds() and "lane 5" in str(ei.value)
