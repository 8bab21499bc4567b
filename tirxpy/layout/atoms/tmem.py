"""tcgen05 tensor-memory (TMEM) layouts (sm_100a).

- ``tcgen05.ld`` / ``tcgen05.st`` register layouts: PTX ISA 9.7.16.2.3.1 "Matrix fragments for
  shape .32x32b / .16x64b / .16x128b / .16x256b" (Figures 183-186), the ``.num`` repeat counts
  of Table 47, and the access restriction of 9.7.16.8.1: warp ``w`` of a warpgroup reaches TMEM
  lanes ``32w .. 32w + 31`` only. Per warp, with ``t`` = laneid and ``r`` the register index:

  - ``.32x32b.xN``: lane ``t`` of the 32 TMEM lanes, column ``r`` (N registers);
  - ``.16x64b.xN``: row ``t/4 + 8*(t%2)``, column ``2r + (t/2)%2`` (N registers);
  - ``.16x128b.xN``: row ``t/4 + 8*(r%2)``, column ``4*(r/2) + t%4`` (2N registers);
  - ``.16x256b.xN``: row ``t/4 + 8*((r/2)%2)``, column ``8*(r/4) + 2*(t%4) + r%2`` (4N registers).

  The logical tile of a warpgroup stacks the four warps' tiles: ``(128, N)`` for ``.32x32b``
  and ``(64, C)`` for the 16-lane shapes, in 32-bit elements.
- MMA accumulators in TMEM: PTX ISA 9.7.16.10.5 "Data Path Layout Organization": Layout D
  (M = 128, cta_group::1, Figure 211: row i in lane i, column j in column j) and Layout F
  (M = 64, not .ws, Figure 215: rows 16w .. 16w + 15 in lanes 32w + base .. 32w + base + 15,
  base = 0 or 16, half the datapath used).
- ``tcgen05.cp .32x128b.warpx4`` (PTX ISA 9.7.16.2.3 shapes, 9.7.16.9.1 ``tcgen05.cp``): 32 rows of
  128 bits from shared memory land in TMEM lanes ``t``, ``t + 32``, ``t + 64``, ``t + 96`` (one
  copy per warp quarter), four 32-bit columns per row: :func:`tmem_warpx4_layout`. The block
  scale factors of ``tcgen05.mma ... .block_scale`` live there.
"""
from __future__ import annotations
from tirxpy.errors import shown

from ..axis import TCol, TLane, laneid, m, wid_in_wg
from ..errors import LayoutError
from ..iters import R, S
from ..tile import TileLayout
from ..coords import is_int
from ._check import choice, int_at_least

TMEM_LD_SHAPES = {"32x32b": (32, 1), "16x64b": (16, 1), "16x128b": (16, 2), "16x256b": (16, 4)}
"""shape -> (TMEM lanes per warp, 32-bit registers per thread per repeat)."""
_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)


def _check_ld(shape, num):
    shape = choice(shape, tuple(TMEM_LD_SHAPES), "tcgen05.ld shape")
    num = choice(num, _NUMS, f"tcgen05.ld .{shape} repeat count .num", "use a power of two 1..128")
    lanes, regs = TMEM_LD_SHAPES[shape]
    if regs * num > 128:
        raise LayoutError(
            f"tcgen05.ld.{shape}.x{num} would need {regs * num} registers per thread; the largest is 128 "
            f"(use .x{128 // regs} or less)"
        )
    return shape, num


