"""Small argument checks shared by the hardware atoms."""
from __future__ import annotations

from ..coords import is_int
from ..errors import LayoutError


def choice(value, options, what: str, hint: str = ""):
    """Return ``value`` if it is one of ``options``, else raise a LayoutError listing them."""
    for o in options:   # equal and of the same kind: 2.0 is not the repeat count 2, True is not 1
        if type(value) is type(o) and value == o:
            return value
    opts = ", ".join(repr(o) for o in options)
    raise LayoutError(f"{what} must be one of {opts}, got {value!r}" + (f"; {hint}" if hint else ""))


def positive_int(value, what: str) -> int:
    if not is_int(value) or value < 1:
        raise LayoutError(f"{what} must be a positive int, got {value!r}")
    return int(value)
