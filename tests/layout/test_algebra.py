"""Laws of group / slice_layout / permute_dims / tile_product / direct_sum (tirxpy/layout/algebra.py).

Each law has one post-condition helper checked over the whole domain; expected owners come
from ``Layout.owners`` of the input (tested against a reference in test_tile.py).
"""
from math import prod

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.testing import aligned_shapes, compose_layouts, domain, norm, owner_set, regions, shapes, tile_layouts
from tirxpy.layout import (
    ComposeLayout, Iter, LayoutError, S, SwizzleLayout, TileLayout, direct_sum, group, laneid, permute_dims,
    slice_layout, split_iter, tile_product, warpid,
)


# ---- post-condition helpers ----
def check_group(L, shape, res):
    G, ranges = res
    assert [a for a, _ in ranges] == [0] + [b for _, b in ranges[:-1]] and ranges[-1][1] == len(G.shard)
    for (a, b), n in zip(ranges, shape):
        assert prod(it.extent for it in G.shard[a:b]) == n
    for c in domain(shape):
        assert G.owners(c, shape=shape) == L.owners(c, shape=shape)


def check_slice(L, shape, region, R):
    rshape = tuple(b - a for a, b in region)
    assert R.size() == prod(rshape)
    for c in domain(rshape):
        src = tuple(a + x for (a, _), x in zip(region, c))
        assert norm(R.owners(c, shape=rshape)) == norm(L.owners(src, shape=shape))


def check_permute(L, shape, perm, P):
    pshape = tuple(shape[p] for p in perm)
    for c in domain(shape):
        pc = tuple(c[p] for p in perm)
        assert norm(P.owners(pc, shape=pshape)) == norm(L.owners(c, shape=shape))


def add(a, b):
    return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}


