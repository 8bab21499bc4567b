"""``mma.sync.m16n8k16`` register fragments (warp level, f16 / bf16 inputs, f32 accumulator).

PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type"
(Figures 79, 81, 83). With ``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``:

- A (16x16, 16-bit): row = groupID for a0, a1, a4, a5, else groupID + 8;
  col = threadID_in_group * 2 + (i & 1), plus 8 for i >= 4.
- B (16x8, logical (k, n)): row = threadID_in_group * 2 + (i & 1), plus 8 for i >= 2;
  col = groupID.
- C/D (16x8, f32): row = groupID for c0, c1, else groupID + 8; col = threadID_in_group * 2 + (i & 1).

The layouts below are of the logical tile in row-major (row, col) order; the ``m`` axis is the
index ``i`` of the element in the thread's fragment (16-bit elements for A/B, 32-bit for C/D).
"""
from __future__ import annotations

from ..axis import laneid, m
from ..iters import S
from ..tile import TileLayout
from ._check import choice

_AB_TYPES = ("f16", "bf16", "float16", "bfloat16")


def mma_m16n8k16_a(dtype: str = "f16") -> TileLayout:
    """Fragment of A (16x16) for ``mma.sync.aligned.m16n8k16`` (PTX ISA Figure 79).

        >>> L = mma_m16n8k16_a()
        >>> L.apply(9, 10, shape=(16, 16))      # a6 of lane 4*1 + 1
        {'m': 6, 'laneid': 5}
    """
    choice(dtype, _AB_TYPES, "mma.m16n8k16 A dtype", "use the f16/bf16 atom for 16-bit inputs")
    return TileLayout(S[(2, 8, 2, 4, 2) : (2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def mma_m16n8k16_b(dtype: str = "f16") -> TileLayout:
    """Fragment of B (16x8, logical (k, n)) for ``mma.sync.aligned.m16n8k16`` (PTX ISA Figure 81).

        >>> mma_m16n8k16_b().apply(11, 2, shape=(16, 8))   # b3 of lane 4*2 + 1
        {'m': 3, 'laneid': 9}
    """
    choice(dtype, _AB_TYPES, "mma.m16n8k16 B dtype", "use the f16/bf16 atom for 16-bit inputs")
    return TileLayout(S[(2, 4, 2, 8) : (2 @ m, 1 @ laneid, 1 @ m, 4 @ laneid)])


def mma_m16n8k16_c(dtype: str = "f32") -> TileLayout:
    """Fragment of the C/D accumulator (16x8, f32) for ``mma.sync.aligned.m16n8k16``
    (PTX ISA Figure 83).

        >>> mma_m16n8k16_c().apply(8, 3, shape=(16, 8))    # c3 of lane 1
        {'m': 3, 'laneid': 1}
    """
    choice(dtype, ("f32", "float32"), "mma.m16n8k16 C/D dtype", "this atom encodes the 32-bit accumulator")
    return TileLayout(S[(2, 8, 4, 2) : (2 @ m, 4 @ laneid, 1 @ laneid, 1 @ m)])
