"""WGMMA register fragments against PTX ISA 9.7.15.5.1.1 (Figures 148, 149, 152)."""
import pytest

from tirxpy.layout import LayoutError
from tirxpy.layout.atoms import WGMMA_N, wgmma_a_fragment, wgmma_accumulator

from ._atom_check import assert_layout_matches, placement_from_reference


def ptx_d(n):
    # Figure 149: each warp holds 16 rows; per 8 columns the mma C fragment (d pairs).
    for w in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for reg in range(n // 2):
                nb, h, c = reg // 4, (reg // 2) % 2, reg % 2
                yield {"wid_in_wg": w, "laneid": lane, "m": reg}, (16 * w + 8 * h + g, 8 * nb + 2 * t + c)


def ptx_a16():
    for w in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for i in range(8):
                row = g if (i < 2 or 4 <= i < 6) else g + 8
                yield {"wid_in_wg": w, "laneid": lane, "m": i}, (16 * w + row, 2 * t + (i & 1) + (8 if i >= 4 else 0))


def ptx_a8():
    for w in range(4):
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for i in range(16):
                row = g if (i < 4 or 8 <= i < 12) else g + 8
                col = 4 * t + (i & 3) + (16 if i >= 8 else 0)
                yield {"wid_in_wg": w, "laneid": lane, "m": i}, (16 * w + row, col)


def test_legal_n_list():
    assert WGMMA_N == tuple(8 * i for i in range(1, 33))


@pytest.mark.parametrize("n", WGMMA_N)
def test_accumulator_every_n(n):
    L = wgmma_accumulator(n)
    assert_layout_matches(L, placement_from_reference(ptx_d(n), (64, n)), (64, n))
    assert L.is_injective() and L.size("m") == n // 2


def test_accumulator_design_doc_form():
    from tirxpy.layout import S, TileLayout, laneid, m, wid_in_wg

    for n in (8, 64, 256):
        ref = TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])
        assert wgmma_accumulator(n).identical(ref)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_fragment_16bit(dtype):
    assert_layout_matches(wgmma_a_fragment(dtype), placement_from_reference(ptx_a16(), (64, 16)), (64, 16))


@pytest.mark.parametrize("dtype", ["e4m3", "e5m2", "int8", "uint8"])
def test_a_fragment_8bit(dtype):
    assert_layout_matches(wgmma_a_fragment(dtype), placement_from_reference(ptx_a8(), (64, 32)), (64, 32))


@pytest.mark.parametrize("n", [0, 4, 12, 260, 264, -8, 16.0, True, "16"])
def test_illegal_n(n):
    with pytest.raises(LayoutError, match="N must be a multiple of 8 in \\[8, 256\\]"):
        wgmma_accumulator(n)


def test_a_fragment_bad_dtype():
    with pytest.raises(LayoutError, match="16-bit .* and 8-bit .*'f32' has 32 bits"):
        wgmma_a_fragment("f32")
    with pytest.raises(LayoutError, match="wgmma A fragment: unknown dtype 'f17'"):
        wgmma_a_fragment("f17")