def check_tile(inner, outer, ishape, oshape, T):
    shape = tuple(o * n for o, n in zip(oshape, ishape))
    assert T.size() == prod(shape)
    for x in domain(shape):
        hi = tuple(v // n for v, n in zip(x, ishape))
        lo = tuple(v % n for v, n in zip(x, ishape))
        want = [add(a, b) for a in outer.owners(hi, shape=oshape) for b in inner.owners(lo, shape=ishape)]
        assert owner_set(T.owners(x, shape=shape)) == owner_set(want)


# ---- group ----
@given(st.data())
def test_group_aligned_shapes_always_group(data):
    L = data.draw(tile_layouts())
    shape = data.draw(aligned_shapes(L))
    res = group(L, shape)
    assert res is not None
    check_group(L, shape, res)


@given(st.data())
def test_group_random_shapes(data):
    L = data.draw(tile_layouts())
    shape = data.draw(shapes(L.size()))
    res = group(L, shape)
    if res is None:
        with pytest.raises(LayoutError, match="does not align"):
            L.group(shape)
    else:
        check_group(L, shape, res)
        assert L.group(shape) == res


def test_group_examples():
    assert group(TileLayout(S[(4, 6) : (6, 1)]), (3, 8)) is None
    G, r = group(TileLayout(S[(4, 8) : (8, 1)]), (2, 16))
    assert r == [(0, 1), (1, 3)] and [it.extent for it in G.shard] == [2, 2, 8]


# ---- slice ----
@given(st.data())
def test_slice_postcondition(data):
    L = data.draw(tile_layouts())
    shape = data.draw(st.one_of(aligned_shapes(L), shapes(L.size())))
    region = data.draw(regions(shape))
    R = slice_layout(L, region, shape)
    if R is None:
        with pytest.raises(LayoutError, match="dimension"):
            L.slice(region, shape)
    else:
        check_slice(L, shape, region, R)
        assert L.slice([slice(a, b) for a, b in region], shape) == R


@given(st.data())
def test_slice_boxes_always_slice(data):
    """A single element, the whole tile, and any range of a single-digit dimension are boxes."""
    L = data.draw(tile_layouts())
    shape = data.draw(aligned_shapes(L))
    c = data.draw(st.tuples(*(st.integers(0, n - 1) for n in shape)))
    for region in ([(x, x + 1) for x in c], [(0, n) for n in shape]):
        R = slice_layout(L, region, shape)
        assert R is not None
        check_slice(L, shape, region, R)


@given(st.data())
def test_slice_compose_layout(data):
    L = data.draw(compose_layouts())
    shape = data.draw(aligned_shapes(L.tile_layout))
    region = data.draw(regions(shape))
    R = slice_layout(L, region, shape)
    if R is not None:
        assert isinstance(R, ComposeLayout) and R.swizzle == L.swizzle
        check_slice(L, shape, region, R)


def test_slice_view_of_swizzled_smem_tile():
    A = ComposeLayout(SwizzleLayout(3, 3, 3), TileLayout(S[(128, 64) : (64, 1)]))
    V = A.slice((slice(64, 128), slice(0, 64)), shape=(128, 64))
    check_slice(A, (128, 64), ((64, 128), (0, 64)), V)


def test_slice_wrap_reports_dimension():
    L = TileLayout(S[(2, 4) : (4 @ laneid, 1 @ warpid)])
    assert slice_layout(L, ((0, 1), (2, 6)), (1, 8)) is None
    with pytest.raises(LayoutError, match=r"dimension 1: region \[2, 6\) wraps"):
        L.slice(((0, 1), (2, 6)), (1, 8))
    with pytest.raises(LayoutError, match="dimension 0 of shape"):
        TileLayout(S[(4, 6) : (1 @ laneid, 1)]).slice(((0, 1), (0, 8)), (3, 8))


def test_slice_swizzle_outer_has_no_slice():
    L = ComposeLayout(SwizzleLayout(0, 1, 1), TileLayout(S[8 : 1]), swizzle_inner=False)
    assert slice_layout(L, [(0, 4)], (8,)) is None
    with pytest.raises(LayoutError, match="swizzle_inner=False"):
        L.slice([(0, 4)], (8,))


@pytest.mark.parametrize("region,shape,msg", [
    ([(0, 2)], (4, 8), "has 1 entries but shape"),
    ([(0, 2), slice(0, 8, 2)], (4, 8), "step 2"),
    ([(0, 2), (3, 3)], (4, 8), r"dimension 1: region \[3, 3\) is empty"),
    ([(0, 5), (0, 8)], (4, 8), r"dimension 0: region \[0, 5\)"),
    ([(-1, 2), (0, 8)], (4, 8), "outside"),
    ([(0, 2), (0, 1.5)], (4, 8), "must be ints"),
    ([(0, 2), 3], (4, 8), "must be a .start, stop. pair"),
    ([(0, 2), (0, 8)], (4, 4), "has 16 elements but the layout has 32"),
    ([(0, 2), (0, 8)], (4, 0), "positive ints"),
])
def test_slice_bad_input(region, shape, msg):
    L = TileLayout(S[(4, 8) : (8, 1)])
    with pytest.raises(LayoutError, match=msg):
        slice_layout(L, region, shape)


# ---- permute ----
@given(st.data())
def test_permute_postcondition(data):
    L = data.draw(st.one_of(tile_layouts(), compose_layouts()))
    base = L.tile_layout if isinstance(L, ComposeLayout) else L
    shape = data.draw(st.one_of(aligned_shapes(base), shapes(L.size())))
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    P = permute_dims(L, shape, perm)
    if P is None:
        with pytest.raises(LayoutError, match="does not align"):
            L.permute_dims(shape, perm)
    else:
        check_permute(L, shape, perm, P)


@given(st.data())
def test_permute_aligned_always_succeeds_and_inverts(data):
    L = data.draw(tile_layouts())
    shape = data.draw(aligned_shapes(L))
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    P = permute_dims(L, shape, perm)
    assert P is not None
    inv = tuple(perm.index(d) for d in range(len(perm)))
    back = permute_dims(P, tuple(shape[p] for p in perm), inv)
    assert back.equivalent(L)


@pytest.mark.parametrize("perm", [(0, 0), (0,), (1, 2), "ab"])
def test_permute_bad_perm(perm):
    with pytest.raises(LayoutError, match="must be a permutation"):
        permute_dims(TileLayout(S[(4, 8) : (8, 1)]), (4, 8), perm)


# ---- tile ----
@given(st.data())
def test_tile_postcondition(data):
    inner = data.draw(tile_layouts(axes=("m", "laneid", "TLane"), max_size=32))
    outer = data.draw(tile_layouts(axes=("m", "warpid", "TCol"), max_size=16))
    ishape = data.draw(st.one_of(aligned_shapes(inner), shapes(inner.size())))
    oshape = data.draw(shapes(outer.size(), rank=len(ishape)))
    T = tile_product(inner, outer, ishape, oshape)
    if T is None:
        with pytest.raises(LayoutError, match="(inner|outer): dimension"):
            inner.tile(outer, ishape, oshape)
    else:
        check_tile(inner, outer, ishape, oshape, T)


def test_tile_example_mma_fragment_grid():
    inner = TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])          # one 8x4 tile over a warp
    outer = TileLayout(S[(2, 2) : (1 @ warpid, 2 @ warpid)])           # 2x2 tiles over 4 warps
    T = inner.tile(outer, (8, 4), (2, 2))
    check_tile(inner, outer, (8, 4), (2, 2), T)
    assert T.apply(9, 5, shape=(16, 8)) == {"warpid": 3, "laneid": 5}


