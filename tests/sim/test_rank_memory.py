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


def _tma_add(wait):
    """Rank r TMA reduce-adds a tile of ones into rank 1 - r's buffer (the add's read of it is asynchronous, on
    behalf of the issuing thread), after the peer's release on this rank's flag when ``wait``."""
    @T.prim_func
    def tma_add(Peer: T.Tensor((8, 16), "float32"), Flag: T.Tensor((1,), "uint32"), PeerFlag: T.Tensor((1,), "uint32")):
        T.launch(grid=(1,), threads=32)
        Cs = T.alloc_shared((8, 16), "float32")
        for i in T.serial(4):
            Cs[(i * 32 + T.lane_id()) // 16, (i * 32 + T.lane_id()) % 16] = T.float32(1)
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.st_release_sys_u32(PeerFlag[0], T.uint32(1))
            if wait:
                T.ptx.wait_geq_sys_u32(Flag[0], T.uint32(1))
            T.ptx.tma_reduce_add_2d(Peer[0:8, 0:16], 0, 0, Cs)
            T.ptx.bulk_commit_group()
            T.ptx.bulk_wait_group(0)

    return tma_add


@pytest.mark.parametrize("wait", [True, False])
def test_an_asynchronous_read_is_checked_for_the_thread_that_issued_it(wait):
    # each rank's host wrote its buffer before its own launch; the peer's TMA reduce-add reads it ordered after
    # that only through the rank's release (sent at its start) and the reader's acquire
    x, f = Symmetric("x", (8, 16), "float32", 2), Symmetric("f", (1,), "uint32", 2)
    for r in range(2):
        x.set(r, np.full((8, 16), r + 1, np.float32))
        f.set(r, np.zeros(1, np.uint32))
    res = run_ranks(_tma_add(wait), [(x.on(1 - r), f.on(r), f.on(1 - r)) for r in range(2)], seed=0, check=False)
    races = [p for p in res[0].problems if p.kind == "race"]
    if wait:
        assert races == [] and all((x.get(r) == r + 2).all() for r in range(2))
    else:
        assert any("reads x of rank" in str(p) for p in races)
