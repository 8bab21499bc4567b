"""fill, cast and element-wise maps on register tiles: per thread, slot by slot.

- ``Tx.fill(dst, value)``: every slot of ``dst`` (replicas included) gets ``value``.
- ``Tx.cast(dst, src)``: ``dst[e] = dst.dtype(src[e])``.
- unary ``Tx.<f>(dst, a)`` for f in exp, exp2, log, log2, sqrt, rsqrt, abs, neg, relu, silu,
  sigmoid, tanh, copy; or ``Tx.unary(dst, a, fn="exp2")`` / ``Tx.map(dst, a, fn=...)``.
- binary ``Tx.<f>(dst, a, b)`` for f in add, sub, mul, div, maximum, minimum, relu_grad, or
  ``Tx.binary(dst, a, b, fn="mul")``; ``relu_grad(dst, g, y)`` is ReLU's backward, ``0`` where ``y <= 0``
  and ``g`` elsewhere (a select: a NaN ``y`` passes ``g``, a NaN ``g`` is zeroed where ``y <= 0``); ternary
  ``Tx.fma(dst, a, b, c)`` (``a * b + c``).

Operands are register tiles that broadcast to ``dst`` (numpy rules: align right, extent 1
broadcasts: ``Tx.mul(x, x, rstd)`` with ``rstd`` of shape ``(rows, 1)`` scales rows) or scalar
expressions. Every destination element a thread holds must be read from operand elements the
same thread holds (checked for every active thread; the reason names the element and its
owner). Math runs in float32 when the destination is a narrower float (``compute=`` overrides);
float32 ``exp2`` / ``exp`` / ``sigmoid`` / ``silu`` use the SFU (``ex2.approx.ftz``,
``rcp.approx.ftz``: about 2 ulp), the way attention and activation kernels do.
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.dtype import DataType
from tirxpy.ir.expr import Call, Cast, Expr
from tirxpy.ir.stmt import BufferStore, IfThenElse
from tirxpy.errors import shown

from ..context import Tile
from ..dispatch import fail, register_impl
from .slots import all_slots, register_fragment, slot_map

UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "neg", "relu", "silu", "sigmoid", "tanh", "copy")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "relu_grad")
TERNARY = ("fma",)
ARITY = {**{f: 1 for f in UNARY}, **{f: 2 for f in BINARY}, "fma": 3}


def _f(name, *xs):
    return Call(name, list(xs), xs[0].dtype)


def _register_fast_math():
    from tirxpy.intrinsics import lookup, register_intrinsic

    for name, ptx in (("ex2_approx_f32", "ex2.approx.ftz.f32"), ("rcp_approx_f32", "rcp.approx.ftz.f32")):
        if lookup(name) is None:
            register_intrinsic(name, f"{ptx} {{r}}, {{x}};", [("r", "reg", "float32", "w"), ("x", "reg", "float32")],
                               ret="r", memory=False, doc=f"{ptx}: the SFU approximation (2 ulp), flush-to-zero")


_register_fast_math()
_LOG2E = 1.4426950408889634


def _ex2(x):
    from tirxpy.ir.expr import IntrinsicCall

    return IntrinsicCall("ex2_approx_f32", [x], "float32")


def _rcp(x):
    from tirxpy.ir.expr import IntrinsicCall

    return IntrinsicCall("rcp_approx_f32", [x], "float32")


def _fast(x) -> bool:
    return x.dtype is not None and x.dtype.name == "float32"


FUNCTIONS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "neg", "copy", "relu", "sigmoid", "silu",
             "add", "sub", "mul", "div", "maximum", "minimum", "relu_grad", "fma")


def apply_fn(fn: str, xs):
    """The IR expression of ``fn`` on operands ``xs`` (all of one dtype)."""
    if fn not in FUNCTIONS:
        raise ValueError(f"unknown element-wise function {shown(fn)}; use one of {', '.join(FUNCTIONS)}")
    x = xs[0]
    dt = x.dtype
    if fn == "exp2" and _fast(x):
        return _ex2(x)
    if fn == "exp" and _fast(x):
        return _ex2(ops.mul(x, ops.const(_LOG2E, dt)))
    if fn in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh"):
        return _f(fn, x)
    if fn == "neg":
        return ops.neg(x)
    if fn == "copy":
        return x
    if fn == "relu":
        return ops.maximum(x, ops.const(0.0, dt))
    if fn in ("sigmoid", "silu") and _fast(x):
        sig = _rcp(ops.add(ops.const(1.0, dt), _ex2(ops.mul(x, ops.const(-_LOG2E, dt)))))
        return sig if fn == "sigmoid" else ops.mul(x, sig)
    if fn == "sigmoid":
        return ops.div(ops.const(1.0, dt), ops.add(ops.const(1.0, dt), _f("exp", ops.neg(x))))
    if fn == "silu":
        return ops.div(x, ops.add(ops.const(1.0, dt), _f("exp", ops.neg(x))))
    a, b = xs[0], xs[1]
    if fn == "add":
        return ops.add(a, b)
    if fn == "sub":
        return ops.sub(a, b)
    if fn == "mul":
        return ops.mul(a, b)
    if fn == "div":
        return ops.div(a, b)
    if fn == "maximum":
        return ops.maximum(a, b)
    if fn == "minimum":
        return ops.minimum(a, b)
    if fn == "relu_grad":
        return ops.select(ops.le(b, ops.const(0.0, b.dtype)), ops.const(0.0, a.dtype), a)
    if fn == "fma":
        return _f("fma", a, b, xs[2])
    raise AssertionError(fn)  # unreachable: FUNCTIONS is checked on entry


def compute_dtype(ctx, dst):
    c = ctx.attr("compute")
    if c is not None:
        return DataType.get(str(c))
    dt = dst.dtype
    if dt.is_float and dt.bits < 32:
        return DataType.get("float32")
    return dt


def _conv(x, dt):
    return x if x.dtype == dt else Cast(dt, x)


def _fn_of(ctx):
    op = ctx.op
    if op in ("unary", "binary", "map"):
        fn = ctx.attr("fn")
        if not isinstance(fn, str) or fn not in ARITY:
            fail(f"Tx.{op} needs fn= one of {sorted(ARITY)}, got {fn!r}")
        return fn
    return op


def is_local_map(ctx):
    """dst is a register tile; the other operands are register tiles or scalars; arity fits."""
    if not ctx.operands or not isinstance(ctx.operands[0], Tile):
        return "the first operand (dst) must be a tensor"
    dst = ctx.operands[0]
    if dst.storage != "local":
        return f"dst {dst.name} is in '{dst.storage}'; element-wise maps write register tiles ('local')"
    fn = ctx.op if ctx.op in ARITY else ctx.attr("fn")
    if fn not in ARITY:
        return f"Tx.{ctx.op} needs fn= one of {sorted(ARITY)}, got {fn!r}"
    n = ARITY[fn]
    if len(ctx.operands) != n + 1:
        return f"{fn} takes dst and {n} operand(s), got {len(ctx.operands) - 1}"
    for o in ctx.operands[1:]:
        if isinstance(o, Tile) and o.storage != "local":
            return f"{o.name} is in '{o.storage}'; element-wise maps read register tiles (copy it to registers first)"
    return None


def _map(ctx):
    fn = _fn_of(ctx)
    dst = ctx.operands[0]
    srcs = list(ctx.operands[1:])
    frag, maps = slot_map(ctx, dst, [o if isinstance(o, Tile) else None for o in srcs])
    cdt = compute_dtype(ctx, dst)
    dslots = dst.slots()
    oslots = [o.slots() if isinstance(o, Tile) else None for o in srcs]
    stmts = []
    for k, slot in enumerate(frag.slots):
        xs = []
        for j, o in enumerate(srcs):
            if isinstance(o, Tile):
                xs.append(_conv(oslots[j][maps[j][k]], cdt))
            else:
                e = o if isinstance(o, Expr) else ops.const(o)
                xs.append(_conv(e, cdt))
        val = _conv(apply_fn(fn, xs), dst.dtype)
        stmts.append(BufferStore(dslots, (ops.const(slot),), val))
    out = ctx.seq(stmts)
    return IfThenElse(frag.guard, out) if frag.guard is not None else out


for _op in UNARY + BINARY + TERNARY + ("unary", "binary", "map"):
    register_impl(_op, "any", variant="local_map", priority=10, when=[is_local_map])(_map)


# ------------------------------------------------------------------ fill
def is_local_fill(ctx):
    if not ctx.operands or not isinstance(ctx.operands[0], Tile):
        return "fill(dst, value): dst must be a tensor"
    if ctx.operands[0].storage != "local":
        return f"dst is in '{ctx.operands[0].storage}'; this variant fills register tiles"
    if len(ctx.operands) != 2 or isinstance(ctx.operands[1], Tile):
        return "fill(dst, value) takes a scalar value"
    return None


@register_impl("fill", "any", variant="local_fill", priority=10, when=[is_local_fill])
def local_fill(ctx):
    """Every register slot of dst (a thread fills only its own registers) gets the value."""
    dst = ctx.operands[0]
    if not dst.static_starts:
        fail(f"{dst.name}: a register view needs static starts")
    val = ctx.operands[1]
    val = _conv(val if isinstance(val, Expr) else ops.const(val), dst.dtype)
    s = dst.slots()
    if dst.is_whole:  # every register of the tile, in every thread (registers a thread does not own are unused)
        return ctx.seq([BufferStore(s, (ops.const(r),), val) for r in all_slots(dst)])
    frag = register_fragment(ctx, dst)  # a view: only the slots (and threads) that hold it
    out = ctx.seq([BufferStore(s, (ops.const(r),), val) for r in sorted(set(frag.slots))])
    return IfThenElse(frag.guard, out) if frag.guard is not None else out


# ------------------------------------------------------------------ cast
def is_local_cast(ctx):
    if len(ctx.operands) != 2 or not all(isinstance(o, Tile) for o in ctx.operands):
        return "cast(dst, src) takes two tensors"
    dst, src = ctx.operands
    if dst.storage != "local" or src.storage != "local":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant casts register tiles"
    if dst.shape != src.shape:
        return f"{dst.name} {dst.shape} and {src.name} {src.shape} differ in shape"
    return None


@register_impl("cast", "any", variant="local_cast", priority=10, when=[is_local_cast])
def local_cast(ctx):
    """dst[e] = dst.dtype(src[e]) slot by slot (the same thread must hold both)."""
    dst, src = ctx.operands
    frag, (m,) = slot_map(ctx, dst, [src])
    d, s = dst.slots(), src.slots()
    out = ctx.seq([BufferStore(d, (ops.const(slot),), _conv(s[m[k]], dst.dtype)) for k, slot in enumerate(frag.slots)])
    return IfThenElse(frag.guard, out) if frag.guard is not None else out


__all__ = ["apply_fn", "local_fill", "local_cast", "register_fragment"]
