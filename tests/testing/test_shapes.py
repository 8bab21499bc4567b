"""Shape, coordinate and region strategies keep their promises."""
from math import prod

from hypothesis import given, strategies as st

from tirxpy.layout import group
from tirxpy.testing import aligned_shapes, coords, domain, norm, owner_set, regions, shapes, tile_layouts


@given(st.data(), st.integers(1, 512), st.integers(1, 4))
def test_shapes_multiply_to_the_size(data, size, rank):
    shape = data.draw(shapes(size, rank=rank))
    assert prod(shape) == size and len(shape) == rank


@given(st.data())
def test_aligned_shapes_group(data):
    L = data.draw(tile_layouts(max_size=64))
    shape = data.draw(aligned_shapes(L))
    assert prod(shape) == L.size()
    group(L, shape)


@given(st.data())
def test_coords_and_regions_are_in_range(data):
    shape = data.draw(st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple))
    c = data.draw(coords(shape))
    assert all(0 <= x < n for x, n in zip(c, shape))
    r = data.draw(regions(shape))
    assert all(0 <= a < b <= n for (a, b), n in zip(r, shape))


def test_domain_and_owner_helpers():
    assert list(domain((2, 3)))[-1] == (1, 2) and len(list(domain((2, 3)))) == 6
    assert norm([{"m": 0, "laneid": 3}]) == [{"laneid": 3}]
    assert owner_set([{"m": 0, "laneid": 3}, {"laneid": 3}]) == {(("laneid", 3),)}


def test_shapes_of_huge_primes_and_bad_sizes():
    import time

    import pytest

    from tirxpy.layout.errors import LayoutError
    from tirxpy.testing import shapes

    t = time.perf_counter()
    assert prod(shapes(2**61 - 1, rank=2).example()) == 2**61 - 1     # a prime: trial division took ~2**61 steps
    assert time.perf_counter() - t < 5
    for bad in (0, -4, 8.0, 2**64, True):       # 0 / -4 gave (1, 1, 1) (product 1), 8.0 a float product
        with pytest.raises(LayoutError, match="size"):
            shapes(bad).example()
    with pytest.raises(LayoutError, match="rank"):
        shapes(8, rank=0).example()
