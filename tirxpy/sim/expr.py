"""Expressions compiled to closures that evaluate all 32 lanes of a warp at once.

``compile_expr(e)(w, mask)`` returns a numpy array of 32 lane values in the expression's
compute dtype (:mod:`tirxpy.sim.values`); ``mask`` marks the active lanes (inactive lanes
compute too, but never trip bounds checks or record accesses).
"""
from __future__ import annotations

import numpy as np

from tirxpy.ir import expr as E
from tirxpy.ir.buffer import Buffer, BufferRegion

from . import access
from .errors import UnsupportedError
from .values import compute_dtype, name_of, round_to

WARP = 32
_CACHE: dict = {}
_NARROW = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2")


def compile_expr(e):
    hit = _CACHE.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    fn = _compile(e)
    _CACHE[id(e)] = (e, fn)
    return fn


def _const(value, dt):
    arr = np.full(WARP, value, dtype=compute_dtype(dt))
    arr.setflags(write=False)
    return lambda w, m: arr


def _narrow(fn, dt):
    if dt is not None and name_of(dt) in _NARROW:
        return lambda w, m: round_to(fn(w, m), dt)
    return fn


_BIN = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide, E.Min: np.minimum,
    E.Max: np.maximum, E.BitAnd: np.bitwise_and, E.BitOr: np.bitwise_or, E.BitXor: np.bitwise_xor,
    E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater,
    E.GE: np.greater_equal, E.And: np.logical_and, E.Or: np.logical_or,
}
_MATH = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "abs": np.abs, "tanh": np.tanh,
    "floor": np.floor, "ceil": np.ceil, "sin": np.sin, "cos": np.cos, "rsqrt": lambda x: 1 / np.sqrt(x),
}


