"""The common error base of tirxpy's front end, and the scope error.

:class:`TirxError` lives here (the lowest layer of the front end) so that every layer above
(``tirxpy.ir`` re-exports it with ``IRError``, ``ParseError``, ``VerifyError``) can share it.

    >>> from tirxpy.scope import Tx
    >>> Tx.wg.copy
    Tx.wg.copy
    >>> Tx.wg.copy(1, 2)
    Traceback (most recent call last):
    ...
    tirxpy.scope.errors.ScopeError: Tx.wg.copy(...) is a marker for the kernel parser and only works inside a @T.prim_func body; write the call in a function decorated with @T.prim_func (from tirxpy import T, Tx)
"""
from __future__ import annotations


class TirxError(ValueError):
    """Base of every tirxpy front-end error (parse, IR construction, verification, scope)."""


class ScopeError(TirxError):
    """An execution scope is unknown or used where it cannot run."""
