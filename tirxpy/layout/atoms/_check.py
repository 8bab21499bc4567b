"""Small argument checks shared by the hardware atoms."""
from __future__ import annotations
from tirxpy.errors import shown

from ..coords import is_int
from ..errors import LayoutError


def choice(value, options, what: str, hint: str = ""):
    """The option equal to ``value`` and of its kind (a numpy int is an int; 2.0 is not 2, True is not 1), else a
    LayoutError listing the options.

        >>> import numpy as np
        >>> choice(np.int64(2), (1, 2, 4), "num")
        2
    """
    for o in options:
        if (is_int(value) and is_int(o) and int(value) == o) or (type(value) is type(o) and value == o):
            return o
    opts = ", ".join(repr(o) for o in options)
    raise LayoutError(f"{what} must be one of {opts}, got {shown(value)}" + (f"; {hint}" if hint else ""))


def int_at_least(value, what: str, lo: int = 1) -> int:
    """``value`` as a Python int ``>= lo`` (numpy ints taken as ints), else a LayoutError naming ``what``."""
    if not is_int(value) or value < lo:
        raise LayoutError(f"{what} must be a {'positive' if lo == 1 else 'non-negative'} int, got {shown(value)}")
    return int(value)


def positive_int(value, what: str) -> int:
    return int_at_least(value, what, 1)
