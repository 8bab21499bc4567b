"""Small Blackwell (sm_100a) kernels written as a new user would, with the public API only, each run in the
simulator against a float64 reference on random inputs, outputs poisoned first, at ragged sizes; and the mutation
each one invites (a missing mbarrier wait, tcgen05 fence, tcgen05.wait::ld or fence.proxy.async, an early
dealloc, a dropped commit) reported by name.

Covered: an M = 128 f16 tcgen05.mma into TMEM drained by ``Tx.wg.copy``; an M = 64 (Layout F) accumulator read
with raw ``tcgen05.ld`` of the 16-lane shapes, each register placed by ``tmem_ld_layout`` / ``tmem_ld_tmem_layout``
and checked against ``tmem_accumulator``; ``tcgen05.cp .32x128b.warpx4`` from ordinary stores, read back from all
four lane quarters; a CTA pair (``cta_group=2``, M = 256) whose MMA thread is chosen by
``warp == 1 and rank == 0``; a TMA -> tcgen05 StageRing over a grid of ragged tiles; an MXFP8 block-scaled MMA
with scales staged by ordinary stores."""
import numpy as np
import pytest
import torch

from tirxpy import T, Tx, sim
from tirxpy.lang import StageRing, setup_barriers
from tirxpy.layout import ComposeLayout, S, TCol, TileLayout, TLane, swizzle_for
from tirxpy.layout.atoms import (mma_smem_layout, tmem_accumulator, tmem_ld_layout, tmem_ld_tile, tmem_ld_tmem_layout,
                                 tmem_warpx4_layout)
from tirxpy.lower.build import build
from tirxpy.sim import SimReportError
from tirxpy.sim.values import from_bits, to_bits


def mma_m128(M, N, K, drop=None):
    """C = A @ B^T (f16 in, f32 out), one 128 x 64 tile: TMA per k-block on ``bars[0]``, one elected thread of
    warp 1 issues the MMAs committed to ``bars[1]``, all four warps drain TMEM and store."""
    BM, BN, BK = 128, 64, 64
    SA = mma_smem_layout(BM, BK, "float16", "K", 128)
    SB = mma_smem_layout(BN, BK, "float16", "K", 128)
    REGS = tmem_ld_layout("32x32b", BN)

    @T.prim_func
    def mma128(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(1,), threads=128)
        As = T.alloc_shared((BM, BK), "float16", layout=SA)
        Bs = T.alloc_shared((BN, BK), "float16", layout=SB)
        bars = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((128, BN), "float32")
        regs = T.alloc_local((128, BN), "float32", layout=REGS)
        warp = T.warp_id()
        if warp == 0:
            T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(BN))
            T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bars[0], 2)
            T.ptx.mbarrier_init(bars[1], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        m0 = T.cta_id(0) * BM
        for kb in T.serial(K // BK):
            if T.thread_id() == 0:
                Tx.copy_async(As, A[m0:m0 + BM, kb * BK:kb * BK + BK], mbar=bars[0])
                Tx.copy_async(Bs, B[m0:m0 + BN, kb * BK:kb * BK + BK], mbar=bars[0])
            if warp == 1 and T.elect_one():
                T.ptx.mbarrier_wait_parity(bars[0], kb % 2)
                T.ptx.tcgen05_fence_after_thread_sync()
                Tx.gemm_async(acc, As, Bs, taddr=taddr, transpose_b=True, accumulate=kb > 0, mbar=bars[1])
            if drop != "mma_wait" or kb < K // BK - 1:
                T.ptx.mbarrier_wait_parity(bars[1], kb % 2)
        if drop != "fence":
            T.ptx.tcgen05_fence_after_thread_sync()
        if drop == "early_dealloc" and warp == 0:
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(BN))
        Tx.wg.copy(regs, acc, taddr=taddr)
        Tx.wg.copy(C[m0:m0 + BM, m0:m0 + BN], regs)
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        if drop != "early_dealloc" and warp == 0:
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(BN))

    return mma128


