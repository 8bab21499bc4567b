"""Fused RMSNorm + SiLU over rows, written only with tile primitives.

``y[r, :] = silu(x[r, :] / sqrt(mean(x[r, :]**2) + eps) * w)``, bf16 in and out, float32 math.

The plan (:func:`plan`) deals a row of width ``d`` (any positive multiple of 32) to ``threads`` threads
as ``vecs`` vectors of ``v`` elements each:

- ``v``: the widest vector (at most 8 bf16 = 16 bytes) such that ``32 v`` divides ``d``, so every access
  is one aligned vector load or store;
- ``vecs``: ``elems_per_thread / v`` vectors per thread (fewer where they do not divide the row, more
  where the row would need over 1024 threads);
- ``threads = d / (v vecs)``. A row that fits one warp (``d <= 32 elems_per_thread``) is one warp's,
  eight rows to a CTA; a wider row is one CTA's.

The kernel is three named parts, each a macro over the row tiles: :func:`load_row` (one pass over
``x`` and the weights into registers), :func:`row_scale` (the sum of squares as a CTA reduction, warp
butterflies and then one shared-memory exchange, or just the butterflies for a warp per row; then
``rsqrt(mean + eps)``), :func:`store_silu` (scale, weight, SiLU, vector stores).

    >>> k = rmsnorm_silu(64, 4096)
    >>> k.launch.threads, plan(4096), plan(96), plan(8192), rmsnorm_silu(64, 256).launch.threads
    (256, (8, 2, 256), (1, 3, 32), (8, 2, 512), 256)
"""
from __future__ import annotations

import math
import numbers

import tirxpy
from tirxpy import T, Tx
from tirxpy.layout import R, S, TileLayout, laneid, m, warpid

from .errors import KernelConfigError, int_option

ELEMS_PER_THREAD = 16
"""Default elements of the row per thread: two 16-byte bf16 vectors, which deals a 4096-wide row to 256
threads (one CTA of 8 warps). Raising it keeps more bytes in flight per thread and gives a row fewer
threads (more rows per SM at once); lowering it does the opposite. ``benchmarks/rmsnorm_sweep.py`` times
the choices against a copy of the same bytes."""

WARP_ROWS_PER_CTA = 8
"""Rows per CTA when one warp holds a row: 8 (256 threads)."""

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: the kernel adds ``eps`` in float32, so it may not pass this."""


def plan(d: int, target_elems: int = ELEMS_PER_THREAD) -> tuple:
    """``(v, vecs, threads)``: vector width in elements, vectors per thread, threads per row (module docstring).
    ``d`` is a positive multiple of 32 and ``target_elems`` an int >= 1 (:class:`KernelConfigError` otherwise).

        >>> plan(64, 10 ** 12)
        (2, 1, 32)
        >>> plan(64, 0)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: rmsnorm_silu: elems_per_thread = 0 is out of range; it must be >= 1
    """
    d = int_option("rmsnorm_silu", "the row width d", d, lo=1, hi=2 ** 31 - 1)
    target_elems = int_option("rmsnorm_silu", "elems_per_thread", target_elems, lo=1)
    if d % 32:
        raise KernelConfigError(f"rmsnorm_silu: the row width {d} must be a positive multiple of 32")
    q = d // 32
    v = 1
    while v < 8 and q % (2 * v) == 0:
        v *= 2
    # no more vectors than the row has for one warp: wider counts never divide the row (the loop below is linear)
    vecs = max(1, min(target_elems // v, d // (32 * v)))
    while vecs > 1 and d % (32 * v * vecs):
        vecs -= 1
    while d // (v * vecs) > 1024 or d % (32 * v * vecs):
        vecs += 1
    return v, vecs, d // (v * vecs)


def row_layout(d: int, elems_per_thread: int = ELEMS_PER_THREAD) -> TileLayout:
    """Element ``((i * warps + w) * 32 + l) * v + j`` of the row lives in warp ``w``, lane ``l``, slot ``i * v + j``."""
    v, vecs, threads = plan(d, elems_per_thread)
    nw = threads // 32
    if nw == 1:  # a warp per row: lanes only, so every warp holds its own row
        return TileLayout(S[(vecs, 32, v) : (v @ m, 1 @ laneid, 1 @ m)])
    return TileLayout(S[(vecs, nw, 32, v) : (v @ m, 1 @ warpid, 1 @ laneid, 1 @ m)])


def scalar_layout(d: int, elems_per_thread: int = ELEMS_PER_THREAD) -> TileLayout:
    """One float held (replicated) by every thread of the CTA (of the warp, for a warp per row)."""
    nw = plan(d, elems_per_thread)[2] // 32
    if nw == 1:
        return TileLayout(S[1 : 1 @ m] + R[32 : 1 @ laneid])
    return TileLayout(S[1 : 1 @ m] + R[(32, nw) : (1 @ laneid, 1 @ warpid)])


def check_eps(eps) -> float:
    """``eps`` as a float when it is a real number (not a bool) in ``[0, FLOAT32_MAX]``: a NaN, an infinity, a
    negative value or one past float32 would turn every row's scale into NaN or 0.

        >>> check_eps(1e-5)
        1e-05
        >>> check_eps(float("nan"))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: rmsnorm_silu: eps must be a finite float >= 0 ..., got nan
    """
    real = isinstance(eps, numbers.Real) and not isinstance(eps, bool)
    if not (real and math.isfinite(eps) and 0 <= eps <= FLOAT32_MAX):
        raise KernelConfigError(f"rmsnorm_silu: eps must be a finite float >= 0 in float32's range, got {eps!r:.60}")
    return float(eps)


@T.macro
def load_row(x, w, xf, X, W, row, d):
    """Row ``row`` of ``X`` and the weights into registers (16-byte vector loads, one pass over ``x``); ``xf``
    the row in float32."""
    Tx.cta.copy(x, X[row, :])
    Tx.cta.copy(w, W[0:d])
    Tx.cta.cast(xf, x)


@T.macro
def row_scale(ms, sq, xf, inv_d, eps):
    """``ms = rsqrt(mean(xf^2) + eps)``, held by every thread of the row: warp butterflies, then one
    shared-memory exchange across the row's warps."""
    Tx.cta.mul(sq, xf, xf)
    Tx.cta.sum(ms, sq, axis=0)
    Tx.cta.fma(ms, ms, T.float32(inv_d), T.float32(eps))
    Tx.cta.rsqrt(ms, ms)


