"""``Tx``: the marker namespace for tile primitives at an execution scope.

``Tx.op(...)`` is the thread-scope call of primitive ``op``; ``Tx.warp.op``, ``Tx.wg.op``,
``Tx.cta.op`` and ``Tx.cluster.op`` are the same primitive at wider scopes. Inside a
``@T.prim_func`` the parser turns each call into a ``PrimitiveCall`` node; called anywhere
else a marker raises :class:`ScopeError`.

    >>> from tirxpy.scope import Tx, Scope
    >>> m = Tx.cta.gemm
    >>> m.op, m.scope
    ('gemm', <Scope.CTA: 3>)
    >>> Tx.copy.scope
    <Scope.THREAD: 0>
"""
from __future__ import annotations

from .errors import ScopeError
from .scopes import Scope


class PrimitiveMarker:
    """``Tx.<scope>.<op>``: names a primitive at a scope; only the kernel parser may call it."""

    __slots__ = ("op", "scope")

    def __init__(self, op: str, scope: Scope):
        self.op = op
        self.scope = scope

    def _spelling(self) -> str:
        return f"Tx.{self.op}" if self.scope is Scope.THREAD else f"Tx.{self.scope.short}.{self.op}"

    def __repr__(self) -> str:
        return self._spelling()

    def __call__(self, *args, **kwargs):
        raise ScopeError(
            f"{self._spelling()}(...) is a marker for the kernel parser and only works inside a @T.prim_func body; "
            "write the call in a function decorated with @T.prim_func (from tirxpy import T, Tx)"
        )


class ScopeNamespace:
    """``Tx`` (thread scope) or ``Tx.warp`` / ``Tx.wg`` / ``Tx.cta`` / ``Tx.cluster``."""

    def __init__(self, scope: Scope):
        object.__setattr__(self, "scope", scope)

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        return PrimitiveMarker(op, self.scope)

    def __setattr__(self, name, value):
        raise ScopeError("Tx is a read-only namespace; register primitives with tirxpy.ir.register_op_spec")

    def __repr__(self) -> str:
        return "Tx" if self.scope is Scope.THREAD else f"Tx.{self.scope.short}"


class _TxRoot(ScopeNamespace):
    def __init__(self):
        super().__init__(Scope.THREAD)
        for s in (Scope.THREAD, Scope.WARP, Scope.WARPGROUP, Scope.CTA, Scope.CLUSTER):
            object.__setattr__(self, s.short, ScopeNamespace(s))
        object.__setattr__(self, "warpgroup", self.wg)


Tx = _TxRoot()
