"""ldmatrix register layouts against PTX ISA 9.7.14.5.15 (Figure 104 and the .x2/.x4/.trans text)."""
import pytest

from tirxpy.layout import LayoutError
from tirxpy.layout.atoms import ldmatrix_layout, mma_m16n8k16_a

from ._atom_check import assert_layout_matches, placement_from_reference


def ptx_ldmatrix(num, trans, gr, gc):
    # Thread t receives, of each 8x8 matrix q (into register q), row t/4, elements 2*(t%4), +1;
    # with .trans the matrix is read column-major: column t/4, rows 2*(t%4), +1.
    for q in range(num):
        br, bc = 8 * (q % gr), 8 * (q // gr)
        for t in range(32):
            for j in range(2):
                a, b = t // 4, 2 * (t % 4) + j
                r, c = (b, a) if trans else (a, b)
                yield {"laneid": t, "m": 2 * q + j}, (br + r, bc + c)


CASES = [(1, (1, 1)), (2, (2, 1)), (2, (1, 2)), (4, (4, 1)), (4, (2, 2)), (4, (1, 4))]


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("num, grid", CASES)
def test_matches_ptx(num, grid, trans):
    shape = (8 * grid[0], 8 * grid[1])
    L = ldmatrix_layout(num, trans=trans, grid=grid)
    assert_layout_matches(L, placement_from_reference(ptx_ldmatrix(num, trans, *grid), shape), shape)
    assert L.is_injective()


def test_default_grid_stacks():
    assert ldmatrix_layout(4).identical(ldmatrix_layout(4, grid=(4, 1)))


def test_x4_grid_is_mma_a_fragment():
    assert ldmatrix_layout(4, grid=(2, 2)).equivalent(mma_m16n8k16_a())


@pytest.mark.parametrize("num", [0, 3, 8, "4", True])
def test_bad_num(num):
    with pytest.raises(LayoutError, match="ldmatrix .num .*must be one of 1, 2, 4"):
        ldmatrix_layout(num)


def test_bad_grid():
    with pytest.raises(LayoutError, match=r"grid \(2, 1\) holds 2 matrices but .x4 loads 4"):
        ldmatrix_layout(4, grid=(2, 1))
    with pytest.raises(LayoutError, match="grid must be a pair"):
        ldmatrix_layout(4, grid=4)


def test_bad_trans():
    with pytest.raises(LayoutError, match="trans must be True or False"):
        ldmatrix_layout(1, trans="yes")
