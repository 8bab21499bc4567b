"""The FP8 scaling steps of the Hopper GEMM (:mod:`tirxpy_kernels.gemm_sm90` with ``scaling=``).

An FP8 product is ``C = (A * sa) @ (B * sb)``: the kernel multiplies the float32 wgmma results by the
scales, never the FP8 operands. Three scalings (:data:`tirxpy_kernels.gemm_fp8_plan.SCALINGS`):

- ``"tensor"``: ``SA``, ``SB`` are ``(1, 1)`` float32; each tile's accumulator is multiplied by
  ``SA[0, 0] * SB[0, 0]`` before the bias (:func:`scale_tile`).
- ``"row"``: ``SA`` is ``(M, 1)`` (one scale per row of A), ``SB`` is ``(1, N)`` (one per column of B);
  each output chunk is multiplied by its rows' and columns' scales (:func:`scale_chunk`). Each consumer warp
  loads its tile's column scales before the tile's k-loop, lane ``l`` holding column ``32 r + l`` in register
  ``r`` (:func:`load_col_scales`), so they land under the k-loop; each chunk shuffles its columns' scales out
  of them (:func:`chunk_col_scales`).
- ``"block"`` (DeepSeek-V3): ``SA`` is ``(KB, Mp)``, A's scale per row and 128-deep group of K stored
  group-major (row ``kb`` holds every row's scale of k-block ``kb``; ``Mp``: M rounded up to 4 so each
  row is whole 16-byte units for TMA); ``SB`` is ``(KB, NB)``, B's scale per 128 x 128 block (row
  ``kb`` holds the k-block's scale of every 128-column block). The producer loads the k-block's 128
  row scales into the stage next to the operands (:func:`load_block_scales`). Each consumer warp holds
  B's scales of its tile's column blocks (:attr:`~tirxpy_kernels.gemm_plan.GemmPlan.scale_cols`) for
  windows of 32 k-blocks, one k-block per lane, loaded a window ahead (:func:`load_b_window`); it runs the
  k-block's wgmma in column parts into scratch accumulators, and once a part is waited for multiplies its
  rows' scales of the k-block from the stage by B's (:func:`stage_row_scales`) and adds the part, times those
  scales, into the float32 tile (:func:`promote`; a whole-tile part spanning several column blocks run by run,
  :meth:`~tirxpy_kernels.gemm_plan.GemmPlan.part_segments`): partial sums leave the FP8 wgmma's narrow
  accumulator every 128 of K.

A ``(64, 1)`` column of row scales is held the way the wgmma accumulator holds its rows
(:func:`row_layout`: rows ``16 w + 8 h + lane / 4`` in slot ``h``, replicated over ``lane % 4``), so
``Tx.wg.mul(chunk, chunk, srow)`` scales each thread's own rows.

    >>> row_layout().apply(25, 0, shape=(64, 1))    # warp 1, h = 1, lane group 1
    {'wid_in_wg': 1, 'm': 1, 'laneid': 4}
"""
from __future__ import annotations

from tirxpy import T, Tx
from tirxpy.layout import R, S, TileLayout, laneid, m, wid_in_wg

from .gemm_fp8_plan import BLOCK_SCALE


def row_layout() -> TileLayout:
    """A ``(64, 1)`` float32 column held like the rows of a wgmma accumulator (module docstring)."""
    return TileLayout(S[(4, 2, 8, 1) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid, 1 @ m)] + R[(4,) : (1 @ laneid,)])


