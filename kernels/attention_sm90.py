"""Flash attention forward for Hopper (sm_90a): TMA -> wgmma -> online softmax -> wgmma RS -> TMA.

``O = softmax(scale * Q K^T [+ mask]) V`` and ``LSE = logsumexp(scale * Q K^T [+ mask])`` per row,
for tensors in ``(batch, seq, heads, dim)`` layout, bf16 / f16, head dims 64 / 128 / 256,
grouped-query attention (``H`` query heads over ``HKV`` key / value heads, ``H % HKV == 0``:
query head ``h`` reads key / value head ``h // (H // HKV)``), any sequence lengths (ragged edges
masked), causal masking aligned top-left like ``torch.nn.functional.scaled_dot_product_attention``
(query row ``r`` sees keys ``0 .. r``). Written with tirxpy's public API only.

A tile is ``BM = 64 * NC`` query rows of one head. Persistent (``PERSIST``, the default up to 32
key blocks, see :func:`~kernels.attention_plan.plan`): ``G = min(tiles, sms)`` CTAs, CTA ``u``
taking tiles ``u, u + G, ...`` of the ``(ceil(SQ / BM), H, B)`` tiles (query tile fastest; causal:
pairs of query tiles, the last ones dealt as single tiles with ``TAIL``, see :func:`tile_of`); the
K / V ring, its barrier phases and the Q buffer carry over from tile to tile, so the next tile's Q
and first K / V blocks load while this tile finishes, and O is staged in its own buffer (head dims
64 / 128) or over the last key block's K / V stages (``OSTAGE="kv"``, head dim 256, which has no room
for an O buffer: those two stages go back to the producer once the O store has read them).
Otherwise the grid is ``(ceil(SQ / BM), H, B)``, one tile per CTA, and O is staged over Q.

Roles (``threads = 128 * (1 + NC)``):

- warpgroup 0, **producer** (``setmaxnreg.dec``): one elected thread loads each tile's Q
  (``D / 64`` TMA boxes of ``(BM, 64)`` into a 128B-swizzled tile, on ``q_full``, after
  ``q_empty``: every consumer's last ``S`` of the buffer's previous tile is done, or with
  ``OSTAGE="q"`` its O store has read the buffer, so Q then goes out after ``K_0, K_1, V_0``), then key /
  value block ``i`` (``BN`` rows) into stage ``i % STAGES`` of two rings: K on ``k_full[s]``
  after ``k_empty[s]``, V on ``v_full[s]`` after ``v_empty[s]`` (parity of the previous round,
  from the second round on), in the order ``K_0, K_1, V_0, K_2, V_1, ...``. K and V have their
  own empty barriers because a K stage is free as soon as ``S = Q K^T`` is done, a V stage only
  after ``P V``: with one shared barrier, ``K_{i+2}`` waited for ``P_i V_i`` and every block
  paid a load latency (head dim 128 ran at 0.70-0.76 of cuDNN; split, 0.98-1.11).
- warpgroups 1 .. NC, **consumers** (``setmaxnreg.inc``): consumer ``c`` owns query rows
  ``64 c .. 64 c + 63`` of the tile. Per key block: ``S = Q K^T`` (wgmma SS, ``(64, BN)``
  float32 in registers), the ragged / causal mask where the block needs it (``Tx.wg.mask``),
  online softmax on the accumulator fragment (row max by quad-lane shuffles; the row sum as each
  lane's share, ``l`` of shape ``(64, 4)`` in :data:`QUAD`, summed over the quad once per tile in the
  epilogue, as FlashAttention-3 does: 0-7% faster than shuffling every block, H100; scale folded
  into the ``exp2`` argument: ``p = exp2(s * scale * log2(e) - m * scale * log2(e))``),
  ``O *= exp2((m_old - m_new) * scale * log2(e))`` (with ``LAZY``, the head dim 256 default, only once
  the max has risen past ``2^8``: :func:`attention_sm90`), ``P`` converted to bf16 / f16 *in registers*
  (the accumulator fragment of ``S`` is the wgmma A fragment of ``P``), ``O += P V`` (wgmma RS);
  one lane per warp arrives on ``k_empty[s]`` once ``S`` is done and on ``v_empty[s]`` once
  ``P V`` is. Epilogue: ``O / l`` converted and written with ``stmatrix`` over the consumer's
  own rows of the O staging buffer (after the previous tile's store has read them), fenced to the
  async proxy and stored with TMA (which drops rows past ``SQ``); ``LSE = (m * scale * log2(e)
  + log2(l)) * ln(2)`` stored from registers (guarded at the ragged edge).

Schedule (``OVERLAP=True``, the default): intra-warpgroup overlap -- after block 0, iteration
``i`` waits for ``P_{i-2} V_{i-2}`` (``wait_group 0``), converts ``P_{i-1}``, issues ``S_i = Q
K_i^T``, rescales ``O`` by the previous block's factor while ``S_i`` runs, issues ``O += P_{i-1}
V_{i-1}``, waits only for ``S_i`` (``wait_group 1``) and runs the softmax of block ``i`` while
``P_{i-1} V_{i-1}`` is still on the tensor cores. The ``wait_group 0`` opens the loop body on
purpose: at the end of the body, after the softmax, ptxas 13.0 scheduled it above the softmax
(it may move a wait earlier), which serialized the softmax behind ``P V`` (in SASS: the
``WARPGROUP.DEPBAR.LE gsb0, 0x0`` before every ``MUFU.EX2``; tests/kernels/test_attention_sm90.py
checks the order). With ``NC = 2`` and ``PINGPONG`` (the default for head dim 256, but for its
short causal case, and for causal masks without ``CHAIN``,
:func:`~kernels.attention_plan.default_pingpong`) the two consumers take turns issuing their GEMMs
(named barriers 3 and 4: wait for our turn, issue, hand the turn over), so one warpgroup's softmax
runs under the other's GEMMs. ``OVERLAP=False`` is the plain loop (S, softmax, P V, one block at a
time).

Across tiles (``CHAIN``, the default for persistent CTAs where a second Q buffer fits: head dims
64 and 128): Q is double-buffered (``q_full`` / ``q_empty`` per buffer), and a tile's last ``P V``
goes out together with the *next* tile's ``S_0 = Q' K_0^T``; the next tile's block-0 softmax runs
while that ``P V`` does, and only then is this tile's ``O`` finished and stored (its row max / sum
kept in ``mfin`` / ``lfin``). Without it the tensor cores idled through every tile's first ``S``
and softmax: at S = 1k (8 key blocks per tile) it gained 2-7% on the H100.

Barrier phases are closed forms of the CTA's key block counter ``g`` (its earlier tiles'
blocks plus ``i``): stage ``g % STAGES``, parity ``(g / STAGES) % 2``; ``q_full`` / ``q_empty``
use the CTA's tile counter ``tc`` (buffer ``tc % QB``, parity ``(tc / QB) % 2``). Causal query
tiles of a head run from the last (heaviest) down.

    >>> k = attention_sm90(1, 2, 1, 200, 80, 64, causal=True, BN=32, STAGES=2, PERSIST=False)
    >>> k.launch.threads, k.launch.grid
    (384, (2, 2, 1))
    >>> attention_sm90(1, 2, 1, 200, 80, 64, BN=32, STAGES=2, sms=3).launch.grid   # 4 tiles on 3 CTAs
    (3, 1, 1)
    >>> attention_sm90(1, 2, 1, 200, 80, 64, causal=True, BN=32, STAGES=2).launch.grid   # 2 pairs
    (2, 1, 1)
"""
from __future__ import annotations

