"""The executing thread's part of a register tile, derived from its layout (no search).

A ``local`` tile's layout ``L`` over ``shape`` places element ``e`` at register slot
``L.apply(e)['m']`` of the threads named by its thread axes (``laneid``, ``warpid``,
``wid_in_wg``, ``tid_in_wg``, ``tx``, ``wgid``). Axes the layout leaves out are free: every
unit along them holds its own instance (a ``(wid_in_wg, laneid)`` accumulator lives once per
warpgroup).

:func:`thread_fragment` inverts ``L`` in closed form. Each thread iterator ``(e, s, a)``
contributes digit ``((id_a - O_a) // s) % e`` (replica iterators are further digits of the same
ids that pick no element); each ``m`` iterator is unrolled. For every slot ``r`` the thread
holds, the result gives the logical coordinate as IR expressions of the thread ids, plus the
guard (which threads hold anything at all). The closed form is then checked against the
layout's owner table for every active thread (brute force), so a layout whose thread axes are
not a mixed-radix split fails with the first element that disagrees.

    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> from tirxpy.scope import ThreadSet
    >>> f = thread_fragment(TileLayout(S[(32, 4) : (1@laneid, 1)]), (32, 4), ThreadSet.full(32))
    >>> f.nslots, f.slots[1], f.coords[1]
    (4, 1, (T.lane_id(), 1))
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from tirxpy.errors import TirxError, shown
from tirxpy.ir import ops
from tirxpy.ir.expr import ScopeId
from tirxpy.layout import ComposeLayout, TileLayout, group

THREAD_AXES = {
    "laneid": ("lane_id", lambda t: t % 32),
    "warpid": ("warp_id", lambda t: t // 32),
    "wid_in_wg": ("warp_id_in_wg", lambda t: (t // 32) % 4),
    "tid_in_wg": ("thread_id_in_wg", lambda t: t % 128),
    "tx": ("thread_id", lambda t: t),
    "wgid": ("warpgroup_id", lambda t: t // 128),
}


_AXIS_RANGE = {"laneid": 32, "wid_in_wg": 4, "tid_in_wg": 128}


class FragmentError(TirxError, ValueError):
    """The layout cannot be inverted per thread; ``.reason`` names the fact."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Fragment:
    """One thread's slots: ``slots[k]`` holds the element at ``coords[k]`` (IR expressions) and
    ``linear[k]`` (row-major index as a ``(const, {axis: (stride, extent, weight)})`` form is
    not exposed; use ``static_coord``). ``guard`` is None when every active thread holds data."""

    layout: TileLayout
    shape: tuple
    slots: list
    coords: list
    const_coords: list  # per slot: the coordinate with every thread digit at 0
    thread_terms: list  # per dimension: [(axis, stride, extent, weight)]
    guard: object
    nslots: int
    holders: frozenset = frozenset()
    pinned: dict = None

    def replica_guard(self):
        """True only in the base replica of each element (None when the layout has no thread replicas)."""
        cond = None
        for it in self.layout.replica:
            a = it.axis.name
            if a not in THREAD_AXES or it.extent == 1 or it.stride == 0:
                continue
            o = self.layout.offset.get(a, 0)
            x = _id_expr(a)
            x = ops.sub(x, o) if o else x
            c = ops.eq(ops.floormod(ops.floordiv(x, it.stride) if it.stride > 1 else x, it.extent), 0)
            cond = c if cond is None else ops.logical_and(cond, c)
        return cond

    def coord_expr(self, k: int, ids: dict | None = None) -> tuple:
        """The coordinate of slot ``k`` as IR, with thread ids taken from ``ids`` (axis -> Expr;
        missing axes read the hardware id)."""
        return tuple(_thread_part(self.thread_terms[d], c, ids or {}) for d, c in enumerate(self.const_coords[k]))

    def thread_part(self, d: int):
        """The thread-dependent part of dimension ``d``'s coordinate, as IR: every slot's coordinate
        is ``const_coords[k][d] + thread_part(d)``, so a bound on the coordinate becomes one bound
        on this expression, computed once, against each slot's compile-time constant."""
        return _thread_part(self.thread_terms[d])

    def static_coord(self, k: int, ids: dict) -> tuple:
        """The coordinate of slot ``k`` for a thread with axis values ``ids`` (Python ints)."""
        out = []
        for d, c in enumerate(self.const_coords[k]):
            v = c
            for a, s, e, w, off in self.thread_terms[d]:
                v += ((ids[a] - off) // s) % e * w
            out.append(v)
        return tuple(out)


def _thread_part(terms, const=0, ids=None):
    """``const`` plus the thread digits ``terms`` of one dimension, as IR. Thread ids come from the
    hardware, or from ``ids`` (axis -> Expr) where given. Without ``ids``, a digit that spans its
    id's whole range (``laneid`` / 32, ...) needs no ``% extent``; with ``ids`` every digit keeps it,
    as an id given there may be any value."""
    e = ops.const(const)
    for a, s, ext, w, o in terms:
        idv = None if ids is None else ids.get(a)
        if idv is None:
            idv = _id_expr(a)
        if o:
            idv = ops.sub(idv, o)
        digit = ops.floordiv(idv, s) if s != 1 else idv
        if ids is not None or not (o == 0 and _AXIS_RANGE.get(a) is not None and s * ext >= _AXIS_RANGE[a]):
            digit = ops.floormod(digit, ext)
        e = ops.add(e, ops.mul(digit, w) if w != 1 else digit)
    return e


def thread_ids(tid: int) -> dict:
    return {a: fn(tid) for a, (_, fn) in THREAD_AXES.items()}


def _id_expr(axis):
    return ScopeId(THREAD_AXES[axis][0])


def pinned_axes(tile) -> dict:
    """Thread axes a register *view* is pinned to: axes its buffer's layout uses that the view's
    layout lost because the view sits at id 0 on them (``acc[0:16, :]`` of a warpgroup tile lives
    in warp 0 only; a zero offset does not show in a layout)."""
    if tile.storage != "local" or tile.buffer.layout is tile.layout:
        return {}
    root = set(tile.buffer.layout.axes()) & set(THREAD_AXES)
    return {a: 0 for a in sorted(root - set(tile.layout.axes()))}


def tile_fragment(tile, threads) -> Fragment:
    """:func:`thread_fragment` of a register tile or view (pinned axes included)."""
    return thread_fragment(tile.layout, tile.shape, threads, pinned_axes(tile))


def thread_fragment(layout, shape, threads, pinned=None) -> Fragment:
    """Closed-form per-thread slots of a register tile (see the module docstring); ``pinned``
    ({axis: id}) restricts the holders to threads with those ids."""
    pinned = dict(pinned or {})
    if isinstance(layout, ComposeLayout):
        raise FragmentError("a register tile cannot be swizzled")
    if not isinstance(layout, TileLayout):
        raise FragmentError(f"layout {shown(layout)} is not a TileLayout")
    shape = tuple(shape)
    axes = set(layout.axes())
    bad = axes - set(THREAD_AXES) - {"m"}
    if bad:
        raise FragmentError(f"a register tile's layout uses axes {sorted(bad)}; registers are spread over "
                            f"m and the thread axes {sorted(THREAD_AXES)} only")
    for it in layout.shard:
        if it.axis.name in THREAD_AXES and it.extent > 1 and it.stride == 0:
            raise FragmentError(f"the layout's iterator {shown(it)} puts {it.extent} elements on one {it.axis.name} at "
                                "stride 0 without a register digit between them; give it a stride, or move the "
                                "copies to a replica iterator R[...]")
    g = group(layout, shape)
    if g is None:
        raise FragmentError(f"layout {shown(layout)} does not split along the tile shape {shape}")
    G, ranges = g
    shard = G.shard
    off = G.offset
    # slot enumeration: the m digits
    m_iters = [(k, it) for k, it in enumerate(shard) if it.axis.name == "m"]
    dims_of = {}
    weights = {}
    for d, (a, b) in enumerate(ranges):
        w = 1
        for k in range(b - 1, a - 1, -1):
            dims_of[k] = d
            weights[k] = w
            w *= shard[k].extent
    thread_terms = [[] for _ in shape]
    for k, it in enumerate(shard):
        if it.axis.name != "m" and it.extent > 1:   # an extent-1 digit is always 0
            thread_terms[dims_of[k]].append((it.axis.name, it.stride, it.extent, weights[k], off.get(it.axis.name, 0)))
    slots, const_coords = [], []
    n_m = prod(it.extent for _, it in m_iters)
    for flat in range(n_m):
        digits, rem = [], flat
        for _, it in reversed(m_iters):
            digits.append(rem % it.extent)
            rem //= it.extent
        digits.reverse()
        coord = [0] * len(shape)
        slot = off.get("m", 0)
        for (k, it), dg in zip(m_iters, digits):
            coord[dims_of[k]] += dg * weights[k]
            slot += dg * it.stride
        slots.append(slot)
        const_coords.append(tuple(coord))
    guard_terms = _guard_terms(G, {a for a in G.axes() if a in THREAD_AXES})   # every named thread axis
    coords = [tuple(_thread_part(thread_terms[d], const_coords[k][d]) for d in range(len(shape))) for k in range(n_m)]
    frag = Fragment(G, shape, slots, coords, const_coords, thread_terms, None, n_m)
    for a, v in sorted(pinned.items()):
        guard_terms.append((lambda ids, a=a, v=v: ids[a] == v, ops.eq(_id_expr(a), v)))
    holders = _check(frag, layout, shape, threads, pinned)
    frag.holders = frozenset(holders)
    frag.pinned = pinned
    active = sorted(threads.tids)
    needed = [(fn, ex) for fn, ex in guard_terms if not all(fn(thread_ids(t)) for t in active)]
    for t in active:
        ids = thread_ids(t)
        inside = all(fn(ids) for fn, _ in needed)
        if inside != (t in holders):
            raise FragmentError(f"thread {t} (warp {t // 32}, lane {t % 32}) holds "
                                f"{'elements' if t in holders else 'nothing'} of the tile, but the layout's thread "
                                "iterators do not say so in closed form")
    for _, ex in needed:
        frag.guard = ex if frag.guard is None else ops.logical_and(frag.guard, ex)
    return frag


def _guard_terms(G, axes) -> list:
    """Per thread axis, conditions (python fn of ids, IR expr) that hold exactly for ids that own data."""
    out = []
    for a in sorted(axes):
        its = sorted((it for it in list(G.shard) + list(G.replica)   # extent-1 / stride-0 walks stay at the offset
                      if it.axis.name == a and it.extent > 1 and it.stride > 0), key=lambda it: it.stride)
        o = G.offset.get(a, 0)
        idv = _id_expr(a)
        x = ops.sub(idv, o) if o else idv
        if not its:  # only an offset: the tile lives at that one id
            out.append((lambda ids, a=a, o=o: ids[a] == o, ops.eq(idv, o)))
            continue
        if o:
            out.append((lambda ids, a=a, o=o: ids[a] >= o, ops.ge(idv, o)))
        s0 = its[0].stride
        if s0 > 1:
            out.append((lambda ids, a=a, o=o, s0=s0: (ids[a] - o) % s0 == 0, ops.eq(ops.floormod(x, s0), 0)))
        for k, it in enumerate(its):
            nxt = its[k + 1].stride if k + 1 < len(its) else None
            if nxt is None:
                n = it.stride * it.extent
                out.append((lambda ids, a=a, o=o, n=n: ids[a] - o < n, ops.lt(x, n)))
                continue
            if nxt % it.stride or nxt < it.stride * it.extent:
                raise FragmentError(f"the {a} iterators of the layout overlap or interleave (strides "
                                    f"{[i.stride for i in its]}, extents {[i.extent for i in its]})")
            gap = nxt // it.stride
            if it.extent < gap:
                s_, e_ = it.stride, it.extent
                out.append((lambda ids, a=a, o=o, s_=s_, g=gap, e_=e_: ((ids[a] - o) // s_) % g < e_,
                            ops.lt(ops.floormod(ops.floordiv(x, s_) if s_ > 1 else x, gap), e_)))
    return out


_CHECKED: dict = {}


def _check(frag, layout, shape, threads, pinned=None) -> frozenset:
    """Brute force: every active thread's closed-form slots agree with the owner table; returns the threads
    that hold elements. ``frag`` is :func:`thread_fragment`'s, a function of ``(layout, shape)``, so a layout
    that passed for a thread set and pins is not checked again (memoized by layout value: layouts compare by
    structure and are immutable; a kernel's element-wise calls reuse a few register tiles many times)."""
    key = (type(layout), layout, tuple(shape), frozenset(threads.tids), tuple(sorted((pinned or {}).items())))
    hit = _CHECKED.get(key)
    if hit is None:
        hit = frozenset(_check_all(frag, layout, shape, threads, pinned))
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        _CHECKED[key] = hit
    return hit


def _check_all(frag, layout, shape, threads, pinned=None) -> set:
    names, t = layout.owner_table()
    holds: dict = {}
    thread_axes = [a for a in names if a != "m"]
    mi = names.index("m") if "m" in names else None
    for i in range(t.shape[0]):
        for r in range(t.shape[1]):
            key = tuple(int(t[i, r, names.index(a)]) for a in thread_axes)
            slot = int(t[i, r, mi]) if mi is not None else 0
            holds.setdefault(key, {})[slot] = i
    strides = [prod(shape[d + 1:]) for d in range(len(shape))]
    holders = set()
    for tid in sorted(threads.tids):
        ids = thread_ids(tid)
        if any(ids[a] != v for a, v in (pinned or {}).items()):
            continue
        key = tuple(ids[a] for a in thread_axes)
        have = holds.get(key)
        if have is None:
            continue
        holders.add(tid)
        for k, slot in enumerate(frag.slots):
            want = have.get(slot)
            got = frag.static_coord(k, ids)
            lin = sum(c * s for c, s in zip(got, strides))
            if want != lin:
                wc = None if want is None else tuple(int(x) for x in _unflatten(want, shape))
                raise FragmentError(f"thread {tid} (warp {tid // 32}, lane {tid % 32}) slot {slot}: the layout puts "
                                    f"element {wc} there, the per-thread inversion gives {got}")
    return holders


def _unflatten(i, shape):
    out = []
    for n in reversed(shape):
        out.append(i % n)
        i //= n
    return reversed(out)
