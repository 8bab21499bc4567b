"""A warp-specialized GEMM written with tirxpy.lang (the README's kernel with its orchestration named):
C[M, N] = A[M, K] @ B[N, K]^T, bf16 in, f32 out, one producer and two consumer warpgroups."""
from tirxpy import T, Tx
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_128B, wid_in_wg


def ring_gemm(M, N, K, STAGES=3, release=True, regs=(40, 232)):
    BM, BN, BK = 128, 128, 64
    SMEM = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BM, BK)]))
    ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2) : (1@wid_in_wg, 2@m, 4@laneid, 4@m, 1@laneid, 1@m)])
    roles = WarpRoles(384, *regs)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(N // BN, M // BM), threads=384)
        bx, by = T.cta_id(0), T.cta_id(1)
        As = T.alloc_shared((STAGES, BM, BK), "bfloat16", layout=SMEM)
        Bs = T.alloc_shared((STAGES, BN, BK), "bfloat16", layout=SMEM)
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        acc = T.alloc_local((64, BN), "float32", layout=ACC)
        ring = StageRing(full, empty, STAGES)
        setup_barriers([(ring, 1, 2)], 1, False)
        wg = T.warpgroup_id()
        if wg == 0:
            roles.enter_producer()
            if T.thread_id() == 0:
                for k in T.serial(K // BK):
                    s = ring.stage(k)
                    ring.wait_empty(k)
                    ring.expect_bytes(k, (BM + BN) * BK * 2)
                    Tx.copy_async(As[s], A[by * BM:by * BM + BM, k * BK:k * BK + BK], mbar=full[s], arrive=False, expect_tx=False)
                    Tx.copy_async(Bs[s], B[bx * BN:bx * BN + BN, k * BK:k * BK + BK], mbar=full[s], arrive=False, expect_tx=False)
        else:
            roles.enter_consumer()
            for k in T.serial(K // BK):
                s = ring.stage(k)
                ring.wait_full(k)
                Tx.wg.gemm_async(acc, As[s, (wg - 1) * 64:(wg - 1) * 64 + 64], Bs[s], transpose_b=True,
                                 accumulate=k > 0, wait=0)
                if release:
                    if T.thread_id_in_wg() == 0:
                        ring.release(k)
            row = by * BM + (wg - 1) * 64
            Tx.wg.copy(C[row:row + 64, bx * BN:bx * BN + BN], acc)

    return gemm
