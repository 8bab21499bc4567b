"""Shape, coordinate and region strategies keep their promises."""
from math import prod

import pytest
from hypothesis import given, settings, strategies as st

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


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_shapes_of_a_huge_prime(data):
    """A prime size (trial division up to it would not end) gives shapes of that product."""
    assert prod(data.draw(shapes(2**61 - 1, rank=2))) == 2**61 - 1


def test_shapes_checks_size_and_rank_when_called():
    import pytest

    from tirxpy.layout.errors import LayoutError

    for bad in (0, -4, 8.0, 2**64, True):       # 0 / -4 gave (1, 1, 1) (product 1), 8.0 a float product
        with pytest.raises(LayoutError, match="size"):
            shapes(bad)
    with pytest.raises(LayoutError, match="rank"):
        shapes(8, rank=0)


def test_domain_is_lazy_and_checks_its_shape():
    """domain((2**40,)) raised MemoryError (itertools.product materialized the range)."""
    import itertools

    import pytest

    from tirxpy.layout.errors import LayoutError

    assert list(itertools.islice(domain((2**40, 2**20)), 2)) == [(0, 0), (0, 1)]
    for bad in ((0,), (2**64,), (2.0,), "ab", None, ()):
        with pytest.raises(LayoutError, match="domain: shape"):
            domain(bad)


@given(st.one_of(st.integers(max_value=0), st.floats(), st.none(), st.text(), st.tuples(st.integers(max_value=0))))
def test_strategies_check_their_arguments_when_called(bad):
    """coords / regions raised hypothesis InvalidArgument or TypeError, aligned_shapes(5) AttributeError, and
    only when drawn; now each call raises LayoutError naming the strategy and the argument."""
    import pytest

    from tirxpy.layout.errors import LayoutError

    for fn, call in (("coords", lambda: coords(bad)), ("regions", lambda: regions(bad)),
                     ("aligned_shapes", lambda: aligned_shapes(bad)), ("shapes", lambda: shapes(bad)),
                     ("norm", lambda: norm(bad)), ("owner_set", lambda: owner_set(bad))):
        with pytest.raises(LayoutError, match=fn):
            call()
    from tirxpy.layout import S, TileLayout

    L = TileLayout(S[(4, 2) : (2, 1)])
    with pytest.raises(LayoutError, match="aligned_shapes: max_rank"):
        aligned_shapes(L, max_rank=bad)


@given(st.data())
def test_coords_and_regions_of_huge_shapes(data):
    shape = data.draw(st.lists(st.integers(1, 2**64 - 1), min_size=1, max_size=4).map(tuple))
    c = data.draw(coords(shape))
    assert all(0 <= x < n for x, n in zip(c, shape))
    assert all(0 <= a < b <= n for (a, b), n in zip(data.draw(regions(shape)), shape))


@pytest.mark.parametrize("owners", [[{"m": [1]}], [{"m": {1: 2}}], [{"m": 1, 3: 2}]])
def test_owner_set_of_owners_that_are_not_axis_to_int_is_refused(owners):
    from tirxpy.layout.errors import LayoutTypeError

    with pytest.raises(LayoutTypeError, match=r"owner_set: owners must map axis names to ints"):
        owner_set(owners)
