"""Axis registry (tirxpy/layout/axis.py)."""
import pytest

from tirxpy.layout import Axis, AxisStride, LayoutError, TCol, TLane, laneid, m, tid_in_wg, warpid, wgid, wid_in_wg

HW = {"laneid": 32, "wid_in_wg": 4, "tid_in_wg": 128, "TLane": 128, "TCol": 512, "Bank": 32, "wgid": 8,
      "warpid": 32, "tx": 1024}


@pytest.mark.parametrize("name,bound", sorted(HW.items()))
def test_hardware_bounds(name, bound):
    assert Axis.get(name).bound == bound


def test_kinds_and_scopes():
    assert m.is_memory and not m.is_thread and m.bound is None
    assert TLane.is_memory and TCol.kind == "tmem"
    assert laneid.is_thread and laneid.scope == ("warp", "thread")
    assert wid_in_wg.scope == ("warpgroup", "warp") and tid_in_wg.scope == ("warpgroup", "thread")
    assert warpid.scope == ("cta", "warp") and wgid.scope == ("cta", "warpgroup")
    assert Axis.get(laneid) is laneid and Axis.all()["m"] is m
    assert repr(laneid) == "laneid"
    s = 4 @ laneid
    assert isinstance(s, AxisStride) and (s.value, s.axis) == (4, laneid) and repr(s) == "4@laneid"


def test_register_is_idempotent():
    a = Axis.register("test_axis_q", "memory")
    assert Axis.register("test_axis_q", "memory") is a and Axis.get("test_axis_q") is a
    c = Axis.register("test_axis_c", "thread", ("cluster", "cta"), 16)
    assert c.scope == ("cluster", "cta") and c.bound == 16


@pytest.mark.parametrize("call,msg", [
    (lambda: Axis.get("nope"), "unknown axis 'nope'; known axes: .*Axis.register"),
    (lambda: Axis.get(3), "named by a string or an Axis, got 3"),
    (lambda: Axis.register("1bad", "memory"), "must be a Python identifier"),
    (lambda: Axis.register("test_axis_k", "gpu"), "kind must be one of"),
    (lambda: Axis.register("test_axis_s", "thread", ("warp", "cta")), "outer wider than inner"),
    (lambda: Axis.register("test_axis_s", "thread", ("warp",)), "outer wider than inner"),
    (lambda: Axis.register("test_axis_b", "thread", ("warp", "thread"), 0), "bound must be a positive int"),
    (lambda: Axis.register("laneid", "thread", ("warp", "thread"), 64), "already registered"),
])
def test_bad_input(call, msg):
    with pytest.raises(LayoutError, match=msg):
        call()


def test_register_checks_scope_and_bound_kinds():
    """A scope of the wrong kind raised a bare TypeError; a numpy bound was refused as not a positive int."""
    import numpy as np

    from tirxpy.layout.errors import LayoutTypeError

    for scope in (5, "warp", ("warp", 3), None.__class__):
        with pytest.raises(LayoutTypeError, match="scope must be an .outer, inner. pair"):
            Axis.register("test_axis_t", "thread", scope)
    ax = Axis.register("test_axis_np", "thread", ("warp", "thread"), np.int64(8))
    assert ax.bound == 8 and type(ax.bound) is int
    assert Axis.register("test_axis_np", "thread", ("warp", "thread"), 8) is ax
    for bad in (2.5, "8", True):
        with pytest.raises(LayoutTypeError, match="axis bound"):
            Axis.register("test_axis_bb", "thread", ("warp", "thread"), bad)
    with pytest.raises(LayoutError, match="bound must be a positive int below 2..64"):
        Axis.register("test_axis_bb", "thread", ("warp", "thread"), 2**64)
