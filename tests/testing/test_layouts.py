"""The layout strategies draw valid layouts of the kinds they promise."""
from math import prod

from hypothesis import find, given, settings, strategies as st

from tirxpy.layout import ComposeLayout, TileLayout, equivalent, hardware_swizzle_bytes
from tirxpy.testing import (
    BOUNDS, compose_layouts, hardware_atoms, memory_layouts, owner_set, split_layouts, swizzled_layouts, tile_layouts,
)
from tirxpy.testing.layouts import _atom_makers


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
