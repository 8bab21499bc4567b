"""Layout algebra on the memory axis: packing elements into wider ones, and composition.

    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> L = TileLayout(S[(8, 4, 2) : (1@laneid, 2, 1)])        # 8 lanes x 8 bf16 registers
    >>> pack(L, 2)                                               # 8 lanes x 4 32-bit registers
    TileLayout(S[(8, 4) : (1@laneid, 1@m)])
    >>> unpack(pack(L, 2), 2).equivalent(L)
    True
"""
from __future__ import annotations

import numpy as np

from .axis import Axis
from .canonical import fuse_shard
from .coords import is_int
from .errors import LayoutError
from .iters import Iter
from .tile import TileLayout

_M = Axis.get("m")


def _factor(factor) -> int:
    if not is_int(factor) or factor < 1:
        raise LayoutError(f"pack/unpack factor must be a positive int, got {factor!r}")
    return int(factor)


def _plain_tile(L, op) -> TileLayout:
    if not isinstance(L, TileLayout):
        raise LayoutError(
            f"{op} takes a TileLayout, got {type(L).__name__}; a swizzled layout is packed by packing its tile "
            "and choosing the swizzle for the wider element"
        )
    return L


def pack(L: TileLayout, factor: int) -> TileLayout:
    """Pack ``factor`` consecutive logical elements into one wider element on ``m``.

    *Requires*: the innermost shard iterators walk ``factor``-divisible elements contiguously on
    ``m`` (stride 1), and every other ``m`` stride and the ``m`` offset divide by ``factor``.
    *Postcondition*: ``packed.size() == L.size() // factor`` and ``packed.apply(i) ==
    L.apply(i * factor)`` with ``m`` divided by ``factor`` (replicas likewise).

        >>> from tirxpy.layout import S, TileLayout
        >>> pack(TileLayout(S[(4, 8) : (16, 1)]), 4)
        TileLayout(S[(4, 2) : (4@m, 1@m)])
        >>> pack(TileLayout(S[(4, 2) : (1, 4)]), 2)
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: pack(2) needs the innermost elements contiguous on m (stride 1), but the innermost shard iterator is Iter(2, 4, m); make the packed elements the fastest-varying stride-1 m digit
    """
    L, f = _plain_tile(L, "pack"), _factor(factor)
    if f == 1:
        return L
    shard = list(fuse_shard(L.shard))
    last = shard[-1] if shard else None
    if last is None or last.axis is not _M or last.stride != 1:
        raise LayoutError(
            f"pack({f}) needs the innermost elements contiguous on m (stride 1), but the innermost shard iterator is "
            f"{last!r}; make the packed elements the fastest-varying stride-1 m digit"
        )
    if last.extent % f:
        raise LayoutError(
            f"pack({f}): the innermost contiguous run on m has {last.extent} elements, which {f} does not divide; "
            f"pack by a divisor of {last.extent}"
        )
    shard[-1] = Iter(last.extent // f, f, _M)

    def div(its, what):
        out = []
        for k, it in enumerate(its):
            if it.axis is _M:
                if it.stride % f:
                    raise LayoutError(
                        f"pack({f}): m stride {it.stride} of {what} iterator {k} ({it!r}) is not divisible by {f}; "
                        "packed elements would straddle two wide elements"
                    )
                it = Iter(it.extent, it.stride // f, _M)
            out.append(it)
        return out

    off = L.offset
    if off.get("m", 0) % f:
        raise LayoutError(f"pack({f}): the m offset {off['m']} is not divisible by {f}; align the tile to {f} elements")
    if "m" in off:
        off["m"] //= f
    return TileLayout.from_iters(div(shard, "shard"), div(L.replica, "replica"), off)


def unpack(L: TileLayout, factor: int) -> TileLayout:
    """Split each element into ``factor`` consecutive narrower elements on ``m`` (inverse of pack).

    *Postcondition*: ``unpack(L, f).size() == L.size() * f``, element ``i * f + r`` sits at
    ``m = f * L.apply(i)['m'] + r``; ``unpack(pack(L, f), f)`` is equivalent to ``L``.

        >>> from tirxpy.layout import S, TileLayout, laneid
        >>> unpack(TileLayout(S[(8, 4) : (1@laneid, 1)]), 2)
        TileLayout(S[(8, 8) : (1@laneid, 1@m)])
    """
    L, f = _plain_tile(L, "unpack"), _factor(factor)
    if f == 1:
        return L

    def mul(its):
        return [Iter(it.extent, it.stride * f, _M) if it.axis is _M else it for it in its]

    off = L.offset
    if "m" in off:
        off["m"] *= f
    return TileLayout.from_iters(fuse_shard(mul(L.shard) + [Iter(f, 1, _M)]), mul(L.replica), off)


def _compose_ap(shard, e, s):
    """Iterators of ``j -> outer(j * s)`` for ``j < e`` by dividing outer's digits by ``s``."""
    if e == 1:
        return []
    if s == 0:
        return [Iter(e, 0, _M)]
    out, rs, re = [], s, e
    for it in reversed(shard):
        if re == 1:
            break
        if rs % it.extent == 0:
            rs //= it.extent
            continue
        if it.extent % rs:
            return None
        avail, stride, rs = it.extent // rs, it.stride * rs, 1
        if re % avail == 0:
            take = avail
        elif avail % re == 0:
            take = re
        else:
            return None
        out.insert(0, Iter(take, stride, it.axis))
        re //= take
    return out if re == 1 else None


def _aligned(names, t, axes):
    cols = [t[:, :, names.index(a)] if a in names else np.zeros(t.shape[:2], dtype=np.int64) for a in axes]
    return np.stack(cols, axis=-1) if cols else np.zeros(t.shape[:2] + (0,), dtype=np.int64)


def _compose(outer, inner):
    if not isinstance(outer, TileLayout):
        raise LayoutError(f"compose: outer must be a TileLayout (a swizzle is not affine), got {type(outer).__name__}")
    if not isinstance(inner, TileLayout):
        raise LayoutError(f"compose: inner must be a TileLayout on m, got {type(inner).__name__}")
    bad = [a for a in inner.axes() if a != "m"]
    if bad:
        raise LayoutError(
            f"compose: inner must place elements only on m (a memory layout), but it uses {', '.join(bad)}"
        )
    if any(it.extent > 1 and it.stride > 0 for it in inner.replica):
        raise LayoutError("compose: inner must map each index to one m (a function); drop its replicas")
    hi = inner.offset.get("m", 0) + sum((it.extent - 1) * it.stride for it in inner.shard)
    if hi >= outer.size():
        raise LayoutError(
            f"compose: inner reaches m = {hi} but outer has only {outer.size()} logical elements; "
            f"keep inner's m inside [0, {outer.size()})"
        )
    shard = []
    for it in inner.shard:
        part = _compose_ap(outer.shard, it.extent, it.stride)
        if part is None:
            return None, f"inner iterator {it!r} divides outer's iterators {list(outer.shard)} unevenly; the composition is not affine"
        shard += part
    try:
        cand = TileLayout.from_iters(shard, outer.replica, outer.apply(inner.offset.get("m", 0)))
    except LayoutError:
        cand = None
    if cand is not None:
        on, ot = outer.owner_table()
        inn, it_ = inner.owner_table()
        im = it_[:, 0, inn.index("m")] if "m" in inn else np.zeros(inner.size(), dtype=np.int64)
        cn, ct = cand.owner_table()
        axes = sorted(set(on) | set(cn))
        if np.array_equal(_aligned(on, ot, axes)[im], _aligned(cn, ct, axes)):
            return cand, None
    return None, "inner's offsets carry across outer's iterator digits; the composition is not affine"


def compose(outer: TileLayout, inner: TileLayout) -> TileLayout | None:
    """Functional composition ``(outer o inner)(i) = outer.owners(inner.apply(i)['m'])``.

    *Requires*: ``inner`` places elements only on ``m``, without replicas, inside
    ``[0, outer.size())``. *Postcondition*: the result has ``inner.size()`` elements and the
    owners above (replicas of ``outer`` kept, in order); ``None`` when that map is not affine.
    Built CuTe-style (outer's digits divided by each inner stride) and checked over the domain.

        >>> from tirxpy.layout import S, TileLayout, laneid, warpid
        >>> outer = TileLayout(S[(4, 32) : (1@warpid, 1@laneid)])
        >>> compose(outer, TileLayout(S[(32, 4) : (1, 32)]))     # transpose the index space
        TileLayout(S[(32, 4) : (1@laneid, 1@warpid)])
        >>> compose(outer, TileLayout(S[4 : 3])) is None        # steps across a warp boundary
        True
    """
    return _compose(outer, inner)[0]
