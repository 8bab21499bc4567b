"""tirxpy/lower/codegen/expr.py: expressions as C++ (precedence, floor division, casts, narrow floats)."""
from tirxpy.ir import Buffer, Kernel, LaunchConfig, Var, ops
from tirxpy.lower.codegen.context import BufferInfo, Context
from tirxpy.lower.codegen.expr import ExprRenderer, is_tile
from tirxpy.lower.codegen.ranges import Ranges
from tirxpy.target import as_target


class _Vars:
    """Vars declared in the context (as LetStmt / parameters would)."""

    def __init__(self, ctx):
        self.ctx = ctx

    def __call__(self, name, dtype="int32"):
        v = Var(name, dtype)
        self.ctx.name(v, name)
        return v


def _r():
    ctx = Context(Kernel("k", [], LaunchConfig(), []), as_target("sm_90a"), Ranges(threads=128))
    return ExprRenderer(ctx), ctx


def test_precedence_adds_only_needed_parentheses():
    r, ctx = _r()
    Var = _Vars(ctx)
    a, b, c = Var("a"), Var("b"), Var("c")
    assert r(ops.mul(ops.add(a, b), c)) == "(a + b) * c"
    assert r(ops.add(a, ops.mul(b, c))) == "a + b * c"
    assert r(ops.sub(a, ops.sub(b, c))) == "a - (b - c)"


def test_floor_division_depends_on_known_signs():
    r, ctx = _r()
    Var = _Vars(ctx)
    q, t = Var("q"), Var("t")
    ctx.ranges.bind(t, (0, 127))
    assert r(ops.floordiv(t, 3)) == "t / 3"
    assert r(ops.floormod(t, 3)) == "t % 3"
    assert r(ops.floordiv(q, 3)) == "tx_floordiv<int32_t>(q, 3)" and "floor" in ctx.helpers
    assert r(ops.floordiv(q, 4)) == "q >> 2"


def test_select_min_and_float_ops():
    r, ctx = _r()
    Var = _Vars(ctx)
    q, t = Var("q"), Var("t")
    assert r(ops.select(ops.gt(q, 0), q, t)) == "q > 0 ? q : t"
    assert r(ops.add(ops.select(ops.gt(q, 0), q, t), 1)) == "(q > 0 ? q : t) + 1"
    assert r(ops.minimum(q, t)) == "min(q, t)"
    x = Var("x", "float32")
    assert r(ops.maximum(x, ops.const(-1.25, "float32"))) == "fmaxf(x, -1.25f)"
    h = Var("h", "float16")
    assert r(ops.cast(h, "float32")) == "static_cast<float>(h)"


def test_buffer_load_through_registered_buffer():
    r, ctx = _r()
    Var = _Vars(ctx)
    A = Buffer("A", (4, 8), "float32")
    ctx.buffers[id(A)] = BufferInfo(A, "A", "global")
    i = Var("i")
    assert r(A[i, 3]) == "A[i * 8 + 3]"
    assert is_tile(A) and not is_tile(i)
