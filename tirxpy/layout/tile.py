"""``TileLayout``: shard / replica / offset placement of a logical tile on named axes.

Semantics (DESIGN.md section 2). Shard iterators D = [Iter(e_k, s_k, a_k)], replica iterators
R = [Iter(f_j, t_j, b_j)], offset O = {axis: o}:

- ``size = prod(e_k)``; a linear index i in [0, size) splits row-major over the extents;
- ``apply(i)[a] = O.get(a, 0) + sum_{k: a_k == a} i_k * s_k``;
- ``owners(i) = {apply(i) + sum_j r_j * t_j on b_j : r in prod [0, f_j)}``.

    >>> from tirxpy.layout import TileLayout, S, R, laneid, warpid
    >>> L = TileLayout(S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] + R[2 : 4@warpid] + 5@warpid)
    >>> L.apply(3, 9, shape=(8, 16))
    {'laneid': 12, 'warpid': 6, 'm': 1}
    >>> L.owners(57)
    [{'laneid': 12, 'warpid': 6, 'm': 1}, {'laneid': 12, 'warpid': 10, 'm': 1}]
    >>> L.elements_at(laneid=12, warpid=10, shape=(8, 16))
    [(3, 8), (3, 9)]
"""
from __future__ import annotations

import itertools
from functools import cached_property
from math import prod

import numpy as np

from tirxpy.errors import shown

from .axis import Axis
from .coords import check_shape, normalize, split, unflatten
from .errors import MAX_ANSWER, MAX_COORD, MAX_ITERS, MAX_TABLE, LayoutError, LayoutTypeError
from .iters import Iter, LayoutSpec, as_int


def _fmt_iters(name, iters):
    if len(iters) == 1:
        it = iters[0]
        return f"{name}[{it.extent} : {it.stride_text()}]"
    ext = ", ".join(str(it.extent) for it in iters)
    st = ", ".join(it.stride_text() for it in iters)
    if len(iters) == 0:
        return f"{name}[() : ()]"
    return f"{name}[({ext}) : ({st})]"


