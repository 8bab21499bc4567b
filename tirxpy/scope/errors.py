"""The common error base of tirxpy's front end, and the scope error.

:class:`TirxError`, the root of every tirxpy error, lives in :mod:`tirxpy.errors`; it is
re-exported here and by ``tirxpy.ir`` (with ``IRError``, ``ParseError``, ``VerifyError``).

    >>> from tirxpy.scope import Tx
    >>> Tx.wg.copy
    Tx.wg.copy
    >>> Tx.wg.copy(1, 2)
    Traceback (most recent call last):
    ...
    tirxpy.scope.errors.ScopeError: Tx.wg.copy(...) is a marker for the kernel parser and only works inside a @T.prim_func body; write the call in a function decorated with @T.prim_func (from tirxpy import T, Tx)
"""
from __future__ import annotations

from tirxpy.errors import TirxError


class ScopeError(TirxError, ValueError):
    """An execution scope is unknown or used where it cannot run."""


class ScopeAttributeError(ScopeError, AttributeError):
    """An attribute of a ``Tx`` marker that does not exist (``Tx.wrap.copy``: ``wrap`` is no scope); an
    ``AttributeError`` too, so ``hasattr`` and ``getattr(..., default)`` keep working."""
