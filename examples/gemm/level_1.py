"""GEMM level 1: one warpgroup per 64 x BN tile, plain loads into swizzled shared memory, one wgmma.

``C = A @ B^T`` (``A`` ``(M, K)``, ``B`` ``(N, K)``, bf16 in, float32 out). CTA ``(x, y)`` owns the
64 x ``BN`` tile ``(y, x)`` of ``C``. Its 128 threads copy the whole 64 x K block of ``A`` and ``BN`` x K
block of ``B`` into shared memory with ordinary loads (rows past ``M`` / ``N`` as zeros), into the
128B-swizzled K-major layouts wgmma reads (:func:`tirxpy.layout.atoms.mma_smem_layout`); a
``fence.proxy.async`` makes those generic-proxy stores visible to the tensor cores; then
``Tx.wg.gemm`` issues the wgmma instructions over all of K and waits for them, and the accumulator goes
to global memory straight from registers (stores past ``M`` / ``N`` are guarded).

Nothing overlaps: every CTA loads, then computes, then stores. The whole K extent sits in shared
memory, so K is bounded by the 227 KiB a CTA may hold: ``(64 + BN) * K * 2`` bytes.

    python examples/gemm/level_1.py          # on a Hopper GPU, next to cuBLAS
    python examples/gemm/level_1.py --sim    # under the CPU simulator, against float64
"""
import sys

import ladder
from tirxpy import T, Tx
from tirxpy.layout import S, TileLayout, laneid, m, wid_in_wg
from tirxpy.layout.atoms import mma_smem_layout

NAME = "level 1 (plain loads + wgmma)"
BM, BN = 64, 128
GPU_SHAPE = (4096, 4096, 512)
SIM_SHAPE = (100, 200, 128)
SHAPE_RULE = f"any M and N; K a multiple of 64 with (64 + {BN}) * K * 2 bytes of shared memory at most 227 KiB (K <= 576)"

# the wgmma accumulator of a 64 x n tile: warp w of the warpgroup holds rows 16 w .. 16 w + 15
ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def check_shape(M, N, K):
    """None, or why the kernel does not take ``(M, N, K)``."""
    if K % 64:
        return f"K = {K} is not a multiple of 64"
    if (BM + BN) * K * 2 > 232448:
        return f"K = {K} needs {(BM + BN) * K * 2} bytes of shared memory"
    return None


def build(M, N, K):
    SA = mma_smem_layout(BM, K, "bfloat16", "K", 128)
    SB = mma_smem_layout(BN, K, "bfloat16", "K", 128)

    @T.prim_func
    def gemm_level_1(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
                     C: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=128)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        tid = T.thread_id()
        As = T.alloc_shared((BM, K), "bfloat16", layout=SA)
        Bs = T.alloc_shared((BN, K), "bfloat16", layout=SB)
        acc = T.alloc_local((BM, BN), "float32", layout=ACC)
        for i in T.serial(BM * K // 128):
            r = (i * 128 + tid) // K
            c = (i * 128 + tid) % K
            if m0 + r < M:
                As[r, c] = A[m0 + r, c]
            else:
                As[r, c] = T.cast(0, "bfloat16")
        for i in T.serial(BN * K // 128):
            r = (i * 128 + tid) // K
            c = (i * 128 + tid) % K
            if n0 + r < N:
                Bs[r, c] = B[n0 + r, c]
            else:
                Bs[r, c] = T.cast(0, "bfloat16")
        T.ptx.fence_proxy_async()          # generic-proxy stores -> visible to wgmma (the async proxy)
        T.ptx.syncthreads()
        Tx.wg.gemm(acc, As, Bs, transpose_b=True, accumulate=False)
        Tx.wg.copy(C[m0:m0 + BM, n0:n0 + BN], acc)

    return gemm_level_1


if __name__ == "__main__":
    sys.exit(ladder.main(sys.modules[__name__]))