class Layout:
    """What every layout answers (TileLayout, ComposeLayout). Subclasses define
    ``size()``, ``axes()``, ``apply``, ``owners``, ``_owner_table()`` and ``__repr__``.

    An axis the layout does not name (not in :meth:`axes`) is *free* when it is a thread or CTA
    axis: the layout does not constrain it, so every thread (CTA) along it holds the element, each
    its own copy (a register tile whose layout names no thread axis is held by every thread). A
    memory axis the layout does not name reads 0. Owner dicts list the named axes only.
    """

    def owners(self, *coord, shape=None) -> list[dict]:
        """Every physical coordinate holding the element, base placement first, then the
        replicas in row-major order of the replica iterators."""
        raise NotImplementedError

    def replica_count_total(self) -> int:
        """How many owners each element has (the product of the replica extents)."""
        return 1

    # ---- table-based queries (vectorized over the whole domain; bounded by MAX_TABLE) ----
    def check_table(self, op: str = "owner_table") -> None:
        """Raise :class:`LayoutError` unless the owner table fits: at most ``MAX_TABLE`` (2**22)
        elements x replicas, every coordinate below 2**63 (the table is int64)."""
        n, r = self.size(), self.replica_count_total()
        if n * r > MAX_TABLE:
            raise LayoutError(
                f"{op}: the layout has {n} elements x {r} replica(s) = {n * r} owners; owner tables hold at most "
                f"{MAX_TABLE} (the limit MAX_TABLE). Ask closed-form questions instead (apply, owners, elements_at, "
                "span) or work on a sub-tile (slice)"
            )
        hi = self._reach_upper()
        if any(v >= 1 << 63 for v in hi.values()):
            a = next(a for a, v in hi.items() if v >= 1 << 63)
            raise LayoutError(f"{op}: the layout reaches {a} = {hi[a]}, past 2**63 - 1 (the limit of the int64 owner "
                              "table); use apply / owners / elements_at, which are exact")

    def _reach_upper(self) -> dict:
        return {}

    def owner_table(self):
        """``(axes, T)``: ``T[i, r, a]`` is the coordinate on ``axes[a]`` of replica ``r`` of
        logical index ``i``. Computed once per layout; refused past ``MAX_TABLE`` owners."""
        self.check_table()
        return self._owner_table_cached

    @cached_property
    def _owner_table_cached(self):
        axes, t = self._owner_table()
        t.setflags(write=False)
        return axes, t

    def _query(self, coord, axes, op) -> dict:
        """Validate an elements_at query: ``{axis name: int >= 0}`` over axes the layout names."""
        if coord is not None and not isinstance(coord, dict):
            raise LayoutTypeError(f"{op}: coord must be a dict {{axis: value}} or keyword arguments "
                                  f"(elements_at(laneid=3)), got {shown(coord)} ({type(coord).__name__})")
        want = {}
        named = self.axes()
        for k, v in list((coord or {}).items()) + list(axes.items()):
            name = Axis.get(k).name
            v = as_int(v, f"{op}: coordinate on {name}")
            if v < 0:
                raise LayoutError(f"{op}: coordinate {shown(v, 60)} on {name} is negative; coordinates are >= 0")
            bound = Axis.get(name).bound
            if bound is not None and v >= bound:
                raise LayoutError(f"{op}: coordinate {v} on {name} is out of range: the hardware has {bound} values "
                                  f"on {name} ({name} 0..{bound - 1})")
            if name not in named:
                ax = Axis.get(name)
                what = ("places nothing there (a missing memory axis reads 0)" if ax.is_memory else
                        f"is free there: every {name} holds the same elements")
                raise LayoutError(f"{op}: the layout does not name {name}, so it {what}; leave {name} out of "
                                  f"the query (the layout names {', '.join(named) or 'no axis'})")
            if want.get(name, v) != v:
                return None
            want[name] = v
        return want

    def elements_at(self, coord: dict | None = None, *, shape=None, **axes) -> list:
        """Reverse query: the logical elements held at a physical coordinate.

        Axes left out match any value (``elements_at(laneid=3)``: everything lane 3 holds); an
        axis the layout does not name, or a coordinate past its axis's hardware bound (``laneid=32``),
        raises :class:`LayoutError`.
        Returns sorted linear indices, or coordinate tuples when ``shape`` is given. Solved in
        closed form (:mod:`tirxpy.layout.solve`); more than ``MAX_ANSWER`` answers raise.
        """
        shp = None if shape is None else check_shape(shape, self.size())
        want = self._query(coord, axes, "elements_at")
        idx = [] if want is None else self._elements_at(want)
        if shp is None:
            return idx
        return [tuple(int(x) for x in unflatten(i, shp)) for i in idx]

    def _elements_at(self, want: dict) -> list:
        names, t = self.owner_table()
        mask = np.ones(t.shape[:2], dtype=bool)
        for name, v in want.items():
            mask &= t[:, :, names.index(name)] == v
        return np.nonzero(mask.any(axis=1))[0].tolist()

    def owner_sets(self, axes=None) -> list[frozenset]:
        """For each linear index, the set of owner tuples over ``axes`` (missing axes read 0)."""
        names, t = self.owner_table()
        axes = list(names) if axes is None else [Axis.get(a).name for a in axes]
        cols = [t[:, :, names.index(a)] if a in names else np.zeros(t.shape[:2], dtype=np.int64) for a in axes]
        stacked = np.stack(cols, axis=-1) if cols else np.zeros(t.shape[:2] + (0,), dtype=np.int64)
        return [frozenset(map(tuple, row.tolist())) for row in stacked]

    def is_injective(self) -> bool:
        """True when no physical coordinate holds two different logical elements."""
        names, t = self.owner_table()
        n, r, a = t.shape
        flat = t.reshape(n * r, a)
        idx = np.repeat(np.arange(n), r)
        pairs = np.unique(np.concatenate([flat, idx[:, None]], axis=1), axis=0)
        coords = pairs[:, :-1]
        return len(np.unique(coords, axis=0)) == len(coords)

    def free_axes(self) -> frozenset:
        """Named thread / CTA axes (the ones whose absence would mean "every unit holds it")."""
        return frozenset(a for a in self.axes() if not Axis.get(a).is_memory)

    def equivalent(self, other: "Layout") -> bool:
        """Same size, the same named thread / CTA axes, and the same set of owners for every
        logical index (a memory axis one layout leaves out reads 0 there). Layouts with identical
        canonical forms (:func:`~tirxpy.layout.canonical.canonicalize`) are equivalent at any size;
        others are compared by their owner tables (at most ``MAX_TABLE`` owners each)."""
        if not isinstance(other, Layout):
            raise LayoutTypeError(f"equivalent() compares two layouts, got {type(other).__name__}")
        if self.size() != other.size() or self.free_axes() != other.free_axes():
            return False
        if self.identical(other):
            return True
        from .canonical import canonicalize

        if canonicalize(self).identical(canonicalize(other)):   # one split class: no table needed
            return True
        axes = sorted(set(self.axes()) | set(other.axes()))
        return self.owner_sets(axes) == other.owner_sets(axes)

    def span(self, axis=None):
        """Width of the coordinate range touched on ``axis`` (max - min + 1, offset excluded
        from the width); without ``axis`` a dict over every axis the layout uses."""
        if axis is None:
            return {a: self.span(a) for a in self.axes()}
        name = Axis.get(axis).name
        if name not in self.axes():
            return 1
        return self._span(name)

    def _span(self, name):
        names, t = self.owner_table()
        col = t[:, :, names.index(name)]
        return int(col.max() - col.min() + 1)

    def dense_box_mismatch(self, box) -> tuple | None:
        """None when the ``m`` coordinate of this layout over the logical tile ``box`` is the dense
        row-major box (what a TMA copy writes / reads, up to a base offset): element ``i`` (row-major
        in ``box``) at ``m(0) + i`` for every ``i``. Otherwise an element out of place, as ``(element,
        its offset from m(0), the dense box's offset)``: the first of the steps 1 and ``n - 1`` along
        each dimension from the origin that is out of place, else the first in row-major order. A
        swizzled layout is checked before its swizzle. Checked element by element (at most
        ``MAX_TABLE`` elements); :class:`TileLayout` answers in closed form for any size.
        """
        box = check_shape(box, self.size(), "box")
        wrong = self._box_steps_mismatch(box)
        if wrong is not None:
            return wrong
        if self.size() > MAX_TABLE:
            raise LayoutError(f"dense_box_mismatch: the layout has {self.size()} elements, past the {MAX_TABLE} "
                              "(MAX_TABLE) checked one by one; check the unswizzled TileLayout, which is closed form")
        base = self.apply(0).get("m", 0)
        for i in range(self.size()):
            got = self.apply(i).get("m", 0) - base
            if got != i:
                return tuple(int(x) for x in unflatten(i, box)), int(got), i
        return None

    def _box_steps_mismatch(self, box):
        """The first of the steps 1 and ``n - 1`` along each dimension (from the origin) whose ``m`` is not
        the dense box's, or None: the element a mismatch names when one of these is out of place."""
        rm = [prod(box[d + 1:]) for d in range(len(box))]
        origin = [0] * len(box)
        base = self.apply(*origin, shape=box).get("m", 0)
        for d in range(len(box)):
            for step in sorted({s for s in (1, box[d] - 1) if 0 < s < box[d]}):
                c = list(origin)
                c[d] = step
                got = self.apply(*c, shape=box).get("m", 0) - base
                if got != step * rm[d]:
                    return tuple(c), int(got), step * rm[d]
        return None

    def table(self, shape=None, **kw) -> str:
        """Render as a terminal grid (see :func:`tirxpy.layout.grid.table`)."""
        from .grid import table

        return table(self, shape=shape, **kw)

    # ---- algebra (tirxpy.layout.canonical / algebra / algebra_compose; raise instead of None) ----
    def canonicalize(self) -> "Layout":
        """:func:`tirxpy.layout.canonical.canonicalize` of this layout."""
        from .canonical import canonicalize

        return canonicalize(self)

    def group(self, shape):
        """:func:`tirxpy.layout.algebra.group`; raises :class:`LayoutError` when ``shape`` does not align."""
        from . import algebra

        return _or_raise(algebra._group(algebra._tile_of(self, "group"), check_shape(shape, self.size())), "group")

    def slice(self, region, shape) -> "Layout":
        """:func:`tirxpy.layout.algebra.slice_layout`; raises naming the dimension and why."""
        from .algebra import _slice

        return _or_raise(_slice(self, region, shape), "slice")

    def permute_dims(self, shape, perm) -> "Layout":
        """:func:`tirxpy.layout.algebra.permute_dims`; raises when ``shape`` does not align."""
        from .algebra import _permute

        return _or_raise(_permute(self, shape, perm), "permute_dims")

    def tile(self, outer, inner_shape, outer_shape) -> "TileLayout":
        """:func:`tirxpy.layout.algebra.tile_product` with this layout as the inner tile."""
        from .algebra import _tile

        return _or_raise(_tile(self, outer, inner_shape, outer_shape), "tile")

    def direct_sum(self, other) -> "TileLayout":
        """:func:`tirxpy.layout.algebra.direct_sum` of this layout and ``other``."""
        from .algebra import direct_sum

        return direct_sum(self, other)

    def pack(self, factor) -> "TileLayout":
        """:func:`tirxpy.layout.algebra_compose.pack`."""
        from .algebra_compose import pack

        return pack(self, factor)

    def unpack(self, factor) -> "TileLayout":
        """:func:`tirxpy.layout.algebra_compose.unpack`."""
        from .algebra_compose import unpack

        return unpack(self, factor)

    def compose(self, inner) -> "TileLayout":
        """:func:`tirxpy.layout.algebra_compose.compose`; raises when the result is not affine."""
        from .algebra_compose import _compose

        return _or_raise(_compose(self, inner), "compose")


