"""Laws of the layout algebra that the per-module tests leave out, and the counterexamples that broke them.

Each expected value is derived from the definition (the layouts evaluated as functions, element by element),
never read off the code under test. The strategies are pushed to their edges here: every axis kind, extent-1
and prime extents, wide strides and offsets, replica-only layouts, swizzles of any parameters over any tile,
inner and outer swizzles.
"""
from math import prod

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tirxpy.layout
from tirxpy.layout import (
    ComposeLayout, Iter, LayoutError, S, SwizzleLayout, TileLayout, canonicalize, equivalent, hardware_swizzle_bytes,
    pack, peer_of, permute_dims, ranks_of, slice_layout, swizzle_for, unpack,
)
from tirxpy.layout.cli import parse_spec
from tirxpy.layout.errors import LayoutTypeError
from tests.layout.test_algebra_compose import packable
from tests.layout.test_tile import ref_owners as tile_ref_owners
from tirxpy.testing import (
    AXES, aligned_shapes, compose_layouts, domain, owner_set, regions, shapes, split_layouts, tile_layouts,
)

EDGE_AXES = AXES + ("P", "F", "pid", "cbx", "rank")
EDGE_EXTENTS = (1, 1, 2, 3, 5, 7, 16)


def edge_layouts(max_size=128):
    """Valid TileLayouts at the strategies' edges: every axis kind, many iterators, extent-1 and prime extents,
    strides up to 40, offsets up to 2**20 on unbounded axes."""
    return tile_layouts(axes=EDGE_AXES, max_shard=8, max_replica=3, max_size=max_size, extents=EDGE_EXTENTS,
                        max_stride=40, max_offset=1 << 20)


def any_compose_layouts(max_size=128):
    """A swizzle of any parameters over an edge tile, inner or outer."""
    return compose_layouts(tiles=edge_layouts(max_size), swizzle_inner=None)


def any_layouts(max_size=128):
    return st.one_of(edge_layouts(max_size), any_compose_layouts(max_size))


def ref_owners(L, i):
    """The definition: row-major digits of ``i`` over the shard extents; base = offset + sum digit * stride per
    axis; one owner per replica digit combination; a swizzle XORs bit P + b of m with bit P + A + b (b < B),
    applied to m (inner) or to ``i`` before the tile (outer)."""
    if isinstance(L, ComposeLayout):
        sw = L.swizzle

        def swz(x):
            for b in range(sw.swizzle_len):
                x ^= ((x >> (sw.per_element + sw.atom_len + b)) & 1) << (sw.per_element + b)
            return x

        if not L.swizzle_inner:
            return ref_owners(L.tile_layout, swz(i))
        return [dict(d, m=swz(d.get("m", 0))) for d in ref_owners(L.tile_layout, i)]
    return tile_ref_owners(L, i)


def held_by(L):
    """{owner coordinate: set of linear indices held there}, from the definition."""
    held = {}
    for i in range(L.size()):
        for o in ref_owners(L, i):
            held.setdefault(tuple(sorted((a, v) for a, v in o.items())), set()).add(i)
    return held


def named_threads(L):
    return {a for a in L.axes() if not tirxpy.layout.Axis.get(a).is_memory}


# ---- evaluation and the reverse query, over every kind of layout ----
@given(any_layouts())
def test_owners_are_the_definition_and_apply_is_the_first(L):
    for i in range(L.size()):
        assert owner_set(L.owners(i)) == owner_set(ref_owners(L, i))
        assert L.apply(i) == L.owners(i)[0]
        assert len(L.owners(i)) == L.replica_count_total()


@given(any_layouts(max_size=64))
def test_elements_at_inverts_owners_and_is_injective_agrees(L):
    held = held_by(L)
    for where, idx in held.items():
        assert set(L.elements_at(dict(where))) == idx
    assert L.is_injective() == all(len(v) == 1 for v in held.values())


