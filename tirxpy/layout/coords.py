"""Logical coordinates: validation, row-major flattening and splitting over iterator extents.

Works on ints (checked against their ranges) and on symbolic coordinates (sympy), where the
split is done per dimension when the extents factor each dimension, so that generated index
arithmetic stays small: for shape (8, 16) and extents (8, 2, 4, 2) the column ``j`` splits into
``j // 8, (j // 2) % 4, j % 2`` and the row ``i`` is used as is.
"""
from __future__ import annotations

import operator
from math import prod

import sympy

from tirxpy.errors import shown

from .errors import MAX_COORD, LayoutError, LayoutTypeError


def is_int(v) -> bool:
    """True for ints and other ``__index__`` types (numpy ints, ``sympy.Integer``), False for bools and for
    objects whose ``__index__`` raises: the one test of what a layout takes as an int.

        >>> import numpy as np
        >>> is_int(np.int64(4)), is_int(True), is_int(2.0)
        (True, False, False)
    """
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return False
    try:
        operator.index(v)
        return True
    except Exception:   # noqa: BLE001  (no __index__, or one of its own that raises: not an int)
        return False


def as_int(v, what: str) -> int:
    """``v`` as a Python int when :func:`is_int` holds, else :class:`LayoutTypeError` naming ``what``.

        >>> import numpy as np
        >>> as_int(np.int64(4), "extent")
        4
    """
    if not is_int(v):
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            raise LayoutTypeError(f"{what} must be an integer, got {shown(v)} (bool); write 1 or 0, not True / False")
        raise LayoutTypeError(f"{what} must be an integer, got {shown(v)} ({type(v).__name__})")
    return int(operator.index(v))


def bounded_int(v, what: str, lo: int = 0) -> int:
    """:func:`as_int` in ``[lo, 2**64)`` (:class:`LayoutError` naming ``what`` and the range otherwise)."""
    v = as_int(v, what)
    if v < lo:
        need = "a positive integer" if lo == 1 else f"an integer >= {lo}"
        raise LayoutError(f"{what} is {shown(v, 60)}; it must be {need}")
    if v >= MAX_COORD:
        raise LayoutError(f"{what} is {shown(v, 60)}, past the limit of layout coordinates (2**64); use values below "
                          "2**64")
    return v


def check_shape(shape, size: int | None, what: str = "shape") -> tuple:
    """A logical shape as a tuple of Python ints: positive, below 2**64, product == ``size`` (any product
    when ``size`` is None); one int is a 1-d shape.

        >>> import numpy as np
        >>> check_shape(np.int64(4), None)
        (4,)
    """
    if is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise LayoutTypeError(f"{what} {shown(shape)} must be a non-empty tuple of positive ints, e.g. (8, 16)")
    for d, n in enumerate(shape):
        if not is_int(n):
            raise LayoutTypeError(f"{what} {shown(tuple(shape))} must be a tuple of positive ints: entry {d} is "
                                  f"{shown(n)} ({type(n).__name__})")
        i = operator.index(n)
        if not 1 <= i < MAX_COORD:
            raise LayoutError(f"{what} {shown(tuple(shape))} must be a tuple of positive ints below 2**64: entry {d} "
                              f"is {shown(i, 60)}")
    shape = tuple(int(operator.index(n)) for n in shape)
    if size is not None and prod(shape) != size:
        raise LayoutError(f"{what} {shape} has {prod(shape)} elements but the layout has {size}; "
                          f"give a shape whose product is {size}")
    return shape


