"""GEMM level 3: warp specialization, a producer warpgroup and two consumer warpgroups.

``C = A @ B^T`` (``A`` ``(M, K)``, ``B`` ``(N, K)``, bf16 in, float32 out); CTA ``(x, y)`` owns the 128 x
``BN`` tile ``(y, x)``. Level 2's ring stays (:class:`tirxpy.lang.StageRing`); what changes is who does
the work:

- :class:`tirxpy.lang.WarpRoles` splits the CTA's 384 threads into warpgroup 0, the producer (one of its
  threads issues the TMA loads), and warpgroups 1 and 2, the consumers, each computing 64 rows of the
  tile. The producer needs few registers, so it gives them up (``setmaxnreg.dec`` to 40) and the
  consumers take them (``setmaxnreg.inc`` to 232): ``40 * 128 + 232 * 256 = 384 * 168``, the CTA's launch
  allocation, which ``WarpRoles`` checks (a split that does not fit would hang the GPU).
- :func:`tirxpy.lang.setup_barriers` initialises the ring (``empty`` expects one arrival per consumer),
  fences and syncs the CTA.
- A consumer keeps one wgmma group in flight: ``gemm_async(..., wait=1)`` returns once the *previous*
  k-block's wgmma is done, so the stage that one read is released while this one runs.

Level 4 is the library kernel, which adds a persistent tile schedule, clusters and a shared-memory
epilogue.

    python examples/gemm/level_3.py          # on a Hopper GPU, next to cuBLAS
    python examples/gemm/level_3.py --sim    # under the CPU simulator, against float64
"""
import sys

import ladder
from tirxpy import T, Tx
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_128B, wid_in_wg

NAME = "level 3 (warp specialization)"
BM, BN, BK, STAGES = 128, 256, 64, 4
GPU_SHAPE = (4096, 4096, 4096)
SIM_SHAPE = (256, 256, 256)
SHAPE_RULE = "any M and N; K a multiple of 64"

SMEM_A = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BM, BK)]))
SMEM_B = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BN, BK)]))
ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])
ROLES = WarpRoles(384, 40, 232)


def check_shape(M, N, K):
    """None, or why the kernel does not take ``(M, N, K)``."""
    return f"K = {K} is not a multiple of {BK}" if K % BK else None


def build(M, N, K):
    KT = K // BK

    @T.prim_func
    def gemm_level_3(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
                     C: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=384)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        As = T.alloc_shared((STAGES, BM, BK), "bfloat16", layout=SMEM_A)
        Bs = T.alloc_shared((STAGES, BN, BK), "bfloat16", layout=SMEM_B)
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        acc = T.alloc_local((64, BN), "float32", layout=ACC)
        ring = StageRing(full, empty, STAGES)
        setup_barriers([(ring, 1, 2)], 1, False)      # full: the producer; empty: one thread per consumer
        wg = T.warpgroup_id()
        if wg == 0:
            ROLES.enter_producer()
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
            ROLES.enter_consumer()
            r0 = (wg - 1) * 64                        # this consumer's rows of the tile
            for k in T.serial(KT):
                s = ring.stage(k)
                ring.wait_full(k)
                Tx.wg.gemm_async(acc, As[s, r0:r0 + 64, :], Bs[s], transpose_b=True, accumulate=k > 0, wait=1)
                if k > 0:
                    if T.thread_id_in_wg() == 0:
                        ring.release(k - 1)           # wait=1: the previous k-block's wgmma is done
            Tx.wg.gemm_wait(0, acc)
            Tx.wg.copy(C[m0 + r0:m0 + r0 + 64, n0:n0 + BN], acc)

    return gemm_level_3


if __name__ == "__main__":
    sys.exit(ladder.main(sys.modules[__name__]))
