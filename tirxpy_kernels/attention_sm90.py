"""Flash attention forward for Hopper (sm_90a): TMA -> wgmma -> online softmax -> wgmma RS -> TMA.

``O = softmax(scale * Q K^T [+ mask]) V`` and ``LSE = logsumexp(scale * Q K^T [+ mask])`` per row,
for tensors in ``(batch, seq, heads, dim)`` layout, bf16 / f16, head dims 64 / 128 / 256,
grouped-query attention (``H`` query heads over ``HKV`` key / value heads, ``H % HKV == 0``:
query head ``h`` reads key / value head ``h // (H // HKV)``), any sequence lengths (ragged edges
masked), causal masking aligned top-left like ``torch.nn.functional.scaled_dot_product_attention``
(query row ``r`` sees keys ``0 .. r``). Written with tirxpy's public API and :mod:`tirxpy.lang`.

The kernel is built from an :class:`~tirxpy_kernels.attention_plan.AttentionPlan` (tile sizes, schedule options,
every derived constant) by :func:`build_kernel`, out of named parts:

- **tiles**: a tile is ``BM = 64 * NC`` query rows of one head. Persistent CTAs (``PERSIST``) walk the
  ``(query tile, head, batch)`` tiles (:mod:`tirxpy_kernels.attention_walk`): the K / V rings, their barrier
  phases and the Q buffers carry over from tile to tile, so the next tile's Q and first K / V blocks load
  while this tile finishes. Otherwise the grid is ``(ceil(SQ / BM), H, B)``, one tile per CTA (``VARLEN``: a
  slot of the tile map per CTA, one tile or a pair of one sequence's, ``PAIRS``). Causal query tiles of a head
  run from the last (heaviest) down.
- **rings** (:class:`tirxpy.lang.StageRing`): Q (``q_buffers`` buffers, counted by the CTA's tile counter
  ``tc``), K and V (``STAGES`` stages each, counted by the CTA's key block counter ``g``: its earlier tiles'
  blocks plus ``i``). K and V have their own empty barriers because a K stage is free as soon as
  ``S = Q K^T`` is done, a V stage only after ``P V``; with one shared barrier ``K_{i+2}`` would wait for
  ``P_i V_i`` and every block would pay a load latency.
- **roles** (:class:`tirxpy.lang.WarpRoles`, ``threads = 128 * (1 + NC)``): warpgroup 0, the
  :func:`producer <producer_part>` (``setmaxnreg.dec``): one elected thread loads each tile's Q (``D / 64``
  TMA boxes of ``(BM, 64)``), then key / value blocks in the order ``K_0, K_1, V_0, K_2, V_1, ...``;
  warpgroups 1 .. NC, the :func:`consumers <consumer_part>` (``setmaxnreg.inc``): consumer ``c`` owns query
  rows ``64 c .. 64 c + 63`` of the tile.
- **per key block** (:func:`consumer_part`): ``S = Q K^T`` (wgmma SS, ``(64, BN)`` float32 in registers),
  the :func:`online softmax <softmax_parts>` on the accumulator fragment (ragged / causal mask where the
  block needs it; row max by quad-lane shuffles; the row sum as each lane's share, ``l`` of shape
  ``(64, 4)`` in :data:`QUAD`, summed over the quad once per tile; the scale folded into the ``exp2``
  argument: ``p = exp2(s * scale * log2(e) - m * scale * log2(e))``), ``O *= exp2((m_old - m_new) * scale
  * log2(e))``, ``P`` converted to bf16 / f16 *in registers* (the accumulator fragment of ``S`` is the
  wgmma A fragment of ``P``), ``O += P V`` (wgmma RS). The ring releases: K once ``S`` is done, V once
  ``P V`` is.
- **the overlapped loop**: after block 0, iteration ``i`` waits for ``P_{i-2} V_{i-2}`` (``wait_group 0``),
  converts ``P_{i-1}``, issues ``S_i = Q K_i^T``, rescales ``O`` by the previous block's factor while ``S_i``
  runs, issues ``O += P_{i-1} V_{i-1}``, waits only for ``S_i`` (``wait_group 1``) and runs the softmax of
  block ``i`` while ``P_{i-1} V_{i-1}`` is still on the tensor cores. The ``wait_group 0`` opens the loop
  body: placed after the softmax, in the same basic block, ptxas may schedule it above the softmax (a wait
  may move earlier), which serializes the softmax behind ``P V``; tests/kernels/test_attention_sm90.py
  checks the order in the SASS.
- **the** :func:`epilogue <epilogue_part>`: ``O / l`` converted and written with ``stmatrix`` into the O
  staging buffer (``OSTAGE``), fenced to the async proxy and stored with TMA (which drops rows past
  ``SQ``); ``LSE = (m * scale * log2(e) + log2(l)) * ln(2)`` stored from registers (guarded at the
  ragged edge).

    >>> k = attention_sm90(1, 2, 1, 200, 80, 64, causal=True, BN=32, STAGES=2, PERSIST=False)
    >>> k.launch.threads, k.launch.grid
    (384, (2, 2, 1))
    >>> attention_sm90(1, 2, 1, 200, 80, 64, BN=32, STAGES=2, sms=3).launch.grid   # 4 tiles on 3 CTAs
    (3, 1, 1)
    >>> attention_sm90(1, 2, 1, 200, 80, 64, causal=True, BN=32, STAGES=2).launch.grid   # 2 pairs
    (2, 1, 1)
"""
from __future__ import annotations

import dataclasses
import math

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.lang.schedule import tiles_of_unit
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator

from .attention_plan import MAX_SIZE, TARGET, check_scale, plan
from .attention_walk import causal_steps, next_step, sequence, tile_blocks, tile_of, varlen_slots, varlen_tile
from .errors import KernelConfigError, flag_option, int_option, shown
from .views import check_strides, tensor

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
LAZY_LOG2 = 8.0
"""``LAZY``: a row's running max moves (and O is rescaled) only when it rises by more than this, in
units of ``scale * log2(e)`` times a score; until then ``P = exp2(...)`` stays below ``2^8 = 256``."""
NEG_INF = float("-inf")

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


