"""``Tx``: the marker namespace for tile primitives at an execution scope.

``Tx.op(...)`` is the thread-scope call of primitive ``op``; ``Tx.warp.op``, ``Tx.wg.op``,
``Tx.cta.op`` and ``Tx.cluster.op`` are the same primitive at wider scopes. Inside a
``@T.prim_func`` the parser turns each call into a ``PrimitiveCall`` node; called anywhere
else a marker raises :class:`ScopeError`.

``help(Tx.<op>)`` prints the primitive's entry of the op-spec table (signature, keyword
arguments and their meaning, scopes; :mod:`tirxpy.ir.op_spec` installs it with
:func:`set_doc_source`), and ``dir(Tx)`` lists the primitives it knows. The same text is in
``docs/reference/tx.md``.

    >>> from tirxpy.scope import Tx, Scope
    >>> m = Tx.cta.gemm
    >>> m.op, m.scope
    ('gemm', <Scope.CTA: 3>)
    >>> Tx.copy.scope
    <Scope.THREAD: 0>
"""
from __future__ import annotations

import difflib

from tirxpy.errors import shown

from .errors import ScopeAttributeError, ScopeError
from .scopes import Scope


_DOC_SOURCE = None  # (doc(op) -> str | None, names() -> list[str]), installed by the op-spec table
_MARKER_TYPES: dict = {}
_SCOPE_NAMES = ("warp", "wg", "warpgroup", "cta", "cluster")
_SCOPE_LIST = "Tx.<op> (thread), Tx.warp, Tx.wg (or Tx.warpgroup), Tx.cta and Tx.cluster"


def set_doc_source(doc, names) -> None:
    """Install the documentation of primitives: ``doc(op)`` returns the help text of ``op`` (None when
    it has none), ``names()`` the known primitives. The op-spec table (an upper layer) calls this."""
    global _DOC_SOURCE
    _DOC_SOURCE = (doc, names)


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

    def __getattr__(self, name: str):
        """``Tx.wrap.copy``: a marker has no attributes, so ``wrap`` was meant as a scope; name the scopes.

        >>> Tx.wrap.copy
        Traceback (most recent call last):
        ...
        tirxpy.scope.errors.ScopeAttributeError: Tx.wrap.copy: 'wrap' is not an execution scope (...); did you mean Tx.warp.copy?
        """
        if name.startswith("_"):
            raise AttributeError(name)
        if self.scope is not Scope.THREAD:
            raise ScopeAttributeError(f"{self._spelling()}.{name}: a primitive has no attributes; call it as "
                                      f"{self._spelling()}(...) or, for another scope, {_SCOPE_LIST}")
        near = difflib.get_close_matches(self.op, _SCOPE_NAMES, n=1)
        guess = f"; did you mean Tx.{near[0]}.{name}?" if near else ""
        raise ScopeAttributeError(f"Tx.{self.op}.{name}: {shown(self.op)} is not an execution scope (the scopes are "
                                  f"{_SCOPE_LIST}){guess}")


class ScopeNamespace:
    """``Tx`` (thread scope) or ``Tx.warp`` / ``Tx.wg`` / ``Tx.cta`` / ``Tx.cluster``."""

    def __init__(self, scope: Scope):
        object.__setattr__(self, "scope", scope)

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        return _marker_type(op)(op, self.scope)

    def __dir__(self):
        names = list(_DOC_SOURCE[1]()) if _DOC_SOURCE is not None else []
        return sorted(set(names) | set(self.__dict__))

    def __setattr__(self, name, value):
        raise ScopeError("Tx is a read-only namespace; register primitives with tirxpy.ir.register_op_spec")

    def __repr__(self) -> str:
        return "Tx" if self.scope is Scope.THREAD else f"Tx.{self.scope.short}"


def _marker_type(op: str):
    """``PrimitiveMarker``, or a subclass whose docstring is the primitive's help text (what ``help`` prints)."""
    doc = _DOC_SOURCE[0](op) if _DOC_SOURCE is not None else None
    if not doc:
        return PrimitiveMarker
    t = _MARKER_TYPES.get(op)
    if t is None or t.__doc__ != doc:
        t = type(op, (PrimitiveMarker,), {"__slots__": (), "__doc__": doc, "__module__": __name__,
                                          "__qualname__": f"Tx.{op}"})
        _MARKER_TYPES[op] = t
    return t


class _TxRoot(ScopeNamespace):
    """``Tx``: tile primitives at an execution scope.

    ``Tx.<op>(...)`` runs at thread scope; ``Tx.warp.<op>``, ``Tx.wg.<op>`` (also ``Tx.warpgroup``),
    ``Tx.cta.<op>`` and ``Tx.cluster.<op>`` run the same primitive at wider scopes. Every call takes
    ``dispatch="variant"`` to pick an implementation by name. ``dir(Tx)`` lists the primitives;
    ``help(Tx.<op>)`` prints one's signature, keyword arguments and rules.
    """

    def __init__(self):
        super().__init__(Scope.THREAD)
        for s in (Scope.THREAD, Scope.WARP, Scope.WARPGROUP, Scope.CTA, Scope.CLUSTER):
            object.__setattr__(self, s.short, ScopeNamespace(s))
        object.__setattr__(self, "warpgroup", self.wg)


Tx = _TxRoot()
