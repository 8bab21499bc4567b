"""GEMM level 2: TMA loads into a ring of shared-memory stages, handed over through mbarriers.

``C = A @ B^T`` (``A`` ``(M, K)``, ``B`` ``(N, K)``, bf16 in, float32 out); CTA ``(x, y)`` owns the 64 x
``BN`` tile ``(y, x)``. Level 1 loaded all of K, then computed; here loads and math overlap. Shared memory
holds ``STAGES`` stages of one 64-wide k-block each, and a :class:`tirxpy.lang.StageRing` of two mbarrier
arrays guards them: ``full[s]`` (stage ``s`` has landed) and ``empty[s]`` (stage ``s`` was read).

- Warpgroup 0 is the producer; one of its threads walks the k-blocks: k-block ``k`` uses stage
  ``k % STAGES``; it waits until the stage's previous round was read (``ring.wait_empty(k)``), announces
  the bytes the stage will receive (``ring.expect_bytes``: ``mbarrier.arrive.expect_tx``) and issues two
  TMA loads (``Tx.copy_async``) that complete those bytes on ``full``.
- Warpgroup 1 is the consumer: it waits for k-block ``k`` (``ring.wait_full(k)``: parity
  ``(k // STAGES) % 2``), runs wgmma on the stage, waits for it and releases the stage
  (``ring.release(k)``: one arrival on ``empty``), so the producer may refill it.

TMA zero-fills reads past the edges of ``A`` and ``B``, and the epilogue's stores are guarded, so ``M`` and
``N`` may be ragged. One consumer warpgroup of 64 rows cannot keep the tensor cores busy: level 3 gives
the CTA two.

    python examples/gemm/level_2.py          # on a Hopper GPU, next to cuBLAS
    python examples/gemm/level_2.py --sim    # under the CPU simulator, against float64
"""
import sys

import ladder
from tirxpy import T, Tx
from tirxpy.lang import StageRing
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_128B, wid_in_wg

NAME = "level 2 (TMA + mbarrier ring)"
BM, BN, BK, STAGES = 64, 128, 64, 4
GPU_SHAPE = (4096, 4096, 4096)
SIM_SHAPE = (128, 256, 384)
SHAPE_RULE = "any M and N; K a multiple of 64"

SMEM_A = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BM, BK)]))     # one 128B-swizzled tile a stage
SMEM_B = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BN, BK)]))
ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def check_shape(M, N, K):
    """None, or why the kernel does not take ``(M, N, K)``."""
    return f"K = {K} is not a multiple of {BK}" if K % BK else None


def build(M, N, K):
    KT = K // BK

    @T.prim_func
    def gemm_level_2(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
                     C: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=256)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        As = T.alloc_shared((STAGES, BM, BK), "bfloat16", layout=SMEM_A)
        Bs = T.alloc_shared((STAGES, BN, BK), "bfloat16", layout=SMEM_B)
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        acc = T.alloc_local((BM, BN), "float32", layout=ACC)
        ring = StageRing(full, empty, STAGES)
        if T.thread_id() == 0:
            ring.init(1, 1)                # full: the producer's arrival (+ bytes); empty: one consumer arrival
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.warpgroup_id() == 0:
            if T.thread_id() == 0:
                for k in T.serial(KT):
                    s = ring.stage(k)
                    ring.wait_empty(k)
                    ring.expect_bytes(k, (BM + BN) * BK * 2)
                    Tx.copy_async(As[s], A[m0:m0 + BM, k * BK:k * BK + BK], mbar=full[s], arrive=False,
                                  expect_tx=False)
                    Tx.copy_async(Bs[s], B[n0:n0 + BN, k * BK:k * BK + BK], mbar=full[s], arrive=False,
                                  expect_tx=False)
        else:
            for k in T.serial(KT):
                s = ring.stage(k)
                ring.wait_full(k)
                Tx.wg.gemm_async(acc, As[s], Bs[s], transpose_b=True, accumulate=k > 0, wait=0)
                if T.thread_id_in_wg() == 0:
                    ring.release(k)
            Tx.wg.copy(C[m0:m0 + BM, n0:n0 + BN], acc)

    return gemm_level_2


if __name__ == "__main__":
    sys.exit(ladder.main(sys.modules[__name__]))
