"""The layout strategies draw valid layouts of the kinds they promise."""
from math import prod

from hypothesis import find, given, settings, strategies as st

from tirxpy.layout import ComposeLayout, TileLayout, equivalent, hardware_swizzle_bytes
from tirxpy.testing import (
    BOUNDS, compose_layouts, hardware_atoms, memory_layouts, owner_set, split_layouts, swizzled_layouts, tile_layouts,
)
from tirxpy.testing.layouts import _atom_makers, bad_queries, iter_lists


@given(tile_layouts())
def test_tile_layouts_stay_within_the_hardware_bounds(L):
    assert isinstance(L, TileLayout) and L.size() <= 256
    for i in range(L.size()):
        for o in L.owners(i):
            for axis, v in o.items():
                assert v < BOUNDS.get(axis, 1 << 30), (L, axis, v)


@given(tile_layouts(replicas=False, offsets=False))
def test_without_replicas_and_offsets(L):
    assert not L.replica and not L.offset


def test_layouts_with_replicas_and_offsets_are_drawn():
    L = find(tile_layouts(), lambda L: L.replica_count > 1 and any(L.offset.values()))
    assert L.replica_count > 1 and any(L.offset.values())


@given(memory_layouts())
def test_memory_layouts_use_m_only(L):
    assert set(L.axes()) <= {"m"}


@given(compose_layouts())
def test_compose_layouts_are_swizzled(C):
    assert isinstance(C, ComposeLayout)


@given(swizzled_layouts())
def test_swizzled_layouts_are_hardware_swizzles_and_permute_their_tile(C):
    assert isinstance(C, ComposeLayout)
    assert sorted(C.apply(i)["m"] for i in range(C.size())) == list(range(C.size()))


def test_swizzled_layouts_cover_every_hardware_mode():
    modes = set()

    @settings(max_examples=100)
    @given(swizzled_layouts(dtypes=("bf16",)))
    def collect(C):
        modes.add(hardware_swizzle_bytes(C.swizzle, "bf16"))

    collect()
    assert modes == {32, 64, 128}


def test_every_hardware_atom_matches_its_shape():
    atoms = _atom_makers()
    assert len({name for name, *_ in atoms}) == len(atoms)
    for name, make, shape in atoms:
        assert prod(shape) == make().size(), name


@given(hardware_atoms())
def test_hardware_atoms_answer_owners_on_their_shape(atom):
    last = tuple(d - 1 for d in atom.shape)
    assert atom.layout.owners(*last, shape=atom.shape)


@given(st.data())
def test_split_layouts_are_equivalent(data):
    L = data.draw(tile_layouts(max_size=64))
    M = data.draw(split_layouts(L))
    assert equivalent(L, M)
    assert all(owner_set(L.owners(i)) == owner_set(M.owners(i)) for i in range(L.size()))


def test_layout_strategies_check_their_arguments_when_called():
    """tile_layouts(max_shard=-1) raised hypothesis InvalidArgument when drawn, split_layouts(5) AttributeError."""
    import pytest

    from tirxpy.layout.errors import LayoutError

    for call, msg in [
        (lambda: tile_layouts(max_shard=-1), "tile_layouts: max_shard is -1"),
        (lambda: tile_layouts(max_replica=65), "tile_layouts: max_replica is 65, past 64 .the limit MAX_ITERS"),
        (lambda: tile_layouts(max_size=0), "tile_layouts: max_size is 0"),
        (lambda: tile_layouts(max_size=2.0), "tile_layouts: max_size must be an integer"),
        (lambda: tile_layouts(axes=()), "tile_layouts: axes must be a non-empty tuple"),
        (lambda: tile_layouts(axes="m"), "tile_layouts: axes must be a non-empty tuple"),
        (lambda: tile_layouts(axes=("nope",)), "tile_layouts: axes: unknown axis 'nope'"),
        (lambda: tile_layouts(offsets=None), "tile_layouts: offsets must be True or False"),
        (lambda: memory_layouts(replicas=1), "tile_layouts: replicas must be True or False"),
        (lambda: split_layouts(5), "split_layouts: L must be a TileLayout"),
        (lambda: swizzled_layouts(dtypes=("f99",)), "swizzled_layouts: dtypes: unknown dtype"),
        (lambda: swizzled_layouts(max_rows=4), "swizzled_layouts: max_rows is 4"),
        (lambda: iter_lists(-1, {}, ("m",), 8), "iter_lists: n_max is -1"),
        (lambda: iter_lists(2, None, ("m",), 8), "iter_lists: reach must be a dict"),
        (lambda: iter_lists(2, {"laneid": 100}, ("laneid",), 8), r"iter_lists: reach\['laneid'\] is 100, past 31"),
        (lambda: iter_lists(2, {"laneid": "x"}, ("laneid",), 8), r"iter_lists: reach\['laneid'\] must be an integer"),
        (lambda: iter_lists(2, {"nope": 1}, ("m",), 8), "iter_lists: reach: unknown axis 'nope'"),
        (lambda: bad_queries(5), "bad_queries: L must be a layout"),
    ]:
        with pytest.raises(LayoutError, match=msg):
            call()


