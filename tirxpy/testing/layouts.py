"""Hypothesis strategies for layouts.

Valid strategies draw only well-formed layouts (every named hardware axis within its bound) of
small size, so a property may enumerate a layout's whole domain.

- :func:`tile_layouts`: shard iterators, replicas (``replicas=False`` drops them) and offsets
  (``offsets=False`` drops them) on the given ``axes``;
- :func:`memory_layouts`: on the memory axis ``m`` only;
- :func:`compose_layouts`: a random swizzle ``(P, B, A)`` over a row-major tile, sometimes times a
  thread axis (``tiles=tile_layouts()``: over any drawn tile; ``swizzle_inner=None``: outer swizzles
  too); :func:`swizzled_layouts`: the hardware 32B / 64B / 128B swizzles of a dtype over a
  tile of whole swizzle atoms;
- :func:`hardware_atoms`: the instruction layouts of :mod:`tirxpy.layout.atoms` (WGMMA accumulator
  and A fragment, mma.sync fragments, ldmatrix, tcgen05 TMEM layouts, WGMMA / tcgen05 shared-memory
  operand layouts) with their logical shapes;
- :func:`split_layouts`: a layout equivalent to a given one, its iterators split at random divisors,
  extent-1 iterators inserted and replicas shuffled;
- :func:`invalid_tile_inputs`, :func:`bad_queries`: calls that must raise ``LayoutError``, each with a
  fragment of the message.

    >>> from hypothesis import given
    >>> from tirxpy.testing.layouts import hardware_atoms, tile_layouts
    >>> @given(tile_layouts(replicas=False, offsets=False))
    ... def plain(L):
    ...     assert not L.replica and not L.offset
    >>> plain()
    >>> @given(hardware_atoms())
    ... def sized(atom):
    ...     n = 1
    ...     for d in atom.shape:
    ...         n *= d
    ...     assert atom.layout.size() == n
    >>> sized()
"""
from __future__ import annotations

from typing import NamedTuple

import sympy
from hypothesis import strategies as st

from tirxpy.layout import (
    Axis, ComposeLayout, Iter, Layout, SwizzleLayout, TileLayout, ldmatrix_layout, mma_m16n8k16_a, mma_m16n8k16_b,
    mma_m16n8k16_c, swizzle_for, tcgen05_smem_layout, tmem_accumulator, tmem_ld_layout, tmem_ld_tile, tmem_warpx4_layout,
    wgmma_a_fragment, wgmma_accumulator, wgmma_smem_layout,
)
from tirxpy.layout.errors import MAX_ITERS, LayoutTypeError
from tirxpy.errors import shown

from . import _args

BOUNDS = {"laneid": 32, "wid_in_wg": 4, "tid_in_wg": 128, "TLane": 128, "TCol": 512, "Bank": 32,
          "wgid": 8, "warpid": 32, "tx": 1024}
"""Axis -> number of values it holds (the hardware bound a valid layout stays within)."""
AXES = ("m", "laneid", "warpid", "wid_in_wg", "tid_in_wg", "TLane", "TCol", "Bank", "wgid", "tx")
"""The axes :func:`tile_layouts` draws from by default."""
EXTENTS = (1, 2, 2, 3, 4, 4, 8)
"""Iterator extents drawn (2 and 4 twice as often)."""


def _bound(a):
    """The number of values axis ``a`` holds (:data:`BOUNDS`, else its registered bound; None: unbounded)."""
    return BOUNDS.get(a) or Axis.get(a).bound


def iter_lists(n_max, reach, axes, max_size):
    """Up to ``n_max`` (in ``[0, MAX_ITERS]``) iterators on ``axes`` of total extent <= ``max_size`` that stay
    within the axes' bounds, above the coordinates ``reach`` already takes (a dict, axis name -> highest
    coordinate so far, below the axis's bound). ``reach`` is read when called, never changed: every draw starts
    from it, so a replay draws the same.

        >>> iter_lists(2, {"laneid": 32}, ("laneid",), 8)
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: iter_lists: reach['laneid'] is 32, past 31; use at most 31
    """
    fn = "iter_lists"
    n_max = _args.count(n_max, fn, "n_max", 0, MAX_ITERS)
    if not isinstance(reach, dict):
        raise LayoutTypeError(f"iter_lists: reach must be a dict (axis -> highest coordinate), got {shown(reach)}")
    start = {}
    for a, v in reach.items():
        (name,) = _args.axes((a,), fn, "reach")
        hi = _bound(name) - 1 if _bound(name) else None
        start[name] = _args.count(v, fn, f"reach[{name!r}]", 0, hi)
    return _iter_lists_from(n_max, start, _args.axes(axes, fn), _args.count(max_size, fn, "max_size", 1))


