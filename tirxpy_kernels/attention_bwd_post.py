"""The step after the attention backward kernel (:mod:`tirxpy_kernels.attention_bwd_sm90`): ``dq`` = the float32
accumulator ``dQacc`` converted to the input dtype and written into a tensor of any token and batch strides (a
slice of a packed ``dqkv`` as well as a fresh tensor).

- :func:`attention_bwd_dq_store`: the kernel ``k(X, Y)``, ``X: (B, S, H, D)`` float32 dense, ``Y: (B, S, H, D)``
  in ``dtype`` with strides ``(sb, ss, D, 1)``. A CTA of 256 threads converts 64 rows of one head's 64 columns; a
  thread holds 8 consecutive floats of rows ``r`` and ``r + 32`` (two 16-byte loads and one 16-byte store each,
  rounded to nearest even as ``torch``'s conversion rounds), 8 threads a row. Rows past ``S`` are neither read nor
  written.
- :func:`dq_store`: that kernel, compiled for a given ``dq``, or None where its 16-byte stores cannot write it
  (:func:`dq_strides`; the caller then converts with torch).

    >>> attention_bwd_dq_store(2, 300, 4, 128).launch.grid
    (8, 5, 2)
"""
from __future__ import annotations

import tirxpy
from tirxpy import T, Tx
from tirxpy.layout import S, TileLayout, m, tx
from tirxpy.target import MAX_GRID

from .attention_bwd_plan import DTYPES, TARGET
from .errors import KernelConfigError, choice_option, flag_option, int_option, shown
from .launch_cache import compiled
from .views import tensor

W = "attention_bwd_dq_store"
ROWS = 64
"""Rows (tokens) of one CTA's tile."""
HALF = TileLayout(S[(2, 32, 8, 8) : (8 @ m, 8 @ tx, 1 @ tx, 1 @ m)])
"""A ``(64, 64)`` register tile over 256 threads: row ``32 i + r``, columns ``8 c .. 8 c + 7`` in thread ``8 r + c``,
slots ``8 i ..``: 8 threads cover a row's 256 bytes of floats, consecutive threads consecutive runs."""


