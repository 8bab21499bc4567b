"""Layout algebra on logical shapes: group, slice, permute, blocked tiling, direct sum.

Each operation is a free function with a one-line meaning; the ones that may have no answer
return ``None`` (the ``Layout`` methods of the same name raise :class:`LayoutError` with the
reason instead).

    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> L = TileLayout(S[(8, 16) : (16, 1@laneid)])
    >>> slice_layout(L, ((2, 4), (8, 16)), (8, 16))
    TileLayout(S[(2, 8) : (16@m, 1@laneid)] + 32@m + 8@laneid)
    >>> permute_dims(L, (8, 16), (1, 0))
    TileLayout(S[(16, 8) : (1@laneid, 16@m)])
"""
from __future__ import annotations

import builtins
from math import prod

from tirxpy.errors import shown

from .canonical import fuse_shard, pinned_offset, rewrap as _rewrap
from .coords import check_shape, is_int, unflatten
from .errors import LayoutError, LayoutTypeError
from .iters import Iter
from .tile import Layout, TileLayout


def split_iter(it: Iter, f: int) -> tuple[Iter, Iter]:
    """``Iter(e, s) -> (Iter(e/f, s*f), Iter(f, s))``: the same walk as an outer and an inner digit.

    *Requires*: ``f`` divides ``e``. *Postcondition*: digit ``c = c_hi * f + c_lo`` lands on
    ``c * s = c_hi * (s*f) + c_lo * s``.

        >>> split_iter(Iter(8, 2, "laneid"), 4)
        (Iter(2, 8, laneid), Iter(4, 2, laneid))
    """
    if not isinstance(it, Iter):
        raise LayoutTypeError(f"split_iter splits an Iter(extent, stride, axis), got {shown(it)} ({type(it).__name__})")
    if not is_int(f) or f < 1 or it.extent % f:
        raise LayoutError(f"cannot split {shown(it)} with inner extent {shown(f)}: the inner extent must be a "
                          f"positive divisor of {it.extent}")
    return Iter(it.extent // f, it.stride * f, it.axis), Iter(f, it.stride, it.axis)


def _tile_of(L, op):
    if not isinstance(L, TileLayout):
        hint = "; a swizzled layout has no such form: apply it to .tile_layout" if isinstance(L, Layout) else ""
        raise LayoutTypeError(f"{op} takes a TileLayout, got {type(L).__name__}{hint}")
    return L


def _group(L: TileLayout, shape):
    shard, out, ranges, k = list(L.shard), [], [], 0
    for d, n in enumerate(shape):
        start, p = len(out), 1
        while p < n:
            it, need = shard[k], n // p
            if need % it.extent == 0:
                out.append(it)
                p *= it.extent
                k += 1
            elif it.extent % need == 0:
                hi, shard[k] = split_iter(it, it.extent // need)
                out.append(hi)
                p = n
            else:
                exts = [i.extent for i in L.shard]
                return None, (
                    f"dimension {d} of shape {shape} (size {n}) does not align with the iterator extents {exts}: "
                    f"{need} remaining elements of the dimension and extent {it.extent} do not divide one another"
                )
        ranges.append((start, len(out)))
    if k < len(shard):  # trailing extent-1 iterators
        out += shard[k:]
        ranges[-1] = (ranges[-1][0], len(out))
    return (TileLayout.from_iters(out, L.replica, L.offset), ranges), None


def group(L: TileLayout, shape) -> tuple[TileLayout, list[tuple[int, int]]] | None:
    """Split shard iterators so each dimension of ``shape`` owns a contiguous run of them.

    *Requires*: ``prod(shape) == L.size()``. *Postcondition*: ``(G, ranges)`` with ``G`` the
    same map as ``L`` and ``G.shard[ranges[d][0]:ranges[d][1]]`` the digits of dimension ``d``
    (their extents multiply to ``shape[d]``); ``None`` when the extents cannot be split to align.

        >>> from tirxpy.layout import S, TileLayout
        >>> group(TileLayout(S[(4, 8) : (8, 1)]), (8, 4))
        (TileLayout(S[(4, 2, 4) : (8@m, 4@m, 1@m)]), [(0, 2), (2, 3)])
        >>> group(TileLayout(S[(4, 6) : (6, 1)]), (3, 8)) is None
        True
    """
    L = _tile_of(L, "group")
    return _group(L, check_shape(shape, L.size()))[0]


def check_region(region, shape) -> list[tuple[int, int]]:
    """Validate a region: one ``(start, stop)`` pair or step-1 ``slice`` per dimension."""
    one_pair = len(shape) == 1 and isinstance(region, (tuple, list)) and len(region) == 2 and all(map(is_int, region))
    if one_pair or not isinstance(region, (tuple, list)):
        region = (region,)
    if len(region) != len(shape):
        raise LayoutError(f"region {shown(region)} has {len(region)} entries but shape {shape} has {len(shape)} "
                          "dimensions; give one (start, stop) per dimension")
    out = []
    for d, (r, n) in enumerate(zip(region, shape)):
        if isinstance(r, builtins.slice):
            if r.step not in (None, 1):
                raise LayoutError(f"dimension {d}: slice step {r.step} is not supported; layouts slice contiguous ranges")
            a, b = 0 if r.start is None else r.start, n if r.stop is None else r.stop
        elif isinstance(r, (tuple, list)) and len(r) == 2:
            a, b = r
        else:
            raise LayoutTypeError(f"dimension {d}: region entry {shown(r)} must be a (start, stop) pair or a slice")
        if not (is_int(a) and is_int(b)):
            raise LayoutTypeError(f"dimension {d}: region bounds {shown(a)}:{shown(b)} must be ints")
        if not 0 <= a < b <= n:
            raise LayoutError(f"dimension {d}: region [{a}, {b}) is empty or outside [0, {n}); need 0 <= start < stop <= {n}")
        out.append((int(a), int(b)))
    return out


def _slice_run(its, a, b):
    """Sub-iterators and offset for the range [a, b) of a run of digits, or None."""
    ext = [it.extent for it in its]
    lo, hi = unflatten(a, ext), unflatten(b - 1, ext)
    off: dict = {}
    for c, it in zip(lo, its):
        off[it.axis.name] = off.get(it.axis.name, 0) + c * it.stride
    k = next((j for j in range(len(its)) if lo[j] != hi[j]), None)
    if k is None:
        return [], off
    inner = prod(ext[k + 1:])
    if a % inner or (b - a) % inner:
        return None
    return [Iter((b - a) // inner, its[k].stride, its[k].axis)] + list(its[k + 1:]), off


SLICE_STEPS_LIMIT = 1 << 12
"""Largest region whose layout is read off its values (through :func:`~tirxpy.layout.algebra_compose.compose`)
when the region wraps inside an iterator digit; past it such a region has no sliced form."""


def _slice(L, region, shape, complete=True):
    """``(sub-layout, None)`` or ``(None, why)``; with ``complete`` a region that wraps inside a digit is
    still sliced when its placement is affine (read off its values, up to ``SLICE_STEPS_LIMIT`` elements)."""
    from .swizzle import ComposeLayout

    if isinstance(L, ComposeLayout):
        if not L.swizzle_inner:
            return None, "a ComposeLayout with swizzle_inner=False permutes logical indices; it has no sliced form"
        t, why = _slice(L.tile_layout, region, shape, complete)
        return _rewrap(L, t), why
    L = _tile_of(L, "slice")
    shape = check_shape(shape, L.size())
    region = check_region(region, shape)
    sub, why = _slice_box(L, region, shape)
    if sub is None and complete and prod(b - a for a, b in region) <= SLICE_STEPS_LIMIT:
        sub = _slice_by_values(L, region, shape)
    return (sub, None) if sub is not None else (None, why)


def _slice_by_values(L, region, shape):
    """The region's layout as the composition of ``L`` with the region's row-major index map (``None`` when
    that is not affine): exact where the digit-wise slice gives up, e.g. stride-0 digits."""
    from .algebra_compose import _compose

    rm = [prod(shape[d + 1:]) for d in range(len(shape))]
    start = sum(a * s for (a, _), s in zip(region, rm))
    index_map = TileLayout.from_iters([Iter(b - a, s) for (a, b), s in zip(region, rm)], (), {"m": start})
    return _compose(L, index_map)[0]


def _slice_box(L, region, shape):
    base = TileLayout.from_iters(fuse_shard(L.shard), L.replica, L.offset)
    g, why = _group(base, shape)
    if g is None:
        return None, why
    G, ranges = g
    shard, off = [], dict(L.offset)
    for d, ((a, b), (s, e)) in enumerate(zip(region, ranges)):
        r = _slice_run(G.shard[s:e], a, b)
        if r is None:
            return None, (
                f"dimension {d}: region [{a}, {b}) wraps inside the digits {list(G.shard[s:e])} of that dimension, "
                "so it is not one strided box; align start and length to the inner digit extents"
            )
        shard += r[0]
        for k, v in r[1].items():
            off[k] = off.get(k, 0) + v
    return TileLayout.from_iters(shard, L.replica, pinned_offset(L, off)), None


def slice_layout(L: Layout, region, shape) -> Layout | None:
    """The layout of the sub-tile ``region`` of the logical tile ``shape``.

    *Requires*: ``region`` has one ``(start, stop)`` (or step-1 slice) per dimension inside
    ``shape``. *Postcondition*: ``result.owners(c) == L.owners(start + c)`` for every ``c`` in
    ``(stop - start, ...)``, with ``L``'s replicas. Found digit by digit when the region is a box of
    ``L``'s iterator digits; a region that wraps inside a digit is read off its values (up to
    ``SLICE_STEPS_LIMIT`` elements); ``None`` when no such TileLayout exists (or the region is past that
    limit). A ComposeLayout keeps its swizzle (it acts on absolute ``m``).

        >>> from tirxpy.layout import S, TileLayout
        >>> slice_layout(TileLayout(S[(8, 8) : (8, 1)]), (slice(2, 4), slice(4, 8)), (8, 8))
        TileLayout(S[(2, 4) : (8@m, 1@m)] + 20@m)
        >>> slice_layout(TileLayout(S[(2, 4) : (1, 2)]), ((0, 1), (1, 3)), (2, 4)) is not None
        True
    """
    return _slice(L, region, shape)[0]


def _check_perm(perm, rank):
    if not isinstance(perm, (tuple, list)) or not all(map(is_int, perm)) or sorted(perm) != list(range(rank)):
        raise LayoutError(f"perm {shown(perm)} must be a permutation of 0..{rank - 1} (one entry per dimension)")
    return tuple(perm)


def _permute(L, shape, perm):
    from .swizzle import ComposeLayout

    if isinstance(L, ComposeLayout):
        if not L.swizzle_inner:
            return None, "a ComposeLayout with swizzle_inner=False permutes logical indices; it has no transposed form"
        t, why = _permute(L.tile_layout, shape, perm)
        return _rewrap(L, t), why
    L = _tile_of(L, "permute_dims")
    shape = check_shape(shape, L.size())
    perm = _check_perm(perm, len(shape))
    g, why = _group(TileLayout.from_iters(fuse_shard(L.shard), L.replica, L.offset), shape)
    if g is None:
        return None, why
    G, ranges = g
    shard = [it for p in perm for it in G.shard[ranges[p][0]:ranges[p][1]]]
    return TileLayout.from_iters(shard, L.replica, pinned_offset(L, L.offset)), None


def permute_dims(L: Layout, shape, perm) -> Layout | None:
    """The layout of the transposed logical tile (dimension ``j`` of the result is ``perm[j]`` of ``L``).

    *Requires*: ``perm`` a permutation of ``range(len(shape))``. *Postcondition*:
    ``result.owners(tuple(c[p] for p in perm), shape=tuple(shape[p] for p in perm)) ==
    L.owners(c, shape=shape)``; ``None`` when ``shape`` does not align with the iterators.

        >>> from tirxpy.layout import S, TileLayout
        >>> permute_dims(TileLayout(S[(4, 8) : (8, 1)]), (4, 8), (1, 0))
        TileLayout(S[(8, 4) : (1@m, 8@m)])
    """
    return _permute(L, shape, perm)[0]


def _sum_offsets(*offs):
    out: dict = {}
    for off in offs:
        for k, v in off.items():
            out[k] = out.get(k, 0) + v
    return out


def _tile(inner, outer, inner_shape, outer_shape):
    inner, outer = _tile_of(inner, "tile (inner)"), _tile_of(outer, "tile (outer)")
    ishape = check_shape(inner_shape, inner.size(), "inner_shape")
    oshape = check_shape(outer_shape, outer.size(), "outer_shape")
    if len(ishape) != len(oshape):
        raise LayoutError(f"inner_shape {ishape} and outer_shape {oshape} must have the same rank")
    gi, why = _group(TileLayout.from_iters(fuse_shard(inner.shard), inner.replica, inner.offset), ishape)
    if gi is None:
        return None, "inner: " + why
    go, why = _group(TileLayout.from_iters(fuse_shard(outer.shard), outer.replica, outer.offset), oshape)
    if go is None:
        return None, "outer: " + why
    (I, ir), (O, orr) = gi, go
    shard = []
    for (a, b), (c, d) in zip(orr, ir):
        shard += list(O.shard[a:b]) + list(I.shard[c:d])
    off = _sum_offsets(pinned_offset(outer, outer.offset), pinned_offset(inner, inner.offset))
    return TileLayout.from_iters(shard, outer.replica + inner.replica, off), None


def tile_product(inner: TileLayout, outer: TileLayout, inner_shape, outer_shape) -> TileLayout | None:
    """Blocked tiling: ``inner`` places the elements inside one tile of shape ``inner_shape``
    (``n``), ``outer`` places the whole tiles over a grid of shape ``outer_shape`` (``o``).

    *Requires*: ``inner_shape`` and ``outer_shape`` of equal rank, with products ``inner.size()``
    and ``outer.size()``. *Postcondition*: the result has logical shape ``(o_j * n_j)`` and
    ``result.owners(x) == {a + b : a in outer.owners(x // n), b in inner.owners(x % n)}``
    (axis-wise sum); ``None`` when a shape does not align with its layout's iterators.
    Raises :class:`LayoutError` when the sum exceeds a hardware bound.

        >>> from tirxpy.layout import S, TileLayout, laneid, warpid
        >>> tile_product(TileLayout(S[(2, 4) : (4@laneid, 1@laneid)]), TileLayout(S[(2, 2) : (2@warpid, 1@warpid)]), (2, 4), (2, 2))
        TileLayout(S[(2, 2, 2, 4) : (2@warpid, 4@laneid, 1@warpid, 1@laneid)])
    """
    return _tile(inner, outer, inner_shape, outer_shape)[0]


def direct_sum(a: TileLayout, b: TileLayout) -> TileLayout:
    """Concatenate iterators: index ``(i, j)`` (row-major over ``a.size() x b.size()``) goes to
    ``a(i) + b(j)`` axis-wise; replicas and offsets add.

        >>> from tirxpy.layout import S, TileLayout, laneid, warpid
        >>> direct_sum(TileLayout(S[4 : 1@warpid] + 1@warpid), TileLayout(S[32 : 1@laneid]))
        TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 1@warpid)
    """
    a, b = _tile_of(a, "direct_sum"), _tile_of(b, "direct_sum")
    return TileLayout.from_iters(a.shard + b.shard, a.replica + b.replica, _sum_offsets(a.offset, b.offset))
