"""``simplify(node)``: rebuild an expression (or every expression in a statement / kernel)
through the simplifying constructors of :mod:`tirxpy.ir.ops`.

Hand-built IR (``Add(IntImm(1), IntImm(2))``) becomes the canonical form the parser produces,
so that printing and re-parsing it gives a structurally equal result.

    >>> from tirxpy.ir import Add, IntImm, Mul, Var
    >>> from tirxpy.ir.simplify import simplify
    >>> i = Var("i")
    >>> simplify(Mul(Add(i, IntImm(1)), IntImm(4)))
    i * 4 + 4
"""
from __future__ import annotations

from . import expr as E
from . import ops
from . import stmt as St
from .visitor import map_bodies

_REBUILD = {
    E.Add: ops.add, E.Sub: ops.sub, E.Mul: ops.mul, E.Div: ops.div, E.FloorDiv: ops.floordiv,
    E.FloorMod: ops.floormod, E.Min: ops.minimum, E.Max: ops.maximum, E.Shl: ops.shl, E.Shr: ops.shr,
    E.BitAnd: ops.bitand, E.BitOr: ops.bitor, E.BitXor: ops.bitxor, E.And: ops.logical_and,
    E.Or: ops.logical_or, E.EQ: ops.eq, E.NE: ops.ne, E.LT: ops.lt, E.LE: ops.le, E.GT: ops.gt, E.GE: ops.ge,
}


def simplify(node):
    """Canonical form of an expression, statement or kernel (statements are rebuilt in place of
    their expressions; variables and buffers are kept)."""
    from .kernel import Kernel

    if isinstance(node, E.Expr):
        return _expr(node)
    if isinstance(node, Kernel):
        node.body = _stmt(node.body)
        return node
    if isinstance(node, St.Stmt):
        return _stmt(node)
    return node


def _expr(e):
    from .buffer import BufferRegion

    if isinstance(e, BufferRegion):
        return BufferRegion(e.buffer, [_expr(s) for s in e.starts], e.extents, e.squeeze, span=e.span)
    if not isinstance(e, E.Expr):
        return e
    t = type(e)
    if t in _REBUILD:
        return _REBUILD[t](_expr(e.a), _expr(e.b))
    if t is E.Not:
        return ops.logical_not(_expr(e.a))
    if t is E.BitNot:
        return ops.bitnot(_expr(e.a))
    if t is E.Select:
        return ops.select(_expr(e.cond), _expr(e.t), _expr(e.f))
    if t is E.Cast:
        return ops.cast(_expr(e.value), e.dtype)
    if t is E.BufferLoad:
        return E.BufferLoad(e.buffer, [_expr(i) for i in e.indices], span=e.span)
    if t is E.Call:
        return E.Call(e.name, [_expr(a) for a in e.args], e.dtype, span=e.span)
    if t is E.IntrinsicCall:
        return E.IntrinsicCall(e.name, [_expr(a) for a in e.args], e.dtype, span=e.span)
    if t is E.AddressOf:
        return E.AddressOf(_expr(e.target), span=e.span)
    return e


def _stmt(s):
    """``s`` with every expression simplified; nested bodies are rebuilt by :func:`tirxpy.ir.visitor.map_bodies`."""
    s = map_bodies(s, _stmt)
    if isinstance(s, St.LetStmt):
        return St.LetStmt(s.var, _expr(s.value), span=s.span)
    if isinstance(s, St.BufferStore):
        return St.BufferStore(s.buffer, [_expr(i) for i in s.indices], _expr(s.value), span=s.span)
    if isinstance(s, St.Evaluate):
        return St.Evaluate(_expr(s.expr), span=s.span)
    if isinstance(s, St.For):
        return St.For(s.var, _expr(s.start), _expr(s.stop), s.kind, s.body, span=s.span)
    if isinstance(s, St.IfThenElse):
        return St.IfThenElse(_expr(s.cond), s.then_body, s.else_body, span=s.span)
    if isinstance(s, St.While):
        return St.While(_expr(s.cond), s.body, span=s.span)
    if isinstance(s, St.PrimitiveCall):
        return St.PrimitiveCall(s.op, [_expr(o) for o in s.operands], s.scope,
                                {k: _expr(v) for k, v in s.attrs.items()}, s.dispatch, span=s.span)
    return s