@st.composite
def _iter_lists_from(draw, n_max, start, axes, max_size):
    return draw(_iter_lists(n_max, dict(start), axes, max_size))


@st.composite
def _iter_lists(draw, n_max, reach, axes, max_size, extents=EXTENTS, max_stride=12):
    out, size = [], 1
    for _ in range(draw(st.integers(0, n_max))):
        e = draw(st.sampled_from([x for x in extents if size * x <= max_size] or [1]))
        a = draw(st.sampled_from(axes))
        raw = draw(st.integers(0, max_stride))
        if _bound(a) and e > 1:
            raw = min(raw, (_bound(a) - 1 - reach.get(a, 0)) // (e - 1))
        reach[a] = reach.get(a, 0) + (e - 1) * raw
        out.append(Iter(e, raw, a))
        size *= e
    return out


def tile_layouts(axes=AXES, max_shard=4, max_replica=2, max_size=256, offsets=True, replicas=True, *,
                 extents=EXTENTS, max_stride=12, max_offset=40):
    """A valid TileLayout on ``axes`` with size <= ``max_size``: up to ``max_shard`` shard iterators,
    up to ``max_replica`` replica iterators (none with ``replicas=False``), an offset on up to two axes
    (none with ``offsets=False``). Counts are ints in ``[0, MAX_ITERS]``, ``max_size >= 1``.

    What it draws: iterator extents from ``extents`` (default :data:`EXTENTS`: 1, 2, 3, 4, 8; extent-1
    iterators included), strides in ``[0, max_stride]`` (0 included) cut down to stay within each bounded
    axis, offsets up to the axis's bound (``max_offset`` on an unbounded axis), replicas of at most 8 copies
    in all, an empty shard (one element, e.g. a replica-only layout) among them. What it leaves out unless
    asked: the axes not in :data:`AXES` (``P``, ``F``, CTA axes, ``rank``: pass ``axes=``), extents other
    than ``extents``, larger strides and offsets, and sizes past ``max_size``; layouts past an axis's bound
    are never drawn (they are invalid).

        >>> tile_layouts(max_shard=-1)
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: tile_layouts: max_shard is -1; it must be an integer >= 0
    """
    fn = "tile_layouts"
    if isinstance(extents, (str, bytes)) or not isinstance(extents, (tuple, list)) or not extents:
        raise LayoutTypeError(f"{fn}: extents must be a non-empty tuple of positive ints, got {shown(extents)}")
    extents = tuple(_args.count(e, fn, "extents", 1) for e in extents)
    return _tile_layouts(_args.axes(axes, fn), _args.count(max_shard, fn, "max_shard", 0, MAX_ITERS),
                         _args.count(max_replica, fn, "max_replica", 0, MAX_ITERS),
                         _args.count(max_size, fn, "max_size", 1), _args.flag(offsets, fn, "offsets"),
                         _args.flag(replicas, fn, "replicas"), extents, _args.count(max_stride, fn, "max_stride"),
                         _args.count(max_offset, fn, "max_offset"))


@st.composite
def _tile_layouts(draw, axes, max_shard, max_replica, max_size, offsets, replicas, extents=EXTENTS, max_stride=12,
                  max_offset=40):
    reach: dict = {}
    shard = draw(_iter_lists(max_shard, reach, axes, max_size, extents, max_stride))
    replica = draw(_iter_lists(max_replica, reach, axes, 8, extents, max_stride)) if replicas else []
    off = {}
    if offsets:
        for a in draw(st.lists(st.sampled_from(axes), max_size=2, unique=True)):
            hi = _bound(a) - 1 - reach.get(a, 0) if _bound(a) else max_offset
            off[a] = draw(st.integers(0, max(hi, 0)))
    return TileLayout.from_iters(shard, replica, off)


def memory_layouts(max_shard=4, max_replica=2, max_size=256, offsets=True, replicas=True, **kw):
    """TileLayouts on ``m`` only (e.g. the inner operand of ``compose``); arguments as :func:`tile_layouts`,
    but for ``axes``."""
    if "axes" in kw:
        raise LayoutTypeError("memory_layouts draws on the axis m only, so it takes no axes= (got "
                              f"{shown(kw['axes'], 60)}); use tile_layouts(axes=...) for other axes")
    return tile_layouts(("m",), max_shard, max_replica, max_size, offsets, replicas, **kw)


def compose_layouts(tiles=None, swizzle_inner=True):
    """A ComposeLayout (a swizzle of the memory axis ``m``).

    ``tiles=None`` (the default): a swizzle ``(P, B, A)`` with ``P <= 2``, ``B <= 3``, ``B <= A <= 3`` over a
    row-major ``(rows, cols)`` m-tile of one or two swizzle periods (``cols = 2**(P + A)``), sometimes times a
    ``laneid`` iterator; no offset, no replicas. With ``tiles`` (a strategy of TileLayouts, e.g.
    ``tile_layouts()``): any swizzle with ``P, B <= 4``, ``B <= A <= 6`` over a drawn tile (offsets, replicas,
    thread axes and all; a tile that names no ``m`` gets an extent-1 iterator on it).

    ``swizzle_inner``: True (the swizzle permutes the ``m`` the tile produces), False (it permutes the logical
    index; the swizzle is then drawn so that the size is a whole number of periods or below ``2**(P + A)``),
    or None (either). Left out: swizzles of the other memory axes (``P``, ``F``, ``Bank``).
    """
    if tiles is not None and not isinstance(tiles, st.SearchStrategy):
        raise LayoutTypeError(f"compose_layouts: tiles must be a strategy of TileLayouts (e.g. tile_layouts()), "
                              f"got {shown(tiles)} ({type(tiles).__name__})")
    if swizzle_inner is not None:
        _args.flag(swizzle_inner, "compose_layouts", "swizzle_inner")
    return _compose_layouts(tiles, swizzle_inner)


@st.composite
def _compose_layouts(draw, tiles, swizzle_inner):
    inner = draw(st.booleans()) if swizzle_inner is None else swizzle_inner
    if tiles is None:
        P, B = draw(st.integers(0, 2)), draw(st.integers(0, 3))
        A = draw(st.integers(B, 3))
        period = 1 << (P + A + B)
        cols = 1 << (P + A)
        rows = period // cols * draw(st.sampled_from([1, 2]))
        shard = [Iter(rows, cols), Iter(cols, 1)]
        if draw(st.booleans()) and rows * cols <= 256:
            shard.insert(draw(st.integers(0, 2)), Iter(draw(st.sampled_from([2, 4])), 1, "laneid"))
        return ComposeLayout(SwizzleLayout(P, B, A), TileLayout.from_iters(shard), swizzle_inner=inner)
    tile = draw(tiles)
    if not isinstance(tile, TileLayout):
        raise LayoutTypeError(f"compose_layouts: tiles drew {shown(tile)} ({type(tile).__name__}), not a TileLayout")
    if inner and "m" not in tile.axes():
        tile = TileLayout.from_iters(tile.shard + (Iter(1, 1, "m"),), tile.replica, tile.offset)
    B = draw(st.integers(0, 4))
    A, P = draw(st.integers(B, 6)), draw(st.integers(0, 4))
    n = tile.size()
    if not inner and n % (1 << (P + A + B)) and n > 1 << (P + A):
        v = (n & -n).bit_length() - 1          # 2**v divides n: a swizzle of at most v bits has whole periods
        B = draw(st.integers(0, v // 2))
        A = draw(st.integers(B, v - B))
        P = draw(st.integers(0, v - A - B))
    return ComposeLayout(SwizzleLayout(P, B, A), tile, swizzle_inner=inner)


_SMEM_DTYPES = ("bf16", "f16", "f32", "e4m3")


def swizzled_layouts(dtypes=_SMEM_DTYPES, max_rows=16):
    """A hardware shared-memory swizzle (32B, 64B or 128B for an element of one of ``dtypes``) over a
    row-major tile whose rows are one swizzle row (``swizzle_bytes`` bytes) and whose row count is a
    multiple of 8 up to ``max_rows`` (an int >= 8): ``ComposeLayout(swizzle_for(bytes, dtype), rows x cols)``.
    Left out: padded rows, offsets (views of a larger tile) and thread axes; :func:`compose_layouts` draws those."""
    def known(dtype):
        for nbytes in (32, 64, 128):
            swizzle_for(nbytes, dtype)

    dtypes = _args.names(dtypes, "swizzled_layouts", "dtypes", known)
    return _swizzled_layouts(dtypes, _args.count(max_rows, "swizzled_layouts", "max_rows", 8))


@st.composite
def _swizzled_layouts(draw, dtypes, max_rows):
    from tirxpy.layout import dtype_bits

    dtype = draw(st.sampled_from(dtypes))
    nbytes = draw(st.sampled_from([32, 64, 128]))
    cols = nbytes * 8 // dtype_bits(dtype)
    rows = 8 * draw(st.integers(1, max_rows // 8))
    return ComposeLayout(swizzle_for(nbytes, dtype), TileLayout.from_iters([Iter(rows, cols), Iter(cols, 1)]))


class Atom(NamedTuple):
    """A hardware layout drawn by :func:`hardware_atoms`: the call that made it, the layout, and the
    logical tile shape it maps (``prod(shape) == layout.size()``)."""

    name: str
    layout: object
    shape: tuple


def _atom_makers():
    out = [(f"wgmma_accumulator({n})", lambda n=n: wgmma_accumulator(n), (64, n)) for n in (8, 16, 64, 256)]
    out += [(f"wgmma_a_fragment({d!r})", lambda d=d: wgmma_a_fragment(d), (64, 16))
            for d in ("f16", "bf16")]
    out += [("mma_m16n8k16_a()", mma_m16n8k16_a, (16, 16)), ("mma_m16n8k16_b()", mma_m16n8k16_b, (16, 8)),
            ("mma_m16n8k16_c()", mma_m16n8k16_c, (16, 8))]
    out += [(f"ldmatrix_layout({n}, trans={t})", lambda n=n, t=t: ldmatrix_layout(n, t), (8 * n, 8))
            for n in (1, 2, 4) for t in (False, True)]
    out += [(f"tmem_accumulator({m}, {n})", lambda m=m, n=n: tmem_accumulator(m, n), (m, n))
            for m, n in ((128, 64), (64, 64))]
    out += [(f"tmem_ld_layout({s!r}, {n})", lambda s=s, n=n: tmem_ld_layout(s, n), tmem_ld_tile(s, n))
            for s in ("32x32b", "16x64b", "16x128b", "16x256b") for n in (1, 2)]
    out += [("tmem_warpx4_layout(4)", lambda: tmem_warpx4_layout(4), (32, 4))]
    for fn, nm in ((wgmma_smem_layout, "wgmma_smem_layout"), (tcgen05_smem_layout, "tcgen05_smem_layout")):
        for sw in (32, 64, 128):
            for major in ("K", "MN"):
                k = 64 if major == "MN" else sw // 2
                out.append((f"{nm}(64, {k}, 'bf16', {major!r}, {sw})",
                            lambda fn=fn, k=k, major=major, sw=sw: fn(64, k, "bf16", major, sw), (64, k)))
    return out


_ATOMS = None


def hardware_atoms():
    """An :class:`Atom`: one of the instruction layouts of :mod:`tirxpy.layout.atoms` with its logical
    shape (WGMMA accumulators and A fragments, mma.sync m16n8k16 fragments, ldmatrix x1 / x2 / x4,
    tcgen05 TMEM accumulators and tcgen05.ld layouts, tcgen05.cp warpx4, WGMMA / tcgen05 shared-memory
    operand layouts of every swizzle and major-ness). A fixed sample of each family's parameters (e.g. WGMMA
    N in 8, 16, 64, 256; bf16 operands; 64-row tiles), listed in ``_atom_makers``; not every legal call."""
    global _ATOMS
    if _ATOMS is None:
        _ATOMS = [Atom(name, make(), tuple(shape)) for name, make, shape in _atom_makers()]
    return st.sampled_from(_ATOMS)


def split_layouts(L):
    """A TileLayout equivalent to the TileLayout ``L`` (same owners for every index): shard and replica iterators
    split at random divisors (drawn from the prime factors, so any extent below 2**64 is quick), extent-1
    iterators inserted, replicas shuffled; never past ``MAX_ITERS`` iterators."""
    L = _args.tile_layout(L, "split_layouts")
    named = ("m",) + tuple(a for a in L.axes() if a != "m")   # extent 1 on an axis the layout names, else it pins it
    return _split_layouts(L, tuple(sorted(sympy.factorint(it.extent).items()) for it in L.shard),
                          tuple(sorted(sympy.factorint(it.extent).items()) for it in L.replica), named)


@st.composite
def _split_layouts(draw, L, shard_primes, replica_primes, named):
    def split_all(its, primes):
        out, room = [], MAX_ITERS - len(its)
        for it, ps in zip(its, primes):
            f = 1
            if room and draw(st.booleans()):
                for p, k in ps:
                    f *= p ** draw(st.integers(0, k))
            if 1 < f < it.extent:
                out += [Iter(it.extent // f, it.stride * f, it.axis), Iter(f, it.stride, it.axis)]
                room -= 1
            else:
                out.append(it)
            if room and draw(st.booleans()):
                out.append(Iter(1, draw(st.integers(0, 5)), draw(st.sampled_from(named))))
                room -= 1
        return out

    replica = draw(st.permutations(split_all(L.replica, replica_primes)))
    return TileLayout.from_iters(split_all(L.shard, shard_primes), replica, L.offset)


# ---- invalid inputs: (thunk, expected message fragment) ----
def invalid_tile_inputs():
    """``(thunk, fragment)``: a layout constructor call that must raise ``LayoutError`` whose message
    contains ``fragment``."""
    from tirxpy.layout import R, S, TCol, laneid, wid_in_wg

    return st.sampled_from([
        (lambda: TileLayout(S[(8, 0) : (1, 1)]), "extent 0"),
        (lambda: TileLayout(S[(8, -2) : (1, 1)]), "extent -2"),
        (lambda: TileLayout.from_iters([Iter(4, -1)]), "negative stride"),
        (lambda: TileLayout(S[4 : 1] + (-3) @ laneid), "is negative"),
        (lambda: TileLayout(S[64 : 1 @ laneid]), "only 32 values on laneid"),
        (lambda: TileLayout(S[4 : 1] + R[8 : 1 @ wid_in_wg]), "wid_in_wg"),
        (lambda: TileLayout(S[2 : 1] + 600 @ TCol), "TCol"),
        (lambda: Iter(4, 1, "nosuchaxis"), "unknown axis 'nosuchaxis'"),
        (lambda: TileLayout(S[(4, 2) : (1,)]), "2 extents but 1 strides"),
        (lambda: TileLayout.from_iters([(4, 1)]), "must be Iter"),
        (lambda: TileLayout(S[4 : 1] + S[2 : 1]), "one S[...]"),
        (lambda: TileLayout("S[4:1]"), "TileLayout takes"),
        (lambda: Iter(2.5, 1), "must be an integer"),
        (lambda: SwizzleLayout(0, 2, 3, axis="laneid"), "thread axis"),
        (lambda: SwizzleLayout(0, 3, 2), "overlap"),
    ])


def bad_queries(L):
    """``(coord, shape, fragment)``: an ``apply`` / ``owners`` call on the layout ``L`` that must raise
    ``LayoutError`` whose message contains ``fragment``."""
    if not isinstance(L, Layout):
        raise LayoutTypeError(f"bad_queries: L must be a layout, got {shown(L)} ({type(L).__name__})")
    return _bad_queries(L)


@st.composite
def _bad_queries(draw, L):
    from .shapes import shapes

    size = L.size()
    kind = draw(st.sampled_from(["index", "rank", "range", "product", "shape"]))
    if kind == "index":
        return (draw(st.one_of(st.integers(size, size + 50), st.integers(-50, -1))),), None, "out of range"
    shape = draw(shapes(size, max_rank=2, rank=2))
    if kind == "rank":
        return (0,) * draw(st.sampled_from([1, 3])), shape, "rank"
    if kind == "range":
        d = draw(st.integers(0, 1))
        c = [0, 0]
        c[d] = shape[d] + draw(st.integers(0, 5))
        return tuple(c), shape, f"dimension {d} is out of range"
    if kind == "product":
        return (0, 0), (shape[0] + 1, shape[1]), f"but the layout has {size}"
    return (0, 0), (shape[0], 0), "positive ints"
