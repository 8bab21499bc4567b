"""Fused RMSNorm + SiLU over rows, written only with tile primitives.

``y[r, :] = silu(x[r, :] / sqrt(mean(x[r, :]**2) + eps) * w)``, bf16 in and out, float32 math.

The plan (:func:`plan`) deals a row of width ``d`` (any positive multiple of 32 up to :data:`MAX_WIDTH`) to
``threads`` threads as ``vecs`` vectors of ``v`` elements each:

- ``v``: the widest vector (at most 8 bf16 = 16 bytes) such that ``32 v`` divides ``d``, so every access
  is one aligned vector load or store;
- ``vecs``: ``elems_per_thread / v`` vectors per thread (fewer where they do not divide the row, more
  where the row would need over 1024 threads);
- ``threads = d / (v vecs)``. A row that fits one warp (``d <= 32 elems_per_thread``) is one warp's,
  eight rows to a CTA; a wider row is one CTA's.

A thread holds its ``v vecs`` elements in registers, :func:`registers` of them within the 255-register limit:
at most :data:`MAX_ELEMS` = 84 in scalars, 72 in vectors; where the widest ``v`` would give a thread more, the
next narrower one is tried.
A row that no ``v`` deals within that (wider than :data:`MAX_WIDTH` = 1024 threads x 84, or ``32 p`` for a
prime ``p > 84``, which only one warp can take) is refused by the plan with a :class:`KernelConfigError`.

The kernel is three named parts, each a macro over the row tiles: :func:`load_row` (one pass over
``x`` and the weights into registers), :func:`row_scale` (the sum of squares as a CTA reduction, warp
butterflies and then one shared-memory exchange, or just the butterflies for a warp per row; then
``rsqrt(mean + eps)``), :func:`store_silu` (scale, weight, SiLU, vector stores).

    >>> k = rmsnorm_silu(64, 4096)
    >>> k.launch.threads, plan(4096), plan(96), plan(8192), rmsnorm_silu(64, 256).launch.threads
    (256, (8, 2, 256), (1, 3, 32), (8, 2, 512), 256)
    >>> plan(2752), plan(MAX_WIDTH)         # 43 vectors of 2 would take 302 registers a thread: vectors of 1
    ((1, 43, 64), (1, 84, 1024))
"""
from __future__ import annotations

import math

import numpy as np

import tirxpy
from tirxpy import T, Tx
from tirxpy.target import MAX_REGISTERS
from tirxpy.layout import R, S, TileLayout, laneid, m, warpid

from .errors import KernelConfigError, int_option, shown

ELEMS_PER_THREAD = 16
"""Default elements of the row per thread: two 16-byte bf16 vectors, which deals a 4096-wide row to 256
threads (one CTA of 8 warps). Raising it keeps more bytes in flight per thread and gives a row fewer
threads (more rows per SM at once); lowering it does the opposite. ``benchmarks/rmsnorm_sweep.py`` times
the choices against a copy of the same bytes."""

