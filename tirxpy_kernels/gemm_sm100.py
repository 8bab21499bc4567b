"""Warp-specialized persistent GEMM for Blackwell (sm_100a): TMA -> tcgen05.mma -> TMEM -> TMA.

``C[M, N] = A[M, K] @ B[N, K]^T`` with bf16 / f16 inputs (both K-major, the "TN" layout of
cuBLAS), float32 accumulation in tensor memory and a float32 output; with fp8 inputs the
block-scaled MXFP8 product (below). Written only with the public API: tile primitives for every
data movement and MMA (``Tx.copy_async`` -> TMA, ``Tx.gemm_async`` -> ``tcgen05.mma``, ``Tx.wg.copy``
-> ``tcgen05.ld`` and shared-memory stores), :mod:`tirxpy.lang` for the orchestration (two
:class:`~tirxpy.lang.StageRing` s, :func:`~tirxpy.lang.setup_barriers`, the persistent schedule),
intrinsics for fences and TMEM allocation. The plan (tile choice, budgets, checks) is
:mod:`tirxpy_kernels.gemm_sm100_plan`.

Roles (``threads = 192``; warps 0-3 form the epilogue warpgroup so warp ``w`` reaches TMEM lanes
``32 (w % 4) ..``), each a macro of this module:

- warp 4, one elected thread: :func:`tma_producer`. For every k-block of every tile of this CTA it
  waits until the stage is free (``ring.wait_empty``), then loads the A and B boxes of the stage,
  completing on ``full``.
- warp 5, one elected thread: :func:`mma_issuer`. Per tile it waits until the epilogue drained the
  accumulator (``accs.wait_empty``), then per k-block waits ``ring.wait_full``, issues the stage's
  ``tcgen05.mma`` s and commits them to the stage's ``empty`` barrier (``ring.commit_empty``: the stage
  is refilled once the tensor cores have read it); after the last k-block it commits to ``tmem_full``
  (``accs.commit_full``).
- warps 0-3: :func:`epilogue`. Per tile wait ``accs.wait_full``, move the accumulator in ``EPI``-column
  chunks TMEM -> registers (``tcgen05.ld``) -> shared memory -> global (:func:`store_chunk`: a
  double-buffered staging tile and a TMA store, which also clips the ragged edges), and release the
  accumulator as soon as the last chunk is in registers, so the MMAs of tile ``i + 2`` may overwrite it
  while this tile is still being stored.

Two stage rings connect them: ``ring`` (``STAGES`` shared-memory stages, ``full`` / ``empty``) and
``accs`` (the two ``(128, BN)`` f32 accumulators in TMEM, ``tmem_full`` / ``tmem_empty``), so the
epilogue of tile ``i`` overlaps the MMAs of tile ``i + 1``. Positions are closed forms of the loop
counters: k-block ``g = i KB + kb`` of the CTA's ``i``-th tile in ``ring``, tile ``i`` in ``accs``.
Schedule: static persistent, unit ``c`` of ``G`` takes tiles ``c, c + G, c + 2G, ...`` (row-major over
``(M / BM) x (N / BN)``, N fastest).

``cta_group=2`` runs the same roles on a 2-CTA cluster with the ``M = 256`` instruction (tiles of
``256 x BN``): each CTA loads its 128 rows of A and half of B's ``BN`` rows (TMA ``.cta_group::2``,
completing on the *leader* CTA's ``full``), the leader's MMA warp issues ``tcgen05.mma.cta_group::2``
over both CTAs' shared memory and its commits multicast to both CTAs' ``empty`` / ``tmem_full``; both
epilogues release the accumulator on the leader's ``tmem_empty`` (``accs.release_to(i, 0)``). TMEM is
allocated with ``cta_group::2`` by both CTAs.

    >>> k = gemm_sm100(256, 256, 128, BN=64, STAGES=2, ctas=2)
    >>> k.launch.threads, plan(256, 256, 128, BN=64, ctas=2).tiles
    (192, 8)
"""
from __future__ import annotations

