"""Intrinsics-only Hopper pipeline kernels for the simulator tests: a producer warp issues TMA
loads into a 2-stage 128B-swizzled ring (full / empty mbarriers), a consumer warpgroup runs
wgmma on them and writes C through shared memory with a TMA store. ``drop=`` removes one
synchronization step so tests can check that the simulator names the problem."""
from tirxpy import T
from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_128B


def pipeline_gemm(M=64, N=64, K=256, drop=None, BN=None):
    """C[M, N] = A[M, K] @ B[N, K]^T (bf16 in, f32 out): CTA (bx, by) computes the 64 x BN tile
    (by, bx) with one consumer warpgroup."""
    BN = N if BN is None else BN
    assert M % 64 == 0 and N % BN == 0 and K % 64 == 0
    KT = K // 64
    from tirxpy.intrinsics import wgmma

    NT = N
    N = BN
    WG = wgmma.get(n=N, d="float32", a="bfloat16", b="bfloat16", a_from="smem")
    SMA = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(2, 64, 64)]))
    SMB = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(2, N, 64)]))
    BYTES = (64 * 64 + N * 64) * 2
    wait_full = drop != "full_wait"
    wait_empty = drop != "empty_wait"
    expect = drop != "expect_tx"
    fence = drop != "fence_proxy_async"
    wgwait = drop != "wgmma_wait"
    wgfence = drop != "wgmma_fence"
    zero_fill = drop == "wgmma_fence"

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((NT, K), "bfloat16"), C: T.Tensor((M, NT), "float32")):
        T.launch(grid=(NT // BN, M // 64), threads=256)
        bx = T.cta_id(0)
        by = T.cta_id(1)
        As = T.alloc_shared((2, 64, 64), "bfloat16", layout=SMA)
        Bs = T.alloc_shared((2, N, 64), "bfloat16", layout=SMB)
        Cs = T.alloc_shared((64, N), "float32")
        full = T.alloc_shared((2,), "uint64")
        empty = T.alloc_shared((2,), "uint64")
        acc = T.alloc_local((N // 2,), "float32")
        if T.thread_id() == 0:
            for s in T.serial(2):
                T.ptx.mbarrier_init(full[s], 1)
                T.ptx.mbarrier_init(empty[s], 128)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.warpgroup_id() == 0:
            if T.elect_one():
                for k in T.serial(KT):
                    s = k % 2
                    if wait_empty:
                        if k >= 2:
                            T.ptx.mbarrier_wait_parity(empty[s], (k // 2 - 1) % 2)
                    if expect:
                        T.ptx.mbarrier_arrive_expect_tx(full[s], BYTES)
                    else:
                        T.ptx.mbarrier_arrive(full[s])
                    T.ptx.tma_load_2d(As[s], A[by * 64:by * 64 + 64, k * 64:k * 64 + 64], 0, 0, full[s])
                    T.ptx.tma_load_2d(Bs[s], B[bx * N:bx * N + N, k * 64:k * 64 + 64], 0, 0, full[s])
        else:
            if zero_fill:
                for i in T.serial(N // 2):
                    acc[i] = T.float32(0)
            for k in T.serial(KT):
                s = k % 2
                if wait_full:
                    T.ptx.mbarrier_wait_parity(full[s], (k // 2) % 2)
                if wgfence:
                    T.ptx.wgmma_fence()
                for kk in T.unroll(4):
                    WG(acc, As[s, 0:64, kk * 16:kk * 16 + 16],
                   Bs[s, 0:N, kk * 16:kk * 16 + 16], zero_fill or k > 0 or kk > 0, 1, 1, 0, 0)
                T.ptx.wgmma_commit_group()
                if wgwait:
                    T.ptx.wgmma_wait_group(0)
                T.ptx.mbarrier_arrive(empty[s])
            wiw = T.warp_id_in_wg()
            lane = T.lane_id()
            for nb in T.serial(N // 8):
                for h in T.unroll(2):
                    for c in T.unroll(2):
                        Cs[16 * wiw + 8 * h + lane // 4, 8 * nb + 2 * (lane % 4) + c] = acc[4 * nb + 2 * h + c]
            if fence:
                T.ptx.fence_proxy_async()
            T.ptx.barrier_sync(1, 128)
            if T.thread_id_in_wg() == 0:
                T.ptx.tma_store_2d(C[by * 64:by * 64 + 64, bx * N:bx * N + N], 0, 0, Cs)
                T.ptx.bulk_commit_group()
                T.ptx.bulk_wait_group(0)
    return gemm
