"""Dispatcher: registration, priority order, dispatch= restriction, aggregated errors, fail()."""
import pytest

from tirxpy import T, Tx
from tirxpy.ir import SeqStmt
from tirxpy.primitives import (
    DispatchError, explain, fail, implementations, lower_calls, register_impl, unregister_impl,
)

from tests.primitives.helpers import intrinsics


def _shared_only(ctx):
    st = ctx.tensor(0).storage
    return None if st == "shared" else f"dst is '{st}', this variant writes 'shared'"


@pytest.fixture
def demo_op():
    name = "tdemo_op"

    @register_impl(name, "sm_80", variant="fast", priority=5, when=[_shared_only])
    def fast(ctx):
        return ctx.emit("syncthreads")

    @register_impl(name, "sm_90a", variant="hopper", priority=9)
    def hopper(ctx):
        fail("hopper variant rejects everything late")

    @register_impl(name, "any", variant="slow", priority=0)
    def slow(ctx):
        return ctx.emit("fence_acq_rel_cta")

    yield name
    for v in ("fast", "hopper", "slow"):
        try:
            unregister_impl(name, v)
        except DispatchError:
            pass


def _kernel(call_src, storage="global"):
    alloc = "    A = T.alloc_shared((128,), 'float32')\n" if storage == "shared" else ""
    src = f"""
@T.prim_func
def k(G: T.Tensor((128,), "float32")):
    T.launch(grid=(1,), threads=128)
{alloc}    {call_src}
"""
    return T.parse_script(src)


def test_priority_order_and_target(demo_op):
    assert [i.variant for i in implementations(demo_op)] == ["hopper", "fast", "slow"]
    k = _kernel(f"Tx.cta.{demo_op}(A)", "shared")
    assert intrinsics(lower_calls(k, "sm_80").body) == ["syncthreads"]
    assert intrinsics(lower_calls(k, "sm_90a").body) == ["syncthreads"]  # hopper fails late
    kg = _kernel(f"Tx.cta.{demo_op}(G)")
    assert intrinsics(lower_calls(kg, "sm_80").body) == ["fence_acq_rel_cta"]


def test_dispatch_variant_restricts(demo_op):
    k = _kernel(f"Tx.cta.{demo_op}(G, dispatch='fast')")
    with pytest.raises(DispatchError) as ei:
        lower_calls(k, "sm_90a")
    msg = str(ei.value)
    assert "restricted by dispatch='fast'" in msg
    assert "dst is 'global', this variant writes 'shared'" in msg
    assert "slow" not in msg
    assert [c[0] for c in ei.value.candidates] == ["fast"]


def test_unknown_variant(demo_op):
    k = _kernel(f"Tx.cta.{demo_op}(G, dispatch='nope')")
    with pytest.raises(DispatchError, match=r"has no implementation 'nope'.*\n(.|\n)*known variants: hopper, fast, slow"):
        lower_calls(k, "sm_80")


def test_aggregated_error_lists_every_candidate_and_line(demo_op):
    unregister_impl(demo_op, "slow")
    k = _kernel(f"Tx.cta.{demo_op}(G)")
    with pytest.raises(DispatchError) as ei:
        lower_calls(k, "sm_80")
    e = ei.value
    assert [c[0] for c in e.candidates] == ["hopper", "fast"]
    assert e.candidates[0][3] == "target sm_80: needs sm_90a; the kernel targets sm_80"
    assert e.candidates[1][3] == "dst is 'global', this variant writes 'shared'"
    assert e.span is not None and e.span.line == 5
    with pytest.raises(DispatchError) as ei:
        lower_calls(k, "sm_90a")
    assert ei.value.candidates[0][3] == "hopper variant rejects everything late"


def test_no_impl_at_all():
    from tirxpy.ir.op_spec import register_op_spec
    register_op_spec("tdemo_orphan")
    k = _kernel("Tx.tdemo_orphan(G)")
    with pytest.raises(DispatchError, match="no implementation of primitive 'tdemo_orphan' is registered"):
        lower_calls(k, "sm_80")


def test_user_primitive_takes_part_at_once():
    @register_impl("tdemo_new_prim", "any", variant="mine")
    def mine(ctx):
        return ctx.emit("syncthreads")
    try:
        k = _kernel("Tx.cta.tdemo_new_prim(G)")
        out = lower_calls(k, "sm_80")
        assert intrinsics(out.body) == ["syncthreads"]
        assert "tdemo_new_prim/mine" in explain(k, "sm_80")
    finally:
        unregister_impl("tdemo_new_prim", "mine")


def test_registration_errors():
    with pytest.raises(DispatchError, match="variant must be an identifier"):
        register_impl("copy", variant="not an id")
    with pytest.raises(DispatchError, match="predicate 3 is not callable"):
        register_impl("copy", variant="x", when=[3])
    with pytest.raises(DispatchError, match="priority must be an int"):
        register_impl("copy", variant="x", priority="high")
    with pytest.raises(DispatchError, match="bad target 'sm_7'"):
        register_impl("copy", "sm_7", variant="x")
    with pytest.raises(DispatchError, match="has no implementation 'ghost'"):
        unregister_impl("copy", "ghost")


def test_impl_must_return_stmt():
    @register_impl("tdemo_bad_ret", "any", variant="bad")
    def bad(ctx):
        return 42
    try:
        with pytest.raises(DispatchError, match="returned 42, not a statement"):
            lower_calls(_kernel("Tx.tdemo_bad_ret(G)"), "sm_80")
    finally:
        unregister_impl("tdemo_bad_ret", "bad")


def test_false_predicate_named():
    def holds_never(ctx):
        return False

    @register_impl("tdemo_false", "any", variant="f", when=[holds_never])
    def f(ctx):
        return SeqStmt()
    try:
        with pytest.raises(DispatchError, match="predicate holds_never does not hold"):
            lower_calls(_kernel("Tx.tdemo_false(G)"), "sm_80")
    finally:
        unregister_impl("tdemo_false", "f")
