"""Several ranks in one process (tirxpy/sim/ranks.py): values, late ranks, side launches, argument errors. The
race watch is tested in test_rank_memory.py, the signal models (deadlocks, counters) in test_rank_flags.py."""
import numpy as np
import pytest

from tests.sim.rank_helpers import WRITE_SIGNAL_READ, kernel as _kernel, world as _world
from tirxpy import T
from tirxpy.sim import ArgumentError, SimReportError
from tirxpy.sim.ranks import Symmetric, run_ranks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_signal_then_read_gives_the_peer_values(seed):
    data, flag, outs, args = _world()
    run_ranks(_kernel(WRITE_SIGNAL_READ, "wsr"), args, seed=seed)
    want = np.arange(64, dtype=np.uint32) + 100
    assert (outs[0] == want).all() and (outs[1] == want).all()
    assert int(flag.get(0)[0]) == 2 and int(flag.get(1)[0]) == 2
    assert (data.get(1) == want).all()


def test_a_late_rank_still_gives_the_right_answer():
    data, flag, outs, args = _world()
    run_ranks(_kernel(WRITE_SIGNAL_READ, "wsr"), args, late={1: 500}, seed=3)
    assert (outs[0] == np.arange(64, dtype=np.uint32) + 100).all()


@pytest.mark.parametrize("bad,msg", [
    (lambda s, o: [(s.on(0),)], "takes 2 arguments"),
    (lambda s, o: [], "non-empty list"),
    (lambda s, o: [(Symmetric("y", (3,), "uint32", 1).on(0), o)], "symmetric buffer 'y' is \\(3,\\)"),
])
def test_bad_arguments(bad, msg):
    k = T.parse_script('''
@T.prim_func
def one(C: T.Tensor((1,), "uint32"), Old: T.Tensor((2,), "uint32")):
    T.launch(grid=(1,), threads=32)
    Old[0] = C[0]
''')
    s = Symmetric("s", (1,), "uint32", 1)
    with pytest.raises(ArgumentError, match=msg):
        run_ranks(k, bad(s, np.zeros(2, np.uint32)))
    with pytest.raises(ArgumentError, match="late="):
        run_ranks(k, [(s.on(0), np.zeros(2, np.uint32))], late={5: 1})
    with pytest.raises(ArgumentError, match="ranks 0 .. 0"):
        s.on(1)


_PUSH = '''
@T.prim_func
def push(Peer: T.Tensor((32,), "uint32"), PeerFlag: T.Tensor((1,), "uint32"), Src: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    Peer[T.lane_id()] = Src[T.lane_id()]
    T.ptx.bar_warp_sync(0xFFFFFFFF)
    if T.lane_id() == 0:
        T.ptx.st_release_sys_u32(PeerFlag[0], T.uint32({flag}))
'''
_WAIT_READ = '''
@T.prim_func
def wait_read(Mine: T.Tensor((32,), "uint32"), Flag: T.Tensor((1,), "uint32"), Out: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    T.ptx.wait_geq_sys_u32(Flag[0], T.uint32(1))
    Out[T.lane_id()] = Mine[T.lane_id()]
'''


def _side_world(flag_value):
    data, flag = Symmetric("data", (32,), "uint32", 2), Symmetric("flag", (1,), "uint32", 2)
    outs = [np.zeros(32, np.uint32) for _ in range(2)]
    srcs = [np.arange(32, dtype=np.uint32) + 1000 * (r + 1) for r in range(2)]
    main = [(data.on(r), flag.on(r), outs[r]) for r in range(2)]
    push = T.parse_script(_PUSH.format(flag=flag_value))
    side = [(push, (data.on(1 - r), flag.on(1 - r), srcs[r])) for r in range(2)]
    return T.parse_script(_WAIT_READ), main, side, outs, srcs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_side_launch_runs_beside_the_kernel_like_a_second_stream(seed):
    k, main, side, outs, srcs = _side_world(1)
    run_ranks(k, main, seed=seed, side=side, late={seed % 2: 50})
    assert outs[0].tolist() == srcs[1].tolist() and outs[1].tolist() == srcs[0].tolist()


def test_a_side_launch_that_never_signals_deadlocks_the_kernel():
    k, main, side, outs, srcs = _side_world(0)
    with pytest.raises(SimReportError, match="deadlock"):
        run_ranks(k, main, side=side)


def test_bad_side_launches():
    k, main, side, outs, srcs = _side_world(1)
    with pytest.raises(ArgumentError, match="one \\(kernel, args\\) pair"):
        run_ranks(k, main, side=side[:1])
    with pytest.raises(ArgumentError, match="side\\[1\\] must be"):
        run_ranks(k, main, side=[side[0], (k,)])
