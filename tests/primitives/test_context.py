"""tirxpy/primitives/context.py: Tile views and the CallContext builders."""
import pytest

from tirxpy.ir import Buffer, IntImm, Kernel, LaunchConfig, PrimitiveCall, Var
from tirxpy.ir.expr import BufferLoad, IntrinsicCall
from tirxpy.ir.stmt import Allocate, Evaluate, For, LetStmt, SeqStmt
from tirxpy.primitives.context import CallContext, Tile
from tirxpy.primitives.dispatch import ImplRejected


def test_tile_of_whole_buffer():
    A = Buffer("A", (4, 8), "float32")
    t = Tile(A, 0)
    assert t.shape == (4, 8) and t.size == 32 and t.ndim == 2 and t.is_whole and t.static_starts
    assert t.name == "A" and t.storage == "global" and repr(t) == "Tile(A[4, 8] float32 in global)"
    idx = t.index((1, 2))
    assert [x.value for x in idx] == [1, 2]
    assert isinstance(t.load((0, 0)), BufferLoad)
    with pytest.raises(ValueError, match="does not match view shape"):
        t.index((1,))


def test_tile_of_region_drops_scalar_dims():
    A = Buffer("A", (4, 8), "float32")
    i = Var("i")
    t = Tile(A[i, 2:6], 1)
    assert t.shape == (4,) and not t.is_whole and not t.static_starts and t.position == 1
    r, c = t.index((3,))
    assert r is i and c.value == 5
    assert Tile(A[1, 3:4], 0).shape == (1,)


def test_slots_of_register_tile():
    R = Buffer("R", (8,), "float16", "local")
    t = Tile(R, 0)
    s = t.slots()
    assert s.shape == (8,) and t.slots() is s
    s32 = t.slots("uint32")
    assert s32.shape == (4,)
    with pytest.raises(ImplRejected, match="not registers"):
        Tile(Buffer("G", (8,), "float16"), 0).slots()


def _ctx(threads=128):
    A = Buffer("A", (4,), "float32")
    call = PrimitiveCall("fill", [A, IntImm(3)], "cta", {"value": 1.0})
    k = Kernel("k", [A], LaunchConfig(threads=threads), [call])
    return CallContext(call, k, None, "sm_90a"), A


def test_call_context_operands_and_attrs():
    ctx, A = _ctx()
    assert ctx.op == "fill" and ctx.threads_per_cta == 128 and ctx.attr("value") == 1.0 and ctx.attr("x", 7) == 7
    assert ctx.tensor(0).buffer is A and len(ctx.tiles) == 1
    with pytest.raises(ImplRejected, match="scalar"):
        ctx.tensor(1)
    with pytest.raises(ImplRejected, match="needs operand 2"):
        ctx.tensor(2)


def test_builders_make_fresh_names():
    ctx, _ = _ctx()
    v1, v2 = ctx.var("v"), ctx.var("v")
    assert v1.name != v2.name and v1.name.startswith("tx_v")
    x, let = ctx.let("x", 5)
    assert isinstance(let, LetStmt) and let.var is x and let.value.value == 5
    b, alloc = ctx.local("r", (4,), "float32")
    assert isinstance(alloc, Allocate) and alloc.buffer is b and b.storage == "local"
    loop = ctx.loop(4, lambda i: LetStmt(Var("y"), i))
    assert isinstance(loop, For) and loop.stop.value == 4
    one = ctx.loop(1, lambda i: LetStmt(Var("y"), i))
    assert isinstance(one, SeqStmt) and one.stmts[0].value.value == 0
    assert len(ctx.seq([let, None, alloc])) == 2


def test_intrin_checks_table_and_target():
    ctx, _ = _ctx()
    c = ctx.intrin("fence_proxy_async")
    assert isinstance(c, IntrinsicCall) and ctx.emitted == ["fence_proxy_async"]
    assert isinstance(ctx.emit("fence_proxy_async"), Evaluate)
    with pytest.raises(ImplRejected, match="no 'nope_xyz'"):
        ctx.intrin("nope_xyz")
    A = Buffer("A", (4,), "float32")
    call = PrimitiveCall("fill", [A], "cta")
    old = CallContext(call, Kernel("k", [A], LaunchConfig(), [call]), None, "sm_80")
    with pytest.raises(ImplRejected, match="needs sm_90"):
        old.intrin("fence_proxy_async")
