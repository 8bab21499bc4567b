"""The rank axis (tirxpy/layout/ranks.py): sharded / replicated layouts, owners across ranks, which peer
holds a region. Property-tested against a brute-force enumeration of every element's owners."""
import itertools
from math import prod

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy.layout import Axis, LayoutError, S, TileLayout, laneid, peer_of, rank, ranks_of, replicated, sharded
from tirxpy.layout.errors import LayoutTypeError


@st.composite
def sharded_case(draw):
    """(shape, world, dim, layout) with every dimension small."""
    nd = draw(st.integers(1, 3))
    world = draw(st.integers(1, 4))
    dim = draw(st.integers(0, nd - 1))
    shape = [draw(st.integers(1, 4)) for _ in range(nd)]
    shape[dim] *= world
    return tuple(shape), world, dim, sharded(tuple(shape), world, dim)


@st.composite
def region_of(draw, shape):
    out = []
    for n in shape:
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, n))
        out.append((a, b))
    return tuple(out)


def _brute_ranks(L, region, shape):
    out = set()
    for c in itertools.product(*(range(a, b) for a, b in region)):
        for o in L.owners(*c, shape=shape):
            out.add(o["rank"])
    return sorted(out)


def test_rank_axis_is_registered_and_free_when_left_out():
    assert Axis.get("rank") is rank and rank.kind == "rank" and not rank.is_memory
    L = TileLayout(S[8 : 1@laneid])
    assert "rank" not in L.owners(3)[0]          # free: every rank holds it
    assert ranks_of(L, ((0, 8),), (8,)) == []


@settings(max_examples=60, deadline=None)
@given(sharded_case())
def test_owner_rank_is_the_block_of_the_sharded_dim(case):
    shape, world, dim, L = case
    blk = shape[dim] // world
    local = list(shape)
    local[dim] = blk
    for c in itertools.product(*(range(n) for n in shape)):
        (o,) = L.owners(*c, shape=shape)
        assert o["rank"] == c[dim] // blk
        lc = list(c)
        lc[dim] %= blk
        assert o.get("m", 0) == sum(x * prod(local[k + 1:]) for k, x in enumerate(lc))
    assert L.is_injective()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_ranks_of_matches_enumeration(data):
    shape, world, dim, L = data.draw(sharded_case())
    region = data.draw(region_of(shape))
    assert ranks_of(L, region, shape) == _brute_ranks(L, region, shape)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_peer_of_slices_to_the_local_layout(data):
    shape, world, dim, L = data.draw(sharded_case())
    region = data.draw(region_of(shape))
    held = _brute_ranks(L, region, shape)
    if len(held) > 1:
        with pytest.raises(LayoutError, match="spans ranks|not one strided box"):
            peer_of(L, region, shape)
        return
    try:
        who, loc = peer_of(L, region, shape)
    except LayoutError as e:       # a single-rank region that is no strided box of the layout
        assert "not one strided box" in str(e)
        return
    assert who == held[0] and "rank" not in loc.axes()
    sub_shape = tuple(b - a for a, b in region)
    for c in itertools.product(*(range(n) for n in sub_shape)):
        full = tuple(a + x for (a, _), x in zip(region, c))
        (o,) = L.owners(*full, shape=shape)
        (lo,) = loc.owners(*c, shape=sub_shape)
        assert lo.get("m", 0) == o.get("m", 0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6))
def test_replicated_every_rank_owns_and_me_reads_locally(world, n):
    L = replicated((n,), world)
    assert [o["rank"] for o in L.owners(n - 1)] == list(range(world))
    assert ranks_of(L, ((0, n),), (n,)) == list(range(world))
    for me in range(world):
        assert peer_of(L, ((0, n),), (n,), me=me)[0] == me


@settings(max_examples=40, deadline=None)
@given(sharded_case())
def test_canonical_form_keeps_the_owners_across_ranks(case):
    shape, world, dim, L = case
    assert L.canonicalize().equivalent(L)


@pytest.mark.parametrize("call,err,msg", [
    (lambda: sharded((3, 4), 2), LayoutError, "not a multiple of world = 2"),
    (lambda: sharded((4, 4), 0), LayoutError, "at least one rank"),
    (lambda: sharded((4, 4), 2, dim=2), LayoutError, "dim 2 is not a dimension"),
    (lambda: sharded("x", 2), LayoutTypeError, "non-empty tuple"),
    (lambda: ranks_of("L", ((0, 1),), (1,)), LayoutTypeError, "takes a layout"),
    (lambda: peer_of(sharded((4,), 2), ((1, 3),), (4,)), LayoutError, "spans ranks \\[0, 1\\]"),
])
def test_bad_input_is_a_typed_error(call, err, msg):
    with pytest.raises(err, match=msg):
        call()


@given(st.integers(max_value=-1), st.sampled_from(["plain", "replicated", "sharded"]))
def test_peer_of_refuses_a_negative_me(me, kind):
    """me is a rank (an int >= 0): me=-5 was returned as the peer of a layout that does not name rank."""
    L = {"plain": TileLayout(S[4 : 1]), "replicated": replicated((4,), 2), "sharded": sharded((4,), 2)}[kind]
    with pytest.raises(LayoutError, match="me .*must be an integer >= 0"):
        peer_of(L, ((0, 2),), (4,), me=me)
    with pytest.raises(LayoutTypeError, match="me"):
        peer_of(L, ((0, 2),), (4,), me=1.0)


@given(sharded_case())
def test_numpy_ints_are_the_ints_they_are(case):
    """sharded(np.int64(4), 2) was refused as 'not a tuple of positive ints'."""
    import numpy as np

    shape, world, dim, L = case
    assert sharded(tuple(np.int64(n) for n in shape), np.int64(world), np.int64(dim)).identical(L)
    if len(shape) == 1:
        assert sharded(np.int64(shape[0]), world).identical(L)
        assert replicated(np.int32(shape[0]), world).identical(replicated(shape, world))
    me = np.int64(world - 1)
    assert peer_of(replicated(shape, world), [(0, 1)] * len(shape), shape, me=me)[0] == world - 1


@given(st.integers(1, 4), st.integers(0, 6), st.sampled_from(["plain", "replicated", "sharded"]))
def test_peer_of_with_world_refuses_a_me_or_a_rank_outside_the_group(world, me, kind):
    """With ``world`` given, ``me`` must be a rank of the group (``[0, world)``: ``me = world`` was returned as the
    peer of a layout that does not name rank), and so must the rank the layout places the region on."""
    L = {"plain": TileLayout(S[4 : 1]), "replicated": replicated((4,), world), "sharded": sharded((4,), 2)}[kind]
    region = ((2, 4),)
    if me >= world:
        with pytest.raises(LayoutError, match=rf"me = {me} is not a rank of a group of world = {world} ranks"):
            peer_of(L, region, (4,), me=me, world=world)
    elif kind == "sharded" and world < 2:
        with pytest.raises(LayoutError, match=rf"on rank 1, outside a group of world = {world} ranks"):
            peer_of(L, region, (4,), me=me, world=world)
    else:
        assert peer_of(L, region, (4,), me=me, world=world) == peer_of(L, region, (4,), me=me)
    with pytest.raises(LayoutError, match="at least one rank"):
        peer_of(L, region, (4,), me=0, world=0)
