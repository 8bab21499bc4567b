"""The multi-rank simulator's models of the peer signal intrinsics (tirxpy/sim/rank_flags.py): a wait nobody
will satisfy is a deadlock naming the flag; atomic counters return the old values; a red adds every active
lane's value."""
import numpy as np
import pytest

from tests.sim.rank_helpers import NO_SIGNAL, WRITE_SIGNAL_READ, kernel as _kernel, world as _world
from tirxpy import T
from tirxpy.sim import SimReportError
from tirxpy.sim.ranks import Symmetric, run_ranks


def test_missing_signal_is_a_deadlock():
    data, flag, outs, args = _world()
    ks = [_kernel(WRITE_SIGNAL_READ, "wsr"), _kernel(NO_SIGNAL, "nosig")]
    with pytest.raises(SimReportError) as e:
        run_ranks(ks, args)
    assert "deadlock" in e.value.kinds()
    assert "rank 0 cta" in str(e.value) and "flag@rank0 to reach 2 (wait_geq_sys_u32)" in str(e.value)


def test_atom_counter_returns_old_values_and_orders():
    k = T.parse_script('''
@T.prim_func
def count(C: T.Tensor((1,), "uint32"), Old: T.Tensor((2,), "uint32")):
    T.launch(grid=(2,), threads=32)
    if T.lane_id() == 0:
        Old[T.cta_id(0)] = T.ptx.atom_acq_rel_gpu_add_u32(C[0], T.uint32(1))
''')
    c = Symmetric("c", (1,), "uint32", 1)
    old = np.zeros(2, np.uint32)
    run_ranks(k, [(c.on(0), old)])
    assert sorted(old.tolist()) == [0, 1] and int(c.get(0)[0]) == 2


def test_red_adds_every_active_lane_and_ld_acquire_reads_the_sum():
    k = T.parse_script('''
@T.prim_func
def add(C: T.Tensor((1,), "uint32"), Out: T.Tensor((1,), "uint32")):
    T.launch(grid=(1,), threads=32)
    if T.lane_id() < 5:
        T.ptx.red_release_sys_add_u32(C[0], T.cast(T.lane_id(), "uint32") + T.uint32(1))
    T.ptx.bar_warp_sync(0xFFFFFFFF)
    if T.lane_id() == 0:
        Out[0] = T.ptx.ld_acquire_sys_u32(C[0])
''')
    c = Symmetric("c", (1,), "uint32", 1)
    c.set(0, np.array([10], np.uint32))
    out = np.zeros(1, np.uint32)
    run_ranks(k, [(c.on(0), out)])
    assert int(c.get(0)[0]) == 10 + 15 and int(out[0]) == 25
