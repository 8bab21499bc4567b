"""The README's example kernel: a warp-specialized Hopper GEMM tile loop in the tirxpy IR.

Run ``python examples/ir_example.py`` to print it; tests/ir/test_example.py parses, prints,
re-parses and verifies it.
"""
from tirxpy import T, Tx
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_128B, wid_in_wg

M, N, K = 1024, 1024, 1024
BM, BN, BK, STAGES = 128, 128, 64, 3
SMEM = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(STAGES, BM, BK)]))        # 128B-swizzled stages
ACC = TileLayout(S[(4, 2, 8, BN // 8, 4, 2) : (1@wid_in_wg, 2@m, 4@laneid, 4@m, 1@laneid, 1@m)])  # wgmma C


@T.prim_func
def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "float32")):
    T.launch(grid=(N // BN, M // BM), threads=384)
    bx, by = T.cta_id(0), T.cta_id(1)
    As = T.alloc_shared((STAGES, BM, BK), "bfloat16", layout=SMEM)
    Bs = T.alloc_shared((STAGES, BN, BK), "bfloat16", layout=SMEM)
    full = T.alloc_shared((STAGES,), "uint64")                     # stage s has landed
    empty = T.alloc_shared((STAGES,), "uint64")                    # both consumers have read stage s
    acc = T.alloc_local((64, BN), "float32", layout=ACC)
    if T.thread_id() == 0:
        for s in T.serial(STAGES):
            T.ptx.mbarrier_init(full[s], 2)                        # the two TMA loads arrive
            T.ptx.mbarrier_init(empty[s], 2)                       # one thread per consumer arrives
        T.ptx.fence_mbarrier_init()
    T.ptx.syncthreads()
    wg = T.warpgroup_id()
    if wg == 0:                                                    # producer: one thread issues TMA
        if T.thread_id() == 0:
            for k in T.serial(K // BK):
                s = k % STAGES
                if k >= STAGES:                                    # wait until round k / STAGES - 1 is read
                    T.ptx.mbarrier_wait_parity(empty[s], (k // STAGES - 1) % 2)
                Tx.copy_async(As[s], A[by * BM:by * BM + BM, k * BK:k * BK + BK], mbar=full[s])
                Tx.copy_async(Bs[s], B[bx * BN:bx * BN + BN, k * BK:k * BK + BK], mbar=full[s])
    else:                                                          # consumers: 64 rows per warpgroup
        for k in T.serial(K // BK):
            s = k % STAGES
            T.ptx.mbarrier_wait_parity(full[s], (k // STAGES) % 2)
            Tx.wg.gemm_async(acc, As[s, (wg - 1) * 64:(wg - 1) * 64 + 64], Bs[s], transpose_b=True,
                             accumulate=k > 0, wait=0)
            if T.thread_id_in_wg() == 0:
                T.ptx.mbarrier_arrive(empty[s])
        row = by * BM + (wg - 1) * 64
        Tx.wg.copy(C[row:row + 64, bx * BN:bx * BN + BN], acc)


if __name__ == "__main__":
    print(gemm)
