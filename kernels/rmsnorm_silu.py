"""Fused RMSNorm + SiLU over rows, written only with tile primitives.

``y[r, :] = silu(x[r, :] / sqrt(mean(x[r, :]**2) + eps) * w)``, bf16 in and out, float32 math.

One CTA per row (rows of up to 512 elements: one warp per row, 8 rows per CTA): every thread
holds ``vecs`` 16-byte (or narrower, when ``d`` demands) vectors of the row in registers (one
pass over ``x``), the sum of squares is a CTA reduction (warp butterflies, then one
shared-memory exchange; just the butterflies for a warp per row), and the result leaves with
vector stores. Works
for any ``d`` that is a multiple of 32 (vector width ``v``: the largest power of two <= 8 that
divides ``d / 32``; rows of up to 1024 threads).

    >>> k = rmsnorm_silu(64, 4096)
    >>> k.launch.threads, plan(4096), plan(96), plan(8192), rmsnorm_silu(64, 256).launch.threads
    (256, (8, 2, 256), (1, 3, 32), (8, 2, 512), 256)
"""
from __future__ import annotations

import tirxpy
from tirxpy import T, Tx
from tirxpy.layout import R, S, TileLayout, laneid, m, warpid

from .errors import KernelConfigError


def plan(d: int, target_elems: int = 16) -> tuple:
    """``(v, vecs, threads)``: vector width in elements, vectors per thread, threads per row."""
    if d % 32 or d <= 0:
        raise KernelConfigError(f"rmsnorm_silu: the row width {d} must be a positive multiple of 32")
    q = d // 32
    v = 1
    while v < 8 and q % (2 * v) == 0:
        v *= 2
    vecs = max(1, target_elems // v)
    while vecs > 1 and d % (32 * v * vecs):
        vecs -= 1
    while d // (v * vecs) > 1024 or d % (32 * v * vecs):
        vecs += 1
    return v, vecs, d // (v * vecs)


def row_layout(d: int, elems_per_thread: int = 16) -> TileLayout:
    """Element ``((i * warps + w) * 32 + l) * v + j`` of the row lives in warp ``w``, lane ``l``, slot ``i * v + j``."""
    v, vecs, threads = plan(d, elems_per_thread)
    nw = threads // 32
    if nw == 1:  # a warp per row: lanes only, so every warp holds its own row
        return TileLayout(S[(vecs, 32, v) : (v @ m, 1 @ laneid, 1 @ m)])
    return TileLayout(S[(vecs, nw, 32, v) : (v @ m, 1 @ warpid, 1 @ laneid, 1 @ m)])


def scalar_layout(d: int, elems_per_thread: int = 16) -> TileLayout:
    """One float held (replicated) by every thread of the CTA."""
    nw = plan(d, elems_per_thread)[2] // 32
    if nw == 1:
        return TileLayout(S[1 : 1 @ m] + R[32 : 1 @ laneid])
    return TileLayout(S[1 : 1 @ m] + R[(32, nw) : (1 @ laneid, 1 @ warpid)])


@tirxpy.jit
def rmsnorm_silu(n_rows: int, d: int, eps: float = 1e-6, elems_per_thread: int = 16):
    """The kernel for ``n_rows`` rows of width ``d``: call it as ``k(x, w, y)`` (bf16 tensors
    ``(n_rows, d)``, ``(d,)``, ``(n_rows, d)``). The primitives run at CTA scope; with one warp
    per row each warp works on its own row (the row tiles' layouts name only lanes).
    ``elems_per_thread`` sets how much of the row each thread holds (bytes in flight)."""
    _, _, threads = plan(d, elems_per_thread)
    XL, SL = row_layout(d, elems_per_thread), scalar_layout(d, elems_per_thread)
    inv_d = 1.0 / d
    # one warp per row (d <= 512): 8 rows per CTA, each warp its own instance of the row tiles
    rpc = 8 if threads == 32 else 1
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
        Tx.cta.copy(x, X[row, :])            # 16-byte vector loads, one pass over x
        Tx.cta.copy(w, W[0:d])
        Tx.cta.cast(xf, x)
        Tx.cta.mul(sq, xf, xf)
        Tx.cta.sum(ms, sq, axis=0)           # warp butterflies + one shared-memory exchange
        Tx.cta.fma(ms, ms, T.float32(inv_d), T.float32(eps))
        Tx.cta.rsqrt(ms, ms)
        Tx.cta.mul(xf, xf, ms)               # broadcast the row's scale
        Tx.cta.mul(xf, xf, w)
        Tx.cta.silu(xf, xf)
        Tx.cta.copy(Y[row, :], xf)           # convert to bf16, 16-byte vector stores

    return rmsnorm_silu_kernel