@tirxpy.jit
def attention_bwd_dq_store(B, S_, H, D, dtype="bfloat16", sb=None, ss=None, PDL=True):
    """The conversion kernel ``k(X, Y)``: ``Y[b, s, h, d] = dtype(X[b, s, h, d])`` for ``X: (B, S_, H, D)`` float32
    dense and ``Y: (B, S_, H, D)`` in ``dtype`` (``"bfloat16"`` or ``"float16"``) with element strides ``(sb, ss, D,
    1)`` (default dense). ``ss`` and ``sb`` must be multiples of 8 (a row's 16-byte stores stay aligned), ``D`` a
    multiple of 64, ``S_`` at least 64; each argument is checked (:class:`KernelConfigError` naming it). Grid
    ``(H D / 64, ceil(S_ / 64), B)``. ``PDL`` (default on): programmatic dependent launch; every thread waits for the
    previous kernel in the stream (the backward kernel, ``griddepcontrol.wait``) before its first load."""
    pdl = flag_option(W, "PDL", PDL)
    B = int_option(W, "B", B, 1, MAX_GRID[2])                    # grid (H D / 64, ceil(S_ / 64), B)
    S_ = int_option(W, "S_", S_, 1, MAX_GRID[1] * ROWS)
    H, D = (int_option(W, n, v, 1, 1 << 20) for n, v in (("H", H), ("D", D)))
    dtype = choice_option(W, "dtype", dtype, DTYPES)
    if D % 64:
        raise KernelConfigError(f"{W}: head dim D = {D} must be a multiple of 64")
    if H * D // 64 > MAX_GRID[0]:
        raise KernelConfigError(f"{W}: H * D / 64 = {H * D // 64} column tiles are more than a grid holds "
                                f"({MAX_GRID[0]}); split the heads")
    if S_ < ROWS:
        raise KernelConfigError(f"{W}: S_ = {S_} rows are fewer than one tile of {ROWS}; convert them with torch "
                                "(dq.copy_(dqacc))")
    ss = H * D if ss is None else int_option(W, "ss", ss, 0, 1 << 40)
    sb = S_ * ss if sb is None else int_option(W, "sb", sb, 0, 1 << 40)
    sb, ss = check_dq_strides(W, H, D, (sb, ss))
    DC = D // 64

    @T.prim_func
    def attention_bwd_dq_store_kernel(X: T.Tensor((B, S_, H, D), "float32"),
                                      Y: tensor((B, S_, H, D), dtype, (sb, ss, D, 1))):
        T.launch(grid=(H * DC, -(-S_ // ROWS), B), threads=256, pdl=pdl)
        if pdl:
            T.ptx.griddepcontrol_wait()
        x = T.alloc_local((ROWS, 64), "float32", layout=HALF)
        s0 = T.cta_id(1) * ROWS
        h = T.cta_id(0) // DC
        c0 = T.cta_id(0) % DC * 64
        b = T.cta_id(2)
        Tx.cta.copy(x, X[b, s0:s0 + ROWS, h, c0:c0 + 64])
        Tx.cta.copy(Y[b, s0:s0 + ROWS, h, c0:c0 + 64], x)

    return attention_bwd_dq_store_kernel


def check_dq_strides(where, H, D, strides):
    """``(sb, ss)``, the batch and token element strides of a ``(B, S, H, D)`` ``dq`` written with 16-byte stores,
    checked: ints in ``[0, 2^40]``, multiples of 8 (a row's stores stay aligned), the token stride at least ``H *
    D`` (rows do not overlap); :class:`KernelConfigError` naming the strides otherwise.

        >>> check_dq_strides("k", 2, 64, (1024, 129))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: k: token / batch strides ss = 129 / sb = 1024 must be multiples of 8 \
and the token stride at least H * D = 128
    """
    if not isinstance(strides, tuple) or len(strides) != 2:
        raise KernelConfigError(f"{where}: dq strides must be a (batch, token) pair of ints, got {shown(strides, 60)}")
    sb, ss = (int_option(where, n, v, 0, 1 << 40) for n, v in (("sb", strides[0]), ("ss", strides[1])))
    if ss % 8 or sb % 8 or ss < H * D:
        raise KernelConfigError(f"{where}: token / batch strides ss = {ss} / sb = {sb} must be multiples of 8 and the "
                                f"token stride at least H * D = {H * D}")
    return sb, ss


def dq_strides(dq, rows=ROWS):
    """``(sb, ss)`` of ``dq`` ``(B, S, H, D)`` when :func:`attention_bwd_dq_store` can write it (each head's ``D``
    elements dense and next to the next head's (head stride ``D`` even for one head: the kernel's strides must be
    the tensor's), token and batch strides multiples of 8, 16-byte aligned, at least ``rows`` rows: its 64, 1 for
    the backward kernel that converts ``dQ`` itself), else None."""
    B, S_, H, D = dq.shape
    sb, ss, sh, sd = dq.stride()
    if S_ < rows or sd != 1 or sh != D or ss % 8 or sb % 8 or dq.data_ptr() % 16 or D % 64:
        return None
    if ss < H * D or (B > 1 and sb < S_ * ss):      # (rows of one tensor must not overlap)
        return None
    return sb, ss


def dq_store(dq, dtype):
    """The :func:`attention_bwd_dq_store` kernel (compiled) that writes ``dq`` from a dense float32 accumulator of its
    shape, or None where :func:`dq_strides` refuses ``dq``'s layout."""
    st = dq_strides(dq)
    if st is None:
        return None
    B, S_, H, D = dq.shape
    return compiled(attention_bwd_dq_store(B, S_, H, D, dtype, *st), TARGET)
