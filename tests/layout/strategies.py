"""Hypothesis generators for the layout tests.

Valid generators produce only well-formed layouts (hardware bounds respected) of small size;
the invalid generators at the bottom produce inputs that must raise ``LayoutError``.
"""
from __future__ import annotations

import itertools
from math import prod

from hypothesis import strategies as st

from tirxpy.layout import ComposeLayout, Iter, SwizzleLayout, TileLayout

BOUNDS = {"laneid": 32, "wid_in_wg": 4, "tid_in_wg": 128, "TLane": 128, "TCol": 512, "Bank": 32,
          "wgid": 8, "warpid": 32, "tx": 1024}
AXES = ("m", "laneid", "warpid", "wid_in_wg", "tid_in_wg", "TLane", "TCol", "Bank", "wgid", "tx")
EXTENTS = (1, 2, 2, 3, 4, 4, 8)


@st.composite
def iter_lists(draw, n_max, reach, axes, max_size):
    """Iterators with in-bound reach; ``reach`` (axis -> highest coordinate) is updated."""
    out, size = [], 1
    for _ in range(draw(st.integers(0, n_max))):
        e = draw(st.sampled_from([x for x in EXTENTS if size * x <= max_size] or [1]))
        a = draw(st.sampled_from(axes))
        raw = draw(st.integers(0, 12))
        if a in BOUNDS and e > 1:
            raw = min(raw, (BOUNDS[a] - 1 - reach.get(a, 0)) // (e - 1))
        reach[a] = reach.get(a, 0) + (e - 1) * raw
        out.append(Iter(e, raw, a))
        size *= e
    return out


@st.composite
def tile_layouts(draw, axes=AXES, max_shard=4, max_replica=2, max_size=256, offsets=True, replicas=True):
    """A valid TileLayout on ``axes`` with size <= ``max_size``."""
    reach: dict = {}
    shard = draw(iter_lists(max_shard, reach, axes, max_size))
    replica = draw(iter_lists(max_replica, reach, axes, 8)) if replicas else []
    off = {}
    if offsets:
        for a in draw(st.lists(st.sampled_from(axes), max_size=2, unique=True)):
            hi = BOUNDS[a] - 1 - reach.get(a, 0) if a in BOUNDS else 40
            off[a] = draw(st.integers(0, max(hi, 0)))
    return TileLayout.from_iters(shard, replica, off)


def memory_layouts(**kw):
    """TileLayouts on m only (inner operands of compose)."""
    return tile_layouts(axes=("m",), **kw)


@st.composite
def compose_layouts(draw):
    """A ComposeLayout: a swizzle over a row-major (rows, cols) m-tile, maybe times a thread axis."""
    P, B = draw(st.integers(0, 2)), draw(st.integers(0, 3))
    A = draw(st.integers(B, 3))
    period = 1 << (P + A + B)
    cols = 1 << (P + A)
    rows = period // cols * draw(st.sampled_from([1, 2]))
    shard = [Iter(rows, cols), Iter(cols, 1)]
    if draw(st.booleans()) and rows * cols <= 256:
        shard.insert(draw(st.integers(0, 2)), Iter(draw(st.sampled_from([2, 4])), 1, "laneid"))
    return ComposeLayout(SwizzleLayout(P, B, A), TileLayout.from_iters(shard))


@st.composite
def shapes(draw, size, max_rank=3, rank=None):
    """A random shape whose product is ``size`` (may or may not align with the iterators)."""
    primes, n, p = [], size, 2
    while n > 1:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    primes = draw(st.permutations(primes))
    rank = rank or draw(st.integers(1, max_rank))
    dims = [1] * rank
    for q in primes:
        dims[draw(st.integers(0, rank - 1))] *= q
    return tuple(dims)


@st.composite
def aligned_shapes(draw, L, max_rank=3):
    """A shape made by merging adjacent shard extents of ``L``: ``group`` always succeeds."""
    ext = [it.extent for it in L.shard] or [1]
    cuts = sorted(draw(st.sets(st.integers(1, max(len(ext) - 1, 1)), max_size=max_rank - 1)))
    cuts = [c for c in cuts if c < len(ext)]
    bounds = [0] + cuts + [len(ext)]
    return tuple(prod(ext[a:b]) for a, b in zip(bounds, bounds[1:]))


@st.composite
def coords(draw, shape):
    """An in-range coordinate of ``shape``."""
    return tuple(draw(st.integers(0, n - 1)) for n in shape)


@st.composite
def regions(draw, shape):
    """A non-empty (start, stop) region of ``shape``."""
    out = []
    for n in shape:
        a = draw(st.integers(0, n - 1))
        out.append((a, draw(st.integers(a + 1, n))))
    return tuple(out)


def domain(shape):
    """Every coordinate of ``shape``, row-major."""
    return itertools.product(*(range(n) for n in shape))


def split_randomly(draw, L):
    """A layout in the same fusion/split class as ``L``: split shard and replica iterators at
    random divisors, insert extent-1 iterators and shuffle the replicas."""
    def split_all(its):
        out = []
        for it in its:
            divs = [d for d in range(2, it.extent) if it.extent % d == 0]
            if divs and draw(st.booleans()):
                f = draw(st.sampled_from(divs))
                out += [Iter(it.extent // f, it.stride * f, it.axis), Iter(f, it.stride, it.axis)]
            else:
                out.append(it)
            if draw(st.booleans()):   # extent 1 on m, or on an axis the layout names (else it would pin it)
                named = ["m"] + [a for a in L.axes() if a != "m"]
                out.append(Iter(1, draw(st.integers(0, 5)), draw(st.sampled_from(named))))
        return out

    replica = draw(st.permutations(split_all(L.replica)))
    return TileLayout.from_iters(split_all(L.shard), replica, L.offset)


# ---- invalid inputs: (thunk, expected message fragment) ----
def invalid_tile_inputs():
    """Constructors that must raise LayoutError, with the fragment the message must contain."""
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


def norm(owners):
    """Owner dicts with zero coordinates dropped (a missing axis reads 0), as a list."""
    return [{k: v for k, v in d.items() if v} for d in owners]


def owner_set(owners):
    """Owner dicts as a set of sorted (axis, value) tuples, zeros dropped."""
    return {tuple(sorted(d.items())) for d in norm(owners)}


@st.composite
def bad_queries(draw, L):
    """(coord, shape, message fragment) for an apply/owners call on ``L`` that must raise."""
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
