"""Flash attention forward for Hopper (sm_90a): TMA -> wgmma -> online softmax -> wgmma RS -> TMA.

``O = softmax(scale * Q K^T [+ mask]) V`` and ``LSE = logsumexp(scale * Q K^T [+ mask])`` per row,
for tensors in ``(batch, seq, heads, dim)`` layout, bf16 / f16, head dims 64 / 128 / 256,
grouped-query attention (``H`` query heads over ``HKV`` key / value heads, ``H % HKV == 0``:
query head ``h`` reads key / value head ``h // (H // HKV)``), any sequence lengths (ragged edges
masked), causal masking aligned top-left like ``torch.nn.functional.scaled_dot_product_attention``
(query row ``r`` sees keys ``0 .. r``). Written with tirxpy's public API only.

Grid ``(ceil(SQ / BM), H, B)``; one CTA computes ``BM = 64 * NC`` query rows of one head.

Roles (``threads = 128 * (1 + NC)``):

- warpgroup 0, **producer** (``setmaxnreg.dec``): one elected thread loads the CTA's Q tile once
  (``D / 64`` TMA boxes of ``(BM, 64)`` into a 128B-swizzled tile, on ``q_full``), then key /
  value block ``i`` (``BN`` rows) into stage ``i % STAGES`` of two rings: K on ``k_full[s]``
  after ``k_empty[s]``, V on ``v_full[s]`` after ``v_empty[s]`` (parity of the previous round,
  from the second round on), in the order ``K_0, K_1, V_0, K_2, V_1, ...``. K and V have their
  own empty barriers because a K stage is free as soon as ``S = Q K^T`` is done, a V stage only
  after ``P V``: with one shared barrier, ``K_{i+2}`` waited for ``P_i V_i`` and every block
  paid a load latency (head dim 128 ran at 0.70-0.76 of cuDNN; split, 0.98-1.11).
- warpgroups 1 .. NC, **consumers** (``setmaxnreg.inc``): consumer ``c`` owns query rows
  ``64 c .. 64 c + 63`` of the tile. Per key block: ``S = Q K^T`` (wgmma SS, ``(64, BN)``
  float32 in registers), the ragged / causal mask where the block needs it (``Tx.wg.mask``),
  online softmax on the accumulator fragment (row max / row sum by quad-lane shuffles; scale
  folded into the ``exp2`` argument: ``p = exp2(s * scale * log2(e) - m * scale * log2(e))``),
  ``O *= exp2((m_old - m_new) * scale * log2(e))``, ``P`` converted to bf16 / f16 *in registers*
  (the accumulator fragment of ``S`` is the wgmma A fragment of ``P``), ``O += P V`` (wgmma RS);
  one lane per warp arrives on ``k_empty[s]`` once ``S`` is done and on ``v_empty[s]`` once
  ``P V`` is. Epilogue: ``O / l`` converted and written
  with ``stmatrix`` over the consumer's own rows of the Q tile (no longer read), fenced to the
  async proxy and stored with TMA (which drops rows past ``SQ``); ``LSE = (m * scale * log2(e)
  + log2(l)) * ln(2)`` stored from registers (guarded at the ragged edge).

Schedule (``OVERLAP=True``, the default): intra-warpgroup overlap -- after block 0, iteration
``i`` waits for ``P_{i-2} V_{i-2}`` (``wait_group 0``), converts ``P_{i-1}``, issues ``S_i = Q
K_i^T``, rescales ``O`` by the previous block's factor while ``S_i`` runs, issues ``O += P_{i-1}
V_{i-1}``, waits only for ``S_i`` (``wait_group 1``) and runs the softmax of block ``i`` while
``P_{i-1} V_{i-1}`` is still on the tensor cores. The ``wait_group 0`` opens the loop body on
purpose: at the end of the body, after the softmax, ptxas 13.0 scheduled it above the softmax
(it may move a wait earlier), which serialized the softmax behind ``P V`` (in SASS: the
``WARPGROUP.DEPBAR.LE gsb0, 0x0`` before the ``MUFU.EX2``\ s; tests/kernels/test_attention_sm90.py
checks the order). With ``NC = 2`` and ``PINGPONG`` (the default for causal masks and head dim
256, :func:`default_pingpong`) the two consumers take turns issuing their GEMMs (named barriers
3 and 4: wait for our turn, issue, hand the turn over), so one warpgroup's softmax runs under the
other's GEMMs. ``OVERLAP=False`` is the plain loop (S, softmax, P V, one block at a time).

Barrier phases are closed forms of the block counter (stage ``i % STAGES``, parity
``(i / STAGES) % 2``). Causal CTAs run heaviest-first (the last query tile on the lowest CTA id).

    >>> k = attention_sm90(1, 2, 1, 200, 80, 64, causal=True, BN=32, STAGES=2)
    >>> k.launch.threads, k.launch.grid
    (384, (2, 2, 1))
"""
from __future__ import annotations

