"""Warp-specialized persistent GEMM for Blackwell (sm_100a): TMA -> tcgen05.mma -> TMEM -> TMA.

``C[M, N] = A[M, K] @ B[N, K]^T`` with bf16 / f16 inputs (both K-major, the "TN" layout of
cuBLAS), float32 accumulation in tensor memory and a float32 output. Written only with the
public API: tile primitives for every data movement and MMA (``Tx.copy_async`` -> TMA,
``Tx.gemm_async`` -> ``tcgen05.mma`` + ``tcgen05.commit``, ``Tx.wg.copy`` -> ``tcgen05.ld`` and
shared-memory stores), intrinsics for the orchestration (mbarriers, fences, TMEM allocation).

Roles (``threads = 192``; warps 0-3 form the epilogue warpgroup so warp ``w`` reaches TMEM lanes
``32 (w % 4) ..``):

- warp 4, one elected thread: **TMA producer**. For every k-block of every tile of this CTA it
  waits ``empty[s]``, then loads the A and B boxes of stage ``s`` completing on ``full[s]``.
- warp 5, one elected thread: **MMA issuer**. Per tile it waits ``tmem_empty[acc]`` (the
  epilogue drained accumulator ``acc`` = tile parity), then per k-block waits ``full[s]``,
  issues the stage's ``tcgen05.mma`` s and commits them to ``empty[s]`` (the stage may be
  refilled once the tensor cores have read it); after the last k-block it commits to
  ``tmem_full[acc]``.
- warps 0-3: **epilogue**. Per tile wait ``tmem_full[acc]``, move the accumulator in
  ``EPI``-column chunks TMEM -> registers (``tcgen05.ld``) -> shared memory (double-buffered
  staging tile) -> global (TMA store, which also clips the ragged edges), and arrive on
  ``tmem_empty[acc]`` as soon as the last chunk is in registers, so the MMAs of tile ``i + 2``
  may overwrite it while this tile is still being stored.

TMEM holds two ``(128, BN)`` f32 accumulators (``2 BN`` columns), so the epilogue of tile ``i``
overlaps the MMAs of tile ``i + 1``. Schedule: static persistent, CTA ``c`` of ``G`` takes tiles
``c, c + G, c + 2G, ...`` (row-major over ``(M / BM) x (N / BN)``, N fastest). Every barrier
phase is a closed form of the loop counters (k-block ``g = i * KB + kb`` of the CTA's ``i``-th
tile: stage ``g % STAGES``, parity ``(g / STAGES) % 2``).

``cta_group=2`` runs the same roles on a 2-CTA cluster with the ``M = 256`` instruction
(tiles of ``256 x BN``): each CTA loads its 128 rows of A and half of B's ``BN`` rows (TMA
``.cta_group::2``, completing on the *leader* CTA's ``full[s]``), the leader's MMA warp issues
``tcgen05.mma.cta_group::2`` over both CTAs' shared memory and commits with multicast to both
CTAs' ``empty`` / ``tmem_full`` barriers, and both epilogues arrive on the leader's
``tmem_empty`` (a remote arrive through ``mapa``). TMEM is allocated with ``cta_group::2`` by
both CTAs.

    >>> k = gemm_sm100(256, 256, 128, BN=64, STAGES=2, ctas=2)
    >>> k.launch.threads, plan(256, 256, 128, BN=64, ctas=2)["tiles"]
    (192, 8)
"""
from __future__ import annotations

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.layout import ComposeLayout, R, S, TCol, TileLayout, TLane, swizzle_for
from tirxpy.layout.atoms import tmem_ld_layout

from .errors import KernelConfigError

SM_COUNT_B200 = 148
SMEM_LIMIT = 232448  # sm_100 dynamic shared memory per CTA (227 KiB)