@settings(deadline=None)
@given(st.data(), st.sampled_from([2**61 - 1, 2**62, 2**32 * 3**20, 2**63 - 25]))
def test_split_layouts_of_huge_extents_are_quick_and_equivalent(data, n):
    """split_layouts walked every number below an iterator's extent looking for divisors."""
    from tirxpy.layout import Iter
    from tirxpy.layout.errors import MAX_ITERS

    L = TileLayout.from_iters([Iter(n, 1)], [Iter(2, 0, "laneid")])
    M = data.draw(split_layouts(L))
    assert M.size() == n and M.replica_count == 2
    assert all(L.apply(i) == M.apply(i) for i in (0, 1, n // 3, n - 1))
    W = TileLayout.from_iters([Iter(4, 1)] + [Iter(1, 0)] * (MAX_ITERS - 1))   # full: no room to split or insert
    assert len(data.draw(split_layouts(W)).shard) == MAX_ITERS


REACH = {"laneid": 20}


@settings(max_examples=200, database=None)
@given(iter_lists(4, REACH, ("laneid",), 64))
def test_iter_lists_start_every_draw_from_reach_and_leave_it_alone(its):
    """Each draw stays within laneid's 32 values above the coordinate 20 that reach gives; the caller's dict
    is not grown by the draws (it was, so later draws differed on replay and their strides went to 0)."""
    assert REACH == {"laneid": 20}
    top = 20 + sum((it.extent - 1) * it.stride for it in its)
    assert top <= 31, its


def test_compose_layouts_over_drawn_tiles_reach_every_kind():
    """compose_layouts(tiles=...) draws inner and outer swizzles of parameters past the default's (P <= 2,
    A <= 3), over tiles with offsets and replicas; every draw is a valid layout."""
    seen = set()

    @settings(max_examples=200, database=None)
    @given(compose_layouts(tiles=tile_layouts(), swizzle_inner=None))
    def collect(C):
        assert isinstance(C, ComposeLayout)
        C.check_well_formed()
        if not C.swizzle_inner:
            assert C.size() % C.swizzle.period == 0 or C.size() <= 1 << (C.swizzle.per_element + C.swizzle.atom_len)
        seen.add(("outer" if not C.swizzle_inner else "inner", C.swizzle.per_element > 2 or C.swizzle.atom_len > 3,
                  bool(C.tile_layout.replica), bool(C.tile_layout.offset)))

    collect()
    assert {k[0] for k in seen} == {"inner", "outer"} and any(k[1] for k in seen)
    assert any(k[2] for k in seen) and any(k[3] for k in seen)


@given(compose_layouts(swizzle_inner=False))
def test_compose_layouts_draw_outer_swizzles_on_request(C):
    assert not C.swizzle_inner and C.size() % C.swizzle.period == 0


@given(tile_layouts(axes=("m", "laneid", "rank"), extents=(1, 5, 7), max_stride=100, max_offset=1 << 30))
def test_tile_layouts_draw_the_extents_and_strides_asked_for(L):
    assert all(it.extent in (1, 5, 7) for it in L.shard + L.replica)
    assert all(it.stride <= 100 for it in L.shard + L.replica)
    assert all(o.get("laneid", 0) < 32 for i in range(L.size()) for o in L.owners(i))


def test_new_strategy_arguments_are_checked_when_called():
    import pytest

    from tirxpy.layout.errors import LayoutError

    for call, msg in [
        (lambda: tile_layouts(extents=()), "tile_layouts: extents must be a non-empty tuple"),
        (lambda: tile_layouts(extents=(0, 2)), "tile_layouts: extents is 0"),
        (lambda: tile_layouts(max_stride=-1), "tile_layouts: max_stride is -1"),
        (lambda: tile_layouts(max_offset=1.5), "tile_layouts: max_offset must be an integer"),
        (lambda: compose_layouts(tiles=5), "compose_layouts: tiles must be a strategy"),
        (lambda: compose_layouts(swizzle_inner="yes"), "compose_layouts: swizzle_inner must be True or False"),
    ]:
        with pytest.raises(LayoutError, match=msg):
            call()


def test_memory_layouts_take_no_axes():
    import pytest

    from tirxpy.layout.errors import LayoutTypeError
    from tirxpy.testing import memory_layouts

    with pytest.raises(LayoutTypeError, match=r"memory_layouts draws on the axis m only, so it takes no axes="):
        memory_layouts(axes=("laneid",))