@T.macro
def store_silu(Y, xf, w, ms, row):
    """``Y[row] = silu(xf * ms * w)``, converted to bf16 and written with vector stores."""
    Tx.cta.mul(xf, xf, ms)               # broadcast the row's scale
    Tx.cta.mul(xf, xf, w)
    Tx.cta.silu(xf, xf)
    Tx.cta.copy(Y[row, :], xf)


@tirxpy.jit
def rmsnorm_silu(n_rows: int, d: int, eps: float = 1e-6, elems_per_thread: int = ELEMS_PER_THREAD):
    """The kernel for ``n_rows`` rows of width ``d``: call it as ``k(x, w, y)`` (bf16 tensors
    ``(n_rows, d)``, ``(d,)``, ``(n_rows, d)``). The primitives run at CTA scope; with one warp
    per row each warp works on its own row (the row tiles' layouts name only lanes).
    ``elems_per_thread``: elements of the row each thread holds (:data:`ELEMS_PER_THREAD` says when to
    change it). ``n_rows`` is an int in [1, 2**31 - 1] (the row index is 32-bit), ``eps`` a finite real number
    >= 0 within float32's range; :class:`KernelConfigError` names a bad one."""
    n_rows = int_option("rmsnorm_silu", "n_rows", n_rows, lo=1, hi=2 ** 31 - 1)
    eps = check_eps(eps)
    _, _, threads = plan(d, elems_per_thread)
    d, elems_per_thread = int(d), int(elems_per_thread)      # checked by plan (numpy ints become ints)
    XL, SL = row_layout(d, elems_per_thread), scalar_layout(d, elems_per_thread)
    inv_d = 1.0 / d
    rpc = WARP_ROWS_PER_CTA if threads == 32 else 1
    wpr = threads // 32

    @T.prim_func
    def rmsnorm_silu_kernel(X: T.Tensor((n_rows, d), "bfloat16"), W: T.Tensor((d,), "bfloat16"),
                            Y: T.Tensor((n_rows, d), "bfloat16")):
        T.launch(grid=((n_rows + rpc - 1) // rpc,), threads=threads * rpc)
        row = T.cta_id(0) * rpc + T.warp_id() // wpr
        x = T.alloc_local((d,), "bfloat16", layout=XL)
        w = T.alloc_local((d,), "bfloat16", layout=XL)
        xf = T.alloc_local((d,), "float32", layout=XL)
        sq = T.alloc_local((d,), "float32", layout=XL)
        ms = T.alloc_local((1,), "float32", layout=SL)
        load_row(x, w, xf, X, W, row, d)
        row_scale(ms, sq, xf, inv_d, eps)
        store_silu(Y, xf, w, ms, row)

    return rmsnorm_silu_kernel