def _cdiv(a, b):
    return -(-a // b)


FP8 = ("float8_e4m3", "float8_e5m2")


def _elem_bytes(dtype):
    return 1 if dtype in FP8 else {"bfloat16": 2, "float16": 2}[dtype]


def plan(M, N, K, BN=256, BK=None, STAGES=4, EPI=32, ctas=SM_COUNT_B200, cta_group=1, dtype="bfloat16"):
    """Checked tile plan: tile counts, grid, TMEM columns and shared-memory bytes."""
    if dtype not in ("bfloat16", "float16") + FP8:
        raise KernelConfigError(f"gemm_sm100: inputs must be bfloat16 or float16 (kind::f16) or float8_e4m3 / float8_e5m2 "
                                f"(block-scaled kind::mxf8f6f4), got {dtype!r}")
    if cta_group not in (1, 2):
        raise KernelConfigError(f"gemm_sm100: cta_group must be 1 or 2, got {cta_group!r}")
    scaled = dtype in FP8
    BK = 128 // _elem_bytes(dtype) if BK is None else BK
    if scaled and (cta_group != 1 or BN not in (32, 64, 128)):
        raise KernelConfigError(f"gemm_sm100: block-scaled fp8 runs with cta_group=1 and BN in (32, 64, 128) (one 128-row "
                                f"scale tile of B per k-block, TMEM for two accumulators and the staged scales); got "
                                f"cta_group={cta_group}, BN={BN}")
    if BK * _elem_bytes(dtype) != 128:
        raise KernelConfigError(f"gemm_sm100: BK = {BK} must span the 128-byte swizzle atom ({128 // _elem_bytes(dtype)} "
                                f"{dtype} elements)")
    step = 16 * cta_group
    if not (step <= BN <= 256 and BN % step == 0):
        raise KernelConfigError(f"gemm_sm100: BN = {BN} must be a multiple of {step} in [{step}, 256] for cta_group={cta_group}"
                                " (tcgen05.mma N, split over the pair for cta_group=2)")
    if BN % EPI or EPI * 4 % 16 or EPI > 128 or EPI & (EPI - 1):
        raise KernelConfigError(f"gemm_sm100: EPI = {EPI} (epilogue chunk columns) must be a power of two <= 128 dividing "
                                f"BN = {BN}, at least 4")
    if min(M, N, K) <= 0:
        raise KernelConfigError(f"gemm_sm100: M, N, K must be positive, got {(M, N, K)}")
    if (K * _elem_bytes(dtype)) % 16 or (N * 4) % 16:
        raise KernelConfigError(f"gemm_sm100: TMA needs 16-byte row pitches: K = {K} ({dtype}) and N = {N} (float32 C) "
                                "must be multiples of 8 and 4")
    BM = 128 * cta_group
    mt, nt = _cdiv(M, BM), _cdiv(N, BN)
    tiles = mt * nt
    clusters = max(1, min(tiles, ctas // cta_group))
    cols = 2 * BN + (8 * STAGES if scaled else 0)  # accumulators, then per stage 4 + 4 scale-word columns
    if cols > 512:
        raise KernelConfigError(f"gemm_sm100: {cols} TMEM columns (2 x BN = {2 * BN} + 8 x STAGES = {8 * STAGES} for the "
                                "scales) exceed 512; use fewer stages")
    tmem_cols = 32
    while tmem_cols < cols:
        tmem_cols *= 2
    eb = _elem_bytes(dtype)
    smem = STAGES * ((128 * BK + (BN // cta_group) * BK) * eb + (1024 if scaled else 0)) + 2 * 128 * EPI * 4 + 1024
    if smem > SMEM_LIMIT:
        raise KernelConfigError(f"gemm_sm100: {smem} bytes of shared memory (STAGES = {STAGES}, BN = {BN}) exceed the "
                                f"{SMEM_LIMIT}-byte sm_100 limit; use fewer stages")
    return dict(BM=BM, BK=BK, mt=mt, nt=nt, tiles=tiles, grid=clusters * cta_group, clusters=clusters,
                per_cta=_cdiv(tiles, clusters), KB=_cdiv(K, BK), tmem_cols=tmem_cols, smem=smem, scaled=scaled)


def scale_rows(rows, K):
    """Rows of the packed scale tensor for a ``(rows, K)`` operand: one (32, 4) uint32 tile per
    128 rows and 128 elements of K."""
    return _cdiv(rows, 128) * _cdiv(K, 128) * 32


def pack_scales(sf):
    """Host side: ue8m0 scales ``sf[r, c]`` (uint8; scales elements ``32 c .. 32 c + 31`` of row
    ``r``) -> the ``(scale_rows, 4)`` uint32 tensor the kernel loads: for 128-row block ``rb`` and
    k-block ``kb``, row ``(rb * KB + kb) * 32 + t`` holds in word ``j`` the bytes ``c = 0..3`` of
    row ``rb * 128 + 32 j + t``, chunk ``4 kb + c`` (the 128 x 4 scale tile of cuBLAS's block-scaled
    layout). Padding is 127 (scale 1)."""
    import numpy as np  # noqa: PLC0415 - host helper only

    sf = np.asarray(sf, np.uint8)
    rows, chunks = sf.shape
    RB, KB = _cdiv(rows, 128), _cdiv(chunks, 4)
    pad = np.full((RB * 128, KB * 4), 127, np.uint8)
    pad[:rows, :chunks] = sf
    t = pad.reshape(RB, 4, 32, KB, 4)  # rb, j, t, kb, c
    return np.ascontiguousarray(t.transpose(0, 3, 2, 1, 4)).reshape(RB * KB * 32, 16).view(np.uint32)


@tirxpy.jit
def gemm_sm100(M: int, N: int, K: int, BN: int = 256, BK: int | None = None, STAGES: int = 4, EPI: int = 32,
               ctas: int = SM_COUNT_B200, cta_group: int = 1, dtype: str = "bfloat16", drop: str | None = None):
    """The kernel for ``C (M, N) f32 = A (M, K) @ B (N, K)^T``; call it as ``k(A, B, C)``.

    ``dtype="float8_e4m3"`` / ``"float8_e5m2"``: block-scaled MXFP8, ``C = (A * SA) @ (B * SB)^T``
    with one ue8m0 scale per 32 elements of K; call it as ``k(A, B, SFA, SFB, C)`` with the scales
    packed by :func:`pack_scales`. Per k-block the producer also loads the two 512-byte scale
    tiles, the MMA warp copies them to TMEM (``tcgen05.cp``, stage-indexed columns after the
    accumulators) and issues ``kind::mxf8f6f4.block_scale``.

    ``ctas``: the persistent grid's size (the GPU's SM count; fewer when there are fewer tiles).
    ``drop=`` removes one synchronization step (``"full_wait"``, ``"empty_wait"``,
    ``"tmem_full_wait"``, ``"tmem_empty_wait"``, ``"mma_commit"``, ``"fence_proxy_async"``,
    ``"store_wait"``, ``"dealloc"``) for the simulator's mutation tests; never use it otherwise.
    """
    p = plan(M, N, K, BN, BK, STAGES, EPI, ctas, cta_group, dtype)
    BM, KB, NT, TILES, G = p["BM"], p["KB"], p["nt"], p["tiles"], p["clusters"]
    BK, BS = p["BK"], p["scaled"]
    NCOLS = p["tmem_cols"]
    CG = cta_group
    BNc = BN // CG  # B rows (N columns) this CTA loads per stage
    sw = swizzle_for(128, dtype)
    SA = ComposeLayout(sw, TileLayout(S[(STAGES, 128, BK)]))
    SB = ComposeLayout(sw, TileLayout(S[(STAGES, BNc, BK)]))
    ACC = TileLayout(S[(2, 128, BN) : (BN @ TCol, 1 @ TLane, 1 @ TCol)])  # two Layout-D accumulators
    REGS = tmem_ld_layout("32x32b", EPI)  # (128, EPI): thread t of the warpgroup holds row t
    NCHUNK = BN // EPI
    d = drop
    if d not in (None, "full_wait", "empty_wait", "tmem_full_wait", "tmem_empty_wait", "mma_commit",
                 "fence_proxy_async", "store_wait", "dealloc", "tcgen05_fence"):
        raise KernelConfigError(f"gemm_sm100: unknown drop={drop!r}")
    MASK = 3 if CG == 2 else 1
    cluster = (2,) if CG == 2 else None
    # block-scaled fp8: packed scale tensors (pack_scales), their stages in shared memory and TMEM
    SFA_T = T.Tensor((scale_rows(M, K), 4), "uint32") if BS else None
    SFB_T = T.Tensor((scale_rows(N, K), 4), "uint32") if BS else None
    SF_COLS = 2 * BN  # the scale columns start after the accumulators: their layouts are relative to taddr + SF_COLS
    SFA_L = TileLayout(S[(STAGES, 32, 4) : (8 @ TCol, 1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane])  # stage s: 8s..8s+3
    SFB_L = TileLayout(S[(STAGES, 32, 4) : (8 @ TCol, 1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane] + 4 @ TCol)
    KBs = _cdiv(K, 128)  # k-blocks of the scale tensors (BK = 128 for fp8)
    NW = BN // 32  # scale words of B per tile

    @T.prim_func
    def gemm_sm100(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), SFA: SFA_T, SFB: SFB_T,
                   C: T.Tensor((M, N), "float32")):
        T.launch(grid=(G * CG,), threads=192, cluster=cluster)
        As = T.alloc_shared((STAGES, 128, BK), dtype, layout=SA)
        Bs = T.alloc_shared((STAGES, BNc, BK), dtype, layout=SB)
        Cs = T.alloc_shared((2, 128, EPI), "float32")
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        tmem_full = T.alloc_shared((2,), "uint64")
        tmem_empty = T.alloc_shared((2,), "uint64")
        tbase = T.alloc_shared((1,), "uint32")
        acc = T.alloc_tmem((2, 128, BN), "float32", layout=ACC)
        regs = T.alloc_local((128, EPI), "float32", layout=REGS)
        if BS:
            SAs = T.alloc_shared((STAGES, 32, 4), "uint32")
            SBs = T.alloc_shared((STAGES, 32, 4), "uint32")
            sfa = T.alloc_tmem((STAGES, 32, 4), "uint32", layout=SFA_L)
            sfb = T.alloc_tmem((STAGES, 32, 4), "uint32", layout=SFB_L)
        warp = T.warp_id()
        if CG == 2:
            rank = T.cluster_rank()
            cid = T.cta_id(0) // 2
        else:
            rank = 0
            cid = T.cta_id(0)
        ntile = (TILES - cid + G - 1) // G  # tiles of this CTA (pair): cid, cid + G, ...
        if T.thread_id() == 0:
            for s in T.unroll(STAGES):
                T.ptx.mbarrier_init(full[s], 4 if BS else 2 * CG)  # one arrive.expect_tx per TMA box (both CTAs' boxes with cta_group=2)
                T.ptx.mbarrier_init(empty[s], 1)  # one tcgen05.commit
            for a in T.unroll(2):
                T.ptx.mbarrier_init(tmem_full[a], 1)  # one tcgen05.commit
                T.ptx.mbarrier_init(tmem_empty[a], 128 * CG)  # every epilogue thread (of both CTAs)
            T.ptx.fence_mbarrier_init()
        if warp == 5:  # the MMA warp owns the tensor memory
            if CG == 2:
                T.ptx.tcgen05_alloc_cg2(tbase[0], T.uint32(NCOLS))
                T.ptx.tcgen05_relinquish_alloc_permit_cg2()
            else:
                T.ptx.tcgen05_alloc_cg1(tbase[0], T.uint32(NCOLS))
                T.ptx.tcgen05_relinquish_alloc_permit_cg1()
        T.ptx.tcgen05_fence_before_thread_sync()
        if CG == 2:
            T.ptx.cluster_sync()
        else:
            T.ptx.syncthreads()
        T.ptx.tcgen05_fence_after_thread_sync()
        taddr = tbase[0]
        if warp == 4:
            # ---------------------------------------------------------------- TMA producer
            if T.elect_one():
                for i in T.serial(ntile):
                    tile = cid + i * G
                    m0 = (tile // NT) * BM + rank * 128
                    n0 = (tile % NT) * BN + rank * BNc
                    for kb in T.serial(KB):
                        g = i * KB + kb
                        s = g % STAGES
                        if d != "empty_wait":
                            if g >= STAGES:
                                T.ptx.mbarrier_wait_parity(empty[s], (g // STAGES - 1) % 2)
                        if CG == 2:
                            Tx.copy_async(As[s], A[m0:m0 + 128, kb * BK:kb * BK + BK], mbar=full[s], cta_group=2)
                            Tx.copy_async(Bs[s], B[n0:n0 + BNc, kb * BK:kb * BK + BK], mbar=full[s], cta_group=2)
                        else:
                            Tx.copy_async(As[s], A[m0:m0 + 128, kb * BK:kb * BK + BK], mbar=full[s])
                            Tx.copy_async(Bs[s], B[n0:n0 + BNc, kb * BK:kb * BK + BK], mbar=full[s])
                        if BS:
                            ra = ((m0 // 128) * KBs + kb) * 32
                            rb = ((n0 // 128) * KBs + kb) * 32
                            Tx.copy_async(SAs[s], SFA[ra:ra + 32, 0:4], mbar=full[s])
                            Tx.copy_async(SBs[s], SFB[rb:rb + 32, 0:4], mbar=full[s])
        elif warp == 5:
            # ---------------------------------------------------------------- MMA issuer (leader CTA)
            if rank == 0:
                if T.elect_one():
                    for i in T.serial(ntile):
                        a = i % 2
                        if d != "tmem_empty_wait":
                            if i >= 2:
                                T.ptx.mbarrier_wait_parity(tmem_empty[a], (i // 2 - 1) % 2)
                        if d != "tcgen05_fence":
                            T.ptx.tcgen05_fence_after_thread_sync()
                        for kb in T.serial(KB):
                            g = i * KB + kb
                            s = g % STAGES
                            if d != "full_wait":
                                T.ptx.mbarrier_wait_parity(full[s], (g // STAGES) % 2)
                            if CG == 2:
                                Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0,
                                              cta_group=2, mbar=empty[s], cta_mask=MASK)
                            elif BS:
                                # scales -> TMEM (tcgen05.cp runs before the mma s in issue order), then
                                # the block-scaled mma s read B's words from column (tile's 32-row group % 4)
                                Tx.copy_async(sfa[s], SAs[s], taddr=taddr + SF_COLS)
                                Tx.copy_async(sfb[s], SBs[s], taddr=taddr + SF_COLS)
                                w = ((cid + i * G) % NT * NW) % 4
                                Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0,
                                              mbar=empty[s], sfa=sfa[s], sfb=sfb[s, 0:32, w:w + NW],
                                              sf_taddr=taddr + SF_COLS)
                            else:
                                Tx.gemm_async(acc[a], As[s], Bs[s], taddr=taddr, transpose_b=True, accumulate=kb > 0,
                                              mbar=empty[s])
                        if d != "mma_commit":
                            if CG == 2:
                                T.ptx.tcgen05_commit_cg2_multicast(tmem_full[a], T.uint16(MASK))
                            else:
                                T.ptx.tcgen05_commit_cg1(tmem_full[a])
        elif warp < 4:
            # ---------------------------------------------------------------- epilogue warpgroup
            tid = T.thread_id()
            for i in T.serial(ntile):
                tile = cid + i * G
                m0 = (tile // NT) * BM + rank * 128
                n0 = (tile % NT) * BN
                a = i % 2
                if d != "tmem_full_wait":
                    T.ptx.mbarrier_wait_parity(tmem_full[a], (i // 2) % 2)
                if d != "tcgen05_fence":
                    T.ptx.tcgen05_fence_after_thread_sync()
                for c in T.unroll(NCHUNK):
                    Tx.wg.copy(regs, acc[a, 0:128, c * EPI:c * EPI + EPI], taddr=taddr)
                    if c == NCHUNK - 1:  # the accumulator is in registers: the MMA warp may reuse it
                        T.ptx.tcgen05_fence_before_thread_sync()
                        if CG == 2:
                            T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(tmem_empty[a], 0))
                        else:
                            T.ptx.mbarrier_arrive(tmem_empty[a])
                    b = c % 2
                    if d != "store_wait":
                        if tid == 0:
                            T.ptx.bulk_wait_group_read(1)  # the store that read Cs[b] two chunks ago is done
                        T.ptx.barrier_sync(1, 128)
                    Tx.wg.copy(Cs[b], regs)
                    if d != "fence_proxy_async":
                        T.ptx.fence_proxy_async()  # generic-proxy stores -> visible to the TMA store
                    T.ptx.barrier_sync(1, 128)
                    if tid == 0:
                        Tx.copy_async(C[m0:m0 + 128, n0 + c * EPI:n0 + c * EPI + EPI], Cs[b])
            if tid == 0:
                T.ptx.bulk_wait_group(0)
        T.ptx.tcgen05_fence_before_thread_sync()
        if CG == 2:
            T.ptx.cluster_sync()
        else:
            T.ptx.syncthreads()
        if warp == 5:
            T.ptx.tcgen05_fence_after_thread_sync()
            if d != "dealloc":
                if CG == 2:
                    T.ptx.tcgen05_dealloc_cg2(taddr, T.uint32(NCOLS))
                else:
                    T.ptx.tcgen05_dealloc_cg1(taddr, T.uint32(NCOLS))

    return gemm_sm100


@tirxpy.jit
def b200_bf16_cg1():
    """8192^3 bf16 on a B200, one CTA per 128 x 256 tile (cta_group::1), 4 stages."""
    return gemm_sm100(8192, 8192, 8192, BN=256, STAGES=4)


@tirxpy.jit
def b200_bf16_cg2():
    """8192^3 bf16 on a B200, CTA pairs per 256 x 256 tile (cta_group::2), 6 stages."""
    return gemm_sm100(8192, 8192, 8192, BN=256, STAGES=6, cta_group=2)


@tirxpy.jit
def b200_mxfp8_cg1():
    """8192^3 block-scaled MXFP8 (e4m3, ue8m0 scale per 32 of K) on a B200: 128 x 128 tiles, 5 stages."""
    return gemm_sm100(8192, 8192, 8192, BN=128, STAGES=5, dtype="float8_e4m3")