@given(any_layouts(max_size=64))
def test_span_and_footprint_are_the_range_of_the_owners(L):
    for a in L.axes():
        col = [o.get(a, 0) for i in range(L.size()) for o in ref_owners(L, i)]
        assert L.span(a) == max(col) - min(col) + 1
        assert L._reach_upper()[a] >= max(col)          # the bound the int64 owner table is checked with
    if isinstance(L, ComposeLayout) and L.swizzle_inner:
        assert L.footprint() == 1 + max(o["m"] for i in range(L.size()) for o in ref_owners(L, i))


def test_swizzled_reach_bounds_the_swizzled_coordinates():
    """m = 5 (0b101) swizzles to 7 (bit 2 flips bit 1) past the tile's reach 6 | 0b10; the bound said 6."""
    L = ComposeLayout(SwizzleLayout(1, 1, 1), TileLayout(S[7 : 1]))
    assert max(L.apply(i)["m"] for i in range(7)) == 7
    assert L._reach_upper()["m"] >= 7


# ---- printing and parsing ----
@given(any_layouts(max_size=512))
def test_parse_of_repr_is_the_layout(L):
    assert parse_spec(repr(L)) == L
    assert eval(repr(L), vars(tirxpy.layout)) == L


# ---- swizzles ----
@given(st.integers(0, 6), st.integers(0, 6), st.integers(0, 8), st.integers(0, 1 << 20))
def test_a_swizzle_is_an_involution(P, B, extra, m):
    sw = SwizzleLayout(P, B, B + extra)
    assert sw.apply(sw.apply(m)) == m
    assert sw.apply(m) // sw.period == m // sw.period        # it stays in its aligned block


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: hardware_swizzle_bytes("SW128", "bf16"), LayoutTypeError, "takes a SwizzleLayout, got 'SW128'"),
    (lambda: swizzle_for(128.0, "bf16"), LayoutTypeError, "32, 64 or 128 bytes .an int., got 128.0"),
    (lambda: swizzle_for(True, "bf16"), LayoutTypeError, "32, 64 or 128 bytes"),
])
def test_swizzle_helpers_refuse_the_wrong_kind(call, exc, msg):
    """hardware_swizzle_bytes('SW128') raised AttributeError; swizzle_for(128.0) answered as for 128."""
    with pytest.raises(exc, match=msg):
        call()


# ---- canonical form and equivalence ----
@given(any_layouts(max_size=64))
def test_canonicalize_keeps_the_owners_and_the_named_axes(L):
    C = canonicalize(L)
    assert all(owner_set(C.owners(i)) == owner_set(ref_owners(L, i)) for i in range(L.size()))
    assert named_threads(C) == named_threads(L)
    assert canonicalize(C) == C and equivalent(C, L)


@given(st.data())
def test_equivalent_is_equal_owner_sets(data):
    a = data.draw(any_layouts(max_size=32))
    b = data.draw(st.one_of(any_layouts(max_size=32), st.just(canonicalize(a))))
    same = (a.size() == b.size() and named_threads(a) == named_threads(b)
            and all(owner_set(ref_owners(a, i)) == owner_set(ref_owners(b, i)) for i in range(a.size())))
    assert equivalent(a, b) == equivalent(b, a) == same


def test_equivalent_needs_no_table_within_a_split_class():
    """Two splits of a 2**30-element layout were refused (owner table past MAX_TABLE) though their canonical
    forms are identical."""
    a, b = TileLayout(S[2**30 : 1]), TileLayout(S[(2**15, 2**15) : (2**15, 1)])
    assert equivalent(a, b)