def _iter_tuple(its, what):
    if its is None:
        return ()
    if isinstance(its, Iter) or not isinstance(its, (list, tuple)):
        raise LayoutTypeError(f"{what} must be a list of Iter(extent, stride, axis), got {shown(its)} "
                              f"({type(its).__name__})")
    for it in its:
        if not isinstance(it, Iter):
            raise LayoutTypeError(f"{what} iterators must be Iter(extent, stride, axis), got {shown(it)}")
    return tuple(its)


def _or_raise(result_why, op):
    result, why = result_why
    if result is None:
        raise LayoutError(f"{op}: {why}")
    return result


class TileLayout(Layout):
    """An affine placement: ``TileLayout(S[extents : strides] + R[...] + k@axis)``.

    Also ``TileLayout.from_iters(shard=[Iter...], replica=[Iter...], offset={"warpid": 5})``.
    Every constructor checks the result (:meth:`check_well_formed`) and raises
    :class:`LayoutError` on bad input (:class:`LayoutTypeError` for a wrong kind of argument).
    A zero offset on a thread / CTA axis that no iterator names is kept (``0@laneid``: the tile
    lives in lane 0 only, unlike a layout that leaves ``laneid`` free).
    """

    def __init__(self, spec: LayoutSpec | None = None, *, shard=None, replica=(), offset=None):
        if spec is not None:
            if shard is not None or replica or offset:
                raise LayoutError("pass either a spec (S[...] + R[...] + k@axis) or shard=/replica=/offset=, not both")
            if isinstance(spec, (TileLayout, LayoutSpec)):
                shard, replica, offset = spec.shard, spec.replica, spec.offset
            else:
                raise LayoutTypeError(
                    f"TileLayout takes S[extents : strides] (+ R[...] + k@axis), got {shown(spec)}; "
                    "for iterator lists use TileLayout.from_iters(shard, replica, offset)"
                )
        shard = _iter_tuple(shard, "shard")
        replica = _iter_tuple(replica, "replica")
        if offset is not None and not isinstance(offset, dict):
            raise LayoutTypeError(f"offset must be a dict {{axis: int}}, got {shown(offset)} ({type(offset).__name__})")
        off = {}
        for k, v in dict(offset or {}).items():
            name = Axis.get(k).name
            off[name] = off.get(name, 0) + as_int(v, f"offset on {name}")
        named = {it.axis.name for it in shard + replica}
        self.shard = shard
        self.replica = replica
        self._offset = tuple((k, v) for k, v in off.items()
                             if v != 0 or (k not in named and not Axis.get(k).is_memory))
        self.check_well_formed()

    @classmethod
    def from_iters(cls, shard, replica=(), offset=None) -> "TileLayout":
        """Build from iterator lists: ``from_iters([Iter(8, 1, "laneid")], [], {"warpid": 2})``."""
        return cls(shard=shard, replica=replica, offset=offset)

    @property
    def offset(self) -> dict:
        return dict(self._offset)

    # ---- checks ----
    def check_well_formed(self) -> None:
        """Raise :class:`LayoutError` unless extents >= 1, strides >= 0, offsets >= 0, every
        coordinate and the size stay below 2**64, at most ``MAX_ITERS`` iterators of each kind,
        and every bounded hardware axis (laneid < 32, TLane < 128, ...) stays in bounds."""
        for what, its in (("shard", self.shard), ("replica", self.replica)):
            if len(its) > MAX_ITERS:
                raise LayoutError(f"the layout has {len(its)} {what} iterators; at most {MAX_ITERS} (the limit "
                                  "MAX_ITERS): fuse adjacent iterators")
            for k, it in enumerate(its):
                if it.extent < 1:
                    raise LayoutError(
                        f"{what} iterator {k} has extent {it.extent}; every extent must be a positive integer "
                        "(drop the iterator or give it extent >= 1)"
                    )
                if it.stride < 0:
                    raise LayoutError(
                        f"{what} iterator {k} ({shown(it)}) has negative stride {it.stride}; strides must be >= 0"
                    )
        for name, v in self._offset:
            if v < 0:
                raise LayoutError(f"offset {v}@{name} is negative; offsets must be >= 0")
        if self.size() >= MAX_COORD or self.replica_count >= MAX_COORD:
            raise LayoutError(f"the layout has {self.size()} elements x {self.replica_count} replicas; the limit of "
                              "layout sizes is 2**64: use smaller extents")
        for name, hi in self._reach_upper().items():
            ax = Axis.get(name)
            if hi >= MAX_COORD:
                raise LayoutError(f"the layout reaches {name} = {hi}, past the limit of layout coordinates (2**64); "
                                  f"shrink the extents / strides / offset on {name}")
            if ax.bound is not None and hi >= ax.bound:
                raise LayoutError(
                    f"layout reaches {name} = {hi}, but the hardware has only {ax.bound} values on {name} "
                    f"(0..{ax.bound - 1}); shrink the extents/strides on {name} or move part to another axis"
                )

    def _reach_upper(self) -> dict:
        """{axis: the largest coordinate any owner reaches on it} (closed form)."""
        hi = {a: 0 for a in self.axes()}
        for it in self.shard + self.replica:
            hi[it.axis.name] += (it.extent - 1) * it.stride
        for k, v in self._offset:
            hi[k] += v
        return hi

    def replica_count_total(self) -> int:
        return self.replica_count

    def _span(self, name):
        return 1 + sum((it.extent - 1) * it.stride for it in self.shard + self.replica if it.axis.name == name)

    def _elements_at(self, want: dict) -> list:
        from .solve import elements_at

        return elements_at(self, want)

    # ---- structure ----
    def size(self, axis=None) -> int:
        """Number of logical elements; with ``axis``, the product of the shard extents on it."""
        if axis is None:
            return prod(it.extent for it in self.shard)
        ax = Axis.get(axis)
        return prod(it.extent for it in self.shard if it.axis is ax)

    def axes(self) -> tuple:
        """Axis names used, in order of first appearance (shard, replica, offset)."""
        seen = {}
        for it in self.shard + self.replica:
            seen.setdefault(it.axis.name, None)
        for k, _ in self._offset:
            seen.setdefault(k, None)
        return tuple(seen)

    @property
    def replica_count(self) -> int:
        return prod(it.extent for it in self.replica)

    def identical(self, other) -> bool:
        """Structural equality: same iterator lists and offset."""
        return isinstance(other, TileLayout) and self._key() == other._key()

    def _key(self):
        return (self.shard, self.replica, tuple(sorted(self._offset)))

    def __eq__(self, other):
        return self.identical(other)

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        parts = [_fmt_iters("S", self.shard)]
        if self.replica:
            parts.append(_fmt_iters("R", self.replica))
        parts += [f"{v}@{k}" for k, v in self._offset]
        return f"TileLayout({' + '.join(parts)})"

    def dense_box_mismatch(self, box) -> tuple | None:
        """:meth:`Layout.dense_box_mismatch` in closed form: ``m(i) - m(0)`` is the sum over shard digits of
        ``digit * (stride if the iterator is on m else 0)``, and it equals ``i = sum digit * place`` for every
        ``i`` exactly when each iterator of extent > 1 moves ``m`` by its place value (the product of the
        extents after it). When none of the steps :meth:`Layout.dense_box_mismatch` tries first is out of
        place, the first element out of place is the place value of the fastest iterator that does not.

            >>> from tirxpy.layout import TileLayout, S
            >>> TileLayout(S[(4, 8) : (8, 1)]).dense_box_mismatch((4, 8)) is None
            True
            >>> TileLayout(S[(4, 8) : (16, 1)]).dense_box_mismatch((4, 8))
            ((1, 0), 16, 8)
            >>> TileLayout(S[(2, 3, 2) : (8, 1, 1)]).dense_box_mismatch((12,))    # m: 0 1 1 2 2 3 8 ..
            ((2,), 1, 2)
        """
        box = check_shape(box, self.size(), "box")
        wrong = self._box_steps_mismatch(box)
        if wrong is not None:
            return wrong
        place = 1
        for it in reversed(self.shard):
            moves = it.stride if it.axis.name == "m" else 0
            if it.extent > 1 and moves != place:
                return tuple(int(x) for x in unflatten(place, box)), moves, place
            place *= it.extent
        return None

    # ---- evaluation ----
    def apply(self, *coord, shape=None) -> dict:
        """Base physical coordinate of a logical element (replicas at 0).

        ``apply(i)`` takes a linear index, ``apply(r, c, shape=(R, C))`` a coordinate. Ints
        give ints; symbolic coordinates (sympy symbols or names) give index expressions::

            >>> from tirxpy.layout import TileLayout, S, laneid
            >>> TileLayout(S[(8, 4) : (1@laneid, 8)]).apply("i", "j", shape=(8, 4))
            {'laneid': i, 'm': 8*j}
        """
        coord, shape = normalize(coord, shape, self.size())
        comps = split(coord, shape, [it.extent for it in self.shard])
        out = {name: 0 for name in self.axes()}
        for c, it in zip(comps, self.shard):
            if it.extent > 1 and it.stride != 0:
                out[it.axis.name] = out[it.axis.name] + c * it.stride
        for k, v in self._offset:
            out[k] = out[k] + v
        return out

    def owners(self, *coord, shape=None) -> list[dict]:
        """Every owner of the element (``apply`` plus each replica offset); refused when there are
        more than ``MAX_ANSWER`` replicas."""
        if self.replica_count > MAX_ANSWER:
            raise LayoutError(f"owners: each element has {self.replica_count} replicas, more than the limit of "
                              f"{MAX_ANSWER} (MAX_ANSWER); ask apply() for the base owner and read the replica "
                              "iterators for the rest")
        base = self.apply(*coord, shape=shape)
        res = []
        for r in itertools.product(*(range(it.extent) for it in self.replica)):
            d = dict(base)
            for rj, it in zip(r, self.replica):
                d[it.axis.name] = d[it.axis.name] + rj * it.stride
            res.append(d)
        return res

    def _owner_table(self):
        names = self.axes()
        n = self.size()
        idx = np.arange(n, dtype=np.int64)
        base = np.zeros((n, len(names)), dtype=np.int64)
        comps = unflatten(idx, [it.extent for it in self.shard])
        for c, it in zip(comps, self.shard):
            base[:, names.index(it.axis.name)] += c * it.stride
        for k, v in self._offset:
            base[:, names.index(k)] += v
        reps = list(itertools.product(*(range(it.extent) for it in self.replica)))
        radd = np.zeros((len(reps), len(names)), dtype=np.int64)
        for ri, r in enumerate(reps):
            for rj, it in zip(r, self.replica):
                radd[ri, names.index(it.axis.name)] += rj * it.stride
        return names, base[:, None, :] + radd[None, :, :]
