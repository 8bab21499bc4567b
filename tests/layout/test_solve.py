"""The table-free reverse query (tirxpy/layout/solve.py) against brute force."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.testing import tile_layouts
from tirxpy.layout import LayoutError, S, TileLayout
from tirxpy.layout.solve import elements_at


@given(st.data())
def test_matches_brute_force(data):
    L = data.draw(tile_layouts())
    axes = list(L.axes())
    if not axes:
        return
    i = data.draw(st.integers(0, L.size() - 1))
    own = L.owners(i)[-1]
    want = {a: own[a] for a in data.draw(st.lists(st.sampled_from(axes), unique=True, min_size=1))}
    brute = [j for j in range(L.size()) if any(all(o[a] == v for a, v in want.items()) for o in L.owners(j))]
    assert elements_at(L, want) == brute


def test_overlapping_strides_and_limits():
    assert elements_at(TileLayout(S[(3, 4) : (2, 3)]), {"m": 6}) == [2]   # 0 * 2 + 2 * 3; 3 * 2 is past extent 3
    with pytest.raises(LayoutError, match="took more than 262144 steps \\(the limit MAX_SEARCH\\)"):
        elements_at(TileLayout(S[(2**20, 2**20, 4) : (3, 5, 7)]), {"m": 2**21 + 1})
