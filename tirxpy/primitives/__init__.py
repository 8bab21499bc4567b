"""tirxpy.primitives: tile primitives, their per-target implementations, and the dispatcher.

A call ``Tx.<scope>.<op>(operands..., dispatch=None, **attrs)`` is lowered by
:func:`lower_calls` (``lower_calls(kernel, arch) -> Kernel``, what ``build()`` calls): the
candidates registered for ``op`` are tried by priority; each reads the operands' storage
scopes, layouts and dtypes, the active thread set at the call and the target through
predicates that return ``None`` or a reason; the first that accepts returns native IR that
replaces the call in place. See :mod:`tirxpy.primitives.dispatch` for the registration API
and :mod:`tirxpy.primitives.context` for what an implementation sees.

Public: ``register_impl``, ``unregister_impl``, ``implementations``, ``fail``, ``DispatchError``,
``LegalityError``, ``CallContext``, ``Tile``, ``lower_calls``, ``explain``, ``ops``.

The built-in implementations (``copy``, ``elementwise``, ``gemm``, ``reduce``) register when this
package is imported, so :func:`ops` and :func:`implementations` are complete at import. What each
primitive takes (operands, keyword arguments, scopes) is its entry in the op-spec table,
:mod:`tirxpy.ir.op_spec` (``help(Tx.<op>)`` prints it).

    >>> from tirxpy.primitives import ops, implementations
    >>> {"copy", "copy_async", "gemm_async", "exp"} <= set(ops())
    True
    >>> [i.variant for i in implementations("gemm_async")]
    ['tcgen05', 'wgmma', 'wgmma_folded']
"""
from tirxpy.scope.tx import set_doc_source as _set_doc_source

from .context import CallContext, Tile
from .dispatch import (
    Choice, DispatchError, Impl, ImplRejected, LegalityError, dispatch_call, fail, help_text, implementations, ops,
    register_impl, unregister_impl,
)
from .explain import explain
from .lower_pass import lower_calls, lower_calls_traced

__all__ = [
    "CallContext", "Tile", "Choice", "DispatchError", "Impl", "ImplRejected", "LegalityError", "dispatch_call",
    "fail", "help_text", "implementations", "ops", "register_impl", "unregister_impl", "explain", "lower_calls",
    "lower_calls_traced",
]

from . import copy, elementwise, gemm, reduce  # noqa: E402,F401  (built-in implementations register on import)


def _known_ops() -> list[str]:
    from tirxpy.ir.op_spec import op_names

    return sorted(set(op_names()) | set(ops()))


_set_doc_source(help_text, _known_ops)  # help(Tx.<op>) shows the op-spec entry and the implementations