import math

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator

from .attention_plan import plan
from .attention_walk import causal_steps, key_blocks, next_step, tile_of
from .errors import KernelConfigError
from .schedule import SM_COUNT_H100
from tirxpy.lang.schedule import cdiv, tiles_of_unit
from tirxpy.lang import register_split

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LAZY_LOG2 = 8.0
"""``LAZY``: a row's running max moves (and O is rescaled) only when it rises by more than this, in
units of ``scale * log2(e)`` times a score; until then ``P = exp2(...)`` stays below ``2^8 = 256``."""

ROW = TileLayout(S[(4, 2, 8) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid)] + R[4 : 1 @ laneid])
"""One float per accumulator row, ``(64, 1)``: row ``16 w + 8 h + lane / 4`` in slot ``h`` of the
four lanes of its quad (the lanes that hold that row of the wgmma accumulator)."""

QUAD = TileLayout(S[(4, 2, 8, 4) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid, 1 @ laneid)])
"""Per-lane partial row sums, ``(64, 4)``: column ``q`` of row ``16 w + 8 h + lane / 4`` in slot ``h`` of
lane ``4 (lane / 4) + q``, the sum of the accumulator columns ``8 nb + 2 q + c`` that lane holds."""


def quad_view(n):
    """The wgmma accumulator ``(64, n)`` seen as ``(64, 4, n / 4)``: ``[r, q, 2 nb + c]`` is column ``8 nb + 2 q +
    c`` of row ``r``, so axis 1 is the lane within the row's quad and axis 2 the columns one lane holds
    (a sum over axis 2 needs no shuffles).

        >>> from tirxpy.layout.atoms import wgmma_accumulator
        >>> quad_view(16).apply(37, 2, 3, shape=(64, 4, 4)) == wgmma_accumulator(16).apply(37, 13, shape=(64, 16))
        True
    """
    return TileLayout(S[(4, 2, 8, 4, n // 8, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 1 @ laneid, 4 @ m, 1 @ m)])


def _tile_layout(rows, D, stages=None):
    """``(rows, D)`` tiles (``(stages, rows, D)``) made of dense 128B-swizzled ``(rows, 64)`` boxes
    one after another: K-major for Q and K (wgmma A / transposed B), MN-major for V (wgmma B)."""
    inner = S[(rows, D // 64, 64) : (64, rows * 64, 1)] if stages is None else \
        S[(stages, rows, D // 64, 64) : (rows * D, 64, rows * 64, 1)]
    return ComposeLayout(swizzle_for(128, "bf16"), TileLayout(inner))


@tirxpy.jit
def attention_sm90(B, H, HKV, SQ, SK, D, causal=False, scale=None, dtype="bfloat16", BN=None, STAGES=None, NC=None,
                   SQT=None, SKT=None, OVERLAP=True, PINGPONG=None, PERSIST=None, CHAIN=None, sms=SM_COUNT_H100,
                   OSTAGE=None, LAZY=None, TRIM=None, TAIL=None, FOLD=None, PDL=True):
    """The kernel for one problem: ``k(Q, K, V, O, LSE)`` with ``Q, O: (B, SQT, H, D)``,
    ``K, V: (B, SKT, HKV, D)``, ``LSE: (B, H, SQT, 1)`` float32. ``SQ`` / ``SK`` are the valid
    lengths; the tensors may have more rows (``SQT >= SQ``, ``SKT >= SK``, default equal): a TMA
    box may not be larger than its tensor, so :func:`kernels.attention` pads sequences shorter than
    one tile (rows past ``SK`` are masked, rows past ``SQ`` are computed and dropped).

    ``LAZY`` (default :func:`~kernels.attention_plan.default_lazy`: head dim 256): a row's running max,
    and with it ``O``'s scale, moves only when a block raises it by more than ``LAZY_LOG2 = 8`` (in ``scale * log2(e)``
    units); otherwise the block's ``P = exp2(s - m)`` is taken against the stale max, at most ``2^8``
    (bf16 / f16 and the float32 sums hold it to the same relative precision as values below 1), and
    ``O`` is not multiplied at all.
    ``O / l`` and the log-sum-exp ``m + log2(l)`` come out the same, as ``O`` and ``l`` always share
    one scale. A thread decides for its two rows (each row's quad decides alike), so some warps
    rescale while others skip.

    ``TRIM`` (default :func:`~kernels.attention_plan.default_trim`: the short causal head dim 256 plan): in
    a causal tile each consumer stops at its own rows' last key block; the first consumer's rows end 64 rows before the
    tile's, so it skips the tile's last block at BN = 64 (more at narrower blocks) and hands those K / V
    stages back unread, once each one's load has landed. It needs the overlapped loop without ping-pong
    turns and without CHAIN (ValueError otherwise); without a causal mask it changes nothing.

    ``TAIL`` (default :func:`~kernels.attention_plan.default_tail`: from 32 query tiles on, and up to 8 at head
    dims 64 and 256): a persistent causal walk takes its last pairs of query tiles (one to two rounds' worth,
    :func:`~kernels.attention_walk.causal_tail`) as single tiles dealt
    heaviest first, in rounds alternating direction over the CTAs: pairs are all the same size, and when
    they do not divide into the CTAs (2048 pairs on 132 SMs at every causal benchmark shape) their last
    round left the rest idle. Without a persistent causal walk it changes nothing.

    ``FOLD`` (default :func:`~kernels.attention_plan.default_fold`: head dim 256 causal): the matrix
    products dispatch to the ``wgmma_folded`` variant, whose descriptors cost one uniform add per k-step
    and operand instead of about five (tirxpy.primitives.gemm.desc).

    ``PDL`` (default on): programmatic dependent launch, as in :func:`kernels.gemm_sm90.gemm_sm90`: the
    kernel may start while the previous kernel in the stream finishes, and every thread waits for it
    (``griddepcontrol.wait``) after the barrier setup, before any global load or store."""
    if PDL not in (True, False, 0, 1):
        raise KernelConfigError(f"attention_sm90: PDL must be True or False, got {PDL!r}")
    PDL = bool(PDL)
    p = plan(B, H, HKV, SQ, SK, D, dtype, BN, STAGES, NC, causal, OVERLAP, PINGPONG, PERSIST, CHAIN, sms, OSTAGE,
             LAZY, TRIM, TAIL, FOLD)
    SQT, SKT = SQT or SQ, SKT or SK
    if SQT < max(SQ, p["BM"]) or SKT < max(SK, p["BN"]):
        raise KernelConfigError(f"attention_sm90: tensors of {SQT} query / {SKT} key rows are shorter than one tile "
                                f"({p['BM']} / {p['BN']}) or than SQ = {SQ} / SK = {SK}: pad the sequences")
    BM, BN, STAGES, NC = p["BM"], p["BN"], p["STAGES"], p["NC"]
    LAZY, TRIM, TAIL = p["lazy"], p["trim"], p["tail"]
    DISP = "wgmma_folded" if p["fold"] else None     # the matrix products' wgmma variant
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    SL2 = scale * LOG2E
    GROUP = H // HKV
    DC = D // 64
    NKV = cdiv(SK, BN)
    MT = cdiv(SQ, BM)
    PINGPONG, PERSIST, CHAIN, WORK = p["pingpong"], p["persist"], p["chain"], p["work"]
    QB = 2 if CHAIN else 1                  # Q buffers: the next tile's Q loads while this tile runs
    OWN_O = p["ostage"] == "own"
    KV_O = p["ostage"] == "kv"              # O over the last block's K (consumer 0) and V (consumer 1) stages
    Q_AFTER_O = PERSIST and p["ostage"] == "q"  # Q reloads once this tile's O (staged over it) is read
    QL, KVL = _tile_layout(BM, D, QB), _tile_layout(BN, D, STAGES)
    SACC, OACC, OCH = wgmma_accumulator(BN), wgmma_accumulator(D), wgmma_accumulator(64)
    RAGGED = SK % BN != 0
    UNITS = p["grid"][0] if PERSIST else 1
    NEG_INF = float("-inf")
    regs_dec, regs_inc = {1: (40, 232), 2: (24, 240), 3: (32, 160)}[NC]
    if NC == 2 and PERSIST and (D == 256 or p["ostage"] != "own"):
        # the persistent producer's tile walk spills below 48 at head dim 256, and at 128 where its Q
        # or K / V loads wait on the O store (OSTAGE "q" / "kv": 8 / 36 bytes with 24)
        regs_dec, regs_inc = 48, 224
    regs_dec, regs_inc = register_split(p["threads"], regs_dec, regs_inc, "attention_sm90")

    @T.macro
    def online_softmax(sacc, mrow, mprev, nms, alpha, lrow, i, n0, m0, r0, resc):
        """Block ``i`` (key columns ``n0 ..``) of the online softmax, in place on the S fragment:
        mask it, raise the row max, ``alpha = exp2((m_old - m_new) scale log2 e)``, ``S -> P`` and
        ``l = alpha l + rowsum(P)`` (``l``: each lane's share of the row sums, :data:`QUAD`). The caller
        rescales O by ``alpha`` (with ``LAZY``: only where ``resc[0]`` is set, see :func:`attention_sm90`)."""
        if causal:
            if n0 + BN > m0 + 1 or n0 + BN > SK:     # CTA-uniform (the verifier proves it)
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0, diag=r0 - n0)
        elif RAGGED:
            if i == NKV - 1:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0)
        Tx.wg.unary(mprev, mrow, fn="copy")
        Tx.wg.max(mrow, sacc, axis=1, accum=True)
        if LAZY:
            # this thread's two rows (slots 0 and 1: rows 8 h + lane / 4 of its warp); the four lanes of
            # a row's quad hold the same maxima, so they decide alike. Selects, not a branch: a branch here
            # splits the softmax's basic block, and ptxas then schedules it worse (-20% at head dim 64)
            rise = T.max(mrow[0, 0] - mprev[0, 0], mrow[8, 0] - mprev[8, 0])
            resc[0] = T.select(rise * SL2 > LAZY_LOG2, 1, 0)
            for h in range(2):                  # keep the stale max: P stays below 2^LAZY_LOG2
                mrow[8 * h, 0] = T.select(resc[0] != 0, mrow[8 * h, 0], mprev[8 * h, 0])
        Tx.wg.mul(nms, mrow, T.float32(-SL2))
        Tx.wg.fma(alpha, mprev, T.float32(SL2), nms)
        Tx.wg.exp2(alpha, alpha)
        if LAZY:                                # exactly 1 where the max stays (l and O both keep their scale)
            for h in range(2):
                alpha[8 * h, 0] = T.select(resc[0] != 0, alpha[8 * h, 0], T.float32(1))
        Tx.wg.fma(sacc, sacc, T.float32(SL2), nms)
        Tx.wg.exp2(sacc, sacc)
        Tx.wg.mul(lrow, lrow, alpha)
        Tx.wg.sum(lrow, sacc.alias((64, 4, BN // 4), layout=quad_view(BN)), axis=2, accum=True)

    @T.macro
    def rescale_o(oacc, alpha, resc):
        """``O *= alpha`` of the previous block (with ``LAZY``, only in threads whose row max rose past
        the threshold: the others kept their max, so their O stays as it is)."""
        if LAZY:
            if resc[0] != 0:
                Tx.mul(oacc, oacc, alpha)
        else:
            Tx.wg.mul(oacc, oacc, alpha)

    @T.macro
    def first_softmax(sacc, mrow, nms, alpha, lrow, m0, r0, resc):
        """Block 0 of the tile at row ``m0`` (this consumer's rows from ``r0``): mask, row max, ``S -> P``,
        ``l = rowsum(P)``; ``alpha = 1``, as O is still zero."""
        if causal:
            if BN > m0 + 1 or BN > SK:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK, diag=r0)
        elif NKV == 1 and RAGGED:
            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK)
        Tx.wg.max(mrow, sacc, axis=1)
        Tx.wg.mul(nms, mrow, T.float32(-SL2))
        Tx.wg.fma(sacc, sacc, T.float32(SL2), nms)
        Tx.wg.exp2(sacc, sacc)
        Tx.wg.sum(lrow, sacc.alias((64, 4, BN // 4), layout=quad_view(BN)), axis=2)
        Tx.wg.fill(alpha, T.float32(1))
        if LAZY:
            resc[0] = 0                         # O is zero: nothing to rescale

    @T.macro
    def load_q(Qs, Q, q_full, q_empty, qb, tcv, b, m0, h):
        """Tile ``tcv`` of this CTA's Q (rows ``m0 ..`` of head ``h``) into buffer ``qb`` on
        ``q_full[qb]``, once ``q_empty[qb]`` says its previous tile is done with the buffer."""
        if tcv >= QB:
            T.ptx.mbarrier_wait_parity(q_empty[qb], (tcv // QB + 1) % 2)
        for j in range(DC):
            Tx.copy_async(Qs[qb, :, j * 64:j * 64 + 64], Q[b, m0:m0 + BM, h, j * 64:j * 64 + 64],
                          mbar=q_full[qb], arrive=j == DC - 1)

    @T.macro
    def skip_blocks(g0, nkc, nkv, k_full, v_full, k_empty, v_empty):
        """``TRIM``: hand back the K / V stages of the tile's blocks ``nkc .. nkv - 1``, which this consumer's
        rows do not see. Each arrival waits for its round's load first: that load was issued only after
        the stage's previous round was released, so the arrival cannot count towards that round while the
        other consumer may still read it. With ``KV_O`` the last K stage is handed back by the epilogue,
        once the O store that goes over it has read it; this consumer waits for its load all the same,
        before writing over it."""
        for j in T.serial(nkc, nkv):
            gj = g0 + j
            sj = gj % STAGES
            T.ptx.mbarrier_wait_parity(k_full[sj], (gj // STAGES) % 2)
            if T.lane_id() == 0:
                if not KV_O or j < nkv - 1:
                    T.ptx.mbarrier_arrive(k_empty[sj])
            T.ptx.mbarrier_wait_parity(v_full[sj], (gj // STAGES) % 2)
            if T.lane_id() == 0:
                T.ptx.mbarrier_arrive(v_empty[sj])

    @T.macro
    def epilogue(O, Os, LSE, oacc, och, mfin, lfin, ltot, linv, b, h, m0, r0, c, v_empty, last, chained, q_empty,
                 qb, Ks, Vs, k_empty):
        """``l`` = the quad's shares of ``lfin`` summed; ``O / l`` -> this consumer's rows of ``Os``
        (``stmatrix``) -> TMA store; ``LSE`` from registers. ``chained``: the tile's last P V (stage ``last``) is still in flight; it is waited for here, behind
        the branch of the staging buffer's wait, so that ptxas cannot hoist the wait above the next tile's
        block-0 softmax (it does within one basic block). ``Q_AFTER_O``: O goes over this consumer's
        rows of Q, and once the store has read them the consumer arrives on ``q_empty[qb]``."""
        Tx.wg.sum(ltot, lfin, axis=1)           # the quad's partial sums -> the row's (shuffles, once a tile)
        Tx.wg.div(linv, T.float32(1), ltot)
        if OWN_O:                               # the previous tile's store has read our rows of Os
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group_read(0)
            T.ptx.barrier_sync(1 + c, 128)
        if chained:
            Tx.wg.gemm_wait(0, oacc)
            if T.lane_id() == 0:
                T.ptx.mbarrier_arrive(v_empty[last])
        Tx.wg.mul(oacc, oacc, linv)
        if KV_O:                                # every S and P V of the tile is done in both consumers
            T.ptx.barrier_sync(5, 128 * NC)
        for j in range(DC):
            Tx.wg.cast(och, oacc[:, j * 64:j * 64 + 64])
            if KV_O:
                if NC == 1 or c == 0:           # (decided in Python with one consumer)
                    Tx.wg.copy(Ks[last, 0:64, j * 64:j * 64 + 64], och)
                else:
                    Tx.wg.copy(Vs[last, 0:64, j * 64:j * 64 + 64], och)
            else:
                Tx.wg.copy(Os[0, c * 64:c * 64 + 64, j * 64:j * 64 + 64], och)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        for cc in range(NC):                    # one issuing thread per call site
            if T.thread_id() == 128 * (cc + 1):
                for j in range(DC):
                    if KV_O:
                        Tx.copy_async(O[b, m0 + cc * 64:m0 + cc * 64 + 64, h, j * 64:j * 64 + 64],
                                      (Ks if cc == 0 else Vs)[last, 0:64, j * 64:j * 64 + 64])
                    else:
                        Tx.copy_async(O[b, m0 + cc * 64:m0 + cc * 64 + 64, h, j * 64:j * 64 + 64],
                                      Os[0, cc * 64:cc * 64 + 64, j * 64:j * 64 + 64])
                if KV_O:                        # the stage is free once the store has read it: the 4
                    T.ptx.bulk_wait_group_read(0)   # arrivals this consumer's warps held back
                    for w in range(4):
                        T.ptx.mbarrier_arrive((k_empty if cc == 0 else v_empty)[last])
                if Q_AFTER_O:
                    T.ptx.bulk_wait_group_read(0)
                    T.ptx.mbarrier_arrive(q_empty[qb])   # our rows of Q (and of O) are free
        Tx.wg.log2(ltot, ltot)
        Tx.wg.fma(ltot, mfin, T.float32(SL2), ltot)
        Tx.wg.mul(ltot, ltot, T.float32(LN2))
        Tx.wg.copy(LSE[b, h, r0:r0 + 64, 0:1], ltot)

    @T.prim_func
    def attention_sm90_kernel(Q: T.Tensor((B, SQT, H, D), dtype), K: T.Tensor((B, SKT, HKV, D), dtype),
                              V: T.Tensor((B, SKT, HKV, D), dtype), O: T.Tensor((B, SQT, H, D), dtype),
                              LSE: T.Tensor((B, H, SQT, 1), "float32")):
        T.launch(grid=p["grid"], threads=p["threads"], pdl=PDL)
        Qs = T.alloc_shared((QB, BM, D), dtype, layout=QL)
        Ks = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        Vs = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        Os = Qs                                 # O is staged over Q (no longer read), or:
        if OWN_O:
            Os = T.alloc_shared((1, BM, D), dtype, layout=_tile_layout(BM, D, 1))
        q_full = T.alloc_shared((QB,), "uint64")
        q_empty = T.alloc_shared((QB,), "uint64")
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
        lrow = T.alloc_local((64, 4), "float32", layout=QUAD)    # each lane's share of the row sums
        ltot = T.alloc_local((64, 1), "float32", layout=ROW)     # the row sums, in the epilogue
        alpha = T.alloc_local((64, 1), "float32", layout=ROW)
        linv = T.alloc_local((64, 1), "float32", layout=ROW)
        mfin = T.alloc_local((64, 1), "float32", layout=ROW)     # CHAIN: the finished tile's max / sum, kept
        lfin = T.alloc_local((64, 4), "float32", layout=QUAD)    # while the next tile's block 0 runs
        resc = T.alloc_local((1,), "int32")     # LAZY: this thread rescales O after the block
        gb = T.alloc_local((1,), "int32")       # key blocks of this CTA's earlier tiles: ring position
        tc = T.alloc_local((1,), "int32")       # tiles this CTA has done: Q buffer, q_full / q_empty parity
        n_tiles = 1
        if PERSIST:
            n_tiles = causal_steps(MT, H, B, UNITS, TAIL) if causal else tiles_of_unit(T.cta_id(0), UNITS, WORK)
        if T.thread_id() == 0:
            for qb in T.serial(QB):
                T.ptx.mbarrier_init(q_full[qb], 1)
                T.ptx.mbarrier_init(q_empty[qb], NC if Q_AFTER_O else 4 * NC)
            for s in T.serial(STAGES):
                T.ptx.mbarrier_init(k_full[s], 1)
                T.ptx.mbarrier_init(v_full[s], 1)
                T.ptx.mbarrier_init(k_empty[s], 4 * NC)
                T.ptx.mbarrier_init(v_empty[s], 4 * NC)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if PDL:     # launched before the previous kernel in the stream has finished: wait for it here
            T.ptx.griddepcontrol_wait()
        wg = T.warpgroup_id()
        if wg == 0:
            T.ptx.setmaxnreg_dec(regs_dec)
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    gb[0] = 0
                    tc[0] = 0
                    for t in T.serial(n_tiles):
                        mt, h, b, valid = tile_of(t, PERSIST, UNITS, MT, H, causal, B, TAIL)
                        if valid:
                            hk = h // GROUP
                            m0 = mt * BM
                            nkv = key_blocks(m0, NKV, BM, BN, SQ, causal)
                            qb = tc[0] % QB
                            if not Q_AFTER_O:
                                load_q(Qs, Q, q_full, q_empty, qb, tc[0], b, m0, h)
                            elif tc[0] == 0:
                                load_q(Qs, Q, q_full, q_empty, qb, tc[0], b, m0, h)
                            # K_i goes out one block ahead of V_{i-1}: K's stage frees as soon as S = Q K^T
                            # is done, V's only after P V, so neither load queues behind the other's slot
                            for i in T.serial(nkv + 1):
                                if i < nkv:
                                    g = gb[0] + i
                                    s = g % STAGES
                                    if g >= STAGES:
                                        T.ptx.mbarrier_wait_parity(k_empty[s], (g // STAGES + 1) % 2)
                                    for j in range(DC):
                                        Tx.copy_async(Ks[s, :, j * 64:j * 64 + 64],
                                                      K[b, i * BN:i * BN + BN, hk, j * 64:j * 64 + 64],
                                                      mbar=k_full[s], arrive=j == DC - 1)
                                if i > 0:
                                    gv = gb[0] + i - 1
                                    sv = gv % STAGES
                                    if gv >= STAGES:
                                        T.ptx.mbarrier_wait_parity(v_empty[sv], (gv // STAGES + 1) % 2)
                                    for j in range(DC):
                                        Tx.copy_async(Vs[sv, :, j * 64:j * 64 + 64],
                                                      V[b, (i - 1) * BN:(i - 1) * BN + BN, hk, j * 64:j * 64 + 64],
                                                      mbar=v_full[sv], arrive=j == DC - 1)
                                if Q_AFTER_O:
                                    # K_0, K_1 and V_0 load under the previous tile's epilogue, then Q
                                    # once that tile's O store has read the buffer
                                    if i == 1:
                                        if tc[0] > 0:
                                            load_q(Qs, Q, q_full, q_empty, qb, tc[0], b, m0, h)
                            gb[0] = gb[0] + nkv
                            tc[0] = tc[0] + 1
        else:
            T.ptx.setmaxnreg_inc(regs_inc)
            c = wg - 1
            gb[0] = 0
            tc[0] = 0
            for t in T.serial(n_tiles):
                mt, h, b, valid = tile_of(t, PERSIST, UNITS, MT, H, causal, B, TAIL)
                if valid:
                    m0 = mt * BM
                    r0 = m0 + c * 64
                    nkv = key_blocks(m0, NKV, BM, BN, SQ, causal)
                    # TRIM: this consumer's own rows end at r0 + 64, and it stops at their last key block
                    nkc = key_blocks(r0, NKV, 64, BN, SQ, causal) if TRIM else nkv
                    g0 = gb[0]
                    qb = tc[0] % QB
                    if not OVERLAP:
                        Tx.wg.fill(oacc, T.float32(0))
                        Tx.wg.fill(mrow, T.float32(NEG_INF))
                        Tx.wg.fill(lrow, T.float32(0))
                        T.ptx.mbarrier_wait_parity(q_full[qb], (tc[0] // QB) % 2)
                        for i in T.serial(nkv):
                            s = (g0 + i) % STAGES
                            ph = ((g0 + i) // STAGES) % 2
                            n0 = i * BN
                            T.ptx.mbarrier_wait_parity(k_full[s], ph)
                            Tx.wg.gemm_async(sacc, Qs[qb, c * 64:c * 64 + 64, :], Ks[s], transpose_b=True,
                                             accumulate=False, wait=0, dispatch=DISP)
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(k_empty[s])
                            online_softmax(sacc, mrow, mprev, nms, alpha, lrow, i, n0, m0, r0, resc)
                            rescale_o(oacc, alpha, resc)
                            Tx.wg.cast(pfr, sacc)
                            T.ptx.mbarrier_wait_parity(v_full[s], ph)
                            Tx.wg.gemm_async(oacc, pfr, Vs[s], accumulate=True, wait=0, dispatch=DISP)
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(v_empty[s])
                        if not Q_AFTER_O:
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(q_empty[qb])   # every S of this tile is done: Q may reload
                        epilogue(O, Os, LSE, oacc, och, mrow, lrow, ltot, linv, b, h, m0, r0, c, v_empty, 0, False,
                                 q_empty, qb, Ks, Vs, k_empty)
                    else:
                        # CHAIN: a tile's block 0 ran under the previous tile's last P V (below), except the first
                        more = 0                                 # 1: a next tile follows (CHAIN)
                        if CHAIN:
                            nt = next_step(t, UNITS, MT, H, causal, B, TAIL)
                            more = T.cast(nt < n_tiles, "int32")
                        # block 0: S_0 and its softmax (O is still zero: no rescale)
                        if t == 0 or not CHAIN:
                            Tx.wg.fill(oacc, T.float32(0))
                            T.ptx.mbarrier_wait_parity(q_full[qb], (tc[0] // QB) % 2)
                            T.ptx.mbarrier_wait_parity(k_full[g0 % STAGES], (g0 // STAGES) % 2)
                            Tx.wg.gemm_async(sacc, Qs[qb, c * 64:c * 64 + 64, :], Ks[g0 % STAGES], transpose_b=True,
                                             accumulate=False, wait=0, dispatch=DISP)
                            if T.lane_id() == 0:
                                if not KV_O or c > 0 or nkv > 1:    # KV_O: consumer 0's O goes over K[last]
                                    T.ptx.mbarrier_arrive(k_empty[g0 % STAGES])
                            first_softmax(sacc, mrow, nms, alpha, lrow, m0, r0, resc)
                        if PINGPONG:
                            # turns on the tensor cores this tile: one per loop iteration, and the chained
                            # tail's; consumer 0 takes the first, consumer 1 passes none on after its last
                            if wg == 2:
                                if nkv - 1 + more > 0:
                                    T.ptx.barrier_arrive(3, 256)
                        for i in T.serial(1, nkc):
                            g = g0 + i
                            s = g % STAGES
                            sp = (g - 1) % STAGES
                            n0 = i * BN
                            # P_{i-2} V_{i-2} done, V_{i-2} free. This wait opens the loop body so that
                            # ptxas cannot hoist it above the previous block's softmax (it does when both
                            # share a basic block), which would serialize the softmax behind P V
                            Tx.wg.gemm_wait(0, oacc)
                            if i >= 2:
                                if T.lane_id() == 0:
                                    T.ptx.mbarrier_arrive(v_empty[(g - 2) % STAGES])
                            Tx.wg.cast(pfr, sacc)                        # P_{i-1}, the A operand of P V
                            T.ptx.mbarrier_wait_parity(k_full[s], (g // STAGES) % 2)
                            if PINGPONG:
                                T.ptx.barrier_sync(3 + c, 256)           # our turn on the tensor cores
                            # S_i = Q K_i^T, then O += P_{i-1} V_{i-1}, both in flight at once
                            Tx.wg.gemm_async(sacc, Qs[qb, c * 64:c * 64 + 64, :], Ks[s], transpose_b=True,
                                             accumulate=False, dispatch=DISP)
                            rescale_o(oacc, alpha, resc)                 # O *= alpha_{i-1} while S_i runs
                            T.ptx.mbarrier_wait_parity(v_full[sp], ((g - 1) // STAGES) % 2)
                            Tx.wg.gemm_async(oacc, pfr, Vs[sp], accumulate=True, dispatch=DISP)
                            if PINGPONG:
                                if wg == 1:
                                    T.ptx.barrier_arrive(4, 256)         # the other consumer's turn
                                elif i < nkv - 1 + more:             # (none follows consumer 1's last)
                                    T.ptx.barrier_arrive(3, 256)
                            Tx.wg.gemm_wait(1, sacc)                     # S_i done (K_i free); P V still running
                            if T.lane_id() == 0:
                                if not KV_O or c > 0 or i < nkv - 1:
                                    T.ptx.mbarrier_arrive(k_empty[s])
                            online_softmax(sacc, mrow, mprev, nms, alpha, lrow, i, n0, m0, r0, resc)
                        if not Q_AFTER_O:
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(q_empty[qb])   # every S of this tile is done: Q may reload
                        Tx.wg.gemm_wait(0, oacc)
                        if nkc >= 2:
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(v_empty[(g0 + nkc - 2) % STAGES])
                        Tx.wg.cast(pfr, sacc)
                        last = (g0 + nkv - 1) % STAGES          # the tile's last block (KV_O stages O there)
                        lastc = (g0 + nkc - 1) % STAGES         # this consumer's (TRIM: maybe an earlier one)
                        if more > 0:
                            # the next tile's S_0 = Q' K_0^T goes out with this tile's last P V, and its
                            # softmax runs while P V does; this tile's max / sum move to mfin / lfin
                            mt2, _, _, _ = tile_of(nt, PERSIST, UNITS, MT, H, causal, B, TAIL)
                            g2 = g0 + nkv
                            s2 = g2 % STAGES
                            qb2 = (tc[0] + 1) % QB
                            Tx.wg.unary(mfin, mrow, fn="copy")
                            Tx.wg.unary(lfin, lrow, fn="copy")
                            T.ptx.mbarrier_wait_parity(q_full[qb2], ((tc[0] + 1) // QB) % 2)
                            T.ptx.mbarrier_wait_parity(k_full[s2], (g2 // STAGES) % 2)
                            if PINGPONG:
                                T.ptx.barrier_sync(3 + c, 256)
                            Tx.wg.gemm_async(sacc, Qs[qb2, c * 64:c * 64 + 64, :], Ks[s2], transpose_b=True,
                                             accumulate=False, dispatch=DISP)
                            rescale_o(oacc, alpha, resc)
                            T.ptx.mbarrier_wait_parity(v_full[last], ((g0 + nkv - 1) // STAGES) % 2)
                            Tx.wg.gemm_async(oacc, pfr, Vs[last], accumulate=True, dispatch=DISP)
                            if PINGPONG:
                                if wg == 1:
                                    T.ptx.barrier_arrive(4, 256)
                            Tx.wg.gemm_wait(1, sacc)
                            if T.lane_id() == 0:
                                T.ptx.mbarrier_arrive(k_empty[s2])
                            first_softmax(sacc, mrow, nms, alpha, lrow, mt2 * BM, mt2 * BM + c * 64, resc)
                            epilogue(O, Os, LSE, oacc, och, mfin, lfin, ltot, linv, b, h, m0, r0, c, v_empty, last, True,
                                     q_empty, qb, Ks, Vs, k_empty)
                            Tx.wg.fill(oacc, T.float32(0))           # the next tile's O
                        else:
                            rescale_o(oacc, alpha, resc)
                            T.ptx.mbarrier_wait_parity(v_full[lastc], ((g0 + nkc - 1) // STAGES) % 2)
                            Tx.wg.gemm_async(oacc, pfr, Vs[lastc], accumulate=True, wait=0, dispatch=DISP)
                            if T.lane_id() == 0:
                                if not KV_O or c == 0:      # KV_O: consumer 1's O goes over V[last]
                                    T.ptx.mbarrier_arrive(v_empty[lastc])
                            if TRIM:
                                skip_blocks(g0, nkc, nkv, k_full, v_full, k_empty, v_empty)
                            epilogue(O, Os, LSE, oacc, och, mrow, lrow, ltot, linv, b, h, m0, r0, c, v_empty, last, False,
                                     q_empty, qb, Ks, Vs, k_empty)
                    gb[0] = g0 + nkv
                    tc[0] = tc[0] + 1
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group(0)

    return attention_sm90_kernel


@tirxpy.jit
def example():
    """The kernel ``python -m tirxpy compile kernels/attention_sm90.py`` builds: head dim 128, 4096 tokens,
    16 heads, batch 8, the default plan."""
    return attention_sm90(8, 16, 16, 4096, 4096, 128)