class Scales:
    """The scale operands of one FP8 GEMM and the registers / stage buffers the kernel reads them through:
    ``sa``, ``sb`` (global), ``srow`` (a ``(64, 1)`` column of row scales, :func:`row_layout`), ``scol``
    (a ``(1, chunk_cols)`` row of column scales, the bias row's layout), ``sas`` (A's block scales'
    shared-memory stages, ``(stages, 1, BM)``), ``sbv`` (registers holding B's block scales of two windows of
    32 k-blocks, the one in use and the next, one per :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.scale_cols` each:
    :func:`load_b_window`), ``srows``
    (``srows[q]``: the k-block being promoted's row scales times B's scale ``q``; ``srows2``: a second such set, so
    that a k-block's scales are worked out while the previous one's are still read), ``scv`` (registers holding the
    tile's column scales, 32 columns each: :func:`load_col_scales`). Unused ones are None."""

    def __init__(self, sa=None, sb=None, srow=None, scol=None, sas=None, sbv=None, srows=None, scv=None, srows2=None):
        self.sa, self.sb, self.srow, self.scol, self.sas = sa, sb, srow, scol, sas
        self.sbv, self.srows, self.scv, self.srows2 = sbv, srows, scv, srows2


@T.macro
def load_block_scales(P, SC, full, s, m0, k):
    """Producer: k-block ``k``'s 128 row scales of A (``SA[k, m0 .. m0 + 127]``) into stage ``s``, completing on
    ``full[s]`` with the operands."""
    Tx.copy_async(SC.sas[s], SC.sa[k:k + 1, m0:m0 + 128], mbar=full[s], arrive=False, expect_tx=False)


