"""tirxpy.sim.run: argument checks, every CTA of the grid, results written back, problems with check=False."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import run
from tirxpy.sim.args import ArgumentError

_K = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4, 32), "int32"), n: T.int32):
    T.launch(grid=(4,), threads=32)
    A[T.cta_id(), T.thread_id()] = T.cta_id() * 100 + T.thread_id() + n
''')


def test_every_cta_runs_and_the_result_is_written_back():
    a = np.zeros((4, 32), np.int32)
    res = run(_K, a, 5)
    want = np.arange(4)[:, None] * 100 + np.arange(32)[None, :] + 5
    assert (a == want).all() and (res[0] == want).all() and res.problems == []


def test_ctas_limits_the_run():
    a = np.zeros((4, 32), np.int32)
    run(_K, a, 0, ctas=[(2, 0, 0)])
    assert (a[2] == 200 + np.arange(32)).all() and (a[[0, 1, 3]] == 0).all()


def test_wrong_argument_count_and_non_kernel_are_argument_errors():
    with pytest.raises(ArgumentError, match="takes 2 arguments"):
        run(_K, np.zeros((4, 32), np.int32))
    with pytest.raises(ArgumentError, match="simulates a kernel"):
        run(lambda: None)


def test_bfloat16_tensors_come_back_as_float32_values():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "bfloat16")):
    T.launch(grid=(1,), threads=32)
    A[T.thread_id()] = T.cast(T.cast(T.thread_id(), "float32") * T.float32(0.5), "bfloat16")
''')
    res = run(k, np.zeros(32, np.uint16))
    assert res[0].dtype == np.float32 and res[0].tolist() == [t * 0.5 for t in range(32)]


def test_check_false_returns_problems():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=64)
    A[T.thread_id()] = T.float32(1)
''')
    res = run(k, np.zeros(32, np.float32), check=False)
    assert "oob_global" in [p.kind for p in res.problems]
    assert (res[0] == 1).all()
