"""The kernel library's error for a configuration it cannot build, and the option checks that raise it.

Every kernel factory and plan of :mod:`tirxpy_kernels` (``gemm_sm90``, ``attention_sm90``, ``gemm_sm100``, their
plans, ``rmsnorm_silu``, the register split) raises :class:`KernelConfigError` for an option that is out of
range, of the wrong kind, or inconsistent with another option; the message names the option and what to pass
instead. It derives from :class:`tirxpy.errors.TirxError` and from ``ValueError``, so ``except ValueError``
keeps working.

    >>> int_option("gemm_sm90", "STAGES", 4, lo=2)
    4
    >>> int_option("gemm_sm90", "STAGES", True, lo=2)
    Traceback (most recent call last):
    ...
    tirxpy_kernels.errors.KernelConfigError: gemm_sm90: STAGES must be an int, got True (bool)
    >>> flag_option("gemm_sm90", "PDL", 1), flag_option("gemm_sm90", "DEFER", None, none=True)
    (True, None)
"""
from __future__ import annotations

import numpy as np

from tirxpy.errors import TirxError, shown  # noqa: F401  (shown: re-exported for the kernel modules)


class KernelConfigError(TirxError, ValueError):
    """A kernel of the library cannot be built with these options (wrong kind, out of range, or in conflict
    with another option); the message names the option and the fix."""


def is_int(v) -> bool:
    """Whether ``v`` counts as an integer option: a Python ``int`` or a numpy integer, not a bool. Other
    ``numbers.Integral`` types, ``int`` subclasses among them, do not: their comparisons and arithmetic are their
    own code, which every later check would run.

        >>> is_int(128), is_int(np.int64(128)), is_int(True), is_int(128.0)
        (True, True, False, False)
    """
    return type(v) is int or isinstance(v, np.integer)


def int_option(where: str, name: str, v, lo=None, hi=None, none: bool = False):
    """``v`` as an int when it is an integer (:func:`is_int`) in ``[lo, hi]`` (or None, when ``none``);
    :class:`KernelConfigError` naming ``name`` otherwise."""
    if v is None and none:
        return None
    if not is_int(v):
        extra = " or None" if none else ""
        raise KernelConfigError(f"{where}: {name} must be an int{extra}, got {shown(v, 60)} ({type(v).__name__})")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bound = f"in [{lo}, {hi}]" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise KernelConfigError(f"{where}: {name} = {shown(v, 60)} is out of range; it must be {bound}")
    return v


def flag_option(where: str, name: str, v, none: bool = False):
    """``v`` as a Python bool when it is True / False (a numpy bool too, or the ints 0 / 1; or None, when ``none``:
    the default); :class:`KernelConfigError` naming ``name`` otherwise.

        >>> type(flag_option("attention_bwd_sm90", "causal", np.bool_(True)))
        <class 'bool'>
    """
    if v is None and none:
        return None
    if type(v) is bool or isinstance(v, np.bool_) or (is_int(v) and int(v) in (0, 1)):
        return bool(v)
    extra = " (or None: the default)" if none else ""
    raise KernelConfigError(f"{where}: {name} must be True or False{extra}, got {shown(v, 60)}")


def choice_option(where: str, name: str, v, choices: tuple, hint: str = ""):
    """``v`` when it is one of ``choices`` (compared as plain values: a str option takes only a str);
    :class:`KernelConfigError` naming ``name`` otherwise."""
    if any(type(v) is type(c) and v == c for c in choices):
        return v
    raise KernelConfigError(f"{where}: {name} must be one of {choices}{hint}, got {shown(v, 60)}")


def is_flag(v) -> bool:
    """Whether ``v`` is a bool: Python's or numpy's (``np.bool_``, which :func:`plain_flags` makes a Python bool).
    Ints are not, not even 0 and 1.

        >>> is_flag(True), is_flag(np.bool_(False)), is_flag(1), is_flag(np.int64(1))
        (True, True, False, False)
    """
    return isinstance(v, (bool, np.bool_))


def plain_flags(*values):
    """``values`` with numpy bools as Python bools, everything else as it is (the checks judge it): a flag that
    goes on into a kernel factory's cache key or its Python-level branches is a Python bool.

        >>> plain_flags(np.bool_(True), False, 1)
        (True, False, 1)
    """
    return tuple(bool(v) if isinstance(v, np.bool_) else v for v in values)


def plain_ints(*values):
    """``values`` with integers of other types (numpy's) as Python ints, everything else as it is (the checks
    judge it): the kernel's code takes Python ints only.

        >>> import numpy as np
        >>> plain_ints(np.int64(128), None, True)
        (128, None, True)
    """
    return tuple(int(v) if is_int(v) else v for v in values)


__all__ = ["KernelConfigError", "int_option", "flag_option", "choice_option", "is_flag", "is_int", "plain_flags",
           "plain_ints", "shown"]

