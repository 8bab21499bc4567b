"""Statement nodes.

Bodies are :class:`SeqStmt` (nested sequences are flattened). :class:`LetStmt` and
:class:`Allocate` are declarations: they bind their variable / buffer for the statements
after them in the same sequence, the way ``x = ...`` does in Python.

- :class:`SeqStmt` (``stmts``), :class:`For` (``var, start, stop, kind, body``; kind
  ``"serial"``, ``"unroll"`` or ``"rolled"``), :class:`IfThenElse` (``cond, then_body, else_body``),
  :class:`While` (``cond, body``), :class:`LetStmt` (``var, value``), :class:`Evaluate`
  (``expr``), :class:`Allocate` (``buffer``), :class:`BufferStore` (``buffer, indices,
  value``), :class:`PrimitiveCall` (``op, operands, scope, attrs, dispatch``).
"""
from __future__ import annotations

from tirxpy.scope import Scope
from tirxpy.errors import shown

from .errors import IRError
from .expr import Expr, Var
from .node import Node


class Stmt(Node):
    """Base of statements."""


class SeqStmt(Stmt):
    """A sequence of statements (flattened: never directly contains another SeqStmt)."""

    _fields = ("stmts",)

    def __init__(self, stmts=(), span=None):
        super().__init__(span)
        flat = []
        for s in stmts:
            if isinstance(s, SeqStmt):
                flat.extend(s.stmts)
            elif isinstance(s, Stmt):
                flat.append(s)
            else:
                raise IRError(f"a statement sequence holds statements, got {shown(s)}")
        self.stmts = tuple(flat)

    def __iter__(self):
        return iter(self.stmts)

    def __len__(self):
        return len(self.stmts)


def as_seq(body) -> SeqStmt:
    if isinstance(body, SeqStmt):
        return body
    if isinstance(body, Stmt):
        return SeqStmt([body])
    return SeqStmt(list(body or ()))


FOR_KINDS = ("serial", "unroll", "rolled")


class For(Stmt):
    """``for var in T.serial(start, stop)`` / ``T.unroll(...)`` / ``T.rolled(...)``: ``var`` from ``start`` to
    ``stop - 1``. ``kind`` says what the CUDA compiler may do with the loop: ``"serial"`` leaves it to its
    heuristics (it may unroll a loop of known trip count), ``"unroll"`` unrolls it fully (``#pragma unroll``),
    ``"rolled"`` keeps it a loop (``#pragma unroll 1``). The kind never changes what the loop computes."""

    _fields = ("var", "start", "stop", "kind", "body")

    def __init__(self, var: Var, start: Expr, stop: Expr, kind: str, body, span=None):
        super().__init__(span)
        if kind not in FOR_KINDS:
            raise IRError(f"loop kind must be one of {FOR_KINDS}, got {shown(kind)}",
                          hint="pass \"serial\" (T.serial), \"unroll\" (T.unroll) or \"rolled\" (T.rolled)")
        self.var, self.start, self.stop, self.kind = var, start, stop, kind
        self.body = as_seq(body)


class IfThenElse(Stmt):
    """``if cond: then_body else: else_body`` (``else_body`` may be None)."""

    _fields = ("cond", "then_body", "else_body")

    def __init__(self, cond: Expr, then_body, else_body=None, span=None):
        super().__init__(span)
        self.cond = cond
        self.then_body = as_seq(then_body)
        self.else_body = None if else_body is None else as_seq(else_body)


class While(Stmt):
    _fields = ("cond", "body")

    def __init__(self, cond: Expr, body, span=None):
        super().__init__(span)
        self.cond = cond
        self.body = as_seq(body)


class LetStmt(Stmt):
    """``var = value``: binds ``var`` for the rest of the enclosing sequence."""

    _fields = ("var", "value")

    def __init__(self, var: Var, value: Expr, span=None):
        super().__init__(span)
        self.var, self.value = var, value


class Evaluate(Stmt):
    """An expression evaluated for its effect (usually an :class:`~tirxpy.ir.expr.IntrinsicCall`)."""

    _fields = ("expr",)

    def __init__(self, expr: Expr, span=None):
        super().__init__(span)
        self.expr = expr


class Allocate(Stmt):
    """``buf = T.alloc_shared(...)`` / ``T.alloc_local`` / ``T.alloc_tmem``: declares ``buffer``
    (its storage scope says where) for the rest of the enclosing sequence."""

    _fields = ("buffer",)

    def __init__(self, buffer, span=None):
        super().__init__(span)
        self.buffer = buffer


class BufferStore(Stmt):
    """``A[i, j] = value``."""

    _fields = ("buffer", "indices", "value")

    def __init__(self, buffer, indices, value: Expr, span=None):
        super().__init__(span)
        self.buffer = buffer
        self.indices = tuple(indices)
        self.value = value


class PrimitiveCall(Stmt):
    """``Tx.<scope>.<op>(operands..., dispatch=None, **attrs)``: a tile primitive.

    ``operands`` are buffers, regions or expressions; ``scope`` a :class:`~tirxpy.scope.Scope`;
    ``attrs`` a dict of keyword arguments (Python literals, dtypes, layouts or expressions);
    ``dispatch`` an optional implementation variant name.
    """

    _fields = ("op", "operands", "scope", "attrs", "dispatch")

    def __init__(self, op: str, operands, scope=Scope.THREAD, attrs=None, dispatch=None, span=None):
        super().__init__(span)
        if not isinstance(op, str) or not op.isidentifier():
            raise IRError(f"a primitive name is an identifier, got {shown(op)}")
        self.op = op
        self.operands = tuple(operands)
        self.scope = Scope.get(scope)
        self.attrs = dict(attrs or {})
        if dispatch is not None and not isinstance(dispatch, str):
            raise IRError(f"dispatch= names an implementation variant (a str), got {shown(dispatch)}")
        self.dispatch = dispatch