def _scope_id(e):
    k, d = e.kind, e.dim
    if k == "lane_id":
        return lambda w, m: w.lane_ids
    if k == "warp_id":
        return lambda w, m: np.full(WARP, w.wid, np.int32)
    if k == "warpgroup_id":
        return lambda w, m: np.full(WARP, w.wid // 4, np.int32)
    if k == "warp_id_in_wg":
        return lambda w, m: np.full(WARP, w.wid % 4, np.int32)
    if k == "thread_id":
        return lambda w, m: w.tid32
    if k == "thread_id_in_wg":
        return lambda w, m: w.tid32 % 128
    if k == "cta_id":
        return lambda w, m: np.full(WARP, w.cta.cta_id[d], np.int32)
    if k == "cta_id_in_cluster":
        return lambda w, m: np.full(WARP, w.cta.cid[d], np.int32)
    if k == "cluster_rank":
        return lambda w, m: np.full(WARP, w.cta.rank, np.int32)
    raise UnsupportedError(f"hardware id T.{k}()")


def _compile(e):
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return _const(e.value, e.dtype)
    if isinstance(e, E.BoolImm):
        return _const(e.value, "bool")
    if isinstance(e, E.Var):
        def var(w, m, v=e):
            x = w.env.get(v)
            if x is None:
                x = w.cta.machine.scalar(v, e.span)
            return x
        return var
    if isinstance(e, E.ScopeId):
        return _scope_id(e)
    if isinstance(e, E.ElectOne):
        return lambda w, m, node=e: w.elect(node, m)
    if isinstance(e, E.Not):
        a = compile_expr(e.a)
        return lambda w, m: np.logical_not(a(w, m))
    if isinstance(e, E.BitNot):
        a = compile_expr(e.a)
        return lambda w, m: np.invert(a(w, m))
    if isinstance(e, E.Select):
        c, t, f = compile_expr(e.cond), compile_expr(e.t), compile_expr(e.f)
        return lambda w, m: np.where(c(w, m), t(w, m), f(w, m))
    if isinstance(e, E.Cast):
        v, dt = compile_expr(e.value), e.dtype
        return lambda w, m: round_to(v(w, m), dt)
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        a, b = compile_expr(e.a), compile_expr(e.b)
        isdiv = isinstance(e, E.FloorDiv)
        isint = e.dtype.is_int

        def fdiv(w, m):
            x, y = a(w, m), b(w, m)
            if isint:
                z = y == 0
                if z.any():
                    zero = z & m
                    if zero.any():
                        w.cta.machine.report("division_by_zero", f"integer division by zero in `{e}`", e.span,
                                             w.describe(zero))
                    y = np.where(z, 1, y)
            with np.errstate(all="ignore"):
                r = np.floor_divide(x, y) if isdiv else np.mod(x, y)
            return r.astype(x.dtype, copy=False)
        return _narrow(fdiv, e.dtype)
    if isinstance(e, (E.Shl, E.Shr)):
        a, b = compile_expr(e.a), compile_expr(e.b)
        op = np.left_shift if isinstance(e, E.Shl) else np.right_shift

        def sh(w, m):
            x = a(w, m)
            return op(x, b(w, m).astype(x.dtype, copy=False))
        return sh
    if type(e) in _BIN:
        a, b = compile_expr(e.a), compile_expr(e.b)
        op = _BIN[type(e)]
        exact = op is not np.divide     # on integer / bool operands these raise no floating-point flag

        def bin_(w, m):
            x, y = a(w, m), b(w, m)
            if exact and x.dtype.kind in "biu" and y.dtype.kind in "biu":
                return op(x, y)
            with np.errstate(all="ignore"):
                return op(x, y)
        return bin_ if isinstance(e, E.CmpOp) else _narrow(bin_, e.dtype)
    if isinstance(e, E.Call):
        args = [compile_expr(x) for x in e.args]
        dt = e.dtype
        if e.name == "fma":
            def fma(w, m):
                x, y, z = (f(w, m).astype(np.float64) for f in args)
                return round_to(x * y + z, dt)
            return fma
        fn = _MATH.get(e.name)
        if fn is None:
            raise UnsupportedError(f"math builtin T.{e.name}")

        def call(w, m):
            x = args[0](w, m)
            with np.errstate(all="ignore"):
                return round_to(fn(x), dt) if dt.is_float else fn(x)
        return call
    if isinstance(e, E.BufferLoad):
        idx = [compile_expr(i) for i in e.indices]
        buf = e.buffer
        slot = access.fixed_register_slot(buf, e.indices)
        if slot is not None:        # one register slot in every lane: read as a column when all lanes are active
            root, off = slot
            dt = buf.dtype

            def load_slot(w, m):
                if m.all():
                    return w.read_regs_at(root, off, dt, e)
                return access.load(w, m, buf, [f(w, m) for f in idx], e)
            return load_slot
        return lambda w, m: access.load(w, m, buf, [f(w, m) for f in idx], e)
    if isinstance(e, E.AddressOf):
        t = e.target
        buf = t.buffer
        starts = t.indices if isinstance(t, E.BufferLoad) else t.starts
        idx = [compile_expr(i) for i in starts]
        return lambda w, m: access.address(w, m, buf, [f(w, m) for f in idx], e)
    if isinstance(e, E.IntrinsicCall):
        def result(w, m, node=e):
            r = w.results.get(id(node))
            if r is None:
                raise UnsupportedError(f"intrinsic {node.name} returned no value")
            return r
        return result
    if isinstance(e, (Buffer, BufferRegion)):
        raise UnsupportedError(f"a buffer region `{e}` used as a value")
    raise UnsupportedError(f"expression node {type(e).__name__}")


def intrinsic_calls(node, out=None):
    """IntrinsicCall nodes inside an expression / operand, innermost first."""
    if out is None:
        out = []
    if isinstance(node, E.IntrinsicCall):
        for a in node.args:
            intrinsic_calls(a, out)
        out.append(node)
        return out
    if isinstance(node, BufferRegion):
        for s in node.starts:
            intrinsic_calls(s, out)
        return out
    if isinstance(node, E.Expr):
        for _, v in node.fields():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, (E.Expr, BufferRegion)):
                    intrinsic_calls(x, out)
    return out
