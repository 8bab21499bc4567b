"""The simulated target (tirxpy/sim/target.py): taken from the kernel's instructions without arch=,
and an explicit arch= that lacks one of them is refused naming it and the target that has it."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import run
from tirxpy.sim.args import ArgumentError
from tirxpy.sim.target import choose_arch

BW = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    T.ptx.tcgen05_fence_after_thread_sync()
    A[T.lane_id()] = T.lane_id()
''')
HOPPER = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=128)
    T.ptx.wgmma_fence()
    A[T.lane_id()] = T.lane_id()
''')
PLAIN = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    A[T.lane_id()] = T.lane_id()
''')


def test_target_from_the_kernel():
    assert choose_arch(BW, None) == "sm_100a"
    assert choose_arch(HOPPER, None) == "sm_90a"
    assert choose_arch(PLAIN, None) == "sm_90a"
    a = np.zeros(32, np.int32)
    run(BW, a)
    assert (a == np.arange(32)).all()


def test_explicit_arch_that_lacks_an_instruction_is_refused():
    with pytest.raises(ArgumentError) as ei:
        run(BW, np.zeros(32, np.int32), arch="sm_90a")
    msg = str(ei.value)
    assert "arch='sm_90a'" in msg and "tcgen05_fence_after_thread_sync" in msg and "arch='sm_100a'" in msg
    with pytest.raises(ArgumentError) as ei:
        run(HOPPER, np.zeros(32, np.int32), arch="sm_100a")
    assert "arch='sm_100a'" in str(ei.value) and "wgmma_fence" in str(ei.value)


@pytest.mark.parametrize("arch", ["sm_9", "hopper", "sm_70", "", 90, ("sm_90a",)])
def test_bad_arch_values(arch):
    with pytest.raises(ArgumentError) as ei:
        run(PLAIN, np.zeros(32, np.int32), arch=arch)
    assert "arch=" in str(ei.value)


def test_hopper_and_blackwell_instructions_together_have_no_target():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=128)
    T.ptx.wgmma_fence()
    T.ptx.tcgen05_fence_after_thread_sync()
''')
    with pytest.raises(ArgumentError) as ei:
        run(k, np.zeros(32, np.int32))
    msg = str(ei.value)
    assert "no target" in msg and "sm_90a" in msg and "sm_100a" in msg and "arch=" in msg
