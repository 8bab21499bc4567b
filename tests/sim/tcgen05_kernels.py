"""A one-CTA tcgen05 kernel for the simulator tests: C (128 x 32, float32 bits) = A (128 x 64) @ B (32 x 64)^T in
bf16 through tensor memory (alloc, four mma of K = 16, commit to an mbarrier, 32x32b ld, dealloc).
``first_accumulates``: the first mma accumulates into the fresh accumulator; ``mma=False``: no mma at all;
``wait=False``: the ld does not wait for the commit; ``wait_ld=False``: the ld's registers are read with no
tcgen05.wait::ld; ``st_early``: warp 1 tcgen05.st's its quarter of the accumulator while the mma may run;
``dealloc_sync=False``: warp 0 deallocates with no barrier after the other warps' ld; ``fence_before=False``: no
``tcgen05.fence::before_thread_sync`` between the ld and that barrier; ``fence_dealloc=False``: no
``tcgen05.fence::after_thread_sync`` between the barrier and the dealloc; ``remma``: instead of deallocating at once,
thread 0 issues the mma again after the barrier (overwriting the cells the other warps read), commits and waits;
``recp``: with ``remma``, that thread issues a ``tcgen05.cp .32x128b.warpx4`` into columns 0..3 of all 128 lanes
instead of the mma."""
from tirxpy import T, Tx


def mma_kernel(first_accumulates=False, mma=True, wait=True, wait_ld=True, st_early=False, dealloc_sync=True,
               fence_before=True, fence_dealloc=True, remma=False, recp=False):
    from tirxpy.intrinsics import descriptors as D
    from tirxpy.intrinsics import tcgen05_ld, tcgen05_st
    from tirxpy.layout.atoms import mma_smem_layout, tmem_warpx4_layout

    LD = tcgen05_ld.get(shape="32x32b", rep=32)
    ST = tcgen05_st.get(shape="32x32b", rep=32)
    SA = mma_smem_layout(128, 64, "bf16", "K", 128)
    SB = mma_smem_layout(32, 64, "bf16", "K", 128)
    IDESC = D.tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=32)
    FIRST, MMA, WAIT, WAIT_LD, ST_EARLY, DEALLOC_SYNC = first_accumulates, mma, wait, wait_ld, st_early, dealloc_sync
    FENCE_BEFORE, FENCE_DEALLOC, REMMA, RECP = fence_before, fence_dealloc, remma, recp
    SF = tmem_warpx4_layout(4, col=0)

    @T.prim_func
    def k(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((32, 64), "bfloat16"), C: T.Tensor((128, 32), "uint32")):
        T.launch(grid=(1,), threads=128)
        sa = T.alloc_shared((128, 64), "bfloat16", layout=SA)
        sb = T.alloc_shared((32, 64), "bfloat16", layout=SB)
        bar = T.alloc_shared((1,), "uint64")
        taddr = T.alloc_shared((1,), "uint32")
        ss = T.alloc_shared((32, 4), "uint32")
        sf = T.alloc_tmem((32, 4), "uint32", layout=SF)
        d = T.alloc_local((32,), "uint32")
        t = T.thread_id()
        for j in T.serial(64):
            sa[t, j] = A[t, j]
            if t < 32:
                sb[t, j] = B[t, j]
        if t < 32:
            for j in T.serial(4):
                ss[t, j] = T.uint32(j)
        T.ptx.fence_proxy_async()
        if T.warp_id() == 0:
            T.ptx.tcgen05_alloc_cg1(taddr[0], T.uint32(32))
        if t == 0:
            T.ptx.mbarrier_init(bar[0], 1)
        T.ptx.syncthreads()
        if ST_EARLY:
            if T.warp_id() == 1:
                for j in T.serial(32):
                    d[j] = T.uint32(0)
                ST(taddr[0] + T.cast(32 << 16, "uint32"), d)
                T.ptx.tcgen05_wait_st()
        if t == 0:
            if MMA:
                for kk in T.serial(4):
                    T.ptx.tcgen05_mma_cg1_f16_ss(taddr[0], sa[0:128, kk * 16:kk * 16 + 16],
                                                 sb[0:32, kk * 16:kk * 16 + 16], T.uint32(IDESC), kk > 0 or FIRST)
            T.ptx.tcgen05_commit_cg1(bar[0])
        if WAIT:
            T.ptx.mbarrier_wait_parity(bar[0], 0)
        T.ptx.tcgen05_fence_after_thread_sync()
        LD(taddr[0] + T.cast((T.warp_id() * 32) << 16, "uint32"), d)
        if WAIT_LD:
            T.ptx.tcgen05_wait_ld()
        for j in T.serial(32):
            C[t, j] = d[j]
        if FENCE_BEFORE:
            T.ptx.tcgen05_fence_before_thread_sync()
        if DEALLOC_SYNC:
            T.ptx.syncthreads()
        if REMMA:
            if t == 0:
                T.ptx.tcgen05_fence_after_thread_sync()
                if RECP:
                    Tx.copy_async(sf, ss, taddr=taddr[0])
                else:
                    T.ptx.tcgen05_mma_cg1_f16_ss(taddr[0], sa[0:128, 0:16], sb[0:32, 0:16], T.uint32(IDESC), False)
                T.ptx.tcgen05_commit_cg1(bar[0])
            T.ptx.mbarrier_wait_parity(bar[0], 1)
            T.ptx.tcgen05_fence_before_thread_sync()
            T.ptx.syncthreads()
        if T.warp_id() == 0:
            if FENCE_DEALLOC:
                T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr[0], T.uint32(32))
    return k
