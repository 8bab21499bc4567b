"""tirxpy.primitives: tile primitives, their per-target implementations, and the dispatcher.

A call ``Tx.<scope>.<op>(operands..., dispatch=None, **attrs)`` is lowered by
:func:`lower_calls` (``lower_calls(kernel, arch) -> Kernel``, what ``build()`` calls): the
candidates registered for ``op`` are tried by priority; each reads the operands' storage
scopes, layouts and dtypes, the active thread set at the call and the target through
predicates that return ``None`` or a reason; the first that accepts returns native IR that
replaces the call in place. See :mod:`tirxpy.primitives.dispatch` for the registration API
and :mod:`tirxpy.primitives.context` for what an implementation sees.

Public: ``register_impl``, ``unregister_impl``, ``implementations``, ``fail``, ``DispatchError``,
``LegalityError``, ``CallContext``, ``Tile``, ``lower_calls``, ``explain``.
"""
from .context import CallContext, Tile
from .dispatch import (
    Choice, DispatchError, Impl, ImplRejected, LegalityError, dispatch_call, fail, implementations, ops,
    register_impl, unregister_impl,
)
from .explain import explain
from .lower_pass import lower_calls, lower_calls_traced

__all__ = [
    "CallContext", "Tile", "Choice", "DispatchError", "Impl", "ImplRejected", "LegalityError", "dispatch_call",
    "fail", "implementations", "ops", "register_impl", "unregister_impl", "explain", "lower_calls",
    "lower_calls_traced",
]
