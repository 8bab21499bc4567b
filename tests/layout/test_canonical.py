"""Laws of canonicalize / equivalent / identical (tirxpy/layout/canonical.py)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.testing import compose_layouts, owner_set, split_layouts, tile_layouts
from tirxpy.layout import (
    ComposeLayout, Iter, LayoutError, R, S, TileLayout, canonicalize, equivalent, identical, laneid, warpid,
)
from tirxpy.layout.canonical import canonical_replica, fuse_shard


def same_owners(a, b):
    """Brute force over the domain: equal size, the same named thread / CTA axes (an unnamed one is
    free: every unit holds the element) and equal owner sets at every index (memory axes read 0)."""
    named = [{x for x in L.axes() if x not in ("m", "P", "F", "Bank", "TLane", "TCol")} for L in (a, b)]
    return a.size() == b.size() and named[0] == named[1] and all(owner_set(a.owners(i)) == owner_set(b.owners(i)) for i in range(a.size()))


def check_canonical_form(C):
    """No extent-1 iterator, no fusable adjacent shard pair, replicas sorted and unfusable."""
    assert all(it.extent > 1 for it in C.shard + C.replica)
    for x, y in zip(C.shard, C.shard[1:]):
        assert not (x.axis is y.axis and x.stride == y.extent * y.stride)
    keys = [(it.axis.name, it.stride, it.extent) for it in C.replica]
    assert keys == sorted(keys)
    for x in C.replica:
        assert x.stride > 0
        for y in C.replica:
            assert not (x is not y and x.axis is y.axis and x.stride == y.extent * y.stride)


@given(tile_layouts())
def test_canonicalize_preserves_owners_and_is_idempotent(L):
    C = canonicalize(L)
    assert same_owners(C, L)
    check_canonical_form(C)
    assert identical(canonicalize(C), C)
    assert L.canonicalize() == C


@given(st.data())
def test_canonicalize_unique_over_split_class(data):
    L = data.draw(tile_layouts())
    a = data.draw(split_layouts(L))
    b = data.draw(split_layouts(a))
    assert same_owners(a, L) and same_owners(b, L)
    assert identical(canonicalize(a), canonicalize(b))
    assert identical(canonicalize(a), canonicalize(L))


def test_canonicalize_replica_classes_with_overlap():
    # {4:1, 4:2} and {8:1, 2:2} are splits of the same iterators (2:4, 2:2, 2:1, 2:2).
    a = TileLayout(S[2 : 1] + R[(4, 4) : (1, 2)])
    b = TileLayout(S[2 : 1] + R[(8, 2) : (1, 2)])
    assert same_owners(a, b)
    assert identical(canonicalize(a), canonicalize(b))


@given(compose_layouts())
def test_canonicalize_compose_keeps_swizzle(L):
    C = canonicalize(L)
    assert isinstance(C, ComposeLayout) and C.swizzle == L.swizzle
    assert same_owners(C, L)


def test_examples():
    assert fuse_shard([Iter(2, 8), Iter(4, 2), Iter(2, 1, "laneid")]) == (Iter(8, 2), Iter(2, 1, "laneid"))
    assert canonical_replica([Iter(2, 0, "laneid"), Iter(1, 5)]) == ()
    L = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)
    assert canonicalize(L) == L  # already canonical


# ---- equivalence is an equivalence relation; identical implies equivalent ----
@given(tile_layouts(max_size=32), tile_layouts(max_size=32), tile_layouts(max_size=32))
def test_equivalence_relation(a, b, c):
    assert equivalent(a, a)
    assert equivalent(a, b) == equivalent(b, a) == same_owners(a, b)
    if equivalent(a, b) and equivalent(b, c):
        assert equivalent(a, c)
    if identical(a, b):
        assert equivalent(a, b)


@given(st.data())
def test_equivalence_relation_within_a_class(data):
    a = data.draw(tile_layouts())
    b = data.draw(split_layouts(a))
    c = data.draw(split_layouts(b))
    assert equivalent(a, b) and equivalent(b, a) and equivalent(b, c) and equivalent(a, c)


@pytest.mark.parametrize("call,msg", [
    (lambda: canonicalize("S[4:1]"), "canonicalize takes a TileLayout or ComposeLayout, got str"),
    (lambda: equivalent(3, TileLayout(S[4 : 1])), "compares two layouts, got int"),
    (lambda: equivalent(TileLayout(S[4 : 1]), 3), "compares two layouts, got int"),
    (lambda: identical(TileLayout(S[4 : 1]), None), "got TileLayout and NoneType"),
])
def test_bad_input(call, msg):
    with pytest.raises(LayoutError, match=msg):
        call()


def test_canonical_form_keeps_named_thread_axes():
    pinned = TileLayout.from_iters([Iter(4, 1), Iter(1, 5, "laneid")], [Iter(3, 0, "warpid")])
    c = canonicalize(pinned)
    assert c.identical(TileLayout.from_iters([Iter(4, 1)], [], {"laneid": 0, "warpid": 0}))
    assert equivalent(c, pinned) and not equivalent(c, TileLayout.from_iters([Iter(4, 1)]))
