"""Tiny complete kernels, one per gemm implementation, written with T / Tx like a user would.
Built by the CPU compile tests (tests/primitives/gemm/test_compile.py) and run against torch by
the GPU tests (tests/kernels/test_gemm_primitives_gpu.py). C = A @ B (A: (M, K); B: (K, N), or
(N, K) where the kernel says ``b_nk``); M and N need not be multiples of the CTA tile (ragged
edges: loads are zero-filled, stores guarded)."""
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.layout import S, TileLayout, laneid, m, wid_in_wg
from tirxpy.layout.atoms import mma_smem_layout


def _cdiv(a, b):
    return -(-a // b)


def mma_c(mt, nt):
    """(16 mt, 8 nt) float32 accumulator: mma.m16n8k16 C tiles, tile (i, j) at slot 4 (i nt + j)."""
    return TileLayout(S[(mt, 2, 8, nt, 4, 2) : (4 * nt @ m, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def mma_a(mt, kt):
    return TileLayout(S[(mt, 2, 8, kt, 2, 4, 2) : (8 * kt @ m, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)])


def mma_b(kt, nt):
    return TileLayout(S[(kt, 2, 4, 2, nt, 8) : (4 * nt @ m, 2 @ m, 1 @ laneid, 1 @ m, 4 @ m, 4 @ laneid)])


def wgmma_c(n):
    return TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])


def wgmma_a_regs(kt):
    return TileLayout(S[(4, 2, 8, kt, 2, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)])


def mma_sync_gemm(M, N, K, BM=32, BN=16, dtype="bfloat16"):
    """One warp per (BM, BN) tile of C; fragments loaded with Tx.warp.copy; Tx.warp.gemm."""
    CL, AL, BL = mma_c(BM // 16, BN // 8), mma_a(BM // 16, K // 16), mma_b(K // 16, BN // 8)

    @T.prim_func
    def k(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(_cdiv(N, BN), _cdiv(M, BM)), threads=32)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        a = T.alloc_local((BM, K), dtype, layout=AL)
        b = T.alloc_local((K, BN), dtype, layout=BL)
        acc = T.alloc_local((BM, BN), "float32", layout=CL)
        Tx.warp.fill(a, T.cast(0, dtype))
        Tx.warp.fill(b, T.cast(0, dtype))
        Tx.warp.copy(a, A[m0:m0 + BM, 0:K])
        Tx.warp.copy(b, B[0:K, n0:n0 + BN])
        Tx.warp.gemm(acc, a, b, accumulate=False)
        Tx.warp.copy(C[m0:m0 + BM, n0:n0 + BN], acc)

    return k


def wgmma_gemm(M, N, K, BN=64, a_regs=False, b_nk=True, dtype="bfloat16"):
    """One warpgroup per (64, BN) tile of C: A and B staged to shared memory in canonical 128B
    layouts by plain loads, then Tx.wg.gemm (wgmma SS, or RS with ``a_regs``); B is (N, K)
    K-major with ``b_nk``, else (K, N) MN-major."""
    BM = 64
    SA = mma_smem_layout(BM, K, dtype, "K", 128)
    SB = mma_smem_layout(BN, K, dtype, "K", 128) if b_nk else \
        mma_smem_layout(BN, K, dtype, "MN", 128).permute_dims((BN, K), (1, 0))
    b_shape, bs_shape = ((N, K), (BN, K)) if b_nk else ((K, N), (K, BN))
    ACC, AR = wgmma_c(BN), wgmma_a_regs(K // 16)

    @T.prim_func
    def k(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(_cdiv(N, BN), _cdiv(M, BM)), threads=128)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        tid = T.thread_id()
        As = T.alloc_shared((BM, K), dtype, layout=SA)
        Bs = T.alloc_shared(bs_shape, dtype, layout=SB)
        acc = T.alloc_local((BM, BN), "float32", layout=ACC)
        for i in T.serial(BM * K // 128):
            r = (i * 128 + tid) // K
            c = (i * 128 + tid) % K
            if m0 + r < M:
                As[r, c] = A[m0 + r, c]
            else:
                As[r, c] = T.cast(0, dtype)
        for i in T.serial(BN * K // 128):
            if b_nk:
                r = (i * 128 + tid) // K
                c = (i * 128 + tid) % K
                if n0 + r < N:
                    Bs[r, c] = B[n0 + r, c]
                else:
                    Bs[r, c] = T.cast(0, dtype)
            else:
                r = (i * 128 + tid) // BN
                c = (i * 128 + tid) % BN
                if n0 + c < N:
                    Bs[r, c] = B[r, n0 + c]
                else:
                    Bs[r, c] = T.cast(0, dtype)
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        if a_regs:
            a = T.alloc_local((BM, K), dtype, layout=AR)
            Tx.wg.fill(a, T.cast(0, dtype))
            Tx.wg.copy(a, A[m0:m0 + BM, 0:K])
            Tx.wg.gemm(acc, a, Bs, transpose_b=b_nk, accumulate=False)
        else:
            Tx.wg.gemm(acc, As, Bs, transpose_b=b_nk, accumulate=False)
        Tx.wg.copy(C[m0:m0 + BM, n0:n0 + BN], acc)

    return k


def tcgen05_gemm(N=128, K=64, dtype="bfloat16", cta_group=1):
    """One elected thread issues tcgen05.mma into a TMEM accumulator and commits to an mbarrier
    (compile-only here: Blackwell). cta_group=2: a CTA pair, commit multicast to both."""
    M = 128
    SA = mma_smem_layout(M, K, dtype, "K", 128)
    BNc = N // cta_group
    SB = mma_smem_layout(BNc, K, dtype, "K", 128)
    cl = (2,) if cta_group == 2 else None

    @T.prim_func
    def k(C: T.Tensor((M, N), "float32")):
        T.launch(grid=(cta_group,), threads=128, cluster=cl)
        As = T.alloc_shared((M, K), dtype, layout=SA)
        Bs = T.alloc_shared((BNc, K), dtype, layout=SB)
        bar = T.alloc_shared((1,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((M, N), "float32")
        if T.elect_one():
            if cta_group == 2:
                Tx.gemm_async(acc, As, Bs, taddr=tbase[0], transpose_b=True, accumulate=False, cta_group=2,
                              mbar=bar[0], cta_mask=3)
            else:
                Tx.gemm_async(acc, As, Bs, taddr=tbase[0], transpose_b=True, accumulate=False, mbar=bar[0])

    return k
