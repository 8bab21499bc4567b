"""The row steps ahead of the attention backward kernel (:mod:`tirxpy_kernels.attention_bwd_sm90`): ``D =
rowsum(O * dO)`` in float32 per query row and head, and for packed sequences the per-sequence rows the kernel reads.

- :func:`attention_bwd_preprocess`: ``D`` of a ``(batch, seq, heads, dim)`` problem, ``(B, H, SQP)``, and the
  backward kernel's float32 ``dQ`` accumulator set to zero.
- :func:`attention_bwd_preprocess_packed`: ``D`` and the forward's ``LSE`` of packed sequences (``cu_seqlens``) as
  ``(H, B, XQ)``: sequence ``b``'s rows from 0, zero past its length, so that every TMA box of a sequence's rows
  starts at a multiple of 64 floats and the rows past its end give finite scores; and the ``dQ`` accumulator's
  rows of every sequence set to zero.

The dense kernel runs a CTA of :data:`THREADS` threads per 64 rows of one head: 8 lanes share a row of ``O`` and
``dO`` (one 16-byte load each per 64 columns), products summed in float32 in each thread, then over the row's lanes;
its stores of zeros put a warp's lanes along one row of the accumulator. The packed kernel's CTAs are the same, over
64 rows of one head of one sequence.

    >>> attention_bwd_preprocess(2, 4, 300, 128).launch.grid
    (5, 4, 2)
"""
from __future__ import annotations

import tirxpy
from tirxpy import T, Tx
from tirxpy.layout import R, S, TileLayout, laneid, m, warpid
from tirxpy.target import MAX_GRID

from .attention_bwd_plan import DTYPES
from .attention_walk import clamped_rows
from .errors import KernelConfigError, choice_option, flag_option, int_option

THREADS = 128
"""Threads of a dense preprocessing CTA (four warps)."""


