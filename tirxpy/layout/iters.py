"""Iterators and the ``S[...] + R[...] + k@axis`` construction syntax.

An :class:`Iter` is a strided walk ``(extent, stride, axis)`` on one named axis. ``S[...]``
builds shard iterators, ``R[...]`` replica iterators, and ``k @ axis`` an offset:

    >>> from tirxpy.layout import S, R, laneid, warpid
    >>> spec = S[(8, 2) : (4@laneid, 1)] + R[2 : 4@warpid] + 5@warpid
    >>> spec.shard
    (Iter(8, 4, laneid), Iter(2, 1, m))
    >>> spec.replica, spec.offset
    ((Iter(2, 4, warpid),), {'warpid': 5})
    >>> S[(4, 8)].shard          # no strides: compact row-major on m
    (Iter(4, 8, m), Iter(8, 1, m))
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.errors import shown

from .axis import Axis
from .coords import as_int, bounded_int  # noqa: F401  (re-exported: the int checks live in coords)
from .errors import MAX_COORD, MAX_ITERS, LayoutError


@dataclass(frozen=True)
class Iter:
    """``Iter(extent, stride, axis)``: ``extent`` positions, ``stride`` apart, on ``axis``.

    ``axis`` may be an :class:`Axis` or its name; it defaults to the memory axis ``m``.

        >>> Iter(8, 4, "laneid")
        Iter(8, 4, laneid)
    """

    extent: int
    stride: int
    axis: Axis = field(default=None)

    def __init__(self, extent, stride, axis="m"):
        e = as_int(extent, "iterator extent")
        if e < 1:
            raise LayoutError(f"iterator extent {shown(e, 60)} is not positive; every extent must be a positive "
                              "integer (drop the iterator or give it extent >= 1)")
        s = as_int(stride, "iterator stride")
        if s < 0:
            raise LayoutError(f"iterator Iter({shown(e, 60)}, {shown(s, 60)}) has negative stride {shown(s, 60)}; "
                              "strides must be >= 0")
        for what, v in (("extent", e), ("stride", s)):
            if v >= MAX_COORD:
                raise LayoutError(f"iterator {what} {shown(v, 60)} is past the limit of layout coordinates (2**64); "
                                  "use values below 2**64")
        object.__setattr__(self, "extent", e)
        object.__setattr__(self, "stride", s)
        object.__setattr__(self, "axis", Axis.get(axis))

    def __repr__(self) -> str:
        return f"Iter({self.extent}, {self.stride}, {self.axis.name})"

    def stride_text(self) -> str:
        return f"{self.stride}@{self.axis.name}"


@dataclass(frozen=True)
class AxisStride:
    """``k @ axis``: a stride inside ``S[...]``/``R[...]``, or an offset added to a spec."""

    value: int
    axis: Axis

    def __init__(self, value, axis):
        v = as_int(value, "stride or offset (k in k@axis)")
        if abs(v) >= MAX_COORD:
            raise LayoutError(f"{shown(v, 60)}@{Axis.get(axis).name} is past the limit of layout coordinates (2**64); "
                              "use values below 2**64")
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "axis", Axis.get(axis))

    def __repr__(self) -> str:
        return f"{self.value}@{self.axis.name}"

    def __add__(self, other):
        return LayoutSpec((), (), {}) + self + other

    def __radd__(self, other):
        return LayoutSpec((), (), {}) + other + self


def _split_strides(extents, strides, what):
    if strides is None:  # compact row-major on m
        out, acc = [], 1
        for e in reversed(extents):
            out.append(AxisStride(acc, "m"))
            acc *= e
        strides = tuple(reversed(out))
    if not isinstance(strides, tuple):
        strides = (strides,)
    if len(extents) > MAX_ITERS:
        raise LayoutError(f"{what}[...] has {len(extents)} extents; a layout has at most {MAX_ITERS} (the limit "
                          "MAX_ITERS): fuse iterators")
    if len(strides) != len(extents):
        raise LayoutError(
            f"{what}[...] has {len(extents)} extents but {len(strides)} strides; give one stride per extent"
        )
    iters = []
    for e, s in zip(extents, strides):
        if isinstance(s, AxisStride):
            iters.append(Iter(e, s.value, s.axis))
        elif isinstance(s, Axis):
            iters.append(Iter(e, 1, s))
        else:
            iters.append(Iter(e, as_int(s, f"{what}[...] stride"), "m"))
    return tuple(iters)


class _SpecBuilder:
    def __init__(self, what):
        self.what = what

    def __getitem__(self, key):
        if isinstance(key, slice):
            if key.step is not None:
                raise LayoutError(f"write {self.what}[extents : strides], with one colon")
            extents, strides = key.start, key.stop
        else:
            extents, strides = key, None
        if not isinstance(extents, tuple):
            extents = (extents,)
        extents = tuple(as_int(e, f"{self.what}[...] extent") for e in extents)
        iters = _split_strides(extents, strides, self.what)
        if self.what == "S":
            return LayoutSpec(iters, (), {})
        return LayoutSpec((), iters, {})

    def __repr__(self):
        return self.what


S = _SpecBuilder("S")
R = _SpecBuilder("R")


@dataclass(frozen=True)
class LayoutSpec:
    """Shard iterators, replica iterators and an offset, as built by ``S[..] + R[..] + k@a``."""

    shard: tuple
    replica: tuple
    offset: dict

    def __add__(self, other):
        if isinstance(other, LayoutSpec):
            if self.shard and other.shard:
                raise LayoutError("a layout has one S[...] part; put all shard extents in one S[...]")
            off = dict(self.offset)
            for k, v in other.offset.items():
                off[k] = off.get(k, 0) + v
            return LayoutSpec(self.shard or other.shard, self.replica + other.replica, off)
        if isinstance(other, AxisStride):
            off = dict(self.offset)
            off[other.axis.name] = off.get(other.axis.name, 0) + other.value
            return LayoutSpec(self.shard, self.replica, off)
        if isinstance(other, dict):
            spec = self
            for k, v in other.items():
                spec = spec + AxisStride(v, k)
            return spec
        raise LayoutError(f"cannot add {shown(other)} to a layout spec; add S[...], R[...] or k@axis")

    __radd__ = __add__