@T.macro
def load_b_window(P, SC, n0, w, slot):
    """Consumer: B's block scales of window ``w``, k-blocks ``W w .. W w + W - 1`` (``W``:
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.b_window`, 32; clamped to the last) for the tile at column ``n0``,
    lane ``l`` holding k-block ``W w + l``'s, one register per
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.scale_cols` (clamped to the last column block), into ``slot`` of
    ``SC.sbv`` (0: the window in use, 1: the next one). A k-block's scale is read from its lane by a shuffle
    (:func:`stage_row_scales`), so one load serves a window and lands a whole window before its first use."""
    for q, off in enumerate(P.scale_cols):
        SC.sbv[slot * len(P.scale_cols) + q] = T.ptx.ld_global_f32(T.address_of(
            SC.sb[T.min(w * P.b_window + T.lane_id(), P.k_blocks - 1),
                  T.min((n0 + off) // BLOCK_SCALE, (P.N - 1) // BLOCK_SCALE)]))


@T.macro
def advance_b_window(P, SC, n0, k):
    """Consumer, after k-block ``k``'s B scales were read: the first k-block of a window loads the next window
    (into slot 1; it lands while this window's k-blocks run), and the last one makes it the window in use. The
    first window of a tile is loaded before it, under the previous tile's epilogue (:func:`load_b_window`)."""
    n = len(P.scale_cols)
    if k % P.b_window == 0:
        load_b_window(P, SC, n0, k // P.b_window + 1, 1)
    if k % P.b_window == P.b_window - 1:
        for q in range(n):
            SC.sbv[q] = SC.sbv[n + q]


@T.macro
def stage_row_scales(P, SC, s, c, k, rows=None, ahead=False):
    """Consumer ``c`` once k-block ``k``'s stage ``s`` has landed, before the stage is released: its rows' scales
    of the k-block times each of B's (shuffled from lane ``k % W`` of the window in use) into ``rows`` (a set like
    ``SC.srows``, the default). ``ahead``: k-block ``k - 1`` is not promoted yet, so where ``k`` opens a window
    that window is still the next one (slot 1, :func:`advance_b_window`)."""
    rows = SC.srows if rows is None else rows
    n = len(P.scale_cols)
    Tx.wg.copy(rows[0], SC.sas[s, 0:1, c * 64:c * 64 + 64])
    for q in range(1, n):
        Tx.wg.mul(rows[q], rows[0], T.ptx.shfl_sync_idx_f32(window_scale(P, SC, q, k, ahead), k % P.b_window,
                                                            0xFFFFFFFF))
    Tx.wg.mul(rows[0], rows[0], T.ptx.shfl_sync_idx_f32(window_scale(P, SC, 0, k, ahead), k % P.b_window, 0xFFFFFFFF))


def window_scale(P, SC, q, k, ahead):
    """The register of B's scale ``q`` holding k-block ``k``'s (:func:`stage_row_scales`)."""
    if not ahead:
        return SC.sbv[q]
    if isinstance(k, int):
        return SC.sbv[len(P.scale_cols) + q] if k % P.b_window == 0 else SC.sbv[q]
    return T.select(k % P.b_window < 1, SC.sbv[len(P.scale_cols) + q], SC.sbv[q])


@T.macro
def promote(P, SC, acc, tmp, k, srow):
    """After k-block ``k``'s wgmma of a part into ``tmp`` was waited for: the part's columns of the tile
    ``acc (+)= tmp * srow`` (:func:`stage_row_scales`)."""
    if k == 0:
        Tx.wg.mul(acc, tmp, srow)
    else:
        Tx.wg.fma(acc, tmp, srow, acc)


@T.macro
def load_row_scales(P, SC, r0):
    """``"row"``: the scales of rows ``r0 .. r0 + 63`` of A into ``SC.srow`` (rows past M read 0)."""
    Tx.wg.fill(SC.srow, T.float32(0))
    Tx.wg.copy(SC.srow, SC.sa[r0:r0 + 64, 0:1])


@T.macro
def scale_tile(P, SC, acc, r0):
    """Before the epilogue of a tile whose accumulator ``acc`` holds rows ``r0 .. r0 + 63``: ``"tensor"``
    multiplies it by ``SA * SB``; ``"row"`` loads those rows' scales (the columns' come per chunk,
    :func:`chunk_col_scales`)."""
    if P.scaling == "tensor":
        Tx.wg.mul(acc, acc, SC.sa[0, 0] * SC.sb[0, 0])
    if P.scaling == "row":
        load_row_scales(P, SC, r0)


def col_registers(P) -> int:
    """``"row"``: the registers a consumer thread holds its tile's column scales in, one per 32 columns of
    ``BN`` (:func:`load_col_scales`).

        >>> from types import SimpleNamespace
        >>> col_registers(SimpleNamespace(BN=176)), col_registers(SimpleNamespace(BN=256))
        (6, 8)
    """
    return -(-P.BN // 32)


@T.macro
def load_col_scales(P, SC, n0):
    """``"row"``, consumer, before the k-loop of the tile at column ``n0``: register ``r`` of lane ``l`` in
    ``SC.scv`` gets column ``n0 + 32 r + l``'s scale (a plain load, ``T.ptx.ld_global_f32``, which ptxas
    keeps where it is, so it lands under the k-loop). Columns past N read column N - 1's: their
    outputs are never stored."""
    for r in range(col_registers(P)):
        SC.scv[r] = T.ptx.ld_global_f32(T.address_of(SC.sb[0, T.min(n0 + 32 * r + T.lane_id(), P.N - 1)]))


@T.macro
def chunk_col_scales(P, SC, j):
    """``"row"``: output chunk ``j``'s column scales into ``SC.scol`` (the bias row's layout: slot ``2 b + e``
    holds chunk column ``8 b + 2 (lane % 4) + e``), each shuffled from the lane of ``SC.scv`` that holds it
    (:func:`load_col_scales`)."""
    if P.scaling == "row":
        slots = SC.scol.alias((P.chunk_cols // 4,))
        for t in range(P.chunk_cols // 4):
            base = j * P.chunk_cols + 8 * (t // 2)     # a multiple of 8: one register holds all 8 columns
            slots[t] = T.ptx.shfl_sync_idx_f32(SC.scv[base // 32], base % 32 + 2 * (T.lane_id() % 4) + t % 2,
                                               0xFFFFFFFF)


@T.macro
def scale_chunk(P, SC, chunk):
    """``"row"``: an output chunk times its rows' scales (``SC.srow``, :func:`load_row_scales`) and its columns'
    (``SC.scol``, :func:`chunk_col_scales`)."""
    if P.scaling == "row":
        Tx.wg.mul(chunk, chunk, SC.srow)
        Tx.wg.mul(chunk, chunk, SC.scol)