# ---- slice / permute over every kind of layout ----
@given(st.data())
def test_slice_and_permute_match_the_definition(data):
    L = data.draw(any_layouts(max_size=64))
    base = L.tile_layout if isinstance(L, ComposeLayout) else L
    shape = data.draw(st.one_of(aligned_shapes(base), shapes(L.size())))
    region = data.draw(regions(shape))
    rshape = tuple(b - a for a, b in region)
    sub = slice_layout(L, region, shape)
    if sub is not None:
        assert named_threads(sub) == named_threads(L)
        for c in domain(rshape):
            src = tuple(a + x for (a, _), x in zip(region, c))
            assert owner_set(sub.owners(c, shape=rshape)) == owner_set(ref_owners(L, flat(src, shape)))
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    P = permute_dims(L, shape, perm)
    if P is not None:
        assert named_threads(P) == named_threads(L)
        pshape = tuple(shape[p] for p in perm)
        for c in domain(shape):
            pc = tuple(c[p] for p in perm)
            assert owner_set(P.owners(pc, shape=pshape)) == owner_set(ref_owners(L, flat(c, shape)))


def flat(c, shape):
    return sum(x * prod(shape[k + 1:]) for k, x in enumerate(c))


def _affine(vals):
    """Brute force: some digit split of the index puts value ``i`` at ``base + sum digit * step``, each step
    non-negative and on one axis (what one TileLayout's base placement is)."""
    def factorizations(n):
        if n == 1:
            return [[]]
        return [[f] + r for f in range(2, n + 1) if n % f == 0 for r in factorizations(n // f)]

    axes = sorted(set().union(*vals))
    vec = [tuple(v.get(a, 0) for a in axes) for v in vals]
    for ext in factorizations(len(vec)):
        place = [prod(ext[k + 1:]) for k in range(len(ext))]
        steps = [tuple(x - b for x, b in zip(vec[p], vec[0])) for p in place]
        if any(x < 0 for s in steps for x in s) or any(sum(1 for x in s if x) > 1 for s in steps):
            continue
        if all(vec[i] == tuple(b + sum((i // p) % e * s[k] for p, e, s in zip(place, ext, steps))
                               for k, b in enumerate(vec[0])) for i in range(len(vec))):
            return True
    return False


def clamp_region(L, a, b):
    """A 1-d region [a', b') of L's linear index from two draws (a and b taken modulo what fits)."""
    n = L.size()
    a %= n
    return ((a, a + 1 + b % (n - a)),)


@example(TileLayout(S[(2, 2) : (1, 1)]), 1, 1)
@given(tile_layouts(axes=("m", "laneid"), max_size=24, replicas=False, extents=(1, 2, 3, 4), max_stride=4),
       st.integers(0, 23), st.integers(0, 23))
def test_slice_is_none_only_where_no_tile_layout_places_the_region(L, a, b):
    """The sub-tile elements 1, 2 of S[(2, 2) : (1, 1)] sit at m = 1, 1 (S[2 : 0] + 1@m) but slice said None:
    the region wraps inside the digits, and slicing only cut digits."""
    region = clamp_region(L, a, b)
    vals = [ref_owners(L, i)[0] for i in range(*region[0])]
    assert (slice_layout(L, region, (L.size(),)) is not None) == _affine(vals), (L, region)


# ---- pack / unpack respect the split class ----
@example((TileLayout(S[4 : 1]), 2), TileLayout.from_iters([Iter(4, 1)], [Iter(1, 3)]))
@given(packable(), st.none())
def test_pack_is_the_same_for_every_split_of_a_layout(Lf, M):
    """pack(2) of S[4 : 1] + R[1 : 3] (an extent-1 replica: no copy) refused 'm stride 3 of replica iterator 0'."""
    L, f = Lf
    for M in [M] if M is not None else [L]:
        packed = pack(M, f)
        for i in range(packed.size()):
            want = [dict(d, m=d.get("m", 0) // f) for d in ref_owners(L, i * f)]
            assert owner_set(packed.owners(i)) == owner_set(want)
        assert named_threads(packed) == named_threads(M)


@given(st.data())
def test_pack_of_a_split_layout_equals_pack_of_the_layout(data):
    L, f = data.draw(packable())
    M = data.draw(split_layouts(L))
    assert equivalent(pack(M, f), pack(L, f))
    assert equivalent(unpack(M, f), unpack(L, f))


# ---- the TMA dense-box check ----
def _first_out_of_place(L):
    base = ref_owners(L, 0)[0].get("m", 0)
    return next((i for i in range(L.size()) if ref_owners(L, i)[0].get("m", 0) - base != i), None)


@example(TileLayout(S[(2, 3, 2) : (8, 1, 1)]), (12,))
@example(TileLayout(S[(2, 3, 2) : (8, 1, 1)]), (2, 6))
@given(tile_layouts(axes=("m", "laneid"), max_size=64, replicas=False, extents=(1, 2, 3, 4), max_stride=16),
       st.none())
def test_dense_box_mismatch_names_an_element_out_of_place(L, box):
    """S[(2, 3, 2) : (8, 1, 1)] puts elements 0..11 at m = 0 1 1 2 2 3 8 9 9 10 10 11: the check tried only the
    steps 1 and n - 1 of each dimension (in place here) and said the box was dense. The answer is None exactly
    when every element is in place; otherwise the element it names is out of place, by the offsets it gives,
    and is the first in row-major order unless it is one of those steps."""
    box = box or (L.size(),)
    i = _first_out_of_place(L)
    got = L.dense_box_mismatch(box)
    if i is None:
        assert got is None
        return
    base = ref_owners(L, 0)[0].get("m", 0)
    el, off, want = got
    j = flat(el, box)
    assert want == j != off == ref_owners(L, j)[0].get("m", 0) - base
    steps = {flat(tuple(s if k == d else 0 for k in range(len(box))), box)
             for d in range(len(box)) for s in (1, box[d] - 1) if 0 < s < box[d]}
    assert j == i or j in steps


@given(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=4), st.data())
def test_every_split_of_a_dense_box_is_dense(dims, data):
    strides = [prod(dims[k + 1:]) for k in range(len(dims))]
    L = data.draw(split_layouts(TileLayout.from_iters([Iter(n, s) for n, s in zip(dims, strides)], [], {"m": 5})))
    assert L.dense_box_mismatch(tuple(dims)) is None


# ---- ranks: which GPU holds a region ----
@example(TileLayout.from_iters([Iter(2, 0, "rank"), Iter(4, 1)]), 0, 7)
@example(TileLayout.from_iters([Iter(2, 1, "rank")], [Iter(2, 1, "rank")]), 0, 1)
@given(tile_layouts(axes=("m", "rank", "laneid"), max_size=32, max_replica=2), st.integers(0, 31), st.integers(0, 31))
def test_ranks_of_and_peer_of_match_the_owners(L, a, b):
    """A rank digit of stride 0 (both halves on rank 0) made peer_of refuse, 'region spans ranks [0]'; so did
    S[2 : 1@rank] + R[2 : 1@rank], whose two elements are both on rank 1 ('spans ranks [0, 1, 2]')."""
    region = clamp_region(L, a, b)
    own = [ref_owners(L, i) for i in range(*region[0])]
    if "rank" not in L.axes():
        assert ranks_of(L, region, (L.size(),)) == []
        return
    assert ranks_of(L, region, (L.size(),)) == sorted({o["rank"] for os in own for o in os})
    on_all = set.intersection(*({o["rank"] for o in os} for os in own))
    try:
        who, local = peer_of(L, region, (L.size(),))
    except LayoutError as e:
        assert not on_all or "not one strided box" in str(e)
        return
    assert who == min(on_all) and local.size() == len(own) and "rank" not in local.axes()
    for j, os in enumerate(own):
        want = [{a: v for a, v in o.items() if a != "rank"} for o in os if o["rank"] == who]
        assert owner_set(local.owners(j)) == owner_set(want)