def tmem_ld_tile(shape: str, num: int) -> tuple:
    """Logical tile ``(rows, cols)`` (32-bit elements) a warpgroup moves with ``tcgen05.ld.{shape}.x{num}``.

        >>> tmem_ld_tile("16x256b", 2)
        (64, 16)
    """
    shape, num = _check_ld(shape, num)
    lanes, regs = TMEM_LD_SHAPES[shape]
    return (4 * lanes, 32 * regs * num // lanes)


def tmem_ld_layout(shape: str, num: int = 1) -> TileLayout:
    """Registers (``wid_in_wg`` / ``laneid`` / ``m``) of the tile a warpgroup gets from
    ``tcgen05.ld.sync.aligned.{shape}.x{num}.b32`` (PTX ISA Figures 183-186).

        >>> tmem_ld_layout("32x32b", 4)
        TileLayout(S[(4, 32, 4) : (1@wid_in_wg, 1@laneid, 1@m)])
        >>> tmem_ld_layout("16x64b", 1).apply(9, 1, shape=(64, 2))   # row 9 = 1 + 8 -> t%2 = 1
        {'wid_in_wg': 0, 'laneid': 7, 'm': 0}
    """
    shape, num = _check_ld(shape, num)
    if shape == "32x32b":
        return TileLayout(S[(4, 32, num) : (1 @ wid_in_wg, 1 @ laneid, 1 @ m)])
    if shape == "16x64b":
        return TileLayout(S[(4, 2, 8, num, 2) : (1 @ wid_in_wg, 1 @ laneid, 4 @ laneid, 1 @ m, 2 @ laneid)])
    if shape == "16x128b":
        return TileLayout(S[(4, 2, 8, num, 4) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid, 2 @ m, 1 @ laneid)])
    return TileLayout(S[(4, 2, 8, num, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def tmem_ld_tmem_layout(shape: str, num: int = 1, lane_base: int = 0, col: int = 0) -> TileLayout:
    """Where the same logical tile sits in TMEM (``TLane`` / ``TCol``) when each warp ``w``
    addresses lane ``32w + lane_base`` and column ``col``.

        >>> tmem_ld_tmem_layout("16x128b", 1, lane_base=16)
        TileLayout(S[(4, 16, 4) : (32@TLane, 1@TLane, 1@TCol)] + 16@TLane)
    """
    shape, num = _check_ld(shape, num)
    lanes = TMEM_LD_SHAPES[shape][0]
    rows, cols = tmem_ld_tile(shape, num)
    bases = (0,) if lanes == 32 else (0, 16)
    if not is_int(lane_base) or int(lane_base) not in bases:     # (the type first: the value's own == is its code)
        raise LayoutError(
            f"lane_base {shown(lane_base)} is not valid for .{shape}: a warp reaches 32 TMEM lanes, so a {lanes}-lane "
            f"access starts at lane offset {' or '.join(map(str, bases))} inside its warp's quarter"
        )
    col, lane_base = int_at_least(col, "col", 0), int(lane_base)
    return TileLayout(S[(4, lanes, cols) : (32 @ TLane, 1 @ TLane, 1 @ TCol)] + lane_base @ TLane + col @ TCol)


def tmem_accumulator(m: int, n: int, lane_base: int = 0, col: int = 0) -> TileLayout:
    """The ``(m, n)`` f32 accumulator of ``tcgen05.mma.cta_group::1`` in TMEM.

    ``m = 128``: Layout D, ``S[(128, n) : (1@TLane, 1@TCol)]``. ``m = 64``: Layout F, rows
    ``16w .. 16w + 15`` in lanes ``32w + lane_base ..`` (``lane_base`` 0 or 16). ``col`` is the
    first allocated column.

        >>> tmem_accumulator(128, 256)
        TileLayout(S[(128, 256) : (1@TLane, 1@TCol)])
        >>> tmem_accumulator(64, 64).apply(17, 3, shape=(64, 64))
        {'TLane': 33, 'TCol': 3}
    """
    m = choice(m, (64, 128), "tcgen05 accumulator M (cta_group::1)",
               "M = 256 needs cta_group::2, M = 32 the .ws variant")
    step = 8 if m == 64 else 16
    if not is_int(n) or not (step <= n <= 256 and n % step == 0):
        raise LayoutError(f"tcgen05.mma with M = {m} takes N = {step}, {2 * step}, ..., 256 (multiples of {step}); got "
                          f"{shown(n)}")
    n = int(n)
    col = int_at_least(col, "col", 0)
    if not is_int(lane_base):
        raise LayoutError(f"lane_base must be an int (0, or 16 for M = 64), got {shown(lane_base)}")
    lane_base = int(lane_base)
    if m == 128:
        if lane_base != 0:
            raise LayoutError(f"M = 128 uses all 128 TMEM lanes; lane_base must be 0, got {shown(lane_base)}")
        return TileLayout(S[(128, n) : (1 @ TLane, 1 @ TCol)] + col @ TCol)
    if lane_base not in (0, 16):
        raise LayoutError("M = 64 (Layout F) uses 16 of each warp's 32 lanes; lane_base must be 0 or 16, got "
                          f"{shown(lane_base)}")
    return TileLayout(S[(4, 16, n) : (32 @ TLane, 1 @ TLane, 1 @ TCol)] + lane_base @ TLane + col @ TCol)


def tmem_warpx4_layout(ncols: int = 4, col: int = 0) -> TileLayout:
    """The ``(32, ncols)`` tile of 32-bit words ``tcgen05.cp.32x128b.warpx4`` writes: word
    ``(t, j)`` at lane ``t`` (and its replicas at ``t + 32``, ``t + 64``, ``t + 96``), column ``col + j``.

    For block scaling (``kind::mxf8f6f4``, ``scale_vec::1X``) word ``(t, j)`` holds the four ue8m0
    scale factors (byte ``c`` scales K elements ``32c .. 32c + 31``) of matrix row ``32 j + t``.

        >>> tmem_warpx4_layout(4, col=256).owners(3, 1, shape=(32, 4))[2]
        {'TLane': 67, 'TCol': 257}
    """
    ncols = int_at_least(ncols, "ncols", 1)
    col = int_at_least(col, "col", 0)
    if col + ncols > TCol.bound:
        raise LayoutError(f"columns col {shown(col, 60)} .. col + ncols - 1 = {shown(col + ncols - 1, 60)} pass the "
                          f"{TCol.bound} TMEM columns (TCol < {TCol.bound}); use col + ncols <= {TCol.bound}")
    return TileLayout(S[(32, ncols) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane] + col @ TCol)
