"""Canonical form, equivalence and identity of layouts.

Two layouts are *equivalent* when they have the same size and the same set of owners for every
logical index, and *identical* when their iterator lists and offsets are equal. The canonical
form is the unique representative of the layouts reachable from one another by fusing adjacent
shard iterators on one axis (``s_k == e_{k+1} * s_{k+1}``), splitting them again, dropping
extent-1 iterators and reordering, splitting or fusing replicas.

    >>> from tirxpy.layout import TileLayout, S, R, laneid
    >>> a = TileLayout(S[(2, 4, 1) : (4@laneid, 1@laneid, 7)] + R[(2, 2) : (2, 1)])
    >>> canonicalize(a)
    TileLayout(S[8 : 1@laneid] + R[4 : 1@m])
    >>> equivalent(a, canonicalize(a)), identical(a, canonicalize(a))
    (True, False)
"""
from __future__ import annotations

from collections import Counter

from .axis import Axis
from .errors import LayoutError, LayoutTypeError
from .iters import Iter
from .tile import Layout, TileLayout


def pinned_offset(L, offset) -> dict:
    """``offset`` plus a 0 on every thread / CTA axis ``L`` names, so that a result which drops
    ``L``'s extent-1 or stride-0 iterators still names those axes (a named axis at 0 means "only
    unit 0 holds it"; an unnamed one means "every unit does").

        >>> from tirxpy.layout import S, TileLayout
        >>> pinned_offset(TileLayout.from_iters([Iter(4, 1), Iter(1, 1, "laneid")]), {})
        {'laneid': 0}
    """
    off = dict(offset)
    for a in L.axes():
        if not Axis.get(a).is_memory:
            off.setdefault(a, 0)
    return off


def fuse_shard(shard) -> tuple:
    """Drop extent-1 shard iterators and fuse adjacent ones on one axis with
    ``s_k == e_{k+1} * s_{k+1}``. The logical map is unchanged.

        >>> fuse_shard([Iter(2, 8), Iter(1, 3, "laneid"), Iter(4, 2), Iter(2, 1)])
        (Iter(16, 1, m),)
    """
    out: list[Iter] = []
    for it in shard:
        if it.extent == 1:
            continue
        if out and out[-1].axis is it.axis and out[-1].stride == it.extent * it.stride:
            prev = out.pop()
            it = Iter(prev.extent * it.extent, it.stride, it.axis)
        out.append(it)
    return tuple(out)


def _match(ds, ns):
    """Deterministic perfect matching of strides ``ds`` to ends ``ns`` with d | n, d < n."""
    if not ds:
        return []
    d, rest = ds[0], ds[1:]
    tried = set()
    for k, n in enumerate(ns):
        if n in tried or n <= d or n % d:
            continue
        tried.add(n)
        sub = _match(rest, ns[:k] + ns[k + 1:])
        if sub is not None:
            return [(d, n)] + sub
    return None


def canonical_replica(replica) -> tuple:
    """Canonical replica iterators with the same multiset of replica offsets.

    A replica ``Iter(f, t, b)`` contributes the factor ``(x^(f t) - 1) / (x^t - 1)`` to the
    generating polynomial of the offsets on ``b``; splits and fusions cancel in that fraction,
    so the reduced fraction names the class. Iterators of stride 0 (copies onto the same
    place) are dropped.

        >>> canonical_replica([Iter(2, 4), Iter(2, 1), Iter(2, 2), Iter(4, 0)])
        (Iter(8, 1, m),)
    """
    by_axis: dict = {}
    for it in replica:
        if it.extent > 1 and it.stride > 0:
            by_axis.setdefault(it.axis.name, []).append(it)
    out = []
    for name in sorted(by_axis):
        ends = Counter(it.extent * it.stride for it in by_axis[name])
        starts = Counter(it.stride for it in by_axis[name])
        common = ends & starts
        ends, starts = ends - common, starts - common
        pairs = _match(sorted(starts.elements()), sorted(ends.elements()))
        if pairs is None:  # cannot happen for valid iterators; keep the honest error
            raise LayoutError(f"internal error: replicas on {name} have no canonical form: {by_axis[name]}")
        out += [Iter(n // d, d, name) for d, n in pairs]
    return tuple(sorted(out, key=lambda it: (it.axis.name, it.stride, it.extent)))


def rewrap(L, t):
    """Put the swizzle of ComposeLayout ``L`` back on a view ``t`` of its tile (None stays None)."""
    from .swizzle import ComposeLayout

    if t is None:
        return None
    if L.swizzle.axis.name not in t.axes():  # keep the swizzled axis present (at 0)
        t = TileLayout.from_iters(t.shard + (Iter(1, 1, L.swizzle.axis),), t.replica, t.offset)
    return ComposeLayout(L.swizzle, t, swizzle_inner=L.swizzle_inner)


def canonicalize(L: Layout) -> Layout:
    """The canonical representative of ``L``'s fusion/split class (same owners).

    *Requires*: a TileLayout (or a ComposeLayout: its tile is canonicalized, the swizzle kept).
    *Postcondition*: ``equivalent(canonicalize(L), L)``; idempotent; layouts that differ only
    by shard fusions/splits, extent-1 iterators or replica order/splits give identical results.

        >>> from tirxpy.layout import S, TileLayout, warpid
        >>> canonicalize(TileLayout(S[(4, 2, 4) : (8, 4, 1)] + 3@warpid))
        TileLayout(S[32 : 1@m] + 3@warpid)
    """
    from .swizzle import ComposeLayout

    if isinstance(L, ComposeLayout):
        return rewrap(L, canonicalize(L.tile_layout))
    if not isinstance(L, TileLayout):
        raise LayoutTypeError(f"canonicalize takes a TileLayout or ComposeLayout, got {type(L).__name__}")
    return TileLayout.from_iters(
        fuse_shard(L.shard), canonical_replica(L.replica), dict(sorted(pinned_offset(L, L.offset).items()))
    )


def equivalent(a: Layout, b: Layout) -> bool:
    """Same size and the same set of owners for every logical index.

        >>> from tirxpy.layout import S, TileLayout
        >>> equivalent(TileLayout(S[(4, 8) : (8, 1)]), TileLayout(S[32 : 1]))
        True
    """
    if not isinstance(a, Layout):
        raise LayoutTypeError(f"equivalent() compares two layouts, got {type(a).__name__}")
    return a.equivalent(b)


def identical(a: Layout, b: Layout) -> bool:
    """Same structure: equal iterator lists and offsets (and swizzle, for ComposeLayout).

        >>> from tirxpy.layout import S, TileLayout
        >>> identical(TileLayout(S[(4, 8) : (8, 1)]), TileLayout(S[32 : 1]))
        False
    """
    if not isinstance(a, Layout) or not isinstance(b, Layout):
        raise LayoutTypeError(f"identical() compares two layouts, got {type(a).__name__} and {type(b).__name__}")
    return a.identical(b)