def tile_layout(rows, D, stages=None):
    """``(rows, D)`` tiles (``(stages, rows, D)``) made of dense 128B-swizzled ``(rows, 64)`` boxes
    one after another: K-major for Q and K (wgmma A / transposed B), MN-major for V (wgmma B)."""
    inner = S[(rows, D // 64, 64) : (64, rows * 64, 1)] if stages is None else \
        S[(stages, rows, D // 64, 64) : (rows * D, 64, rows * 64, 1)]
    return ComposeLayout(swizzle_for(128, "bf16"), TileLayout(inner))


class Ring(StageRing):
    """A :class:`~tirxpy.lang.StageRing` whose waits and releases also come in a form that takes the stage
    ``s = ring.stage(g)`` the caller has already bound (``*_at``): the barrier is then indexed by that one value,
    so a position's stage is computed once (with 3 stages a modulo ptxas does not merge across uses)."""

    @T.macro
    def wait_full_at(self, s, g):
        """:meth:`~tirxpy.lang.StageRing.wait_full` of position ``g``, whose stage is ``s``."""
        T.ptx.mbarrier_wait_parity(self.full[s], self.parity(g))

    @T.macro
    def wait_empty_at(self, s, g):
        """:meth:`~tirxpy.lang.StageRing.wait_empty` of position ``g``, whose stage is ``s``."""
        if g >= self.stages:
            T.ptx.mbarrier_wait_parity(self.empty[s], (g // self.stages + 1) % 2)

    @T.macro
    def release_at(self, s):
        """:meth:`~tirxpy.lang.StageRing.release` of a position whose stage is ``s`` (a CTA-local ring)."""
        T.ptx.mbarrier_arrive(self.empty[s])


class SharedTiles:
    """The shared-memory side of a CTA, as the kernel's parts see it: the Q buffers ``Qs``, the K / V stages
    ``Ks`` / ``Vs``, the O staging buffer ``Os`` and the three :class:`~tirxpy.lang.StageRing` s ``q``, ``k``,
    ``v`` that guard them."""

    def __init__(self, Qs, Ks, Vs, Os, q, k, v):
        self.Qs, self.Ks, self.Vs, self.Os, self.q, self.k, self.v = Qs, Ks, Vs, Os, q, k, v


class ConsumerRegs:
    """A consumer warpgroup's registers: ``sacc`` (S, then P in float32), ``pfr`` (P in the input dtype, the A
    operand of P V), ``oacc`` (O), ``och`` (a 64-column chunk of O for the store), the per-row ``mrow`` (running
    max), ``mprev`` (its value before the block), ``nms`` (``-m * scale * log2 e``), ``alpha`` (the block's
    rescale factor), ``lrow`` (each lane's share of the row sums, :data:`QUAD`), ``ltot`` / ``linv`` (the row
    sums and their inverse, in the epilogue), ``mfin`` / ``lfin`` (``CHAIN``: the finished tile's max / sums,
    kept while the next tile's block 0 runs), ``resc`` (``LAZY``: this thread rescales O after the block)."""

    def __init__(self, sacc, pfr, oacc, och, mrow, mprev, nms, lrow, ltot, alpha, linv, mfin, lfin, resc):
        self.sacc, self.pfr, self.oacc, self.och = sacc, pfr, oacc, och
        self.mrow, self.mprev, self.nms, self.lrow, self.ltot = mrow, mprev, nms, lrow, ltot
        self.alpha, self.linv, self.mfin, self.lfin, self.resc = alpha, linv, mfin, lfin, resc


@tirxpy.jit
def attention_sm90(B, H, HKV, SQ, SK, D, causal=False, scale=None, dtype="bfloat16", BN=None, STAGES=None, NC=None,
                   SQT=None, SKT=None, PINGPONG=None, PERSIST=None, CHAIN=None, sms=TARGET.sm_count, OSTAGE=None,
                   LAZY=None, TRIM=None, TAIL=None, FOLD=None, PDL=True, VARLEN=False, PAIRS=None, strides=None):
    """The kernel for one problem: ``k(Q, K, V, O, LSE)`` with ``Q, O: (B, SQT, H, D)``,
    ``K, V: (B, SKT, HKV, D)``, ``LSE: (B, H, SQT, 1)`` float32. ``SQ`` / ``SK`` are the valid
    lengths; the tensors may have more rows (``SQT >= SQ``, ``SKT >= SK``, default equal): a TMA
    box may not be larger than its tensor, so :func:`tirxpy_kernels.attention` pads sequences shorter than
    one tile (rows past ``SK`` are masked, rows past ``SQ`` are computed and dropped).

    The schedule options (``None``: the rule of :func:`tirxpy_kernels.attention_plan.plan` and its ``default_*``):
    ``BN`` / ``STAGES`` / ``NC`` (key block rows, ring stages, consumer warpgroups), ``PERSIST``, ``CHAIN``,
    ``OSTAGE`` (see :func:`~tirxpy_kernels.attention_plan.plan`), and

    - ``PINGPONG`` (two consumers): the consumers take turns issuing their GEMMs (named barriers 3 and 4: wait
      for our turn, issue, hand the turn over), so one warpgroup's softmax runs under the other's GEMMs;
    - ``LAZY``: a row's running max, and with it ``O``'s scale, moves only when a block raises it by more than
      ``LAZY_LOG2 = 8`` (in ``scale * log2(e)`` units); otherwise the block's ``P = exp2(s - m)`` is taken
      against the stale max, at most ``2^8`` (bf16 / f16 and the float32 sums hold it to the same relative
      precision as values below 1), and ``O`` is not multiplied. ``O / l`` and the log-sum-exp come out the
      same, as ``O`` and ``l`` always share one scale. A thread decides for its two rows (each row's quad
      decides alike), so some warps rescale while others skip;
    - ``TRIM``: in a causal tile each consumer stops at its own rows' last key block (the first consumer's rows
      end 64 rows before the tile's) and hands the remaining K / V stages back unread, once each one's load
      has landed; without a causal mask it changes nothing;
    - ``TAIL``: a persistent causal walk takes its last pairs of query tiles (one to two rounds' worth,
      :func:`~tirxpy_kernels.attention_walk.causal_tail`) as single tiles dealt heaviest first, in rounds alternating
      direction over the CTAs, so that the last round of equal-sized pairs does not leave most CTAs idle;
    - ``FOLD``: the matrix products dispatch to the ``wgmma_folded`` variant, whose descriptors cost one
      uniform add per k-step and operand instead of about five (tirxpy.primitives.gemm.desc);
    - ``PDL`` (default on; off for a plain launch): programmatic dependent launch, as in
      :func:`tirxpy_kernels.gemm_sm90.gemm_sm90`: the kernel may start while the previous kernel in the stream
      finishes, and every thread waits for it (``griddepcontrol.wait``) after the barrier setup, before any
      global load or store;
    - ``VARLEN``: ``B`` packed sequences of at most ``SQ`` query / ``SK`` key rows (one slot of the tile map per
      CTA: one query tile, or two with ``PAIRS``, :func:`~tirxpy_kernels.attention_plan.plan`):
      ``k(Q, K, V, O, LSE, CUQ, CUK, MAP)`` with ``Q: (1, SQT, H, D)``, ``K, V: (1, SKT, HKV, D)`` (the packed
      rows), ``CUQ``, ``CUK: (B + 1,)`` int32 (sequence ``b``'s rows are ``CUQ[b] .. CUQ[b + 1] - 1``), ``MAP:
      (1 + n, S)`` int32 the tile map of ``n`` tiles a slot (``S``: :func:`~tirxpy_kernels.attention_walk.varlen_slots`;
      slot ``s`` holds sequence ``MAP[0, s]``'s query tiles ``MAP[1 .. n, s]``,
      :func:`tirxpy_kernels.attention_varlen_api.tile_map`) on a grid of ``H S`` CTAs, heads fastest
      (:func:`~tirxpy_kernels.attention_walk.varlen_tile`): only real tiles get a CTA, in the map's order (most work
      first), and the
      outputs as overlapping views that clip each sequence's stores at its end: with ``XQ`` the plan's ``xq``,
      ``O: (SQT + 1, XQ, H, D)`` strides ``(H D, H D, D, 1)`` over a ``(XQ + SQT, H, D)`` buffer whose rows from
      ``XQ`` on are the packed output, ``LSE: (SQT + 1, H, XQ, 1)`` strides ``(1, XQ + SQT, 1, 1)`` over an
      ``(H, XQ + SQT)`` buffer likewise: row ``r`` of a sequence ending at ``q1`` is view element ``(q1, XQ - q1
      + r)``, so rows past ``q1`` have ``x >= XQ`` and are not stored (:mod:`tirxpy_kernels.attention_varlen_api`
      allocates them).

    ``strides``: ``Q``, ``K``, ``V`` read in place as strided views, ``(q, k, v)`` element strides of their shapes
    above (an entry None: dense), checked by :func:`tirxpy_kernels.views.check_strides`; for example the slices of
    a fused projection ``(B, S, 3, H, D)``, whose rows are ``3 H D`` elements apart.

        >>> attention_sm90(3, 2, 1, 300, 200, 64, SQT=500, SKT=400, VARLEN=True).launch.grid     # 2 heads x 5 pairs
        (10, 1, 1)
        >>> attention_sm90(3, 2, 1, 300, 200, 64, SQT=500, SKT=400, VARLEN=True, PAIRS=False).launch.grid
        (14, 1, 1)
    """
    flag_option("attention_sm90", "PDL", PDL)
    p = plan(B, H, HKV, SQ, SK, D, dtype, BN, STAGES, NC, causal, PINGPONG, PERSIST, CHAIN, sms, OSTAGE, LAZY, TRIM,
             TAIL, FOLD, VARLEN, PAIRS)
    B, H, HKV, SQ, SK, D = p.B, p.H, p.HKV, p.SQ, p.SK, p.D       # (as plain ints)
    SQT = SQ if SQT is None else int_option("attention_sm90", "SQT", SQT, lo=1, hi=MAX_SIZE)
    SKT = SK if SKT is None else int_option("attention_sm90", "SKT", SKT, lo=1, hi=MAX_SIZE)
    if p.varlen:
        if SQT < p.BM or SKT < p.BN:
            raise KernelConfigError(f"attention_sm90: packed tensors of {SQT} query / {SKT} key rows are shorter than "
                                    f"one tile ({p.BM} / {p.BN}): pad them")
        p = dataclasses.replace(p, grid=(H * varlen_slots(SQT, p.BM, B, p.per_cta), 1, 1))   # a CTA per head and slot
    elif SQT < max(SQ, p.BM) or SKT < max(SK, p.BN):
        raise KernelConfigError(f"attention_sm90: tensors of {SQT} query / {SKT} key rows are shorter than one tile "
                                f"({p.BM} / {p.BN}) or than SQ = {SQ} / SK = {SK}: pad the sequences")
    qrows, krows = (1, SQT) if p.varlen else (B, SQT), (1, SKT) if p.varlen else (B, SKT)
    strides = check_strides("attention_sm90", ("q", "k", "v"), (qrows + (H, D), krows + (HKV, D), krows + (HKV, D)),
                            strides)
    scale = check_scale("attention_sm90", scale)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    return build_kernel(p, scale, SQT, SKT, bool(PDL), strides)


def softmax_parts(p, score_log2):
    """The online softmax of a consumer, for scores scaled by ``score_log2 = scale * log2(e)``: macros
    ``first_block`` (block 0 of a tile), ``next_block`` (block ``i``) and ``rescale_o`` (``O *= alpha``)."""
    BN, SK, causal, lazy = p.BN, p.SK, p.causal, p.lazy

    @T.macro
    def next_block(rg, i, n0, m0, r0, seq):
        """Block ``i`` (key columns ``n0 ..``) of the online softmax, in place on the S fragment:
        mask it, raise the row max, ``alpha = exp2((m_old - m_new) scale log2 e)``, ``S -> P`` and
        ``l = alpha l + rowsum(P)``. The caller rescales O by ``alpha`` (:func:`rescale_o`). ``seq``: the
        packed sequence's ``(q0, lq, k0, lk)`` with ``VARLEN`` (its key length ``lk`` masks), else None."""
        sacc, mrow, mprev, alpha, resc = rg.sacc, rg.mrow, rg.mprev, rg.alpha, rg.resc
        if p.varlen:
            if causal:
                if n0 + BN > m0 + 1 or n0 + BN > seq[3]:
                    Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=seq[3] - n0, diag=r0 - n0)
            elif n0 + BN > seq[3]:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=seq[3] - n0)
        elif causal:
            if n0 + BN > m0 + 1 or n0 + BN > SK:     # CTA-uniform (the verifier proves it)
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0, diag=r0 - n0)
        elif p.ragged:
            if i == p.kv_blocks - 1:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK - n0)
        Tx.wg.unary(mprev, mrow, fn="copy")
        Tx.wg.max(mrow, sacc, axis=1, accum=True)
        if lazy:
            # this thread's two rows (slots 0 and 1: rows 8 h + lane / 4 of its warp); the four lanes of a row's
            # quad hold the same maxima, so they decide alike. Selects, not a branch: a branch here splits the
            # softmax's basic block, which ptxas schedules worse
            rise = T.max(mrow[0, 0] - mprev[0, 0], mrow[8, 0] - mprev[8, 0])
            resc[0] = T.select(rise * score_log2 > LAZY_LOG2, 1, 0)
            for h in range(2):                  # keep the stale max: P stays below 2^LAZY_LOG2
                mrow[8 * h, 0] = T.select(resc[0] != 0, mrow[8 * h, 0], mprev[8 * h, 0])
        Tx.wg.mul(rg.nms, mrow, T.float32(-score_log2))
        Tx.wg.fma(alpha, mprev, T.float32(score_log2), rg.nms)
        Tx.wg.exp2(alpha, alpha)
        if lazy:                                # exactly 1 where the max stays (l and O both keep their scale)
            for h in range(2):
                alpha[8 * h, 0] = T.select(resc[0] != 0, alpha[8 * h, 0], T.float32(1))
        Tx.wg.fma(sacc, sacc, T.float32(score_log2), rg.nms)
        Tx.wg.exp2(sacc, sacc)
        Tx.wg.mul(rg.lrow, rg.lrow, alpha)
        Tx.wg.sum(rg.lrow, sacc.alias((64, 4, BN // 4), layout=quad_view(BN)), axis=2, accum=True)

    @T.macro
    def rescale_o(rg):
        """``O *= alpha`` of the previous block (with ``LAZY``, only in threads whose row max rose past
        the threshold: the others kept their max, so their O stays as it is)."""
        if lazy:
            if rg.resc[0] != 0:
                Tx.mul(rg.oacc, rg.oacc, rg.alpha)
        else:
            Tx.wg.mul(rg.oacc, rg.oacc, rg.alpha)

    @T.macro
    def first_block(rg, m0, r0, seq):
        """Block 0 of the tile at row ``m0`` (this consumer's rows from ``r0``): mask, row max, ``S -> P``,
        ``l = rowsum(P)``; ``alpha = 1``, as O is still zero. ``seq``: as :func:`next_block`'s."""
        sacc = rg.sacc
        if p.varlen:
            if causal:
                if BN > m0 + 1 or BN > seq[3]:
                    Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=seq[3], diag=r0)
            elif BN > seq[3]:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=seq[3])
        elif causal:
            if BN > m0 + 1 or BN > SK:
                Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK, diag=r0)
        elif p.kv_blocks == 1 and p.ragged:
            Tx.wg.mask(sacc, sacc, T.float32(NEG_INF), cols=SK)
        Tx.wg.max(rg.mrow, sacc, axis=1)
        Tx.wg.mul(rg.nms, rg.mrow, T.float32(-score_log2))
        Tx.wg.fma(sacc, sacc, T.float32(score_log2), rg.nms)
        Tx.wg.exp2(sacc, sacc)
        Tx.wg.sum(rg.lrow, sacc.alias((64, 4, BN // 4), layout=quad_view(BN)), axis=2)
        Tx.wg.fill(rg.alpha, T.float32(1))
        if lazy:
            rg.resc[0] = 0                      # O is zero: nothing to rescale

    return first_block, next_block, rescale_o


def producer_part(p):
    """The producer's macro ``produce(Q, K, V, sm, gb, tc, n_tiles)``: one thread walks the CTA's tiles and
    loads each tile's Q into buffer ``tc % q_buffers`` (after the ring's previous round of that buffer was
    released), then its key blocks into the K / V rings, ``K_i`` one block ahead of ``V_{i-1}``."""
    BM, BN, DC = p.BM, p.BN, p.d_chunks

    @T.macro
    def load_q(Q, sm, qb, tcv, b, m0, h):
        """Tile ``tcv`` of this CTA's Q (rows ``m0 ..`` of head ``h``) into its buffer ``qb``, once the buffer's
        previous tile is done with it."""
        sm.q.wait_empty_at(qb, tcv)
        for j in range(DC):
            Tx.copy_async(sm.Qs[qb, :, j * 64:j * 64 + 64], Q[b, m0:m0 + BM, h, j * 64:j * 64 + 64],
                          mbar=sm.q.full[qb], arrive=j == DC - 1)

    @T.macro
    def load_kv(X, ring, stages, g, row, b, hk):
        """The key / value block at ``row`` (position ``g`` of the ring) into its stage, once the stage is free."""
        s = ring.stage(g)
        ring.wait_empty_at(s, g)
        for j in range(DC):
            Tx.copy_async(stages[s, :, j * 64:j * 64 + 64], X[b, row:row + BN, hk, j * 64:j * 64 + 64],
                          mbar=ring.full[s], arrive=j == DC - 1)

    @T.macro
    def produce(Q, K, V, sm, gb, tc, n_tiles, cu):
        gb[0] = 0
        tc[0] = 0
        for t in T.serial(n_tiles):
            seq = None
            if not p.varlen:
                mt, h, b, valid = tile_of(t, p.persist, p.units, p.q_tiles, p.H, p.causal, p.B, p.tail)
            if p.varlen:                # packed sequences: this tile's rows, or none past the sequence's end
                mt, h, b = varlen_tile(p.H, cu[2], t)
                q0, lq, k0, lk = sequence(cu[0], cu[1], b, p, cu[3], cu[4])
                seq = (q0, lq, k0, lk)
                valid = mt >= 0 and mt < T.ceildiv(lq, BM) and lk > 0
            if valid:
                hk = h // p.group
                m0 = mt * BM
                nkv = tile_blocks(p, m0, BM, seq)
                qb = sm.q.stage(tc[0])
                if p.varlen:
                    load_q(Q, sm, qb, tc[0], 0, seq[0] + m0, h)
                elif not p.q_after_o:
                    load_q(Q, sm, qb, tc[0], b, m0, h)
                elif tc[0] == 0:
                    load_q(Q, sm, qb, tc[0], b, m0, h)
                # K_i goes out one block ahead of V_{i-1}: K's stage frees as soon as S = Q K^T is done, V's
                # only after P V, so neither load queues behind the other's slot
                for i in T.serial(nkv + 1):
                    if i < nkv:
                        g = gb[0] + i
                        if p.varlen:
                            load_kv(K, sm.k, sm.Ks, g, seq[2] + i * BN, 0, hk)
                        else:
                            load_kv(K, sm.k, sm.Ks, g, i * BN, b, hk)
                    if i > 0:
                        gv = gb[0] + i - 1
                        if p.varlen:
                            load_kv(V, sm.v, sm.Vs, gv, seq[2] + (i - 1) * BN, 0, hk)
                        else:
                            load_kv(V, sm.v, sm.Vs, gv, (i - 1) * BN, b, hk)
                    if p.q_after_o:
                        # K_0, K_1 and V_0 load under the previous tile's epilogue, then Q once that tile's
                        # O store has read the buffer
                        if i == 1:
                            if tc[0] > 0:
                                load_q(Q, sm, qb, tc[0], b, m0, h)
                gb[0] = gb[0] + nkv
                tc[0] = tc[0] + 1

    return produce


def epilogue_part(p, score_log2):
    """The consumer's macro ``epilogue(O, LSE, sm, rg, mfin, lfin, b, h, m0, r0, c, last, chained, qb)``:
    ``l`` = the quad's shares of ``lfin`` summed; ``O / l`` -> this consumer's rows of the staging buffer
    (``stmatrix``) -> TMA store; ``LSE`` from registers. ``chained``: the tile's last P V (stage ``last``) is still in flight; it is waited for here, behind the branch of the staging buffer's wait,
    so that ptxas cannot hoist the wait above the next tile's block-0 softmax (it does within one basic
    block). With ``q_after_o`` O goes over this consumer's rows of Q, and once the store has read them the
    consumer releases the Q buffer; with ``o_over_kv`` over the last K (consumer 0) / V (consumer 1) stage,
    released once the store has read it."""
    NC, DC, D = p.NC, p.d_chunks, p.D

    @T.macro
    def stage_o(sm, rg, c, last):
        """``O / l`` (already multiplied) converted into this consumer's rows of the staging buffer."""
        for j in range(DC):
            Tx.wg.cast(rg.och, rg.oacc[:, j * 64:j * 64 + 64])
            if p.o_over_kv:
                if NC == 1 or c == 0:           # (decided in Python with one consumer)
                    Tx.wg.copy(sm.Ks[last, 0:64, j * 64:j * 64 + 64], rg.och)
                else:
                    Tx.wg.copy(sm.Vs[last, 0:64, j * 64:j * 64 + 64], rg.och)
            else:
                Tx.wg.copy(sm.Os[0, c * 64:c * 64 + 64, j * 64:j * 64 + 64], rg.och)

    @T.macro
    def store_o(O, sm, b, h, m0, last, qb):
        """One thread per consumer issues its rows' TMA store, then hands back what the store read."""
        for cc in range(NC):                    # one issuing thread per call site
            if T.thread_id() == 128 * (cc + 1):
                for j in range(DC):
                    if p.o_over_kv:
                        Tx.copy_async(O[b, m0 + cc * 64:m0 + cc * 64 + 64, h, j * 64:j * 64 + 64],
                                      (sm.Ks if cc == 0 else sm.Vs)[last, 0:64, j * 64:j * 64 + 64])
                    else:
                        Tx.copy_async(O[b, m0 + cc * 64:m0 + cc * 64 + 64, h, j * 64:j * 64 + 64],
                                      sm.Os[0, cc * 64:cc * 64 + 64, j * 64:j * 64 + 64])
                if p.o_over_kv:                 # the stage is free once the store has read it: the 4
                    T.ptx.bulk_wait_group_read(0)   # arrivals this consumer's warps held back
                    for w in range(4):
                        (sm.k if cc == 0 else sm.v).release_at(last)
                if p.q_after_o:
                    T.ptx.bulk_wait_group_read(0)
                    sm.q.release_at(qb)         # our rows of Q (and of O) are free

    @T.macro
    def epilogue(O, LSE, sm, rg, mfin, lfin, b, h, m0, r0, c, last, chained, qb):
        ltot = rg.ltot
        Tx.wg.sum(ltot, lfin, axis=1)           # the quad's partial sums -> the row's (shuffles, once a tile)
        Tx.wg.div(rg.linv, T.float32(1), ltot)
        if p.o_own:                             # the previous tile's store has read our rows of Os
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group_read(0)
            T.ptx.barrier_sync(1 + c, 128)
        if chained:
            Tx.wg.gemm_wait(0, rg.oacc)
            if T.lane_id() == 0:
                sm.v.release_at(last)
        Tx.wg.mul(rg.oacc, rg.oacc, rg.linv)
        if p.o_over_kv:                         # every S and P V of the tile is done in both consumers
            T.ptx.barrier_sync(5, 128 * NC)
        stage_o(sm, rg, c, last)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        store_o(O, sm, b, h, m0, last, qb)
        Tx.wg.log2(ltot, ltot)
        Tx.wg.fma(ltot, mfin, T.float32(score_log2), ltot)
        Tx.wg.mul(ltot, ltot, T.float32(LN2))
        Tx.wg.copy(LSE[b, h, r0:r0 + 64, 0:1], ltot)

    return epilogue


def consumer_part(p, score_log2):
    """The consumer's macro ``consume(O, LSE, sm, rg, wg, gb, tc, n_tiles)``: consumer ``wg - 1`` walks the
    CTA's tiles with the overlapped key-block loop (module docstring), ping-pong turns (``pingpong``), the next
    tile's block 0 under this tile's last ``P V`` (``chain``) and the unread blocks handed back (``trim``)."""
    BM, BN, NC, STAGES = p.BM, p.BN, p.NC, p.STAGES
    dispatch, kv_o = p.dispatch, p.o_over_kv
    first_block, next_block, rescale_o = softmax_parts(p, score_log2)
    epilogue = epilogue_part(p, score_log2)

    @T.macro
    def take_turn(c):
        """``PINGPONG``: wait for this consumer's turn on the tensor cores."""
        if p.pingpong:
            T.ptx.barrier_sync(3 + c, 256)

    @T.macro
    def s_block(sm, rg, c, qb, g, wait):
        """``S = Q K^T`` of ring position ``g`` (``wait``: also wait for it)."""
        Tx.wg.gemm_async(rg.sacc, sm.Qs[qb, c * 64:c * 64 + 64, :], sm.Ks[sm.k.stage(g)], transpose_b=True,
                         accumulate=False, wait=wait, dispatch=dispatch)

    @T.macro
    def start_tile(sm, rg, c, qb, tcv, g0, nkv, m0, r0, seq):
        """Block 0 of a tile: ``S_0`` and its softmax (O is still zero: no rescale)."""
        Tx.wg.fill(rg.oacc, T.float32(0))
        sm.q.wait_full_at(qb, tcv)
        sm.k.wait_full(g0)
        s_block(sm, rg, c, qb, g0, 0)
        if T.lane_id() == 0:
            if not kv_o or c > 0 or nkv > 1:    # o_over_kv: consumer 0's O goes over K[last]
                sm.k.release(g0)
        first_block(rg, m0, r0, seq)

    @T.macro
    def key_loop(sm, rg, wg, c, qb, g0, nkv, nkc, more, m0, r0, seq):
        """Blocks ``1 .. nkc - 1``: ``S_i`` and ``P_{i-1} V_{i-1}`` in flight at once, the softmax of block ``i``
        under ``P_{i-1} V_{i-1}``."""
        for i in T.serial(1, nkc):
            g = g0 + i
            s = sm.k.stage(g)
            sp = sm.v.stage(g - 1)
            n0 = i * BN
            # P_{i-2} V_{i-2} done, V_{i-2} free. This wait opens the loop body so that ptxas cannot hoist it
            # above the previous block's softmax (it does when both share a basic block)
            Tx.wg.gemm_wait(0, rg.oacc)
            if i >= 2:
                if T.lane_id() == 0:
                    sm.v.release(g - 2)
            Tx.wg.cast(rg.pfr, rg.sacc)                  # P_{i-1}, the A operand of P V
            sm.k.wait_full_at(s, g)
            take_turn(c)
            Tx.wg.gemm_async(rg.sacc, sm.Qs[qb, c * 64:c * 64 + 64, :], sm.Ks[s], transpose_b=True,
                             accumulate=False, dispatch=dispatch)
            rescale_o(rg)                                # O *= alpha_{i-1} while S_i runs
            sm.v.wait_full_at(sp, g - 1)
            Tx.wg.gemm_async(rg.oacc, rg.pfr, sm.Vs[sp], accumulate=True, dispatch=dispatch)
            if p.pingpong:
                if wg == 1:
                    T.ptx.barrier_arrive(4, 256)         # the other consumer's turn
                elif i < nkv - 1 + more:                 # (none follows consumer 1's last)
                    T.ptx.barrier_arrive(3, 256)
            Tx.wg.gemm_wait(1, rg.sacc)                  # S_i done (K_i free); P V still running
            if T.lane_id() == 0:
                if not kv_o or c > 0 or i < nkv - 1:
                    sm.k.release_at(s)
            next_block(rg, i, n0, m0, r0, seq)

    @T.macro
    def chain_next(O, LSE, sm, rg, wg, c, nt, qb, tcv, g0, nkv, last, b, h, m0, r0):
        """``CHAIN``: the next tile's ``S_0 = Q' K_0^T`` goes out with this tile's last ``P V``, and its softmax
        runs while ``P V`` does; this tile's max / sums move to ``mfin`` / ``lfin`` for the epilogue."""
        mt2, _, _, _ = tile_of(nt, p.persist, p.units, p.q_tiles, p.H, p.causal, p.B, p.tail)
        g2 = g0 + nkv
        s2 = sm.k.stage(g2)
        qb2 = sm.q.stage(tcv + 1)
        Tx.wg.unary(rg.mfin, rg.mrow, fn="copy")
        Tx.wg.unary(rg.lfin, rg.lrow, fn="copy")
        sm.q.wait_full_at(qb2, tcv + 1)
        sm.k.wait_full_at(s2, g2)
        take_turn(c)
        Tx.wg.gemm_async(rg.sacc, sm.Qs[qb2, c * 64:c * 64 + 64, :], sm.Ks[s2], transpose_b=True,
                         accumulate=False, dispatch=dispatch)
        rescale_o(rg)
        sm.v.wait_full_at(last, g0 + nkv - 1)
        Tx.wg.gemm_async(rg.oacc, rg.pfr, sm.Vs[last], accumulate=True, dispatch=dispatch)
        if p.pingpong:
            if wg == 1:
                T.ptx.barrier_arrive(4, 256)
        Tx.wg.gemm_wait(1, rg.sacc)
        if T.lane_id() == 0:
            sm.k.release_at(s2)
        first_block(rg, mt2 * BM, mt2 * BM + c * 64, None)
        epilogue(O, LSE, sm, rg, rg.mfin, rg.lfin, b, h, m0, r0, c, last, True, qb)
        Tx.wg.fill(rg.oacc, T.float32(0))           # the next tile's O

    @T.macro
    def skip_blocks(sm, g0, nkc, nkv):
        """``TRIM``: hand back the K / V stages of the tile's blocks ``nkc .. nkv - 1``, which this consumer's
        rows do not see. Each release waits for its round's load first: that load was issued only after the
        stage's previous round was released, so the arrival cannot count towards that round while the other
        consumer may still read it. With ``o_over_kv`` the last K stage is handed back by the epilogue, once
        the O store that goes over it has read it; this consumer waits for its load all the same, before
        writing over it."""
        for j in T.serial(nkc, nkv):
            gj = g0 + j
            sj = sm.k.stage(gj)
            sm.k.wait_full_at(sj, gj)
            if T.lane_id() == 0:
                if not kv_o or j < nkv - 1:
                    sm.k.release_at(sj)
            sm.v.wait_full_at(sj, gj)
            if T.lane_id() == 0:
                sm.v.release_at(sj)

    @T.macro
    def finish_tile(O, LSE, sm, rg, c, g0, nkv, nkc, last, lastc, b, h, m0, r0, qb):
        """The tile's last ``P V`` (this consumer's last block: ``lastc``), the unread blocks with ``TRIM``, the
        epilogue."""
        rescale_o(rg)
        sm.v.wait_full_at(lastc, g0 + nkc - 1)
        Tx.wg.gemm_async(rg.oacc, rg.pfr, sm.Vs[lastc], accumulate=True, wait=0, dispatch=dispatch)
        if T.lane_id() == 0:
            if not kv_o or c == 0:              # o_over_kv: consumer 1's O goes over V[last]
                sm.v.release_at(lastc)
        if p.trim:
            skip_blocks(sm, g0, nkc, nkv)
        epilogue(O, LSE, sm, rg, rg.mrow, rg.lrow, b, h, m0, r0, c, last, False, qb)

    @T.macro
    def consume(O, LSE, sm, rg, wg, gb, tc, n_tiles, cu):
        c = wg - 1
        gb[0] = 0
        tc[0] = 0
        for t in T.serial(n_tiles):
            seq = None
            if not p.varlen:
                mt, h, b, valid = tile_of(t, p.persist, p.units, p.q_tiles, p.H, p.causal, p.B, p.tail)
            if p.varlen:                # packed sequences: this tile's rows, or none past the sequence's end
                mt, h, b = varlen_tile(p.H, cu[2], t)
                q0, lq, k0, lk = sequence(cu[0], cu[1], b, p, cu[3], cu[4])
                seq = (q0, lq, k0, lk)
                valid = mt >= 0 and mt < T.ceildiv(lq, BM) and lk > 0
            if valid:
                m0 = mt * BM
                r0 = m0 + c * 64
                nkv = tile_blocks(p, m0, BM, seq)
                # TRIM: this consumer's own rows end at r0 + 64, and it stops at their last key block
                nkc = tile_blocks(p, r0, 64, seq) if p.trim else nkv
                g0 = gb[0]
                qb = sm.q.stage(tc[0])
                more = 0                                 # 1: a next tile follows (CHAIN)
                if p.chain:
                    nt = next_step(t, p.units, p.q_tiles, p.H, p.causal, p.B, p.tail)
                    more = T.cast(nt < n_tiles, "int32")
                # CHAIN: a tile's block 0 ran under the previous tile's last P V (chain_next), except the first
                if t == 0 or not p.chain:
                    start_tile(sm, rg, c, qb, tc[0], g0, nkv, m0, r0, seq)
                if p.pingpong:
                    # turns on the tensor cores this tile: one per loop iteration, and the chained tail's;
                    # consumer 0 takes the first, consumer 1 passes none on after its last
                    if wg == 2:
                        if nkv - 1 + more > 0:
                            T.ptx.barrier_arrive(3, 256)
                key_loop(sm, rg, wg, c, qb, g0, nkv, nkc, more, m0, r0, seq)
                if not p.q_after_o:
                    if T.lane_id() == 0:
                        sm.q.release_at(qb)              # every S of this tile is done: Q may reload
                Tx.wg.gemm_wait(0, rg.oacc)
                if nkc >= 2:
                    if T.lane_id() == 0:
                        sm.v.release(g0 + nkc - 2)
                Tx.wg.cast(rg.pfr, rg.sacc)
                last = sm.k.stage(g0 + nkv - 1)         # the tile's last block (o_over_kv stages O there)
                lastc = sm.k.stage(g0 + nkc - 1)        # this consumer's (TRIM: maybe an earlier one)
                if more > 0:
                    chain_next(O, LSE, sm, rg, wg, c, nt, qb, tc[0], g0, nkv, last, b, h, m0, r0)
                elif p.varlen:
                    # O / LSE are the overlapping views of attention_sm90's VARLEN: row x of view row q0 + lq
                    # is packed row q0 + lq - XQ + x, and x < XQ (the edge the stores clip at) ends the sequence
                    finish_tile(O, LSE, sm, rg, c, g0, nkv, nkc, last, lastc, q0 + lq, h, p.xq - seq[1] + m0,
                                p.xq - seq[1] + r0, qb)
                else:
                    finish_tile(O, LSE, sm, rg, c, g0, nkv, nkc, last, lastc, b, h, m0, r0, qb)
                gb[0] = g0 + nkv
                tc[0] = tc[0] + 1
        if T.thread_id_in_wg() == 0:
            T.ptx.bulk_wait_group(0)

    return consume


def build_kernel(p, scale, SQT, SKT, pdl, strides=None):
    """The ``@T.prim_func`` of plan ``p`` for tensors of ``SQT`` / ``SKT`` rows and softmax scale ``scale``:
    shared tiles and rings, barrier setup (:func:`tirxpy.lang.setup_barriers`), the register split
    (:class:`tirxpy.lang.WarpRoles`), then the producer and the consumers (:func:`cta_part`). With
    ``p.varlen`` the tensors are packed (:func:`attention_sm90`'s ``VARLEN``) and two ``cu_seqlens`` follow.
    ``strides``: the checked strides of ``Q``, ``K``, ``V`` (:func:`attention_sm90`), or None."""
    B, H, HKV, D, dtype = p.B, p.H, p.HKV, p.D, p.dtype
    cta = cta_part(p, scale, pdl)
    qs, ks, vs = strides or (None, None, None)
    nb = 1 if p.varlen else B
    QT, KT, VT = (tensor((nb, SQT, H, D), dtype, qs), tensor((nb, SKT, HKV, D), dtype, ks),
                  tensor((nb, SKT, HKV, D), dtype, vs))
    if p.varlen:
        XQ = p.xq
        OV = TileLayout(S[(SQT + 1, XQ, H, D) : (H * D, H * D, D, 1)])
        LV = TileLayout(S[(SQT + 1, H, XQ, 1) : (1, SQT + XQ, 1, 1)])

        @T.prim_func
        def attention_varlen_sm90_kernel(Q: QT, K: KT, V: VT,
                                         O: T.Tensor((SQT + 1, XQ, H, D), dtype, layout=OV),
                                         LSE: T.Tensor((SQT + 1, H, XQ, 1), "float32", layout=LV),
                                         CUQ: T.Tensor((B + 1,), "int32"), CUK: T.Tensor((B + 1,), "int32"),
                                         MAP: T.Tensor((1 + p.per_cta, varlen_slots(SQT, p.BM, B, p.per_cta)),
                                                       "int32")):
            T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
            cta(Q, K, V, O, LSE, (CUQ, CUK, MAP, SQT, SKT))

        return attention_varlen_sm90_kernel

    @T.prim_func
    def attention_sm90_kernel(Q: QT, K: KT, V: VT, O: T.Tensor((B, SQT, H, D), dtype),
                              LSE: T.Tensor((B, H, SQT, 1), "float32")):
        T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
        cta(Q, K, V, O, LSE, None)

    return attention_sm90_kernel


def cta_part(p, scale, pdl):
    """The macro ``cta(Q, K, V, O, LSE, cu)`` of one CTA of plan ``p``: shared tiles and rings, registers,
    barrier setup, the register split and the producer / consumer roles (``cu``: with ``p.varlen`` the
    ``cu_seqlens`` tensors, the tile map and the packed row counts, ``(CUQ, CUK, MAP, SQT, SKT)``, else None).
    ``pdl``: the kernel is launched with programmatic dependent launch."""
    B, H, D, dtype = p.B, p.H, p.D, p.dtype
    BM, BN, STAGES, QB = p.BM, p.BN, p.STAGES, p.q_buffers
    roles = WarpRoles(p.threads, *p.regs, kernel="attention_sm90")
    produce = producer_part(p)
    consume = consumer_part(p, scale * LOG2E)
    QL, KVL = tile_layout(BM, D, QB), tile_layout(BN, D, STAGES)
    SACC, OACC, OCH = wgmma_accumulator(BN), wgmma_accumulator(D), wgmma_accumulator(64)

    @T.macro
    def cta(Q, K, V, O, LSE, cu):
        Qs = T.alloc_shared((QB, BM, D), dtype, layout=QL)
        Ks = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        Vs = T.alloc_shared((STAGES, BN, D), dtype, layout=KVL)
        Os = Qs                                 # O is staged over Q (no longer read), or:
        if p.o_own:
            Os = T.alloc_shared((1, BM, D), dtype, layout=tile_layout(BM, D, 1))
        q_full = T.alloc_shared((QB,), "uint64")
        q_empty = T.alloc_shared((QB,), "uint64")
        k_full = T.alloc_shared((STAGES,), "uint64")
        v_full = T.alloc_shared((STAGES,), "uint64")
        k_empty = T.alloc_shared((STAGES,), "uint64")
        v_empty = T.alloc_shared((STAGES,), "uint64")
        sm = SharedTiles(Qs, Ks, Vs, Os, Ring(q_full, q_empty, QB), Ring(k_full, k_empty, STAGES),
                         Ring(v_full, v_empty, STAGES))
        sacc = T.alloc_local((64, BN), "float32", layout=SACC)
        pfr = T.alloc_local((64, BN), dtype, layout=SACC)
        oacc = T.alloc_local((64, D), "float32", layout=OACC)
        och = T.alloc_local((64, 64), dtype, layout=OCH)
        mrow = T.alloc_local((64, 1), "float32", layout=ROW)
        mprev = T.alloc_local((64, 1), "float32", layout=ROW)
        nms = T.alloc_local((64, 1), "float32", layout=ROW)
        lrow = T.alloc_local((64, 4), "float32", layout=QUAD)
        ltot = T.alloc_local((64, 1), "float32", layout=ROW)
        alpha = T.alloc_local((64, 1), "float32", layout=ROW)
        linv = T.alloc_local((64, 1), "float32", layout=ROW)
        mfin = T.alloc_local((64, 1), "float32", layout=ROW)
        lfin = T.alloc_local((64, 4), "float32", layout=QUAD)
        resc = T.alloc_local((1,), "int32")
        rg = ConsumerRegs(sacc, pfr, oacc, och, mrow, mprev, nms, lrow, ltot, alpha, linv, mfin, lfin, resc)
        gb = T.alloc_local((1,), "int32")       # key blocks of this CTA's earlier tiles: K / V ring position
        tc = T.alloc_local((1,), "int32")       # tiles this CTA has done: Q ring position
        n_tiles = p.per_cta
        if p.persist:
            n_tiles = causal_steps(p.q_tiles, H, B, p.units, p.tail) if p.causal else \
                tiles_of_unit(T.cta_id(0), p.units, p.work)
        setup_barriers([(sm.q, 1, p.q_release_arrivals), [(sm.k, 1, 4 * p.NC), (sm.v, 1, 4 * p.NC)]], 1, pdl)
        wg = T.warpgroup_id()
        if wg == 0:
            roles.enter_producer()
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    produce(Q, K, V, sm, gb, tc, n_tiles, cu)
        else:
            roles.enter_consumer()
            consume(O, LSE, sm, rg, wg, gb, tc, n_tiles, cu)


    return cta


@tirxpy.jit
def example():
    """The kernel ``python -m tirxpy compile tirxpy_kernels/attention_sm90.py`` builds: head dim 128, 4096 tokens,
    16 heads, batch 8, the default plan."""
    return attention_sm90(8, 16, 16, 4096, 4096, 128)