def test_tile_bad_input():
    a = TileLayout(S[(2, 4) : (4, 1)])
    with pytest.raises(LayoutError, match="same rank"):
        tile_product(a, a, (2, 4), (8,))
    with pytest.raises(LayoutError, match="outer_shape"):
        tile_product(a, a, (2, 4), (2, 2))
    with pytest.raises(LayoutError, match=r"tile \(outer\) takes a TileLayout"):
        tile_product(a, "x", (2, 4), (2, 4))
    with pytest.raises(LayoutError, match="only 32 values on laneid"):
        tile_product(TileLayout(S[32 : 1 @ laneid]), TileLayout(S[2 : 1 @ laneid]), (32,), (2,))


# ---- direct sum ----
@given(tile_layouts(axes=("m", "laneid"), max_size=32, max_replica=1),
       tile_layouts(axes=("m", "warpid"), max_size=16, max_replica=1))
def test_direct_sum_postcondition(a, b):
    D = direct_sum(a, b)
    assert D.size() == a.size() * b.size()
    for i in range(a.size()):
        for j in range(b.size()):
            want = [add(x, y) for x in a.owners(i) for y in b.owners(j)]
            assert norm(D.owners(i * b.size() + j)) == norm(want)
    assert a.direct_sum(b) == D


def test_direct_sum_bad_input():
    with pytest.raises(LayoutError, match="direct_sum takes a TileLayout"):
        direct_sum(TileLayout(S[2 : 1]), 3)


# ---- split_iter ----
@given(st.sampled_from([2, 4, 6, 8, 12]), st.integers(0, 5), st.data())
def test_split_iter_same_walk(e, s, data):
    f = data.draw(st.sampled_from([d for d in range(1, e + 1) if e % d == 0]))
    hi, lo = split_iter(Iter(e, s), f)
    assert (hi.extent, lo.extent) == (e // f, f)
    assert [a * hi.stride + b * lo.stride for a in range(hi.extent) for b in range(lo.extent)] == [c * s for c in range(e)]


@pytest.mark.parametrize("f", [3, 0, 2.0])
def test_split_iter_bad_factor(f):
    with pytest.raises(LayoutError, match="positive divisor of 8"):
        split_iter(Iter(8, 1), f)


def test_group_rejects_compose_layout():
    L = ComposeLayout(SwizzleLayout(0, 1, 1), TileLayout(S[(4, 4) : (4, 1)]))
    with pytest.raises(LayoutError, match="group takes a TileLayout, got ComposeLayout"):
        group(L, (4, 4))


def test_slice_one_dimensional_pair_and_slice_forms():
    L = TileLayout(S[32 : 1 @ laneid])
    assert L.slice((8, 16), 32) == L.slice(slice(8, 16), (32,)) == L.slice([(8, 16)], (32,))
    check_slice(L, (32,), [(8, 16)], L.slice((8, 16), 32))


def test_slice_keeps_the_pinned_thread_axis():
    from tirxpy.layout.atoms import wgmma_accumulator

    view = slice_layout(wgmma_accumulator(16), ((0, 16), (0, 16)), (64, 16))
    assert view.offset == {"wid_in_wg": 0}                 # warp 0 of the warpgroup, not every warp
    assert view.elements_at(wid_in_wg=0, laneid=0, m=0) == [0]


def test_tile_product_argument_order():
    from tirxpy.layout import laneid, warpid

    inner, outer = TileLayout(S[4 : 1 @ laneid]), TileLayout(S[2 : 1 @ warpid])
    assert tile_product(inner, outer, (4,), (2,)).owners(5) == [{"warpid": 1, "laneid": 1}]