def to_coord(v, what="coordinate"):
    """An int stays an int; a name becomes a non-negative integer symbol; a sympy expression is taken unless sympy
    knows it is not an integer (``expr.is_integer is False``): a float like ``sympy.Float(1.5)`` or ``3/2`` is
    refused (:class:`LayoutTypeError`), while an expression over symbols of unknown kind (the kernels' index
    expressions) is taken as the integer the caller means.

        >>> to_coord("i") + 1
        i + 1
        >>> to_coord(sympy.Rational(3, 2))
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutTypeError: coordinate must be an int or an integer-valued sympy expression, got 3/2 (Rational), which is not an integer: give an int for a number, and declare symbols integer, e.g. sympy.Symbol('i', integer=True, nonnegative=True) or the name 'i'
    """
    if is_int(v):
        return int(operator.index(v))
    if isinstance(v, str):
        v = str.__str__(v)      # (a str subclass as the plain str it holds: its own methods are its code)
        if not v.isidentifier():
            raise LayoutError(f"{what} {shown(v)} is neither an int nor a symbol name; a symbolic coordinate is named "
                              "by a Python identifier, e.g. 'i'")
        return sympy.Symbol(v, integer=True, nonnegative=True)
    if isinstance(v, sympy.Expr) and v.is_integer is not False and not v.has(sympy.nan):
        return v
    if isinstance(v, sympy.Basic):
        raise LayoutTypeError(f"{what} must be an int or an integer-valued sympy expression, got {shown(v)} "
                              f"({type(v).__name__}), which is not an integer: give an int for a "
                              "number, and declare symbols integer, e.g. sympy.Symbol('i', integer=True, "
                              "nonnegative=True) or the name 'i'")
    raise LayoutTypeError(f"{what} must be an int or a sympy expression, got {shown(v)} ({type(v).__name__})")


def normalize(coord, shape, size: int):
    """Return (coords, shape) with len(coords) == len(shape), validated against ``size``."""
    if len(coord) == 1 and isinstance(coord[0], (tuple, list)):
        coord = tuple(coord[0])
    if not coord:
        raise LayoutError("give a coordinate: apply(i) for a linear index or apply(r, c, shape=(R, C))")
    coord = tuple(to_coord(c) for c in coord)
    if shape is None:
        if len(coord) != 1:
            raise LayoutError(
                f"{len(coord)}-d coordinate {shown(coord, 100)} needs shape=...: pass the logical tile shape, e.g. "
                "shape=(8, 16)"
            )
        shape = (size,)
    else:
        shape = check_shape(shape, size)
        if len(coord) != len(shape):
            raise LayoutError(f"coordinate {shown(coord, 100)} has rank {len(coord)} but shape {shown(shape, 100)} has "
                              f"rank {len(shape)}")
    for d, (c, n) in enumerate(zip(coord, shape)):
        if (not 0 <= c < n) if is_int(c) else (c.is_negative or (c - n).is_nonnegative):   # symbolic: when sympy knows
            raise LayoutError(f"coordinate {shown(c, 60)} in dimension {d} is out of range [0, {shown(n, 60)}) for "
                              f"shape {shown(shape, 100)}")
    return coord, shape


def flatten(coord, shape):
    """Row-major linear index of ``coord`` in ``shape``."""
    i = 0
    for c, n in zip(coord, shape):
        i = i * n + c
    return i


def unflatten(i, extents):
    """Row-major split of linear index ``i`` over ``extents`` (last fastest)."""
    out = []
    for e in reversed(extents):
        out.append(i % e)
        i = i // e
    return tuple(reversed(out))


def _split_group(c, group):
    """Split one in-range coordinate over a group of extents whose product is its dimension."""
    out = []
    inner = prod(group)
    for t, g in enumerate(group):
        inner //= g
        v = c if inner == 1 else c // inner
        if t > 0 and g != 1:
            v = v % g
        out.append(0 if g == 1 else v)
    return out


def split(coord, shape, extents):
    """Components (i_0, ..., i_{n-1}) of a validated coordinate over the shard extents."""
    groups, k = [], 0
    for n in shape:
        grp, p = [], 1
        while k < len(extents) and p < n:
            grp.append(extents[k])
            p *= extents[k]
            k += 1
        if p != n:
            groups = None
            break
        groups.append(grp)
    if groups is not None and k < len(extents):  # trailing extent-1 iterators
        if all(e == 1 for e in extents[k:]):
            groups[-1] = groups[-1] + list(extents[k:])
        else:
            groups = None
    if groups is None:
        i = flatten(coord, shape)
        return _split_group(i, list(extents)) if extents else []
    comps = []
    for c, grp in zip(coord, groups):
        comps.extend(_split_group(c, grp))
    return comps
