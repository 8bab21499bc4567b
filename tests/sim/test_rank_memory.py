"""The multi-rank simulator's symmetric memory and race watch (tirxpy/sim/rank_memory.py): a read no release /
acquire chain orders after its write is a race (a kernel's write, or the host's before the owner's launch);
Symmetric's own checks."""
import numpy as np
import pytest

from tests.sim.rank_helpers import READ_FIRST, kernel as _kernel, world as _world
from tirxpy import T
from tirxpy.sim import ArgumentError, SimReportError
from tirxpy.sim.rank_memory import Symmetric
from tirxpy.sim.ranks import run_ranks


def test_read_before_the_signal_is_a_race():
    found = 0
    for seed in range(4):
        data, flag, outs, args = _world()
        res = run_ranks(_kernel(READ_FIRST, "rf"), args, seed=seed, check=False)
        kinds = {p.kind for p in res[0].problems}
        assert kinds <= {"race"}
        found += "race" in kinds
    assert found >= 1


def test_host_data_read_without_waiting_is_a_race():
    k = T.parse_script('''
@T.prim_func
def peek(Peer: T.Tensor((32,), "float32"), Out: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    Out[T.lane_id()] = Peer[T.lane_id()]
''')
    x = Symmetric("x", (32,), "float32", 2)
    x.set(1, np.ones(32, np.float32))
    with pytest.raises(SimReportError, match="rank 0 reads x of rank 1 .* before any signal"):
        run_ranks(k, [(x.on(1), np.zeros(32, np.float32)), (x.on(0), np.zeros(32, np.float32))])


def test_symmetric_buffers_round_trip_and_refuse_bad_calls():
    s = Symmetric("s", (2, 3), "bfloat16", world=2)
    vals = np.array([[1.5, -2.0, 0.25], [3.0, 0.0, -0.5]], np.float32)     # exact in bfloat16
    s.set(1, vals)
    assert (s.get(1) == vals).all() and s.host == [False, True]
    with pytest.raises(ArgumentError, match="world must be a positive int"):
        Symmetric("x", (1,), "uint32", world=0)
    with pytest.raises(ArgumentError, match="has ranks 0 .. 1, got 2"):
        s.on(2)
    with pytest.raises(ArgumentError, match=r"values of shape \(3,\), the buffer is \(2, 3\)"):
        s.set(0, np.zeros(3, np.float32))


def test_a_read_of_bytes_nothing_wrote_is_a_race():
    k = T.parse_script('''
@T.prim_func
def peek(Peer: T.Tensor((32,), "uint32"), Out: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    Out[T.lane_id()] = Peer[T.lane_id()]
''')
    x = Symmetric("x", (32,), "uint32", 2)          # never set: its bytes are undefined
    with pytest.raises(SimReportError, match="before any signal orders the write by nothing"):
        run_ranks(k, [(x.on(1), np.zeros(32, np.uint32)), (x.on(0), np.zeros(32, np.uint32))])
