"""Two-rank kernels and buffers shared by the multi-rank simulator's tests (test_ranks, test_rank_memory,
test_rank_flags)."""
import numpy as np

from tirxpy import T
from tirxpy.sim.ranks import Symmetric

_HEAD = '''
@T.prim_func
def {name}(Mine: T.Tensor((64,), "uint32"), Peer: T.Tensor((64,), "uint32"),
           Flag: T.Tensor((1,), "uint32"), PeerFlag: T.Tensor((1,), "uint32"), Out: T.Tensor((64,), "uint32")):
    T.launch(grid=(2,), threads=64)
    i = T.cta_id(0) * 32 + T.lane_id()
'''

# each CTA's warp 0 writes its half of Mine, the CTA's warp 1 counts the CTA in on the peer's flag once warp 0
# is done (named barrier), and everyone reads the peer's Mine after the flag reached 2 (both CTAs of the peer)
WRITE_SIGNAL_READ = _HEAD + '''
    if T.warp_id() == 0:
        Mine[i] = T.cast(i, "uint32") + T.uint32(100)
    T.ptx.barrier_sync(1, 64)
    if T.warp_id() == 1:
        if T.lane_id() == 0:
            T.ptx.red_release_sys_add_u32(PeerFlag[0], T.uint32(1))
    T.ptx.wait_geq_sys_u32(Flag[0], T.uint32(2))
    if T.warp_id() == 0:
        Out[i] = Peer[i]
'''
NO_SIGNAL = WRITE_SIGNAL_READ.replace("T.ptx.red_release_sys_add_u32(PeerFlag[0], T.uint32(1))",
                                      "T.evaluate(T.uint32(0))")
READ_FIRST = _HEAD + '''
    if T.warp_id() == 0:
        Mine[i] = T.cast(i, "uint32") + T.uint32(100)
    if T.warp_id() == 0:
        Out[i] = Peer[i]
    T.ptx.barrier_sync(1, 64)
    if T.warp_id() == 1:
        if T.lane_id() == 0:
            T.ptx.red_release_sys_add_u32(PeerFlag[0], T.uint32(1))
    T.ptx.wait_geq_sys_u32(Flag[0], T.uint32(2))
'''


def kernel(src, name):
    return T.parse_script(src.format(name=name))


def world():
    data, flag = Symmetric("data", (64,), "uint32", 2), Symmetric("flag", (1,), "uint32", 2)
    outs = [np.zeros(64, np.uint32) for _ in range(2)]
    args = [(data.on(r), data.on(1 - r), flag.on(r), flag.on(1 - r), outs[r]) for r in range(2)]
    return data, flag, outs, args
