"""Hardware atoms: the layouts native instructions impose, as plain layouts of logical tiles.

Each function cites the PTX ISA section / figure it encodes; ``tests/layout/test_atoms_*.py``
check each one against that figure's formula over every element and lane.

    >>> from tirxpy.layout.atoms import wgmma_accumulator
    >>> wgmma_accumulator(16).owners(3, 9, shape=(64, 16))
    [{'wid_in_wg': 0, 'm': 5, 'laneid': 12}]
"""
from .ldmatrix import ldmatrix_layout
from .mma_sync import mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c
from .smem import (
    MAJORS, SWIZZLE_MODES, SmemStrides, mma_smem_layout, smem_descriptor_strides, tcgen05_smem_layout, wgmma_smem_layout,
)
from .tmem import TMEM_LD_SHAPES, tmem_accumulator, tmem_ld_layout, tmem_ld_tile, tmem_ld_tmem_layout, tmem_warpx4_layout
from .wgmma import WGMMA_N, wgmma_a_fragment, wgmma_accumulator

__all__ = [
    "ldmatrix_layout", "mma_m16n8k16_a", "mma_m16n8k16_b", "mma_m16n8k16_c",
    "MAJORS", "SWIZZLE_MODES", "SmemStrides", "mma_smem_layout", "smem_descriptor_strides",
    "tcgen05_smem_layout", "wgmma_smem_layout",
    "TMEM_LD_SHAPES", "tmem_accumulator", "tmem_ld_layout", "tmem_ld_tile", "tmem_ld_tmem_layout", "tmem_warpx4_layout",
    "WGMMA_N", "wgmma_a_fragment", "wgmma_accumulator",
]
