"""The one root of every error tirxpy raises.

Every exception tirxpy raises on purpose derives from :class:`TirxError` and also from the
built-in it matches (``ValueError`` for a bad value, ``TypeError`` for a wrong kind of argument,
``RuntimeError`` for a failure outside the caller's input), so ``except TirxError`` catches all of
them and existing ``except ValueError`` clauses keep working. This module imports no other tirxpy module, so the
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

import reprlib


class TirxError(Exception):
    """Base of every error tirxpy raises; each subclass also derives from a matching built-in."""


class TirxValueError(TirxError, ValueError):
    """A value is wrong (out of range, inconsistent with another argument)."""


class TirxTypeError(TirxError, TypeError):
    """An argument has the wrong kind (a list where a string belongs, a float where an int does)."""


class ArgumentError(TirxError, ValueError, TypeError):
    """A bad argument to a public call: wrong value or wrong type. Catchable as either built-in, so
    callers that test with ``except ValueError`` or ``except TypeError`` both keep working."""


class _BoundedRepr(reprlib.Repr):
    """:mod:`reprlib` with roomy limits, whose objects of other types show as ``<T object>`` when their repr
    raises (reprlib's own fallback names their address, which would make messages differ run to run)."""

    def __init__(self):
        super().__init__()
        self.maxlevel = 6
        self.maxtuple = self.maxlist = self.maxarray = self.maxdict = self.maxset = self.maxfrozenset = 32
        self.maxdeque = 32
        self.maxstring = self.maxlong = self.maxother = 400

    def repr_int(self, x, level):
        try:
            return super().repr_int(x, level)
        except ValueError:                              # past the digits str() converts (sys.get_int_max_str_digits)
            return f"<int of about {round(x.bit_length() * 0.30103)} digits>"

    def repr_instance(self, x, level):
        try:
            s = repr(x)
        except Exception:
            return f"<{type(x).__name__} object>"
        if len(s) > self.maxother:
            i = (self.maxother - 3) // 2
            s = s[:i] + "..." + s[len(s) - (self.maxother - 3 - i):]
        return s


_REPR = _BoundedRepr()


def shown(v, width: int | None = None) -> str:
    """``repr(v)`` (cut to ``width`` characters, when given) for an error message, or ``<T object>`` when that repr
    raises: an argument's own ``__repr__`` is its code, and its failure must not replace the error being reported.
    Built-in containers show their first 32 items, 6 levels deep, and long strings and numbers their ends
    (:mod:`reprlib`), an int too long for ``str()`` its size, so a huge argument gives a short message in a short
    time.

        >>> shown("x" * 100, 8), shown(type("T", (), {"__repr__": lambda s: 1 / 0})()), shown(10 ** 5000)
        ("'xxxxxxx", '<T object>', '<int of about 5000 digits>')
        >>> shown(list(range(10 ** 6)))[-12:], shown((1, 2, 3))
        ('30, 31, ...]', '(1, 2, 3)')
    """
    try:
        text = _REPR.repr(v)
    except Exception:
        return f"<{type(v).__name__} object>"
    return text if width is None else text[:width]


__all__ = ["TirxError", "TirxValueError", "TirxTypeError", "ArgumentError", "shown"]
