"""Shared memory in the simulator (tirxpy/sim/races.py): a read of bytes nothing wrote (by any proxy:
stores, TMA, cp.async, stmatrix) is reported as ``uninitialized_read`` naming the shared tile."""
import numpy as np

from tirxpy import T
from tirxpy.sim import run

SRC = '''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((64,), "float32")
    t = T.alloc_shared((64,), "float32")
    if T.thread_id() < N:
        s[T.thread_id()] = T.cast(T.thread_id(), "float32")
    T.ptx.syncthreads()
    A[T.thread_id()] = s[63 - T.thread_id()]
'''


def test_read_of_unwritten_shared_bytes_is_reported():
    a = np.zeros(64, np.float32)
    res = run(T.parse_script(SRC.replace("N", "32")), a, check=False)
    assert [p.kind for p in res.problems] == ["uninitialized_read"]
    p = res.problems[0]
    assert "shared tile s" in p.msg and p.span.line == 10 and "warp 0" in p.threads
    assert (a[32:] == np.arange(32)[::-1]).all()


def test_fully_written_shared_tile_is_clean():
    a = np.zeros(64, np.float32)
    res = run(T.parse_script(SRC.replace("N", "64")), a, check=False)
    assert res.problems == [] and (a == np.arange(64)[::-1]).all()
