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

from .errors import MAX_COORD, LayoutError, LayoutTypeError


def is_int(v) -> bool:
    """True for ints and other ``__index__`` types (numpy ints), False for bools."""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return False
    try:
        operator.index(v)
        return True
    except TypeError:
        return False


def check_shape(shape, size: int, what: str = "shape") -> tuple:
    """A logical shape as a tuple of Python ints: positive, below 2**64, product == ``size``."""
    if is_int(shape):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape:
        raise LayoutTypeError(f"{what} {shape!r} must be a non-empty tuple of positive ints, e.g. (8, 16)")
    for d, n in enumerate(shape):
        if not is_int(n):
            raise LayoutTypeError(f"{what} {tuple(shape)!r} must be a tuple of positive ints: entry {d} is {n!r} "
                                  f"({type(n).__name__})")
        if not 1 <= operator.index(n) < MAX_COORD:
            raise LayoutError(f"{what} {tuple(shape)!r} must be a tuple of positive ints below 2**64: entry {d} is {n}")
    shape = tuple(int(operator.index(n)) for n in shape)
    if prod(shape) != size:
        raise LayoutError(f"{what} {shape} has {prod(shape)} elements but the layout has {size}; "
                          f"give a shape whose product is {size}")
    return shape


def to_coord(v, what="coordinate"):
    """An int stays an int; anything else must be a sympy expression (or a name)."""
    if is_int(v):
        return operator.index(v)
    if isinstance(v, str):
        if not v.isidentifier():
            raise LayoutError(f"{what} {v!r} is neither an int nor a symbol name; a symbolic coordinate is named "
                              "by a Python identifier, e.g. 'i'")
        return sympy.Symbol(v, integer=True, nonnegative=True)
    if isinstance(v, sympy.Basic):
        return v
    raise LayoutTypeError(f"{what} must be an int or a sympy expression, got {v!r} ({type(v).__name__})")


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
                f"{len(coord)}-d coordinate {coord} needs shape=...: pass the logical tile shape, e.g. shape=(8, 16)"
            )
        shape = (size,)
    else:
        shape = check_shape(shape, size)
        if len(coord) != len(shape):
            raise LayoutError(f"coordinate {coord} has rank {len(coord)} but shape {shape} has rank {len(shape)}")
    for d, (c, n) in enumerate(zip(coord, shape)):
        if is_int(c) and not 0 <= c < n:
            raise LayoutError(f"coordinate {c} in dimension {d} is out of range [0, {n}) for shape {shape}")
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