import tirxpy
from tirxpy import T, Tx
from tirxpy.lang import StageRing, setup_barriers, tiles_of_unit
from tirxpy.layout import ComposeLayout, R, S, TCol, TileLayout, TLane, swizzle_for
from tirxpy.layout.atoms import tmem_ld_layout

from .errors import KernelConfigError, shown
from .gemm_sm100_plan import FP8, TARGET, Plan, pack_scales, plan, scale_rows

__all__ = ["FP8", "TARGET", "Plan", "b200_bf16_cg1", "b200_bf16_cg2", "b200_mxfp8_cg1", "gemm_sm100",
           "pack_scales", "plan", "scale_rows"]

DROPS = (None, "full_wait", "empty_wait", "tmem_full_wait", "tmem_empty_wait", "mma_commit", "fence_proxy_async",
         "store_wait", "dealloc", "tcgen05_fence")


@T.macro
def tmem_alloc(p, tbase):
    """Warp 5 (the MMA warp owns tensor memory): allocate ``p.tmem_cols`` columns (both CTAs of a pair
    with ``cta_group::2``), write their base address to ``tbase[0]``, give up the allocation permit."""
    if p.cta_group == 2:
        T.ptx.tcgen05_alloc_cg2(tbase[0], T.uint32(p.tmem_cols))
        T.ptx.tcgen05_relinquish_alloc_permit_cg2()
    else:
        T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(p.tmem_cols))
        T.ptx.tcgen05_relinquish_alloc_permit_cg1()


@T.macro
def tmem_free(p, drop, taddr):
    """Warp 5, after every role is done (the caller synced the CTA / cluster): free the tensor memory."""
    T.ptx.tcgen05_fence_after_thread_sync()
    if drop != "dealloc":
        if p.cta_group == 2:
            T.ptx.tcgen05_dealloc_cg2(taddr, T.uint32(p.tmem_cols))
        else:
            T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(p.tmem_cols))


@T.macro
def cta_sync(p):
    """Every thread of the CTA, or of the CTA pair with ``cta_group::2``."""
    if p.cta_group == 2:
        T.ptx.cluster_sync()
    else:
        T.ptx.syncthreads()


