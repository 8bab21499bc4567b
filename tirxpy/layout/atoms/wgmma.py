"""``wgmma.mma_async`` register fragments over a warpgroup (sm_90a).

PTX ISA 9.7.15.5.1.1 "Register Fragments":

- Figure 149, "WGMMA .m64nNk16 register fragment layout for accumulator matrix D": warp ``w``
  of the warpgroup holds rows ``16w .. 16w + 15``; inside the warp the D fragment repeats the
  ``mma.m16n8k16`` C layout every 8 columns: row = 16*w + 8*h + lane/4,
  col = 8*nb + 2*(lane%4) + c, register = 4*nb + 2*h + c.
- Figure 148, "WGMMA .m64nNk16 register fragment layout for matrix A" (16-bit types, 8 elements
  a0..a7 in four .f16x2 registers): per warp the ``mma.m16n8k16`` A layout on rows 16w..16w+15.
- Figure 152, "WGMMA .m64nNk32 register fragment layout for matrix A" (8-bit types, 16
  elements a0..a15 in four .b32 registers): per warp the ``mma.m16n8k32`` 8-bit A layout
  (PTX ISA 9.7.14.5.10): row = groupID for a0..a3, a8..a11, else groupID + 8;
  col = threadID_in_group*4 + (i & 3), plus 16 for i >= 8.

The ``m`` axis is the element index in the thread's fragment (32-bit accumulator elements for
D; 16-bit or 8-bit elements for A).
"""
from __future__ import annotations
from tirxpy.errors import shown

from ..axis import laneid, m, wid_in_wg
from ..coords import is_int
from ..errors import LayoutError
from ..iters import S
from ..swizzle import dtype_bits
from ..tile import TileLayout

WGMMA_N = tuple(range(8, 257, 8))
"""Every legal N of ``wgmma.mma_async.m64nNk*`` for f16/bf16/tf32/fp8 inputs."""


def wgmma_accumulator(n: int) -> TileLayout:
    """Accumulator D (64 x n, f32) of ``wgmma.mma_async.m64nNk16`` over a warpgroup
    (PTX ISA Figure 149): ``S[(4, 2, 8, n/8, 4, 2) : (1@wid_in_wg, 2@m, 4@laneid, 4@m, 1@laneid, 1@m)]``.

        >>> L = wgmma_accumulator(16)
        >>> L.apply(37, 13, shape=(64, 16))   # warp 2, h = 0, lane 4*5 + 2, nb = 1, c = 1
        {'wid_in_wg': 2, 'm': 5, 'laneid': 22}
    """
    if not is_int(n) or n not in WGMMA_N:
        raise LayoutError(
            f"wgmma m64nNk16 has no N = {shown(n)}; N must be a multiple of 8 in [8, 256] (8, 16, 24, ..., 256)"
        )
    n = int(n)
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def wgmma_a_fragment(dtype="f16") -> TileLayout:
    """Register operand A of ``wgmma.mma_async`` over a warpgroup.

    16-bit types (f16, bf16): the 64x16 tile of ``.m64nNk16`` (PTX ISA Figure 148), 8
    elements per thread. 8-bit types (e4m3, e5m2, int8, uint8): the 64x32 tile of ``.m64nNk32``
    (PTX ISA Figure 152), 16 elements per thread.

        >>> wgmma_a_fragment("bf16").apply(25, 10, shape=(64, 16))   # warp 1, a6 of lane 5
        {'wid_in_wg': 1, 'm': 6, 'laneid': 5}
        >>> wgmma_a_fragment("e4m3").apply(0, 17, shape=(64, 32))    # a9 of lane 0
        {'wid_in_wg': 0, 'm': 9, 'laneid': 0}
    """
    try:
        bits = dtype_bits(dtype)
    except LayoutError as e:
        raise LayoutError(f"wgmma A fragment: {e}") from None
    if bits == 16:
        return TileLayout(S[(4, 2, 8, 2, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])
    if bits == 8:
        return TileLayout(S[(4, 2, 8, 2, 4, 4) : (1 @ wid_in_wg, 4 @ m, 4 @ laneid, 8 @ m, 1 @ laneid, 1 @ m)])
    raise LayoutError(
        f"wgmma A fragment in registers is provided for 16-bit (f16, bf16: k16) and 8-bit (e4m3, e5m2, int8, uint8: k32) "
        f"types; {shown(dtype)} has {bits} bits"
    )
