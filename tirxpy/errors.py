"""The one root of every error tirxpy raises.

Every exception tirxpy raises on purpose derives from :class:`TirxError` and also from the
built-in it matches (``ValueError`` for a bad value, ``TypeError`` for a wrong kind of argument,
``RuntimeError`` for a failure outside the caller's input), so ``except TirxError`` catches all of
them and existing ``except ValueError`` clauses keep working. This module imports nothing, so the
lowest layer (``tirxpy.layout``) can use it.

    >>> from tirxpy.errors import TirxError
    >>> from tirxpy.layout import LayoutError, S, TileLayout
    >>> issubclass(LayoutError, TirxError) and issubclass(LayoutError, ValueError)
    True
    >>> try:
    ...     TileLayout(S[(8, 0) : (1, 1)])
    ... except TirxError as e:
    ...     print(type(e).__name__)
    LayoutError
"""
from __future__ import annotations


class TirxError(Exception):
    """Base of every error tirxpy raises; each subclass also derives from a matching built-in."""


class TirxValueError(TirxError, ValueError):
    """A value is wrong (out of range, inconsistent with another argument)."""


class TirxTypeError(TirxError, TypeError):
    """An argument has the wrong kind (a list where a string belongs, a float where an int does)."""


class ArgumentError(TirxError, ValueError, TypeError):
    """A bad argument to a public call: wrong value or wrong type. Catchable as either built-in, so
    callers that test with ``except ValueError`` or ``except TypeError`` both keep working."""


def shown(v, width: int | None = None) -> str:
    """``repr(v)`` (cut to ``width`` characters, when given) for an error message, or ``<T object>`` when that repr
    raises: an argument's own ``__repr__`` is its code, and its failure must not replace the error being reported.

        >>> shown("x" * 100, 8), shown(type("T", (), {"__repr__": lambda s: 1 / 0})())
        ("'xxxxxxx", '<T object>')
    """
    try:
        text = repr(v)
    except Exception:
        return f"<{type(v).__name__} object>"
    return text if width is None else text[:width]


__all__ = ["TirxError", "TirxValueError", "TirxTypeError", "ArgumentError", "shown"]