@T.macro
def tma_producer(p, drop, ring, A, B, SFA, SFB, As, Bs, SAs, SBs, cid, rank, ntile):
    """One elected thread of warp 4: per k-block ``g`` of this unit's tiles, wait until stage ``g`` is free,
    then load this CTA's 128 rows of A and ``BNc`` rows of B (and, block-scaled, the two scale tiles)
    into it, completing on ``full`` (the leader's, with ``cta_group::2``)."""
    if T.elect_one():
        for i in T.serial(ntile):
            tile = cid + i * p.clusters
            m0 = (tile // p.nt) * p.BM + rank * 128
            n0 = (tile % p.nt) * p.BN + rank * p.BNc
            for kb in T.serial(p.KB):
                g = i * p.KB + kb
                s = ring.stage(g)
                if drop != "empty_wait":
                    ring.wait_empty(g)
                if p.cta_group == 2:
                    Tx.copy_async(As[s], A[m0:m0 + 128, kb * p.BK:kb * p.BK + p.BK], mbar=ring.full[s], cta_group=2)
                    Tx.copy_async(Bs[s], B[n0:n0 + p.BNc, kb * p.BK:kb * p.BK + p.BK], mbar=ring.full[s], cta_group=2)
                else:
                    Tx.copy_async(As[s], A[m0:m0 + 128, kb * p.BK:kb * p.BK + p.BK], mbar=ring.full[s])
                    Tx.copy_async(Bs[s], B[n0:n0 + p.BNc, kb * p.BK:kb * p.BK + p.BK], mbar=ring.full[s])
                if p.scaled:
                    ra = ((m0 // 128) * p.KBs + kb) * 32
                    rb = ((n0 // 128) * p.KBs + kb) * 32
                    Tx.copy_async(SAs[s], SFA[ra:ra + 32, 0:4], mbar=ring.full[s])
                    Tx.copy_async(SBs[s], SFB[rb:rb + 32, 0:4], mbar=ring.full[s])


@T.macro
def mma_stage(p, ring, acc, As, Bs, SAs, SBs, sfa, sfb, taddr, a, g, kb, tile):
    """The MMAs of k-block ``kb`` (ring position ``g``) into accumulator ``a``, committed to the stage's
    ``empty`` barrier. Block-scaled: first the stage's scale tiles to TMEM (``tcgen05.cp`` runs before the
    MMAs in issue order), whose B words start at column ``(tile's 32-row group) % 4``."""
    s = ring.stage(g)
    if p.cta_group == 2:
        Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0, cta_group=2)
    elif p.scaled:
        Tx.copy_async(sfa[s], SAs[s], taddr=taddr + p.sf_col)
        Tx.copy_async(sfb[s], SBs[s], taddr=taddr + p.sf_col)
        nw = p.BN // 32
        w = (tile % p.nt * nw) % 4
        Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0, sfa=sfa[s],
                      sfb=sfb[s, 0:32, w:w + nw], sf_taddr=taddr + p.sf_col)
    else:
        Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0)
    ring.commit_empty(g, p.cta_group)


@T.macro
def mma_issuer(p, drop, ring, accs, acc, As, Bs, SAs, SBs, sfa, sfb, taddr, cid, ntile):
    """One elected thread of warp 5 (of the leader CTA): per tile wait until accumulator ``i % 2`` is
    drained, issue every k-block's MMAs into it, then commit it to the epilogue."""
    if T.elect_one():
        for i in T.serial(ntile):
            a = accs.stage(i)
            if drop != "tmem_empty_wait":
                accs.wait_empty(i)
            if drop != "tcgen05_fence":
                T.ptx.tcgen05_fence_after_thread_sync()
            for kb in T.serial(p.KB):
                g = i * p.KB + kb
                if drop != "full_wait":
                    ring.wait_full(g)
                mma_stage(p, ring, acc, As, Bs, SAs, SBs, sfa, sfb, taddr, a, g, kb, cid + i * p.clusters)
            if drop != "mma_commit":
                accs.commit_full(i, p.cta_group)


@T.macro
def store_chunk(p, drop, C, Cs, regs, tid, c, m0, n0):
    """Chunk ``c`` of a tile, in ``regs``: wait until the TMA store that read staging buffer ``c % 2`` two
    chunks ago is done, stage the chunk there, make it visible to the async proxy, and store it from
    thread 0 (TMA clips the ragged edges)."""
    b = c % 2
    if drop != "store_wait":
        if tid == 0:
            T.ptx.bulk_wait_group_read(1)
        T.ptx.barrier_sync(1, 128)
    Tx.wg.copy(Cs[b], regs)
    if drop != "fence_proxy_async":
        T.ptx.fence_proxy_async()  # generic-proxy stores -> visible to the TMA store
    T.ptx.barrier_sync(1, 128)
    if tid == 0:
        Tx.copy_async(C[m0:m0 + 128, n0 + c * p.EPI:n0 + c * p.EPI + p.EPI], Cs[b])


@T.macro
def epilogue(p, drop, accs, acc, regs, Cs, C, taddr, cid, rank, ntile):
    """Warps 0-3: per tile wait for accumulator ``i % 2``, drain it in ``EPI``-column chunks (TMEM ->
    registers -> :func:`store_chunk`), releasing it to the MMA warp once the last chunk is in registers."""
    tid = T.thread_id()
    for i in T.serial(ntile):
        tile = cid + i * p.clusters
        m0 = (tile // p.nt) * p.BM + rank * 128
        n0 = (tile % p.nt) * p.BN
        a = accs.stage(i)
        if drop != "tmem_full_wait":
            accs.wait_full(i)
        if drop != "tcgen05_fence":
            T.ptx.tcgen05_fence_after_thread_sync()
        for c in T.unroll(p.BN // p.EPI):
            Tx.wg.copy(regs, acc[a, 0:128, c * p.EPI:c * p.EPI + p.EPI], taddr=taddr)
            if c == p.BN // p.EPI - 1:
                T.ptx.tcgen05_fence_before_thread_sync()
                if p.cta_group == 2:
                    accs.release_to(i, 0)
                else:
                    accs.release(i)
            store_chunk(p, drop, C, Cs, regs, tid, c, m0, n0)
    if tid == 0:
        T.ptx.bulk_wait_group(0)


def _layouts(p: Plan):
    """Shared-memory, TMEM and register layouts: the swizzled A / B stages, two Layout-D accumulators,
    the epilogue's registers (thread ``t`` of the warpgroup holds row ``t``) and, block-scaled, the scale
    tiles in TMEM (stage ``s`` at columns ``8 s ..``, relative to ``sf_col``; ``.warpx4`` copies each word to
    the four lane quarters)."""
    sw = swizzle_for(128, p.dtype)
    sf = S[(p.STAGES, 32, 4) : (8 @ TCol, 1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane]
    return dict(SA=ComposeLayout(sw, TileLayout(S[(p.STAGES, 128, p.BK)])),
                SB=ComposeLayout(sw, TileLayout(S[(p.STAGES, p.BNc, p.BK)])),
                ACC=TileLayout(S[(2, 128, p.BN) : (p.BN @ TCol, 1 @ TLane, 1 @ TCol)]),
                REGS=tmem_ld_layout("32x32b", p.EPI), SFA=TileLayout(sf), SFB=TileLayout(sf + 4 @ TCol))


@tirxpy.jit
def gemm_sm100(M: int, N: int, K: int, BN: int | None = None, STAGES: int | None = None, EPI: int = 32,
               ctas: int = TARGET.sm_count, cta_group: int = 1, dtype: str = "bfloat16", drop: str | None = None):
    """The kernel for ``C (M, N) f32 = A (M, K) @ B (N, K)^T``; call it as ``k(A, B, C)``. ``BN``, ``STAGES``,
    ``EPI``, ``ctas`` and ``cta_group`` follow the rules of :mod:`tirxpy_kernels.gemm_sm100_plan`.

    ``dtype="float8_e4m3"`` / ``"float8_e5m2"``: block-scaled MXFP8, ``C = (A * SA) @ (B * SB)^T``
    with one ue8m0 scale per 32 elements of K; call it as ``k(A, B, SFA, SFB, C)`` with the scales
    packed by :func:`pack_scales`. Per k-block the producer also loads the two 512-byte scale
    tiles, the MMA warp copies them to TMEM (``tcgen05.cp``, stage-indexed columns after the
    accumulators) and issues ``kind::mxf8f6f4.block_scale``.

    ``drop=`` removes one synchronization step (one of ``DROPS``) for the simulator's mutation tests;
    never use it otherwise.
    """
    if not any(type(drop) is type(d) and drop == d for d in DROPS):
        raise KernelConfigError(f"gemm_sm100: unknown drop={shown(drop)}; one of {DROPS[1:]}")
    p = plan(M, N, K, BN, STAGES, EPI, ctas, cta_group, dtype)
    L = _layouts(p)
    CG, BS = p.cta_group, p.scaled
    SFA_T = T.Tensor((scale_rows(M, K), 4), "uint32") if BS else None
    SFB_T = T.Tensor((scale_rows(N, K), 4), "uint32") if BS else None
    # full: one arrive.expect_tx per TMA box (both CTAs' boxes with cta_group=2); empty, tmem_full: one
    # tcgen05.commit; tmem_empty: every epilogue thread (of both CTAs)
    FULL_ARRIVALS = 4 if BS else 2 * CG

    @T.prim_func
    def gemm_sm100(A: T.Tensor((M, K), p.dtype), B: T.Tensor((N, K), p.dtype), SFA: SFA_T, SFB: SFB_T,
                   C: T.Tensor((M, N), "float32")):
        T.launch(grid=(p.grid,), threads=192, cluster=(2,) if CG == 2 else None)
        As = T.alloc_shared((p.STAGES, 128, p.BK), p.dtype, layout=L["SA"])
        Bs = T.alloc_shared((p.STAGES, p.BNc, p.BK), p.dtype, layout=L["SB"])
        Cs = T.alloc_shared((2, 128, p.EPI), "float32")
        full = T.alloc_shared((p.STAGES,), "uint64")
        empty = T.alloc_shared((p.STAGES,), "uint64")
        tmem_full = T.alloc_shared((2,), "uint64")
        tmem_empty = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((2, 128, p.BN), "float32", layout=L["ACC"])
        regs = T.alloc_local((128, p.EPI), "float32", layout=L["REGS"])
        SAs = T.alloc_shared((p.STAGES, 32, 4), "uint32") if BS else None
        SBs = T.alloc_shared((p.STAGES, 32, 4), "uint32") if BS else None
        sfa = T.alloc_tmem((p.STAGES, 32, 4), "uint32", layout=L["SFA"]) if BS else None
        sfb = T.alloc_tmem((p.STAGES, 32, 4), "uint32", layout=L["SFB"]) if BS else None
        ring = StageRing(full, empty, p.STAGES, CG)
        accs = StageRing(tmem_full, tmem_empty, 2, CG)
        warp = T.warp_id()
        if CG == 2:
            rank = T.cluster_rank()
            cid = T.cta_id(0) // 2
        else:
            rank = 0
            cid = T.cta_id(0)
        ntile = tiles_of_unit(cid, p.clusters, p.tiles)
        if warp == 5:
            tmem_alloc(p, tbase)
        T.ptx.tcgen05_fence_before_thread_sync()
        setup_barriers([(ring, FULL_ARRIVALS, 1), (accs, 1, 128 * CG)], CG, False)
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        if warp == 4:
            tma_producer(p, drop, ring, A, B, SFA if BS else None, SFB if BS else None, As, Bs, SAs, SBs, cid, rank,
                         ntile)
        elif warp == 5:
            if rank == 0:
                mma_issuer(p, drop, ring, accs, acc, As, Bs, SAs, SBs, sfa, sfb, taddr, cid, ntile)
        elif warp < 4:
            epilogue(p, drop, accs, acc, regs, Cs, C, taddr, cid, rank, ntile)
        T.ptx.tcgen05_fence_before_thread_sync()
        cta_sync(p)
        if warp == 5:
            tmem_free(p, drop, taddr)

    return gemm_sm100


@tirxpy.jit
def b200_bf16_cg1():
    """8192^3 bf16 on a B200 with the defaults: one CTA per 128 x 256 tile (cta_group::1), the deepest ring (4)."""
    return gemm_sm100(8192, 8192, 8192)


@tirxpy.jit
def b200_bf16_cg2():
    """8192^3 bf16 on a B200, CTA pairs per 256 x 256 tile (cta_group::2), the deepest ring (6)."""
    return gemm_sm100(8192, 8192, 8192, cta_group=2)


@tirxpy.jit
def b200_mxfp8_cg1():
    """8192^3 block-scaled MXFP8 (e4m3, ue8m0 scale per 32 of K) on a B200 with the defaults: 128 x 128 tiles,
    the deepest ring (5)."""
    return gemm_sm100(8192, 8192, 8192, dtype="float8_e4m3")