def lane_rows(cols, elems, threads=THREADS):
    """A ``(rows, cols)`` register tile dealt to ``threads`` threads, ``elems`` consecutive elements of a row (one
    16-byte vector) per thread slot: ``cols / elems`` lanes share a row (at most 32, repeating over the row where it
    is wider), each warp covers ``32 * elems / cols`` rows (at least one) per slot group, and four groups of slots
    stack the warps' rows. Returns ``(rows, layout)``.

        >>> lane_rows(64, 8)[0], lane_rows(128, 4)[0], lane_rows(256, 4)[0]
        (64, 16, 16)
    """
    lanes = min(32, cols // elems)              # lanes that share a row
    reps = cols // (lanes * elems)              # vectors of a row per lane
    per_warp = 32 // lanes                      # rows one warp instruction covers
    warps = threads // 32
    rows = 4 * warps * per_warp
    return rows, TileLayout(S[(4, warps, per_warp, reps, lanes, elems) :
                              (reps * elems @ m, 1 @ warpid, lanes @ laneid, elems @ m, 1 @ laneid, 1 @ m)])


def sum_layout(threads=THREADS, line=False):
    """The row sums of a :func:`lane_rows` tile of 64 bf16 / f16 columns (8 lanes a row): row ``r`` in the 8 lanes
    that hold it; ``line``: the same floats as a ``(1, 64)`` tile (for the column mask)."""
    lead = ((1,), (1 @ m,)) if line else ((), ())
    return TileLayout(S[lead[0] + (4, threads // 32, 4) : lead[1] + (1 @ m, 1 @ warpid, 8 @ laneid)]
                      + R[8 : 1 @ laneid])


@T.macro
def lane_row_sums(acc, O, dO, b, r0, h, D, dtype, packed=False):
    """``acc`` (:func:`sum_layout`) = ``rowsum(O * dO)`` of rows ``r0 .. r0 + 63`` of head ``h`` of batch element
    ``b`` (``packed``: of the packed ``(rows, heads, dim)`` tensors; ``b`` unused): 8 lanes a row, one 16-byte vector
    each, products summed over the row's 64-column chunks in each thread, then butterflies over the row's lanes."""
    _, L = lane_rows(64, 8)
    o = T.alloc_local((64, 64), dtype, layout=L)
    g = T.alloc_local((64, 64), dtype, layout=L)
    prod = T.alloc_local((64, 64), "float32", layout=L)
    for j in range(D // 64):
        Tx.cta.fill(o, T.float32(0))
        Tx.cta.fill(g, T.float32(0))
        if packed:
            Tx.cta.copy(o, O[r0:r0 + 64, h, j * 64:j * 64 + 64])
            Tx.cta.copy(g, dO[r0:r0 + 64, h, j * 64:j * 64 + 64])
        else:
            Tx.cta.copy(o, O[b, r0:r0 + 64, h, j * 64:j * 64 + 64])
            Tx.cta.copy(g, dO[b, r0:r0 + 64, h, j * 64:j * 64 + 64])
        if j == 0:
            Tx.cta.mul(prod, o, g)
        else:
            Tx.cta.fma(prod, o, g, prod)
    Tx.cta.sum(acc, prod, axis=1)


@T.macro
def zero_rows(DQA, b, r0, h, D, packed=False):
    """Rows ``r0 .. r0 + 63`` of head ``h`` of ``DQA[b]`` (float32; ``packed``: of the packed ``(rows, heads, dim)``
    ``DQA``, ``b`` unused) set to 0 with 16-byte stores, a warp's lanes along a row (rows past the tensor's end are
    not written)."""
    zr, zl = lane_rows(D, 4)
    z = T.alloc_local((zr, D), "float32", layout=zl)
    Tx.cta.fill(z, T.float32(0))
    for i in range(64 // zr):
        if packed:
            Tx.cta.copy(DQA[r0 + i * zr:r0 + i * zr + zr, h, :], z)
        else:
            Tx.cta.copy(DQA[b, r0 + i * zr:r0 + i * zr + zr, h, :], z)


def check_problem(where, B, H, SQ, D, dtype):
    """``(B, H, SQ, D, dtype)`` checked: positive ints (``B``, ``H`` within a grid's ``y`` / ``z``), ``D`` a multiple
    of 64 (the kernels read rows 64 columns at a time), a 16-bit dtype; :class:`KernelConfigError` naming the
    argument otherwise.

        >>> check_problem("k", 1, 2, 100, 96, "bfloat16")
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: k: head dim D = 96 must be a positive multiple of 64
    """
    B = int_option(where, "B", B, 1, MAX_GRID[2])
    H = int_option(where, "H", H, 1, MAX_GRID[1])
    SQ = int_option(where, "SQ", SQ, 1, MAX_GRID[0] * 64)
    D = int_option(where, "D", D, 1, 1 << 16)
    if D % 64:
        raise KernelConfigError(f"{where}: head dim D = {D} must be a positive multiple of 64")
    return B, H, SQ, D, choice_option(where, "dtype", dtype, DTYPES)


@tirxpy.jit
def attention_bwd_preprocess(B, H, SQ, D, dtype="bfloat16", SQT=None, PDL=True):
    """The preprocessing kernel ``k(O, dO, DL, DQA)``: ``DL[b, h, s] = sum_d O[b, s, h, d] * dO[b, s, h, d]`` in
    float32 for ``O, dO: (B, SQT, H, D)`` and ``DL: (B, H, SQP)``, ``SQP = ceil(SQ / 64) * 64``; rows ``SQ .. SQP -
    1`` of ``DL`` get 0. It also zeroes the backward kernel's float32 ``dQ`` accumulator ``DQA: (B, SQT, H, D)``, so
    that no separate fill is needed. A CTA of :data:`THREADS` threads takes 64 rows of one head (module docstring).
    Grid ``(SQP / 64, H, B)``.
    ``PDL`` (default on): programmatic dependent launch; every thread waits for the previous kernel in the stream
    (``griddepcontrol.wait``) before its first load."""
    W = "attention_bwd_preprocess"
    B, H, SQ, D, dtype = check_problem(W, B, H, SQ, D, dtype)
    SQT = SQ if SQT is None else int_option(W, "SQT", SQT, SQ, 1 << 40)
    pdl = flag_option(W, "PDL", PDL)
    SQP = -(-SQ // 64) * 64

    @T.prim_func
    def attention_bwd_preprocess_kernel(O: T.Tensor((B, SQT, H, D), dtype), dO: T.Tensor((B, SQT, H, D), dtype),
                                        DL: T.Tensor((B, H, SQP), "float32"),
                                        DQA: T.Tensor((B, SQT, H, D), "float32")):
        T.launch(grid=(SQP // 64, H, B), threads=THREADS, pdl=pdl)
        if pdl:
            T.ptx.griddepcontrol_wait()
        acc = T.alloc_local((64,), "float32", layout=sum_layout())
        s0 = T.cta_id(0) * 64
        h = T.cta_id(1)
        b = T.cta_id(2)
        zero_rows(DQA, b, s0, h, D)
        lane_row_sums(acc, O, dO, b, s0, h, D, dtype)
        Tx.cta.copy(DL[b, h, s0:s0 + 64], acc)

    return attention_bwd_preprocess_kernel


@tirxpy.jit
def attention_bwd_preprocess_packed(B, H, TQ, D, SQ, XQ, dtype="bfloat16", PDL=True):
    """The preprocessing kernel of packed sequences ``k(O, dO, LSE, CUQ, DL, LS, DQA)``: for ``O, dO: (TQ, H, D)``
    (the packed rows), the forward's ``LSE: (H, TQ)`` and ``CUQ: (B + 1,)`` int32 offsets, ``DL[h, b, r] = sum_d
    O[q0 + r, h, d] * dO[q0 + r, h, d]`` and ``LS[h, b, r] = LSE[h, q0 + r]`` for the rows ``r < lq`` of sequence
    ``b`` (``q0``, ``lq``: :func:`~tirxpy_kernels.attention_walk.clamped_rows` of ``CUQ`` with window ``SQ``), and 0
    for ``lq <= r < XQ``; ``DL, LS: (H, B, XQ)`` float32, ``XQ`` a multiple of 64 at least ``SQ``. It also zeroes the
    backward kernel's float32 ``dQ`` accumulator ``DQA: (TQ, H, D)`` on every sequence's rows, in blocks of 64 from
    the sequence's start (so up to 63 rows past its end too, never past ``TQ``; rows before the first sequence are
    left as they are). A CTA of :data:`THREADS` threads takes 64 rows of one head of one sequence, as the
    dense kernel does. Grid ``(XQ / 64, H, B)``. ``PDL`` as in :func:`attention_bwd_preprocess`.

        >>> attention_bwd_preprocess_packed(3, 2, 1000, 64, 300, 320).launch.grid
        (5, 2, 3)
    """
    W = "attention_bwd_preprocess_packed"
    B, H, SQ, D, dtype = check_problem(W, B, H, SQ, D, dtype)
    TQ, XQ = int_option(W, "TQ", TQ, 1, 1 << 40), int_option(W, "XQ", XQ, 1, MAX_GRID[0] * 64)
    pdl = flag_option(W, "PDL", PDL)
    if XQ % 64 or XQ < SQ:
        raise KernelConfigError(f"attention_bwd_preprocess_packed: XQ = {XQ} must be a multiple of 64 of at least "
                                f"SQ = {SQ}")
    if TQ < 64:
        raise KernelConfigError(f"attention_bwd_preprocess_packed: {TQ} packed rows are fewer than one block of 64; "
                                "pad them (attention_varlen_api.pad_rows)")

    @T.prim_func
    def attention_bwd_preprocess_packed_kernel(O: T.Tensor((TQ, H, D), dtype), dO: T.Tensor((TQ, H, D), dtype),
                                               LSE: T.Tensor((H, TQ), "float32"), CUQ: T.Tensor((B + 1,), "int32"),
                                               DL: T.Tensor((H, B, XQ), "float32"),
                                               LS: T.Tensor((H, B, XQ), "float32"),
                                               DQA: T.Tensor((TQ, H, D), "float32")):
        T.launch(grid=(XQ // 64, H, B), threads=THREADS, pdl=pdl)
        if pdl:
            T.ptx.griddepcontrol_wait()
        acc = T.alloc_local((64,), "float32", layout=sum_layout())
        lse = T.alloc_local((64,), "float32", layout=sum_layout())
        s0 = T.cta_id(0) * 64
        h = T.cta_id(1)
        b = T.cta_id(2)
        q0, lq = clamped_rows(CUQ, b, SQ, TQ)
        Tx.cta.fill(acc, T.float32(0))
        Tx.cta.fill(lse, T.float32(0))
        if s0 < lq:                                  # (a block past the sequence's end only writes zeros)
            zero_rows(DQA, b, q0 + s0, h, D, packed=True)
            lane_row_sums(acc, O, dO, b, q0 + s0, h, D, dtype, packed=True)
            Tx.cta.copy(lse, LSE[h, q0 + s0:q0 + s0 + 64])
        for t in (acc, lse):                         # rows past the sequence's end: 0
            line = t.alias((1, 64), layout=sum_layout(line=True))
            Tx.cta.mask(line, line, T.float32(0), cols=lq - s0)
        Tx.cta.copy(DL[h, b, s0:s0 + 64], acc)
        Tx.cta.copy(LS[h, b, s0:s0 + 64], lse)

    return attention_bwd_preprocess_packed_kernel


__all__ = ["attention_bwd_preprocess", "attention_bwd_preprocess_packed"]
