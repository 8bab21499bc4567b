"""Intrinsic calls in the simulator (tirxpy/sim/registry.py): a user intrinsic's declared scope is
enforced like the built-in collectives: a warp-scope instruction reached by only some lanes of a
warp (divergent control flow that the parser's static check cannot see: a data-dependent branch) is
reported as ``divergent_collective``."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.intrinsics import register_intrinsic
from tirxpy.sim import SimReportError, register_model, run


def _kernel(name, cond):
    return T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=64)
    if {cond}:
        B[T.lane_id()] = T.ptx.{name}(A[T.lane_id()])
''')


@pytest.fixture(scope="module")
def warp_popc():
    for name, scope in (("sim_test_wpopc", "warp"), ("sim_test_tpopc", "thread")):
        register_intrinsic(name, "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                           ret="r", memory=False, scope=scope, replace=True)
        register_model(name, lambda ctx: np.array([bin(int(v)).count("1") for v in ctx.arg("x")], np.uint32))
    return "sim_test_wpopc"


def test_warp_scope_intrinsic_under_divergence_is_reported(warp_popc):
    a, b = np.arange(32, dtype=np.uint32), np.zeros(32, np.uint32)
    with pytest.raises(SimReportError) as ei:
        run(_kernel(warp_popc, "A[T.lane_id()] < 16"), a, b)
    assert ei.value.kinds() == {"divergent_collective"}
    msg = str(ei.value)
    assert "sim_test_wpopc has scope 'warp'" in msg and "16 of 32 lanes" in msg and "lanes 0-15" in msg


def test_warp_scope_intrinsic_on_whole_warps_runs(warp_popc):
    a, b = np.arange(32, dtype=np.uint32), np.zeros(32, np.uint32)
    run(_kernel(warp_popc, "T.warp_id() == 1"), a, b)
    assert b.tolist() == [bin(i).count("1") for i in range(32)]


def test_thread_scope_intrinsic_may_diverge(warp_popc):
    a, b = np.arange(32, dtype=np.uint32), np.zeros(32, np.uint32)
    run(_kernel("sim_test_tpopc", "A[T.lane_id()] < 16"), a, b)
    assert b[:16].tolist() == [bin(i).count("1") for i in range(16)] and (b[16:] == 0).all()


@pytest.mark.parametrize("model, match", [
    (lambda ctx: None, r"model of T.ptx.sim_test_bad returned None, but the instruction returns its operand 'r'"),
    (lambda ctx: np.zeros(5, np.uint32), r"returned shape \(5,\); return one value per lane \(32\) or one for all"),
    (lambda ctx: 1 // 0, r"model of T.ptx.sim_test_bad raised ZeroDivisionError: integer division"),
])
def test_a_model_that_breaks_its_contract_is_a_model_error(model, match):
    """A model that returns nothing for an instruction with a value (which read as 0 in every lane), values not one
    per lane (numpy's broadcast error) or raises (its exception bare) is a ModelError naming the intrinsic and the
    call's line."""
    from tirxpy.sim import ModelError

    register_intrinsic("sim_test_bad", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                       ret="r", memory=False, replace=True)
    register_model("sim_test_bad", model)
    a, b = np.arange(32, dtype=np.uint32), np.zeros(32, np.uint32)
    with pytest.raises(ModelError, match=match) as ei:
        run(_kernel("sim_test_bad", "T.warp_id() == 0"), a, b)
    assert ":6:" in str(ei.value)          # the call's line in the kernel
