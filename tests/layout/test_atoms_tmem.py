"""tcgen05 TMEM layouts against PTX ISA 9.7.16.2.3.1 (Figures 183-186), Table 47, 9.7.16.8.1
and the data-path layouts D and F (9.7.16.10.5)."""
import pytest

from tirxpy.layout import LayoutError
from tirxpy.layout.atoms import (
    tmem_accumulator, tmem_ld_layout, tmem_ld_tile, tmem_ld_tmem_layout, wgmma_accumulator,
)

from ._atom_check import assert_layout_matches, placement_from_reference

REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4}  # Table 47, registers per .x1


def per_warp(shape, t, r):
    """(row, col) inside one warp's tile of thread t's register r (Figures 183-186)."""
    if shape == "32x32b":
        return t, r
    if shape == "16x64b":
        return t // 4 + 8 * (t % 2), 2 * r + (t // 2) % 2
    if shape == "16x128b":
        return t // 4 + 8 * (r % 2), 4 * (r // 2) + t % 4
    return t // 4 + 8 * ((r // 2) % 2), 8 * (r // 4) + 2 * (t % 4) + r % 2


def ptx_ld(shape, num):
    lanes = 32 if shape == "32x32b" else 16
    for w in range(4):  # warp w reaches TMEM lanes 32w..32w+31 (9.7.16.8.1)
        for t in range(32):
            for r in range(REGS[shape] * num):
                row, col = per_warp(shape, t, r)
                yield {"wid_in_wg": w, "laneid": t, "m": r}, (lanes * w + row, col)


LEGAL = [(s, n) for s in REGS for n in (1, 2, 4, 8, 16, 32, 64, 128) if REGS[s] * n <= 128]


@pytest.mark.parametrize("shape, num", LEGAL)
def test_ld_layout_matches_ptx(shape, num):
    lanes = 32 if shape == "32x32b" else 16
    tile = (4 * lanes, 32 * REGS[shape] * num // lanes)
    assert tmem_ld_tile(shape, num) == tile
    L = tmem_ld_layout(shape, num)
    assert_layout_matches(L, placement_from_reference(ptx_ld(shape, num), tile), tile)
    assert L.is_injective() and L.size("m") == REGS[shape] * num


@pytest.mark.parametrize("num", [1, 2, 32])
def test_16x256b_is_the_wgmma_accumulator_pattern(num):
    assert tmem_ld_layout("16x256b", num).identical(wgmma_accumulator(8 * num))


@pytest.mark.parametrize("shape, num, base", [("32x32b", 4, 0), ("16x64b", 2, 16), ("16x256b", 1, 0)])
def test_tmem_side(shape, num, base):
    lanes = 32 if shape == "32x32b" else 16
    rows, cols = tmem_ld_tile(shape, num)
    L = tmem_ld_tmem_layout(shape, num, lane_base=base, col=8)
    for r in range(rows):
        for c in range(cols):
            w, i = divmod(r, lanes)
            assert L.apply(r, c, shape=(rows, cols)) == {"TLane": 32 * w + base + i, "TCol": 8 + c}
    assert L.is_injective()


def test_accumulator_layout_d_and_f():
    D = tmem_accumulator(128, 64)
    F = tmem_accumulator(64, 32, lane_base=16, col=64)
    for r in range(128):
        assert D.apply(r, 5, shape=(128, 64)) == {"TLane": r, "TCol": 5}
    for r in range(64):
        assert F.apply(r, 31, shape=(64, 32)) == {"TLane": 32 * (r // 16) + 16 + r % 16, "TCol": 95}
    assert D.is_injective() and F.is_injective()


@pytest.mark.parametrize(
    "args, msg",
    [
        (("16x32b", 1), "tcgen05.ld shape must be one of"),
        (("32x32b", 3), r"repeat count .num must be one of .*got 3"),
        (("16x256b", 64), "need 256 registers per thread; the largest is 128 \\(use .x32 or less\\)"),
        (("16x128b", 128), "need 256 registers per thread; the largest is 128 \\(use .x64 or less\\)"),
    ],
)
def test_ld_bad_args(args, msg):
    with pytest.raises(LayoutError, match=msg):
        tmem_ld_layout(*args)


def test_tmem_side_bad_args():
    with pytest.raises(LayoutError, match="lane_base 16 is not valid for .32x32b"):
        tmem_ld_tmem_layout("32x32b", 1, lane_base=16)
    with pytest.raises(LayoutError, match="lane_base 8 is not valid for .16x64b.*0 or 16"):
        tmem_ld_tmem_layout("16x64b", 1, lane_base=8)
    with pytest.raises(LayoutError, match="col must be a non-negative int"):
        tmem_ld_tmem_layout("16x64b", 1, col=-1)


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(m=256, n=64), "accumulator M .* must be one of 64, 128"),
        (dict(m=128, n=8), "M = 128 takes N = 16, 32, ..., 256"),
        (dict(m=64, n=12), "M = 64 takes N = 8, 16, ..., 256"),
        (dict(m=64, n=264), "M = 64 takes N"),
        (dict(m=128, n=64, lane_base=16), "lane_base must be 0"),
        (dict(m=64, n=64, lane_base=32), "lane_base must be 0 or 16"),
        (dict(m=64, n=64, col=-4), "col must be a non-negative int"),
    ],
)
def test_accumulator_bad_args(kw, msg):
    with pytest.raises(LayoutError, match=msg):
        tmem_accumulator(**kw)


def test_atom_arguments_are_exact_kinds():
    from tirxpy.layout import LayoutError
    from tirxpy.layout.atoms import ldmatrix_layout, tmem_ld_layout, tmem_warpx4_layout

    with pytest.raises(LayoutError, match="repeat count .num must be one of"):
        tmem_ld_layout("32x32b", 2.0)                       # 2.0 is not the repeat count 2
    with pytest.raises(LayoutError, match="pass the 512 TMEM columns"):
        tmem_warpx4_layout(2**80)
    with pytest.raises(LayoutError, match="ldmatrix grid \\(2.5, 2\\) entry must be a positive int"):
        ldmatrix_layout(4, grid=(2.5, 2))


def test_numpy_ints_are_taken_as_ints_by_the_atoms():
    """wgmma_accumulator(np.int64(16)) was refused as 'has no N = 16', tmem columns / counts likewise."""
    import numpy as np

    from tirxpy.layout import ldmatrix_layout, tmem_ld_layout, tmem_warpx4_layout, wgmma_accumulator

    i = np.int64
    assert wgmma_accumulator(i(16)).identical(wgmma_accumulator(16))
    assert tmem_accumulator(i(64), i(32), col=i(8)).identical(tmem_accumulator(64, 32, col=8))
    assert tmem_warpx4_layout(i(4), i(256)).identical(tmem_warpx4_layout(4, 256))
    assert ldmatrix_layout(i(2)).identical(ldmatrix_layout(2))
    assert tmem_ld_layout("32x32b", i(4)).identical(tmem_ld_layout("32x32b", 4))
    with pytest.raises(LayoutError, match="col must be a non-negative int"):
        tmem_accumulator(64, 32, col=1.0)
