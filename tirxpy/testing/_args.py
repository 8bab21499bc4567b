"""The one argument checker of the strategies: each strategy function checks its arguments when called (not when
drawn) and raises :class:`~tirxpy.layout.LayoutError` (:class:`~tirxpy.layout.errors.LayoutTypeError` for a
wrong kind) naming the strategy and the argument.

    >>> count(3, "tile_layouts", "max_shard", 0)
    3
    >>> count(-1, "tile_layouts", "max_shard", 0)
    Traceback (most recent call last):
    ...
    tirxpy.layout.errors.LayoutError: tile_layouts: max_shard is -1; it must be an integer >= 0
"""
from __future__ import annotations

from tirxpy.layout import Axis, TileLayout
from tirxpy.layout.coords import bounded_int, check_shape
from tirxpy.layout.errors import MAX_ITERS, LayoutError, LayoutTypeError
from tirxpy.errors import shown


def count(v, fn: str, arg: str, lo: int = 0, hi: int | None = None) -> int:
    """``v`` as an int in ``[lo, hi]`` (``hi`` None: below 2**64); ``hi == MAX_ITERS`` is named as that limit."""
    v = bounded_int(v, f"{fn}: {arg}", lo)
    if hi is not None and v > hi:
        limit = " (the limit MAX_ITERS)" if hi == MAX_ITERS else ""
        raise LayoutError(f"{fn}: {arg} is {v}, past {hi}{limit}; use at most {hi}")
    return v


def flag(v, fn: str, arg: str) -> bool:
    """``v`` when it is a bool (``True`` / ``False``), else a LayoutTypeError."""
    if not isinstance(v, bool):
        raise LayoutTypeError(f"{fn}: {arg} must be True or False, got {shown(v)} ({type(v).__name__})")
    return v


def shape(v, fn: str, arg: str = "shape") -> tuple:
    """A shape: a non-empty tuple of ints in ``[1, 2**64)`` (one int is a 1-d shape)."""
    return check_shape(v, None, f"{fn}: {arg}")


def tile_layout(v, fn: str, arg: str = "L") -> TileLayout:
    """``v`` when it is a :class:`~tirxpy.layout.TileLayout`, else a LayoutTypeError."""
    if not isinstance(v, TileLayout):
        raise LayoutTypeError(f"{fn}: {arg} must be a TileLayout, got {shown(v)} ({type(v).__name__}); draw one with "
                              "tile_layouts() or build one with TileLayout(S[...])")
    return v


def names(v, fn: str, arg: str, check) -> tuple:
    """``v`` as a non-empty tuple of strings, each passed to ``check`` (its LayoutError for an unknown name is
    raised again naming ``fn`` and ``arg``)."""
    if isinstance(v, str) or not isinstance(v, (tuple, list)) or not v:
        raise LayoutTypeError(f"{fn}: {arg} must be a non-empty tuple of names, got {shown(v)} ({type(v).__name__})")
    for x in v:
        if not isinstance(x, str):
            raise LayoutTypeError(f"{fn}: {arg} holds {shown(x)} ({type(x).__name__}); give names (strings)")
        try:
            check(x)
        except LayoutError as e:
            raise type(e)(f"{fn}: {arg}: {e}") from None
    return tuple(v)


def axes(v, fn: str, arg: str = "axes") -> tuple:
    """Registered axis names (an :class:`~tirxpy.layout.Axis` is taken by its name)."""
    if isinstance(v, (tuple, list)):
        v = [x.name if isinstance(x, Axis) else x for x in v]
    return names(v, fn, arg, Axis.get)
