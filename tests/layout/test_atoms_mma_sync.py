"""mma.sync.m16n8k16 fragments against PTX ISA 9.7.14.5.8 (Figures 79, 81, 83) formulas."""
import pytest

from tirxpy.layout import LayoutError
from tirxpy.layout.atoms import mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c

from ._atom_check import assert_layout_matches, placement_from_reference


def ptx_a():
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            yield {"laneid": lane, "m": i}, (row, col)


def ptx_b():
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            row = t * 2 + (i & 1) + (8 if i >= 2 else 0)
            yield {"laneid": lane, "m": i}, (row, g)


def ptx_c():
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            row = g if i < 2 else g + 8
            yield {"laneid": lane, "m": i}, (row, t * 2 + (i & 1))


@pytest.mark.parametrize(
    "atom, ref, shape",
    [(mma_m16n8k16_a, ptx_a, (16, 16)), (mma_m16n8k16_b, ptx_b, (16, 8)), (mma_m16n8k16_c, ptx_c, (16, 8))],
)
def test_fragment_matches_ptx(atom, ref, shape):
    L = atom()
    assert_layout_matches(L, placement_from_reference(ref(), shape), shape)
    assert L.is_injective()
    assert set(L.axes()) == {"laneid", "m"}


def test_bf16_same_as_f16():
    assert mma_m16n8k16_a("bf16").identical(mma_m16n8k16_a("f16"))
    assert mma_m16n8k16_b("bfloat16").identical(mma_m16n8k16_b())


@pytest.mark.parametrize("atom, bad", [(mma_m16n8k16_a, "f32"), (mma_m16n8k16_b, "e4m3"), (mma_m16n8k16_c, "f16")])
def test_bad_dtype(atom, bad):
    with pytest.raises(LayoutError, match=f"dtype must be one of .*got '{bad}'"):
        atom(bad)