WARP_ROWS_PER_CTA = 8
"""Rows per CTA when one warp holds a row: 8 (256 threads)."""

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: the kernel adds ``eps`` in float32, so it may not pass this."""


MAX_THREADS = 1024
"""Threads of one row at most: a row wider than a warp's is one CTA's, and a CTA has at most 1024 threads."""


def registers(elems: int, v: int = 1) -> int:
    """32-bit registers per thread that the kernel's tiles take when a thread holds ``elems`` elements of the row in
    vectors of ``v``: ``x`` and ``w`` in bf16 (``elems / 2`` each, rounded up), ``xf`` and ``sq`` in float32
    (``elems`` each), the row's scale (1) and, for vectors (``v > 1``), the bf16 copy of the output that the vector
    store is made from (``elems / 2``); the lowered kernel's sum, which the IR verifier holds to 255.

        >>> registers(16, 8), registers(72, 8), registers(74, 2), registers(84), registers(85)
        (57, 253, 260, 253, 257)
    """
    half = -(-elems // 2)
    return 2 * half + 2 * elems + 1 + (half if v > 1 else 0)


MAX_ELEMS = max(e for e in range(1, MAX_REGISTERS) if registers(e) <= MAX_REGISTERS)
"""The most elements of the row one thread holds: 84 in scalars (253 registers; 85 would take 257), 72 in vectors."""

MAX_WIDTH = MAX_THREADS * MAX_ELEMS
"""The widest row the kernel takes: 86016 = 1024 threads x 84 elements (``plan(86016) == (1, 84, 1024)``)."""


def _vecs(d: int, v: int, target_elems: int) -> int:
    """Vectors of ``v`` per thread for a row of ``d`` (module docstring): ``target_elems / v``, fewer where they do
    not divide the row, more where the row would need over :data:`MAX_THREADS` threads."""
    # no more vectors than the row has for one warp: wider counts never divide the row (the loop below is linear)
    vecs = max(1, min(target_elems // v, d // (32 * v)))
    while vecs > 1 and d % (32 * v * vecs):
        vecs -= 1
    while d // (v * vecs) > MAX_THREADS or d % (32 * v * vecs):
        vecs += 1
    return vecs


def plan(d: int, target_elems: int = ELEMS_PER_THREAD) -> tuple:
    """``(v, vecs, threads)``: vector width in elements, vectors per thread, threads per row (module docstring).
    ``d`` is a positive multiple of 32 and ``target_elems`` an int >= 1; a row no plan deals within
    :data:`MAX_ELEMS` elements a thread (the register limit) and :data:`MAX_THREADS` threads is refused, by
    :class:`KernelConfigError` like any bad argument, before anything is built.

        >>> plan(64, 10 ** 12)
        (2, 1, 32)
        >>> plan(64, 0)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: rmsnorm_silu: elems_per_thread = 0 is out of range; it must be >= 1
        >>> plan(86048)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: rmsnorm_silu: the row width 86048 is past the widest row ...
    """
    d = int_option("rmsnorm_silu", "the row width d", d, lo=1, hi=2 ** 31 - 1)
    target_elems = int_option("rmsnorm_silu", "elems_per_thread", target_elems, lo=1)
    if d % 32:
        raise KernelConfigError(f"rmsnorm_silu: the row width {d} must be a positive multiple of 32")
    why = (f"a thread holds its share of the row in registers, within the {MAX_REGISTERS}-register limit at most "
           f"{MAX_ELEMS} elements (x and w in bf16, two float32 copies; 72 in vectors, which add a bf16 copy of the "
           f"output), and a row has at most {MAX_THREADS} threads (one CTA)")
    if d > MAX_WIDTH:
        raise KernelConfigError(f"rmsnorm_silu: the row width {d} is past the widest row the kernel takes, "
                                f"{MAX_WIDTH} = {MAX_THREADS} x {MAX_ELEMS}: {why}; this kernel does not split a "
                                "row over CTAs: normalize wider rows with another kernel")
    got = _deal(d, target_elems)
    if len(got) == 3:
        return got
    if len(_deal(d, ELEMS_PER_THREAD)) == 3:
        fix = f"pass a smaller elems_per_thread (the default, {ELEMS_PER_THREAD}, takes this row)"
    else:
        fix = (f"no split of {d // 32} fits that, so the kernel does not take this width (it takes every multiple "
               f"of 1024 up to {MAX_WIDTH}); normalize these rows with another kernel")
    raise KernelConfigError(f"rmsnorm_silu: the row width {d} = 32 x {d // 32} with elems_per_thread {target_elems} "
                            f"gives a thread {got[0]} elements of the row: {why}; {fix}")


def _deal(d: int, target_elems: int) -> tuple:
    """``(v, vecs, threads)`` of :func:`plan` for a checked ``d <= MAX_WIDTH``: the widest ``v`` whose thread holds
    within the register limit (:func:`registers`); ``(elems,)``, the widest ``v``'s elements a thread, when none
    does."""
    q = d // 32
    v = 1
    while v < 8 and q % (2 * v) == 0:
        v *= 2
    first = None
    while v:
        vecs = _vecs(d, v, target_elems)
        if registers(v * vecs, v) <= MAX_REGISTERS:
            return v, vecs, d // (v * vecs)
        first = first or v * vecs
        v //= 2
    return (first,)


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
    real = type(eps) in (int, float) or isinstance(eps, (np.integer, np.floating))
    if not (real and abs(eps) <= FLOAT32_MAX and math.isfinite(float(eps)) and 0 <= float(eps)):
        raise KernelConfigError("rmsnorm_silu: eps must be a finite float >= 0 in float32's range, got "
                                f"{shown(eps, 60)}")
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