import math

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256)
SMEM_LIMIT = 232448  # sm_90 dynamic shared memory per CTA (227 KiB)
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

ROW = TileLayout(S[(4, 2, 8) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid)] + R[4 : 1 @ laneid])
"""One float per accumulator row, ``(64, 1)``: row ``16 w + 8 h + lane / 4`` in slot ``h`` of the
four lanes of its quad (the lanes that hold that row of the wgmma accumulator)."""


def _cdiv(a, b):
    return -(-a // b)


def default_config(D):
    """``(BN, STAGES, NC)`` per head dim: key block rows, ring stages, consumer warpgroups.

    Measured on the H100 (docs/performance.md, 2026-11-22, third session): 3 stages or BN = 176
    at head dim 128 and 4 stages or BN = 176 at head dim 64 were within noise of these or slower
    across sequence lengths; at head dim 256, BN = 80 beat BN = 64 by 2-8%."""
    return {64: (128, 2, 2), 128: (128, 2, 2), 256: (80, 2, 2)}[D]


def default_pingpong(D, causal, NC=2, OVERLAP=True):
    """Whether the two consumer warpgroups take turns on the tensor cores by default: for causal
    masks and head dim 256. With the softmax overlapping the warpgroup's own P V (the loop below),
    non-causal head dims 64 / 128 ran 2-6% faster without the turn-taking barriers on the H100."""
    return NC == 2 and OVERLAP and (causal or D == 256)


def plan(B, H, HKV, SQ, SK, D, dtype="bfloat16", BN=None, STAGES=None, NC=None, causal=False, OVERLAP=True,
         PINGPONG=None):
    """Checked launch plan (raises ValueError with what to change)."""
    bn, st, nc = default_config(D) if D in HEAD_DIMS else (None, None, None)
    BN, STAGES, NC = (bn if BN is None else BN), (st if STAGES is None else STAGES), (nc if NC is None else NC)
    if dtype not in DTYPES:
        raise ValueError(f"attention_sm90: dtype must be one of {DTYPES}, got {dtype!r}")
    if D not in HEAD_DIMS:
        raise ValueError(f"attention_sm90: head dim {D} is not supported; use one of {HEAD_DIMS}")
    if min(B, H, HKV, SQ, SK) <= 0:
        raise ValueError(f"attention_sm90: B, H, HKV, SQ, SK must be positive, got {(B, H, HKV, SQ, SK)}")
    if H % HKV:
        raise ValueError(f"attention_sm90: {H} query heads do not split into {HKV} key / value head groups "
                         "(grouped-query attention needs H % HKV == 0)")
    if not (16 <= BN <= 256 and BN % 16 == 0):
        raise ValueError(f"attention_sm90: BN = {BN} must be a multiple of 16 in [16, 256] (the k of P V)")
    if NC not in (1, 2, 3):
        raise ValueError(f"attention_sm90: NC = {NC} consumer warpgroups; use 1, 2 or 3")
    if STAGES < 1:
        raise ValueError(f"attention_sm90: STAGES = {STAGES} must be at least 1")
    PINGPONG = default_pingpong(D, causal, NC, OVERLAP) if PINGPONG is None else bool(PINGPONG)
    if PINGPONG and (NC != 2 or not OVERLAP):
        raise ValueError("attention_sm90: PINGPONG schedules two consumer warpgroups (NC = 2) in the overlapped "
                         "loop (OVERLAP=True)")
    BM = 64 * NC
    smem = (BM * D + 2 * STAGES * BN * D) * 2 + 1024 + 8 * (1 + 4 * STAGES)
    if smem > SMEM_LIMIT:
        raise ValueError(f"attention_sm90: Q ({BM} x {D}) and {STAGES} K / V stages of {BN} rows need {smem} bytes "
                         f"of shared memory, over the {SMEM_LIMIT} a CTA may have: use fewer stages or a smaller BN")
    return {"BM": BM, "BN": BN, "STAGES": STAGES, "NC": NC, "smem": smem,
            "grid": (_cdiv(SQ, BM), H, B), "threads": 128 * (1 + NC), "pingpong": PINGPONG}


def _tile_layout(rows, D, stages=None):
    """``(rows, D)`` tiles (``(stages, rows, D)``) made of dense 128B-swizzled ``(rows, 64)`` boxes
    one after another: K-major for Q and K (wgmma A / transposed B), MN-major for V (wgmma B)."""
    inner = S[(rows, D // 64, 64) : (64, rows * 64, 1)] if stages is None else \
        S[(stages, rows, D // 64, 64) : (rows * D, 64, rows * 64, 1)]
    return ComposeLayout(swizzle_for(128, "bf16"), TileLayout(inner))


@tirxpy.jit
def attention_sm90(B, H, HKV, SQ, SK, D, causal=False, scale=None, dtype="bfloat16", BN=None, STAGES=None, NC=None,
                   SQT=None, SKT=None, OVERLAP=True, PINGPONG=None):
    """The kernel for one problem: ``k(Q, K, V, O, LSE)`` with ``Q, O: (B, SQT, H, D)``,
    ``K, V: (B, SKT, HKV, D)``, ``LSE: (B, H, SQT, 1)`` float32. ``SQ`` / ``SK`` are the valid
    lengths; the tensors may have more rows (``SQT >= SQ``, ``SKT >= SK``, default equal): a TMA
    box may not be larger than its tensor, so :func:`kernels.attention` pads sequences shorter than
    one tile (rows past ``SK`` are masked, rows past ``SQ`` are computed and dropped)."""
    p = plan(B, H, HKV, SQ, SK, D, dtype, BN, STAGES, NC, causal, OVERLAP, PINGPONG)
    SQT, SKT = SQT or SQ, SKT or SK
    if SQT < max(SQ, p["BM"]) or SKT < max(SK, p["BN"]):
        raise ValueError(f"attention_sm90: tensors of {SQT} query / {SKT} key rows are shorter than one tile "
                         f"({p['BM']} / {p['BN']}) or than SQ = {SQ} / SK = {SK}: pad the sequences")
    BM, BN, STAGES, NC = p["BM"], p["BN"], p["STAGES"], p["NC"]
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    SL2 = scale * LOG2E
    GROUP = H // HKV
    DC = D // 64
    NKV = _cdiv(SK, BN)
    MT = p["grid"][0]
    QL, KVL = _tile_layout(BM, D), _tile_layout(BN, D, STAGES)
    SACC, OACC, OCH = wgmma_accumulator(BN), wgmma_accumulator(D), wgmma_accumulator(64)
    RAGGED = SK % BN != 0
    PINGPONG = p["pingpong"]
    NEG_INF = float("-inf")
    regs_dec, regs_inc = {1: (40, 232), 2: (24, 240), 3: (32, 160)}[NC]

    @T.prim_func
    def attention_sm90_kernel(Q: T.Tensor((B, SQT, H, D), dtype), K: T.Tensor((B, SKT, HKV, D), dtype),
                              V: T.Tensor((B, SKT, HKV, D), dtype), O: T.Tensor((B, SQT, H, D), dtype),
                              LSE: T.Tensor((B, H, SQT, 1), "float32")):
        T.launch(grid=p["grid"], threads=p["threads"])
        Qs = T.alloc_shared((BM, D), dtype, layout=QL)
        Ks = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        Vs = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        q_full = T.alloc_shared((1,), "uint64")
        k_full = T.alloc_shared((STAGES,), "uint64")
        v_full = T.alloc_shared((STAGES,), "uint64")
        k_empty = T.alloc_shared((STAGES,), "uint64")
        v_empty = T.alloc_shared((STAGES,), "uint64")
        sacc = T.alloc_local((64, BN), "float32", layout=SACC)
        pfr = T.alloc_local((64, BN), dtype, layout=SACC)
        oacc = T.alloc_local((64, D), "float32", layout=OACC)
        och = T.alloc_local((64, 64), dtype, layout=OCH)
        mrow = T.alloc_local((64, 1), "float32", layout=ROW)
        mprev = T.alloc_local((64, 1), "float32", layout=ROW)
        nms = T.alloc_local((64, 1), "float32", layout=ROW)
        lrow = T.alloc_local((64, 1), "float32", layout=ROW)
        alpha = T.alloc_local((64, 1), "float32", layout=ROW)
        mt = T.cta_id(0)
        if causal:
            mt = MT - 1 - T.cta_id(0)       # heaviest tiles first
        h = T.cta_id(1)
        b = T.cta_id(2)
        hk = h // GROUP
        m0 = mt * BM
        nkv = NKV
        if causal:
            nkv = T.min(NKV, T.ceildiv(T.min(m0 + BM, SQ), BN))
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(q_full[0], 1)
            for s in T.serial(STAGES):
                T.ptx.mbarrier_init(k_full[s], 1)
                T.ptx.mbarrier_init(v_full[s], 1)
                T.ptx.mbarrier_init(k_empty[s], 4 * NC)
                T.ptx.mbarrier_init(v_empty[s], 4 * NC)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        wg = T.warpgroup_id()
        if wg == 0:
            T.ptx.setmaxnreg_dec(regs_dec)
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    for j in range(DC):
                        Tx.copy_async(Qs[:, j * 64:j * 64 + 64], Q[b, m0:m0 + BM, h, j * 64:j * 64 + 64],
                                      mbar=q_full[0], arrive=j == DC - 1)
                    # K_i goes out one block ahead of V_{i-1}: K's stage frees as soon as S = Q K^T is
                    # done, V's only after P V, so neither load queues behind the other's slot
                    for i in T.serial(nkv + 1):
                        if i < nkv:
                            s = i % STAGES
                            if i >= STAGES:
                                T.ptx.mbarrier_wait_parity(k_empty[s], (i // STAGES + 1) % 2)
                            for j in range(DC):
                                Tx.copy_async(Ks[s, :, j * 64:j * 64 + 64], K[b, i * BN:i * BN + BN, hk, j * 64:j * 64 + 64],
                                              mbar=k_full[s], arrive=j == DC - 1)
                        if i > 0:
                            v = i - 1
                            sv = v % STAGES
                            if v >= STAGES:
                                T.ptx.mbarrier_wait_parity(v_empty[sv], (v // STAGES + 1) % 2)
                            for j in range(DC):
                                Tx.copy_async(Vs[sv, :, j * 64:j * 64 + 64], V[b, v * BN:v * BN + BN, hk, j * 64:j * 64 + 64],
                                              mbar=v_full[sv], arrive=j == DC - 1)
        else:
            T.ptx.setmaxnreg_inc(regs_inc)
            c = wg - 1
            r0 = m0 + c * 64
            Tx.wg.fill(oacc, T.float32(0))
            Tx.wg.fill(mrow, T.float32(NEG_INF))
            Tx.wg.fill(lrow, T.float32(0))
            T.ptx.mbarrier_wait_parity(q_full[0], 0)
            if not OVERLAP:
                for i in T.serial(nkv):
                    s = i % STAGES
                    n0 = i * BN
                    T.ptx.mbarrier_wait_parity(k_full[s], (i // STAGES) % 2)
                    Tx.wg.gemm_async(sacc, Qs[c * 64:c * 64 + 64, :], Ks[s], transpose_b=True, accumulate=False,
                                     wait=0)
                    if T.lane_id() == 0:
                        T.ptx.mbarrier_arrive(k_empty[s])
                    if causal:
                        if n0 + BN > m0 + 1 or n0 + BN > SK:     # CTA-uniform (the verifier proves it)
                            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0, diag=r0 - n0)
                    elif RAGGED:
                        if i == NKV - 1:
                            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0)
                    Tx.wg.unary(mprev, mrow, fn="copy")
                    Tx.wg.max(mrow, sacc, axis=1, accum=True)
                    Tx.wg.mul(nms, mrow, T.float32(-SL2))
                    Tx.wg.fma(alpha, mprev, T.float32(SL2), nms)
                    Tx.wg.exp2(alpha, alpha)
                    Tx.wg.fma(sacc, sacc, T.float32(SL2), nms)
                    Tx.wg.exp2(sacc, sacc)
                    Tx.wg.mul(lrow, lrow, alpha)
                    Tx.wg.sum(lrow, sacc, axis=1, accum=True)
                    Tx.wg.mul(oacc, oacc, alpha)
                    Tx.wg.cast(pfr, sacc)
                    T.ptx.mbarrier_wait_parity(v_full[s], (i // STAGES) % 2)
                    Tx.wg.gemm_async(oacc, pfr, Vs[s], accumulate=True, wait=0)
                    if T.lane_id() == 0:
                        T.ptx.mbarrier_arrive(v_empty[s])
            else:
                # block 0: S_0 and its softmax (O is still zero: no rescale)
                T.ptx.mbarrier_wait_parity(k_full[0], 0)
                Tx.wg.gemm_async(sacc, Qs[c * 64:c * 64 + 64, :], Ks[0], transpose_b=True, accumulate=False, wait=0)
                if T.lane_id() == 0:
                    T.ptx.mbarrier_arrive(k_empty[0])
                if causal:
                    if BN > m0 + 1 or BN > SK:
                        Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK, diag=r0)
                elif NKV == 1 and RAGGED:
                    Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK)
                Tx.wg.max(mrow, sacc, axis=1)
                Tx.wg.mul(nms, mrow, T.float32(-SL2))
                Tx.wg.fma(sacc, sacc, T.float32(SL2), nms)
                Tx.wg.exp2(sacc, sacc)
                Tx.wg.sum(lrow, sacc, axis=1)
                Tx.wg.fill(alpha, T.float32(1))                  # O is zero: nothing to rescale yet
                if PINGPONG:
                    if wg == 2:
                        T.ptx.barrier_arrive(3, 256)             # consumer 0 takes the first turn
                for i in T.serial(1, nkv):
                    s = i % STAGES
                    sp = (i - 1) % STAGES
                    n0 = i * BN
                    # P_{i-2} V_{i-2} done, V_{i-2} free. This wait opens the loop body so that ptxas
                    # cannot hoist it above the previous block's softmax (it does when both share a
                    # basic block), which would serialize the softmax behind P V
                    Tx.wg.gemm_wait(0, oacc)
                    if i >= 2:
                        if T.lane_id() == 0:
                            T.ptx.mbarrier_arrive(v_empty[(i - 2) % STAGES])
                    Tx.wg.cast(pfr, sacc)                        # P_{i-1}, the A operand of P V
                    T.ptx.mbarrier_wait_parity(k_full[s], (i // STAGES) % 2)
                    if PINGPONG:
                        T.ptx.barrier_sync(3 + c, 256)           # our turn on the tensor cores
                    # S_i = Q K_i^T, then O += P_{i-1} V_{i-1}, both in flight at once
                    Tx.wg.gemm_async(sacc, Qs[c * 64:c * 64 + 64, :], Ks[s], transpose_b=True, accumulate=False)
                    Tx.wg.mul(oacc, oacc, alpha)                 # O *= alpha_{i-1} while S_i runs
                    T.ptx.mbarrier_wait_parity(v_full[sp], ((i - 1) // STAGES) % 2)
                    Tx.wg.gemm_async(oacc, pfr, Vs[sp], accumulate=True)
                    if PINGPONG:
                        if wg == 1:
                            T.ptx.barrier_arrive(4, 256)         # the other consumer's turn
                        elif i < nkv - 1:                        # (no turn follows consumer 1's last)
                            T.ptx.barrier_arrive(3, 256)
                    Tx.wg.gemm_wait(1, sacc)                     # S_i done (K_i free); P V still running
                    if T.lane_id() == 0:
                        T.ptx.mbarrier_arrive(k_empty[s])
                    if causal:
                        if n0 + BN > m0 + 1 or n0 + BN > SK:
                            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0, diag=r0 - n0)
                    elif RAGGED:
                        if i == NKV - 1:
                            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0)
                    Tx.wg.unary(mprev, mrow, fn="copy")
                    Tx.wg.max(mrow, sacc, axis=1, accum=True)
                    Tx.wg.mul(nms, mrow, T.float32(-SL2))
                    Tx.wg.fma(alpha, mprev, T.float32(SL2), nms)
                    Tx.wg.exp2(alpha, alpha)
                    Tx.wg.fma(sacc, sacc, T.float32(SL2), nms)
                    Tx.wg.exp2(sacc, sacc)
                    Tx.wg.mul(lrow, lrow, alpha)
                    Tx.wg.sum(lrow, sacc, axis=1, accum=True)
                Tx.wg.gemm_wait(0, oacc)
                if nkv >= 2:
                    if T.lane_id() == 0:
                        T.ptx.mbarrier_arrive(v_empty[(nkv - 2) % STAGES])
                Tx.wg.cast(pfr, sacc)
                last = (nkv - 1) % STAGES
                Tx.wg.mul(oacc, oacc, alpha)
                T.ptx.mbarrier_wait_parity(v_full[last], ((nkv - 1) // STAGES) % 2)
                Tx.wg.gemm_async(oacc, pfr, Vs[last], accumulate=True, wait=0)
                if T.lane_id() == 0:
                    T.ptx.mbarrier_arrive(v_empty[last])
            # epilogue: O / l -> this consumer's rows of Qs -> TMA; LSE from registers
            Tx.wg.div(alpha, T.float32(1), lrow)
            Tx.wg.mul(oacc, oacc, alpha)
            for j in range(DC):
                Tx.wg.cast(och, oacc[:, j * 64:j * 64 + 64])
                Tx.wg.copy(Qs[c * 64:c * 64 + 64, j * 64:j * 64 + 64], och)
            T.ptx.fence_proxy_async()
            T.ptx.barrier_sync(1 + c, 128)
            for cc in range(NC):                    # one issuing thread per call site
                if T.thread_id() == 128 * (cc + 1):
                    for j in range(DC):
                        Tx.copy_async(O[b, m0 + cc * 64:m0 + cc * 64 + 64, h, j * 64:j * 64 + 64],
                                      Qs[cc * 64:cc * 64 + 64, j * 64:j * 64 + 64])
            Tx.wg.log2(lrow, lrow)
            Tx.wg.fma(lrow, mrow, T.float32(SL2), lrow)
            Tx.wg.mul(lrow, lrow, T.float32(LN2))
            Tx.wg.copy(LSE[b, h, r0:r0 + 64, 0:1], lrow)
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group(0)

    return attention_sm90_kernel