@pytest.mark.parametrize("M, N", [(100, 50), (128, 33)])
def test_m128_f16_mma_into_tmem_and_epilogue_at_ragged_sizes(M, N):
    K = 128
    a, b = torch.randn(M, K).half(), torch.randn(N, K).half()
    c = torch.full((M, N), float("nan"))
    sim.run(mma_m128(M, N, K), a, b, c, arch="sm_100a")
    assert (c.double() - a.double() @ b.double().T).abs().max().item() < 1e-4
    src = build(mma_m128(M, N, K), "sm_100a").cuda_source
    assert "tcgen05.mma.cta_group::1.kind::f16" in src and "tx_tcgen05_ld_32x32b_x64" in src


@pytest.mark.parametrize("drop, kind", [("mma_wait", "tmem_read_before_commit"), ("fence", "missing_tcgen05_fence"),
                                        ("early_dealloc", "tmem_oob")])
def test_m128_mutations_are_reported(drop, kind):
    a, b = torch.randn(100, 128).half(), torch.randn(50, 128).half()
    with pytest.raises(SimReportError) as e:
        sim.run(mma_m128(100, 50, 128, drop=drop), a, b, torch.zeros(100, 50), arch="sm_100a")
    assert kind in e.value.kinds()


def mma_m64_raw_ld(N, K, shape, num, lane_base, wait=True):
    """The M = 64 accumulator (Layout F at ``lane_base``) read with raw ``tcgen05.ld.{shape}.x{num}`` in chunks of
    the shape's columns; thread ``t`` writes its registers of chunk ``j`` to ``O[t, j, :]`` as raw bits."""
    BK = 64
    SA = mma_smem_layout(64, BK, "float16", "K", 128)
    SB = mma_smem_layout(N, BK, "float16", "K", 128)
    D = tmem_accumulator(64, N, lane_base=lane_base)
    rows, cols = tmem_ld_tile(shape, num)
    nreg = rows * cols // 128
    ld = getattr(T.ptx, f"tcgen05_ld_{shape}_x{num}")

    @T.prim_func
    def m64(A: T.Tensor((64, K), "float16"), B: T.Tensor((N, K), "float16"),
            O: T.Tensor((128, N // cols, nreg), "uint32")):
        T.launch(grid=(1,), threads=128)
        As = T.alloc_shared((64, BK), "float16", layout=SA)
        Bs = T.alloc_shared((N, BK), "float16", layout=SB)
        bars = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_buffer((64, N), "float32", scope="tmem", layout=D)
        r = T.alloc_local((nreg,), "uint32")
        warp = T.warp_id()
        if warp == 0:
            T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(N))
            T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bars[0], 2)
            T.ptx.mbarrier_init(bars[1], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        for kb in T.serial(K // BK):
            if T.thread_id() == 0:
                Tx.copy_async(As, A[:, kb * BK:kb * BK + BK], mbar=bars[0])
                Tx.copy_async(Bs, B[:, kb * BK:kb * BK + BK], mbar=bars[0])
            if warp == 1 and T.elect_one():
                T.ptx.mbarrier_wait_parity(bars[0], kb % 2)
                T.ptx.tcgen05_fence_after_thread_sync()
                Tx.gemm_async(acc, As, Bs, taddr=taddr, transpose_b=True, accumulate=kb > 0, mbar=bars[1])
            T.ptx.mbarrier_wait_parity(bars[1], kb % 2)
        T.ptx.tcgen05_fence_after_thread_sync()
        for j in T.serial(N // cols):
            ld(taddr + T.uint32(j * cols) + (T.cast(warp * 32 + lane_base, "uint32") << T.uint32(16)), r[:])
            if wait:
                T.ptx.tcgen05_wait_ld()
            for i in T.unroll(nreg):
                O[T.thread_id(), j, i] = r[i]
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        if warp == 0:
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(N))

    return m64


@pytest.mark.parametrize("shape, num, lane_base", [("16x64b", 4, 16), ("16x128b", 2, 16), ("16x256b", 2, 0)])
def test_m64_layout_f_raw_tcgen05_ld_agrees_with_the_layout_queries(shape, num, lane_base):
    """Element (row, col) of chunk j: ``tmem_ld_layout`` names the thread and register that hold it,
    ``tmem_ld_tmem_layout`` its TMEM cell, which must be the cell ``tmem_accumulator`` gives (row, j * cols + col)."""
    N, K = 64, 128
    rows, cols = tmem_ld_tile(shape, num)
    a, b = torch.randn(64, K).half(), torch.randn(N, K).half()
    o = np.full((128, N // cols, rows * cols // 128), 0x7FC00001, np.uint32)
    sim.run(mma_m64_raw_ld(N, K, shape, num, lane_base), a, b, o, arch="sm_100a")
    got, ref = o.view(np.float32).astype(np.float64), (a.double() @ b.double().T).numpy()
    RL, TL = tmem_ld_layout(shape, num), tmem_ld_tmem_layout(shape, num, lane_base=lane_base)
    D = tmem_accumulator(64, N, lane_base=lane_base)
    for j in range(N // cols):
        for row in range(rows):
            for col in range(cols):
                own = RL.apply(row, col, shape=(rows, cols))
                cell, want = TL.apply(row, col, shape=(rows, cols)), D.apply(row, j * cols + col, shape=(64, N))
                assert (cell["TLane"], cell["TCol"] + j * cols) == (want["TLane"], want["TCol"])
                v = got[own.get("wid_in_wg", 0) * 32 + own["laneid"], j, own.get("m", 0)]
                assert abs(v - ref[row, j * cols + col]) < 1e-4


def test_raw_tcgen05_ld_registers_read_before_wait_ld_are_reported():
    a, b = torch.randn(64, 64).half(), torch.randn(32, 64).half()
    with pytest.raises(SimReportError) as e:
        sim.run(mma_m64_raw_ld(32, 64, "16x256b", 1, 16, wait=False), a, b, np.zeros((128, 4, 4), np.uint32),
                arch="sm_100a")
    assert "tmem_ld_before_wait" in e.value.kinds()


def cp_warpx4(col, drop=None):
    """X (32 x 4 words) -> shared by ordinary stores -> TMEM with ``tcgen05.cp .32x128b.warpx4`` (committed to an
    mbarrier) -> every warp's ``tcgen05.ld .32x32b`` of the same columns -> O (128 x 4): four copies of X."""
    SF = tmem_warpx4_layout(4, col=col)
    ALL = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)] + col @ TCol)
    REGS = tmem_ld_layout("32x32b", 4)

    @T.prim_func
    def cp(X: T.Tensor((32, 4), "uint32"), O: T.Tensor((128, 4), "uint32")):
        T.launch(grid=(1,), threads=128)
        ss = T.alloc_shared((32, 4), "uint32")
        bar = T.alloc_shared((1,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        sf = T.alloc_tmem((32, 4), "uint32", layout=SF)
        quarters = T.alloc_tmem((128, 4), "uint32", layout=ALL)
        regs = T.alloc_local((128, 4), "uint32", layout=REGS)
        warp = T.warp_id()
        if warp == 0:
            T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(32))
            T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        Tx.cta.copy(ss, X)
        if drop != "proxy":
            T.ptx.fence_proxy_async()
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        if warp == 0 and T.elect_one():
            Tx.copy_async(sf, ss, taddr=taddr)
            T.ptx.tcgen05_commit_cg1(bar[0])
        if drop != "wait":
            T.ptx.mbarrier_wait_parity(bar[0], 0)
        T.ptx.tcgen05_fence_after_thread_sync()
        Tx.wg.copy(regs, quarters, taddr=taddr)
        Tx.wg.copy(O, regs)
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        if warp == 0:
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(32))

    return cp


@pytest.mark.parametrize("col", [0, 12])
def test_tcgen05_cp_warpx4_lands_in_all_four_lane_quarters(col):
    x = np.random.randint(0, 2**32, (32, 4), dtype=np.uint64).astype(np.uint32)
    o = np.full((128, 4), 0xDEADBEEF, np.uint32)
    sim.run(cp_warpx4(col), x, o, arch="sm_100a")
    assert (o == np.tile(x, (4, 1))).all()


@pytest.mark.parametrize("drop, kind", [("proxy", "missing_fence_proxy_async"), ("wait", "tmem_read_before_commit")])
def test_tcgen05_cp_mutations_are_reported(drop, kind):
    with pytest.raises(SimReportError) as e:
        sim.run(cp_warpx4(8, drop), np.zeros((32, 4), np.uint32), np.zeros((128, 4), np.uint32), arch="sm_100a")
    assert kind in e.value.kinds()


def cta_pair(M, N, K, drop=None):
    """C = A @ B^T on a CTA pair, M = 256 (``tcgen05.mma.cta_group::2``): each CTA loads its 128 rows of A and
    N / 2 rows of B onto the leader's ``bars[0]``; the leader's MMA thread (``warp == 1 and rank == 0``, then
    elected) multicasts its commit to both CTAs' ``bars[1]``."""
    BK, BNc = 64, N // 2
    SA = mma_smem_layout(128, BK, "bfloat16", "K", 128)
    SB = mma_smem_layout(BNc, BK, "bfloat16", "K", 128)
    REGS = tmem_ld_layout("32x32b", N)

    @T.prim_func
    def pair(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(2,), threads=128, cluster=(2,))
        As = T.alloc_shared((128, BK), "bfloat16", layout=SA)
        Bs = T.alloc_shared((BNc, BK), "bfloat16", layout=SB)
        bars = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((128, N), "float32")
        regs = T.alloc_local((128, N), "float32", layout=REGS)
        warp = T.warp_id()
        rank = T.cluster_rank()
        if warp == 0:
            T.ptx.tcgen05_alloc_cg2(tbase[0], T.uint32(N))
            T.ptx.tcgen05_relinquish_alloc_permit_cg2()
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bars[0], 4)
            T.ptx.mbarrier_init(bars[1], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.cluster_sync()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        m0 = rank * 128
        n0 = rank * BNc
        for kb in T.serial(K // BK):
            if T.thread_id() == 0:
                Tx.copy_async(As, A[m0:m0 + 128, kb * BK:kb * BK + BK], mbar=bars[0], cta_group=2)
                Tx.copy_async(Bs, B[n0:n0 + BNc, kb * BK:kb * BK + BK], mbar=bars[0], cta_group=2)
            if warp == 1 and rank == 0:
                if T.elect_one():
                    T.ptx.mbarrier_wait_parity(bars[0], kb % 2)
                    T.ptx.tcgen05_fence_after_thread_sync()
                    Tx.gemm_async(acc, As, Bs, taddr=taddr, transpose_b=True, accumulate=kb > 0, cta_group=2,
                                  mbar=bars[1], cta_mask=3)
            T.ptx.mbarrier_wait_parity(bars[1], kb % 2)
        T.ptx.tcgen05_fence_after_thread_sync()
        Tx.wg.copy(regs, acc, taddr=taddr)
        Tx.wg.copy(C[m0:m0 + 128, 0:N], regs)
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.cluster_sync()
        if warp == 0 and drop != "dealloc":
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg2(taddr, T.uint32(N))

    return pair


def test_cta_pair_m256_mma_issued_under_a_conjunction_of_warp_and_rank():
    M, N, K = 200, 64, 128
    a, b = torch.randn(M, K).bfloat16(), torch.randn(N, K).bfloat16()
    c = torch.full((M, N), float("nan"))
    sim.run(cta_pair(M, N, K), a, b, c, arch="sm_100a")
    assert (c.double() - a.double() @ b.double().T).abs().max().item() < 1e-4
    src = build(cta_pair(M, N, K), "sm_100a").cuda_source
    assert "tcgen05.mma.cta_group::2.kind::f16" in src and "multicast::cluster" in src
    with pytest.raises(SimReportError) as e:
        sim.run(cta_pair(M, N, K, drop="dealloc"), a, b, c, arch="sm_100a")
    assert "tmem_leak" in e.value.kinds()


def ring_gemm(M, N, K, STAGES=2, drop=None):
    """C = A @ B^T over a grid of 128 x 32 tiles: warp 0 fills a StageRing with TMA, warp 1 issues the MMAs and
    commits each stage to ``empty`` (``ring.commit_empty``) and the accumulator to a one-stage ring
    (``done.commit_full``) the whole CTA waits on before the epilogue."""
    BM, BN, BK = 128, 32, 64
    KB = (K + BK - 1) // BK
    sw = swizzle_for(128, "bfloat16")
    SA = ComposeLayout(sw, TileLayout(S[(STAGES, BM, BK)]))
    SB = ComposeLayout(sw, TileLayout(S[(STAGES, BN, BK)]))
    REGS = tmem_ld_layout("32x32b", BN)

    @T.prim_func
    def ring_mma(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=128)
        As = T.alloc_shared((STAGES, BM, BK), "bfloat16", layout=SA)
        Bs = T.alloc_shared((STAGES, BN, BK), "bfloat16", layout=SB)
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        dfull = T.alloc_shared((1,), "uint64")
        dempty = T.alloc_shared((1,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((128, BN), "float32")
        regs = T.alloc_local((128, BN), "float32", layout=REGS)
        ring = StageRing(full, empty, STAGES)
        done = StageRing(dfull, dempty, 1)
        warp = T.warp_id()
        if warp == 1:
            T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(32))
            T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        T.ptx.tcgen05_fence_before_thread_sync()
        setup_barriers([(ring, 2, 1), (done, 1, 1)], 1, False)
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        if warp == 0 and T.elect_one():
            for kb in T.serial(KB):
                s = ring.stage(kb)
                if drop != "empty_wait":
                    ring.wait_empty(kb)
                Tx.copy_async(As[s], A[m0:m0 + BM, kb * BK:kb * BK + BK], mbar=ring.full[s])
                Tx.copy_async(Bs[s], B[n0:n0 + BN, kb * BK:kb * BK + BK], mbar=ring.full[s])
        elif warp == 1 and T.elect_one():
            for kb in T.serial(KB):
                s = ring.stage(kb)
                if drop != "full_wait":
                    ring.wait_full(kb)
                T.ptx.tcgen05_fence_after_thread_sync()
                Tx.gemm_async(acc, As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0)
                ring.commit_empty(kb, 1)
            if drop != "commit":
                done.commit_full(0, 1)
        done.wait_full(0)
        T.ptx.tcgen05_fence_after_thread_sync()
        Tx.wg.copy(regs, acc, taddr=taddr)
        Tx.wg.copy(C[m0:m0 + BM, n0:n0 + BN], regs)
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        if warp == 1:
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(32))

    return ring_mma


def test_tma_stage_ring_feeding_tcgen05_over_ragged_tiles():
    M, N, K = 150, 40, 200                    # 2 x 2 tiles, K = 3 k-blocks + 8 (TMA zero-fills the rest)
    a, b = torch.randn(M, K).bfloat16(), torch.randn(N, K).bfloat16()
    c = torch.full((M, N), float("nan"))
    sim.run(ring_gemm(M, N, K), a, b, c, arch="sm_100a")
    assert (c.double() - a.double() @ b.double().T).abs().max().item() < 1e-4


@pytest.mark.parametrize("drop, kind", [("full_wait", "race"), ("empty_wait", "mbarrier_over_arrive"),
                                        ("commit", "deadlock")])
def test_stage_ring_mutations_are_reported(drop, kind):
    a, b = torch.randn(100, 200).bfloat16(), torch.randn(20, 200).bfloat16()
    with pytest.raises(SimReportError) as e:
        sim.run(ring_gemm(100, 20, 200, drop=drop), a, b, torch.zeros(100, 20), arch="sm_100a")
    assert kind in e.value.kinds()


def mxfp8(M, N, dt):
    """C = (A * SA) @ (B * SB)^T, one 128 x N tile and one k-block of 128 fp8: the scale tiles (word (t, j) holds
    the four ue8m0 scales of row 32 j + t) go global -> shared by ordinary stores, then ``tcgen05.cp`` to TMEM
    columns after the accumulator, then ``kind::mxf8f6f4.block_scale``."""
    BM, BK = 128, 128
    SA = mma_smem_layout(BM, BK, dt, "K", 128)
    SB = mma_smem_layout(N, BK, dt, "K", 128)
    REGS = tmem_ld_layout("32x32b", N)
    COLS = 64 if N + 8 <= 64 else 128

    @T.prim_func
    def mx(A: T.Tensor((M, BK), dt), B: T.Tensor((N, BK), dt), SFA: T.Tensor((32, 4), "uint32"),
           SFB: T.Tensor((32, 4), "uint32"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=(1,), threads=128)
        As = T.alloc_shared((BM, BK), dt, layout=SA)
        Bs = T.alloc_shared((N, BK), dt, layout=SB)
        sas = T.alloc_shared((32, 4), "uint32")
        sbs = T.alloc_shared((32, 4), "uint32")
        bars = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((128, N), "float32")
        sfa = T.alloc_tmem((32, 4), "uint32", layout=tmem_warpx4_layout(4, col=N))
        sfb = T.alloc_tmem((32, 4), "uint32", layout=tmem_warpx4_layout(4, col=N + 4))
        regs = T.alloc_local((128, N), "float32", layout=REGS)
        warp = T.warp_id()
        if warp == 0:
            T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(COLS))
            T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bars[0], 2)
            T.ptx.mbarrier_init(bars[1], 1)
            T.ptx.fence_mbarrier_init()
        Tx.cta.copy(sas, SFA)
        Tx.cta.copy(sbs, SFB)
        T.ptx.fence_proxy_async()
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        m0 = T.cta_id(0) * BM
        if T.thread_id() == 0:
            Tx.copy_async(As, A[m0:m0 + BM, 0:BK], mbar=bars[0])
            Tx.copy_async(Bs, B[m0:m0 + N, 0:BK], mbar=bars[0])
        if warp == 1 and T.elect_one():
            T.ptx.mbarrier_wait_parity(bars[0], 0)
            T.ptx.tcgen05_fence_after_thread_sync()
            Tx.copy_async(sfa, sas, taddr=taddr)
            Tx.copy_async(sfb, sbs, taddr=taddr)
            Tx.gemm_async(acc, As, Bs, taddr=taddr, transpose_b=True, accumulate=False, sfa=sfa,
                          sfb=sfb[0:32, 0:N // 32], sf_taddr=taddr, mbar=bars[1])
        T.ptx.mbarrier_wait_parity(bars[1], 0)
        T.ptx.tcgen05_fence_after_thread_sync()
        Tx.wg.copy(regs, acc, taddr=taddr)
        Tx.wg.copy(C[m0:m0 + BM, m0:m0 + N], regs)
        T.ptx.tcgen05_fence_before_thread_sync()
        T.ptx.syncthreads()
        if warp == 0:
            T.ptx.tcgen05_fence_after_thread_sync()
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(COLS))

    return mx


def _scale_tile(sf):
    """(rows <= 128, 4) ue8m0 bytes -> the (32, 4) uint32 tile, word (t, j) = the bytes of row 32 j + t."""
    pad = np.full((128, 4), 127, np.uint8)
    pad[:sf.shape[0]] = sf
    return np.ascontiguousarray(pad.reshape(4, 32, 4).transpose(1, 0, 2)).reshape(32, 16).view(np.uint32)


@pytest.mark.parametrize("M, N, dt", [(100, 32, "float8_e4m3"), (128, 64, "float8_e5m2")])
def test_mxfp8_block_scaled_mma_with_scales_from_ordinary_stores(M, N, dt):
    rng = np.random.default_rng(M + N)
    a = to_bits(rng.standard_normal((M, 128)).astype(np.float32), dt)
    b = to_bits(rng.standard_normal((N, 128)).astype(np.float32), dt)
    sa = rng.integers(120, 134, (M, 4)).astype(np.uint8)
    sb = rng.integers(120, 134, (N, 4)).astype(np.uint8)
    c = np.full((M, N), np.nan, np.float32)
    sim.run(mxfp8(M, N, dt), a, b, _scale_tile(sa), _scale_tile(sb), c, arch="sm_100a")
    A = from_bits(a, dt).astype(np.float64) * np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    B = from_bits(b, dt).astype(np.float64) * np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=1))
    ref = A @ B.T
    assert np.abs(c - ref).max() <= 1e-6 * np.abs(ref).max()
    assert "kind::mxf8f6f4.block_scale" in build(mxfp8(M, N, dt), "sm_100a").cuda_source
