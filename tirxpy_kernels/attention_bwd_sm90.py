"""Flash attention backward for Hopper (sm_90a): dQ, dK, dV from Q, K, V, dO, the forward's LSE and
``D = rowsum(dO * O)``, warp-specialized, TMA loads, wgmma for the five products.

With ``P = exp(scale * Q K^T - LSE)`` (masked entries 0) and ``dP = dO V^T``:
``dS = P * (dP - D)``, ``dV = P^T dO``, ``dK = scale * dS^T Q``, ``dQ = scale * dS K``. Tensors are
``(batch, seq, heads, dim)``; GQA as in the forward (``dK``, ``dV`` of a key / value head sum over the
``H / HKV`` query heads of its group); causal masking top-left aligned (query ``i`` sees keys ``0 .. i``).

The kernel is built from an :class:`~tirxpy_kernels.attention_bwd_plan.AttentionBwdPlan` by
:func:`build_kernel`:

- **grid** ``(kv_blocks, HKV, B)``: a CTA owns ``BN = 64 * NC`` keys of one key / value head; K and V stay
  in shared memory. It walks every query head of the group and every query block of ``BM`` rows that can
  see its keys (causal: from block ``n0 // BM`` on; not causal, with the plan's ``rotate``: from that block
  round to it, :func:`query_walk`). Causal grids end in a window of CTAs ordered by key block, the heaviest
  first (:func:`cta_block`), so that the last waves do not wait on a head's heavy blocks.
- **roles** (:class:`tirxpy.lang.WarpRoles`): warpgroup 0 is the producer: one thread loads K and V once,
  then per step the query block's Q, dO (``D / 64`` boxes each), LSE and D (``BM`` floats) into a
  :class:`tirxpy.lang.StageRing` of ``STAGES`` stages (one ``full`` barrier per stage, 4 arrivals per
  consumer free it); one thread of its warp ``1 + c`` is consumer ``c``'s ``dQ`` writer (**dQ accumulation**).
  Warpgroups ``1 .. NC`` are consumers; consumer ``c`` owns keys ``n0 + 64 c ..``.
- **per step** (consumer ``c``), everything transposed so that the key rows are the wgmma ``M``:
  ``S^T = K_c Q^T`` and ``dP^T = V_c dO^T`` (wgmma SS, ``(64, BM)`` float32); ``P^T = exp2(S^T * scale *
  log2 e - LSE * log2 e)`` (the causal mask on a transposed view of the fragment); ``dV += P^T dO`` (wgmma
  RS: the accumulator fragment of ``P^T`` is the A fragment); ``dS^T = scale P^T (dP^T - D)`` (the softmax
  scale folded in once, as ``dP^T scale - D scale``, so that ``dK`` and ``dQ`` come out scaled); ``dS^T`` to
  shared memory (``stmatrix``) 16 query columns at a time, each followed by its k-step of ``dK += dS^T Q`` (RS:
  no store reads the A fragment of a wgmma in flight); and ``dQ = dS K`` (wgmma, A = ``dS`` read transposed).
  ``dq_split="cols"``: the consumers meet at a named barrier once both wrote ``dS`` (two buffers, by step
  parity, so no second barrier guards the overwrite) and consumer ``c`` computes ``dQ``'s columns
  ``c D / NC ..`` (at head dim 64, 32 columns: ``K`` is then held in 64-byte-swizzled boxes of 32 columns, since
  a wgmma ``B`` operand is made of whole swizzle atoms, :func:`~tirxpy_kernels.attention_bwd_plan.k_box`);
  ``"keys"``: consumer ``c`` computes all columns over its own 64 keys.
- **trail** (the plan's ``trail``, head dims 64 and 128 without ``deterministic`` by default): consumer 1 runs
  about half a step behind consumer 0, so that one's exponentials overlap the other's matrix products. Their one
  meeting a step (named barrier 3) is at different points of the step: consumer 0 meets after storing its ``dS^T(t)``,
  consumer 1 before starting step ``t``. With ``dQ`` by columns (the plan's ``lag``) each ``dQ`` product then
  reads the ``dS`` of the step before (both halves are stored by the time either consumer is past the meeting),
  from three buffers, so a buffer is rewritten only after both consumers' products that read it are done; the
  last step's ``dQ`` follows the loop. In a packed kernel consumer 0 alone zeroes a partial query block's rows
  (:func:`zero_tails`).
- **dQ accumulation** (:func:`dq_part`, :func:`dq_writer_part`): the consumer stages its float32 ``dQ`` block
  (128-byte-swizzled boxes of 32 floats: each 8-byte store of the accumulator fragment takes 4 shared-memory
  wavefronts, against 8 in unswizzled 256-byte rows and 2 without conflicts, as rows ``r`` and ``r ^ 1`` of a
  half-warp share banks) and hands it to its writer, a warp of the producer warpgroup, which reduce-adds it into the
  float32 ``dQacc`` with TMA stores (``cp.reduce.async.bulk.tensor .add``), so that no consumer waits on an add.
  ``deterministic``: the reduce-adds into one block of ``dQacc`` go in key-block order: the writer spins
  (``ld.acquire``) until the block's counter in ``SEM`` reaches its turn, waits for the add to land and bumps the
  counter (release). ``fuse_dq``: the writers count every landed add; the consumers convert each block whose
  count was the last into ``dQ`` after their epilogue.
- **epilogue**: ``dK`` and ``dV`` converted and staged over the CTA's own K / V rows once both
  consumers are past their last product, then stored with TMA (rows past ``SK`` dropped).
- **head dim 256** (``kv_split="cols"``, :func:`consumer_cols_part`): the consumers share the CTA's 64 keys and
  each owns ``D / NC`` columns of ``dK``, ``dV`` and ``dQ``; each computes ``S^T`` and ``dP^T`` for its share of
  the block's query rows, and ``P^T`` joins ``dS^T`` in shared memory, so that ``dV`` and ``dK`` read both from
  there.

``D`` (``rowsum(O * dO)`` in float32) comes from :mod:`tirxpy_kernels.attention_bwd_pre`, which also zeroes
``dQacc``.
``dQacc`` receives ``scale * dS K`` summed over key blocks; the caller converts it
(:func:`tirxpy_kernels.attention_bwd_api.attention_backward`), or with ``FUSE_DQ`` the kernel does.

    >>> k = attention_bwd_sm90(1, 2, 1, 100, 80, 64, causal=True, SKT=128)
    >>> k.launch.threads, k.launch.grid
    (384, (1, 1, 1))
"""
from __future__ import annotations

import math

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator

from .attention_bwd_plan import TARGET, plan
from .attention_bwd_post import check_dq_strides
from .attention_plan import MAX_SIZE
from .attention_plan import check_scale
from .attention_walk import sequence
from .errors import KernelConfigError, flag_option, int_option
from .views import check_strides, tensor

LOG2E = 1.4426950408889634
NEG_INF = float("-inf")


def col_vector(n):
    """One float per accumulator column, ``(n,)``: column ``8 nb + 2 q + e`` in slot ``2 nb + e`` of every lane
    ``4 r + q`` of every warp (all the threads that hold that column of the wgmma accumulator), so that it
    broadcasts over the rows of a ``(64, n)`` fragment.

        >>> col_vector(16).apply(13)
        {'m': 3, 'laneid': 2, 'wid_in_wg': 0}
    """
    return TileLayout(S[(n // 8, 4, 2) : (2 @ m, 1 @ laneid, 1 @ m)] + R[(4, 8) : (1 @ wid_in_wg, 4 @ laneid)])


def transposed_accumulator(n):
    """The wgmma accumulator ``(64, n)`` seen as ``(n, 64)``: ``[c, r]`` is element ``[r, c]``, so a mask whose rows
    are the accumulator's columns can be applied to it.

        >>> transposed_accumulator(16).apply(13, 37, shape=(16, 64)) == wgmma_accumulator(16).apply(37, 13, shape=(64, 16))
        True
    """
    return TileLayout(S[(n // 8, 4, 2, 4, 2, 8) : (4 @ m, 1 @ laneid, 1 @ m, 1 @ wid_in_wg, 2 @ m, 4 @ laneid)])


def tile_layout(rows, cols, stages=None, dtype="bf16", swizzle=128):
    """``(rows, cols)`` tiles (``(stages, rows, cols)``) of dense ``swizzle``-byte-swizzled boxes of ``swizzle``-byte
    rows one after another (at 128: 64 columns of bf16 / f16, 32 of float32)."""
    w = swizzle * 8 // (32 if dtype == "float32" else 16)
    inner = S[(rows, cols // w, w) : (w, rows * w, 1)] if stages is None else \
        S[(stages, rows, cols // w, w) : (rows * cols, w, rows * w, 1)]
    return ComposeLayout(swizzle_for(swizzle, dtype), TileLayout(inner))


class Tiles:
    """Shared memory and rings as the parts see them: ``Ks``, ``Vs`` (resident), the staged ``Qs``, ``dOs``,
    ``Ls`` (LSE), ``Ds`` (D), ``dSs`` (two ``dS^T`` buffers), ``dQs`` (each consumer's dQ staging), the ring
    ``qr`` and the K / V barrier ``kv``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


@tirxpy.jit
def attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=False, scale=None, dtype="bfloat16", deterministic=False,
                       SQT=None, SKT=None, BM=None, STAGES=None, DQ_SPLIT=None, PACKED=False, FOLD=None,
                       strides=None, grad_strides=None, TAIL=None, sms=None, ROTATE=None, PDL=True, TRAIL=None,
                       FUSE_DQ=False, dq_strides=None):
    """The kernel for one problem: ``k(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM)`` with ``Q, dO: (B, SQT, H, D)``,
    ``K, V, dK, dV: (B, SKT, HKV, D)`` in ``dtype``, ``LSE, DL: (B, H, SQP)`` float32 (natural log-sum-exp and
    ``rowsum(dO * O)``; ``SQP`` the query blocks' rows, ``ceil(SQ / 64) * 64``), ``dQacc: (B, SQT, H, D)``
    float32 (zeroed; receives ``scale * dS K``) and ``SEM: (B, H, SQP / 64, 2)`` int32 (zeroed; read only when
    ``deterministic``). ``SQ`` / ``SK`` are the valid lengths; the tensors may hold more rows (``SQT >= SQ``,
    ``SKT >= SK``), which must then be zero (a TMA box may not be larger than its tensor: the caller pads
    sequences shorter than one block); key rows past the real ones are also masked out of ``P`` (their zero scores
    would give ``P = exp(-LSE)``, past float32's range where ``LSE < -88``).
    ``PACKED=True``: ``B`` packed sequences of at most ``SQ`` query / ``SK`` key rows, ``k(Q, K, V, dO, LSE, DL, dK,
    dV, dQacc, SEM, CUQ, CUK)`` with ``Q, dO: (SQT, H, D)``, ``K, V: (SKT, HKV, D)`` the packed rows,
    ``LSE, DL: (H, B, XQ)`` (sequence ``b``'s rows from 0, zero past its end), ``CUQ``, ``CUK: (B + 1,)`` int32
    offsets, and ``dK``, ``dV``, ``dQacc`` overlapping views that clip each sequence's stores at its end: with
    ``XK`` (``XQ``) the key (query) block rows times the blocks of ``SK`` (``SQ``), ``dK: (SKT + 1, XK, HKV, D)``
    with strides ``(HKV D, HKV D, D, 1)`` over a ``(XK + SKT, HKV, D)`` buffer whose rows from ``XK`` on are the
    packed rows (row ``r`` of a sequence ending at ``k1`` is view element ``(k1, XK - (k1 - k0) + r)``,
    :func:`tirxpy_kernels.attention_varlen_api.clipped_view`), ``dQacc`` likewise over ``(XQ + SQT, H, D)`` float32.
    A block loaded past a sequence's end holds its neighbour's rows: the consumers zero them in shared memory
    (:func:`zero_tails`).
    ``strides``: ``Q``, ``K``, ``V``, ``dO`` read in place as strided views, ``(q, k, v, dout)`` element strides of
    their shapes above (an entry None: dense; :func:`tirxpy_kernels.views.check_strides`). ``grad_strides``: ``dK``,
    ``dV`` written in place as strided views (the slices of a packed ``dqkv``), ``(dk, dv)`` likewise; not with
    ``PACKED``. ``PDL`` (default on): programmatic dependent launch, as in
    :func:`tirxpy_kernels.attention_sm90.attention_sm90`: the kernel may start while the previous kernel in the
    stream (the preprocessing) finishes, and every thread waits for it (``griddepcontrol.wait``) before any global
    load or store.
    ``FUSE_DQ=True``: the kernel also writes ``dQ`` in ``dtype`` (:func:`dq_writer_part`), taken after ``SEM``:
    ``k(..., dQacc, SEM, dQ)`` with ``dQ: (B, SQ, H, D)``, batch and token strides ``dq_strides = (sb, ss)`` (default
    dense; multiples of 8, :func:`~tirxpy_kernels.attention_bwd_post.check_dq_strides`), and ``SEM`` zeroed whatever
    ``deterministic``; packed, ``k(..., dQacc, SEM, dQ, CUQ, CUK)`` with ``dQ`` a clipped view like ``dQacc``'s, in
    ``dtype``.
    Options: :func:`tirxpy_kernels.attention_bwd_plan.plan`."""
    p = plan(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, BM, STAGES, DQ_SPLIT, PACKED, FOLD, TAIL,
             TARGET.sm_count if sms is None else sms, ROTATE, TRAIL, FUSE_DQ)
    SQT = SQ if SQT is None else int_option("attention_bwd_sm90", "SQT", SQT, lo=1, hi=MAX_SIZE)
    SKT = SK if SKT is None else int_option("attention_bwd_sm90", "SKT", SKT, lo=1, hi=MAX_SIZE)
    if p.packed:
        if SQT < p.BM or SKT < p.BN:
            raise KernelConfigError(f"attention_bwd_sm90: {SQT} packed query / {SKT} key rows are fewer than one "
                                    f"block ({p.BM} / {p.BN}): pad the packed tensors with zero rows")
    elif SQT < max(SQ, p.BM) or SKT < max(SK, p.BN):
        raise KernelConfigError(f"attention_bwd_sm90: tensors of {SQT} query / {SKT} key rows are shorter than one "
                                f"block ({p.BM} / {p.BN}) or than SQ = {SQ} / SK = {SK}: pad the sequences")
    qshape, kshape = ((SQT, H, D), (SKT, HKV, D)) if p.packed else ((B, SQT, H, D), (B, SKT, HKV, D))
    strides = check_strides("attention_bwd_sm90", ("q", "k", "v", "dout"), (qshape, kshape, kshape, qshape), strides)
    grad_strides = check_strides("attention_bwd_sm90", ("dk", "dv"), (kshape, kshape), grad_strides,
                                 option="grad_strides")
    if grad_strides is not None and p.packed:
        raise KernelConfigError("attention_bwd_sm90: grad_strides is for the dense kernel; PACKED=True writes dK and "
                                "dV through its clipped views")
    if dq_strides is not None:
        if not p.fuse_dq or p.packed:
            raise KernelConfigError("attention_bwd_sm90: dq_strides is for the dense kernel with FUSE_DQ=True, the one "
                                    "that writes dQ; leave it None")
        dq_strides = check_dq_strides("attention_bwd_sm90", H, D, dq_strides)
    scale = 1.0 / math.sqrt(D) if scale is None else check_scale("attention_bwd_sm90", scale)
    return build_kernel(p, scale, SQT, SKT, strides, grad_strides, flag_option("attention_bwd_sm90", "PDL", PDL),
                        dq_strides)


def lengths(p, CU, b, SQT, SKT):
    """``(lq, lk, q0, k0)``: the real query and key rows of batch element ``b`` and where they start: with ``p.packed``
    sequence ``b`` of the ``cu_seqlens`` pair ``CU`` over ``SQT`` / ``SKT`` packed rows (rows ``q0 .. q0 + lq - 1``;
    clamped by :func:`tirxpy_kernels.attention_walk.sequence`, so no block past the window is walked and no box
    leaves its tensor whatever the offsets hold), else the plan's ``SQ``, ``SK`` from row 0."""
    if p.packed:
        q0, lq, k0, lk = sequence(CU[0], CU[1], b, p, SQT, SKT)
        return lq, lk, q0, k0
    return p.SQ, p.SK, 0, 0


def q_rows(p, X, b, ln, m0, h, c0, w):
    """Query rows ``m0 .. m0 + BM - 1`` of batch element ``b`` (:func:`lengths` ``ln``) in ``Q`` or ``dO``, head
    ``h``, columns ``c0 .. c0 + w - 1``."""
    if p.packed:
        return X[ln[2] + m0:ln[2] + m0 + p.BM, h, c0:c0 + w]
    return X[b, m0:m0 + p.BM, h, c0:c0 + w]


def k_rows(p, X, b, ln, n0, n, h, c0, w):
    """Key rows ``n0 .. n0 + n - 1`` of batch element ``b`` in ``K`` or ``V``, head ``h``, columns ``c0 ..``."""
    if p.packed:
        return X[ln[3] + n0:ln[3] + n0 + n, h, c0:c0 + w]
    return X[b, n0:n0 + n, h, c0:c0 + w]


def row_vals(p, X, b, h, m0):
    """``LSE`` or ``D`` of query rows ``m0 .. m0 + BM - 1`` of batch element ``b``, head ``h`` (packed: from the
    ``(H, B, XQ)`` per-sequence rows, so that a box starts 16-byte aligned, as TMA needs)."""
    if p.packed:
        return X[h, b, m0:m0 + p.BM]
    return X[b, h, m0:m0 + p.BM]


def q_out(p, X, b, ln, m0, h, c0, w):
    """Where query rows ``m0 .. m0 + BM - 1`` of batch element ``b`` go in ``dQacc``. Packed: the overlapping view
    whose element ``(q0 + lq, XQ - lq + r)`` is packed row ``q0 + r``, so rows past the sequence (``x >= XQ``)
    are clipped (``XQ`` the window, ``q_blocks * BM``)."""
    if p.packed:
        XQ = p.q_blocks * p.BM
        return X[ln[2] + ln[0], XQ - ln[0] + m0:XQ - ln[0] + m0 + p.BM, h, c0:c0 + w]
    return X[b, m0:m0 + p.BM, h, c0:c0 + w]


def k_out(p, X, b, ln, r0, n, h, c0, w):
    """Where key rows ``r0 .. r0 + n - 1`` of batch element ``b`` go in ``dK`` / ``dV`` (packed: clipped at the
    sequence's end as :func:`q_out`, window ``kv_blocks * BN``)."""
    if p.packed:
        XK = p.kv_blocks * p.BN
        return X[ln[3] + ln[1], XK - ln[1] + r0:XK - ln[1] + r0 + n, h, c0:c0 + w]
    return X[b, r0:r0 + n, h, c0:c0 + w]


def cta_block(p):
    """``(kb, hk, b)``: the key block, key / value head and batch element of this CTA. The grid's linear order
    (``cta_id(0)`` fastest) walks the pairs ``(b, hk)`` one after another, each pair's key blocks in order, except
    the last ``p.tail_heads`` pairs (:func:`~tirxpy_kernels.attention_bwd_plan.tail_heads`), which come key block by
    key block: the CTAs of block 0 of each, then of block 1, and so on. A key block's CTAs always come after the
    lower blocks of their pair (``deterministic`` waits on those)."""
    if not p.tail_heads:
        return T.cta_id(0), T.cta_id(1), T.cta_id(2)
    NKV, NT = p.kv_blocks, p.tail_heads
    P0 = p.B * p.HKV - NT                            # pairs in the grid's order
    lin = T.cta_id(0) + NKV * (T.cta_id(1) + p.HKV * T.cta_id(2))
    rest = T.max(lin - P0 * NKV, 0)
    head = lin < P0 * NKV
    pair = T.select(head, lin // NKV, P0 + rest % NT)
    return T.select(head, lin % NKV, rest // NT), pair % p.HKV, pair // p.HKV


def division_free_walk(p):
    """Whether :func:`query_walk` takes step ``t`` as block ``first + t`` of the CTA's own head, with no division by
    the blocks walked per head: under MHA (``group == 1``) without ``rotate``, where that count is known only at
    run time (causal or packed; a compile-time count divides by a multiply), and with ``dQ`` split by columns
    (every head dim's default but head dim 64's with ``deterministic``). With ``dq_split="keys"`` the walk keeps
    the division (why: ``docs/performance.md``, "the division-free walk")."""
    return p.group == 1 and not p.rotate and (p.causal or p.packed) and p.dq_split == "cols"


def query_walk(p, n0, hk, t, ln):
    """``(first, nq, hq, mi)``: the first query block that sees keys from ``n0``, the number of blocks walked per
    head (none when the CTA's keys start past the ``ln = (lq, lk)`` real ones, :func:`lengths`), and step ``t``'s
    query head and block (heads of the group outermost). With ``p.rotate`` (not causal) each head's walk starts at
    block ``n0 / BM`` and wraps around, so that the CTAs of one head running at once add into different blocks of
    ``dQacc`` rather than all into the same one."""
    MT = T.ceildiv(ln[0], p.BM) if p.packed else p.q_blocks
    first = T.min(n0 // p.BM, MT) if p.causal else 0
    nq = T.select(n0 < ln[1], MT - first, 0) if p.packed else MT - first
    if division_free_walk(p):                        # one head: step t is block first + t
        return first, nq, hk, first + t
    j = t % T.max(nq, 1)
    if p.rotate:                                     # start at block n0 / BM, as a causal walk does
        j = (j + n0 // p.BM) % T.max(nq, 1)
    return first, nq, hk * p.group + t // T.max(nq, 1), first + j


def adds_per_block(p, mi, lk):
    """The adds into one counter of ``dQacc`` block ``mi`` of a query head (of a sequence with ``lk`` keys): one
    per key block whose CTA's walk visits the block (not causal: every key block; causal: those whose first query
    block ``n0 // BM`` is at most ``mi``), times ``NC`` when ``dQ`` is split by keys (both consumers add the whole
    block, into counter 0), else once (consumer ``c`` adds its columns, into counter ``c``). ``mi`` and ``lk`` may be
    device expressions (``lk`` a Python int for the dense kernel: its ``SK``).

        >>> p = plan(1, 1, 1, 512, 512, 128, causal=True)
        >>> [int(adds_per_block(p, mi, 512)) for mi in range(8)]
        [1, 1, 2, 2, 3, 3, 4, 4]
    """
    NK = T.ceildiv(lk, p.BN) if p.packed else p.kv_blocks
    n = T.min(NK, ((mi + 1) * p.BM - 1) // p.BN + 1) if p.causal else NK
    return n * p.NC if p.dq_split == "keys" else n


def ragged_keys(p):
    """Whether a CTA's keys can run past the real ones: packed sequences, or ``SK`` not a multiple of ``BN``."""
    return p.packed or p.SK % p.BN != 0


@T.macro
def walk(p, step, args, n0, ln, n_steps):
    """The consumer's ``n_steps`` calls ``step(*args, t, ragged)``. Where keys can run past the real ones
    (:func:`ragged_keys`) the loop is built twice and a CTA picks one once: ``ragged=True`` (the column bound on
    every block) for a CTA whose ``BN`` keys from ``n0`` are not all real, ``False`` for the rest."""
    if ragged_keys(p):
        if ln[1] - n0 >= p.BN:
            for t in T.serial(n_steps):
                step(*args, t, False)
        else:
            for t in T.serial(n_steps):
                step(*args, t, True)
    else:
        for t in T.serial(n_steps):
            step(*args, t, False)


@T.macro
def key_mask(p, st, w, kc, diag, m0, n0, ragged):
    """Scores of the transposed view ``st`` (query rows, ``w`` key columns) set to -inf for key columns from ``kc``
    on (the keys past the real ones, :func:`lengths`, whose zero rows would give ``P = exp(-LSE)``: past float32 where
    ``LSE < -88``) and, when causal on a diagonal block (``m0 < n0 + BN``), past ``diag`` + the row. The column bound
    is applied only with ``ragged`` (the CTA's keys run past the real ones, :func:`walk`), and then on every block,
    as selects: a branch around it would wait for the loads in flight (LSE's) before it."""
    if p.causal:
        if m0 < n0 + p.BN:
            Tx.wg.mask(st, st, T.float32(NEG_INF), cols=kc if ragged else None, diag=diag)
        elif ragged:
            Tx.wg.mask(st, st, T.float32(NEG_INF), cols=kc)
    elif ragged:
        Tx.wg.mask(st, st, T.float32(NEG_INF), cols=kc)


@T.macro
def zero_tails(p, tiles, staged, s, r, c=None):
    """Packed sequences: rows ``r ..`` of a block loaded past the sequence's end (its neighbour's rows) set to 0 in
    shared memory by the consumers' threads, so that the block is the padded batch's, exactly. ``tiles``: shared
    buffers of ``(rows, cols)`` tiles, with a leading stage index ``s`` when ``staged``. Then the async proxy sees
    the stores and both consumers meet (named barrier 4) before either's wgmma reads them. With consumer ``c``
    given, its warpgroup alone zeroes the rows and meets only itself (named barrier ``1 + c``): the plan's
    ``trail``, where consumer 1 reads the block only after a later meeting with consumer 0."""
    n = 128 * p.NC if c is None else 128
    tc = T.thread_id() - 128 * (1 + (0 if c is None else c))
    for X in tiles:
        rows, cols = X.shape[1:] if staged else X.shape
        for i in T.serial(rows * cols // n):
            e = tc + n * i
            if e // cols >= r:
                if staged:
                    X[s, e // cols, e % cols] = T.cast(0, X.dtype)
                else:
                    X[e // cols, e % cols] = T.cast(0, X.dtype)
    T.ptx.fence_proxy_async()
    if c is None:
        T.ptx.barrier_sync(4, 128 * p.NC)
    else:
        T.ptx.barrier_sync(1 + c, 128)


def producer_part(p):
    """The producer's macro ``produce(Q, K, V, dO, LSE, DL, sm, n0, hk, b, ln, n_steps)``: K and V once, then per step
    Q, dO, LSE and D of the step's query block into stage ``t % STAGES``."""
    BM, BN, DC = p.BM, p.BN, p.d_chunks

    @T.macro
    def produce(Q, K, V, dO, LSE, DL, sm, n0, hk, b, ln, n_steps):
        KB = p.k_box
        for j in range(p.D // KB):
            Tx.copy_async(sm.Ks[:, j * KB:j * KB + KB], k_rows(p, K, b, ln, n0, BN, hk, j * KB, KB), mbar=sm.kv[0],
                          arrive=False)
        for j in range(DC):
            Tx.copy_async(sm.Vs[:, j * 64:j * 64 + 64], k_rows(p, V, b, ln, n0, BN, hk, j * 64, 64), mbar=sm.kv[0],
                          arrive=j == DC - 1)
        for t in T.serial(n_steps):
            _, _, hq, mi = query_walk(p, n0, hk, t, ln)
            m0 = mi * BM
            s = sm.qr.stage(t)
            sm.qr.wait_empty(t)
            for j in range(DC):
                Tx.copy_async(sm.Qs[s, :, j * 64:j * 64 + 64], q_rows(p, Q, b, ln, m0, hq, j * 64, 64),
                              mbar=sm.qr.full[s], arrive=False)
                Tx.copy_async(sm.dOs[s, :, j * 64:j * 64 + 64], q_rows(p, dO, b, ln, m0, hq, j * 64, 64),
                              mbar=sm.qr.full[s], arrive=False)
            Tx.copy_async(sm.Ls[s, :], row_vals(p, LSE, b, hq, m0), mbar=sm.qr.full[s], arrive=False)
            Tx.copy_async(sm.Ds[s, :], row_vals(p, DL, b, hq, m0), mbar=sm.qr.full[s], arrive=True)

    return produce


def dq_part(p):
    """The consumer's macros ``dq_product(sm, rg, c, t)`` (``dQ`` of the step's query block from ``dS^T`` in
    shared memory) and ``dq_stage(sm, rg, c, t)``: step ``t``'s ``dQ`` block into consumer ``c``'s staging buffer,
    once its writer (:func:`dq_writer_part`) has read the block before out of it, then handed to the writer: a
    one-stage ring per consumer (``dqr[c]``), position ``t`` for step ``t``."""
    NC, DQC = p.NC, p.dq_cols

    @T.macro
    def dq_product(sm, rg, c, t):
        db = t % p.ds_bufs
        if p.dq_split == "cols":
            Tx.wg.gemm_async(rg.dq, sm.dSs[db, :, :], sm.Ks[:, c * DQC:c * DQC + DQC], transpose_a=True,
                             accumulate=False, dispatch=p.dispatch)
        else:
            Tx.wg.gemm_async(rg.dq, sm.dSs[db, c * 64:c * 64 + 64, :], sm.Ks[c * 64:c * 64 + 64, :],
                             transpose_a=True, accumulate=False, dispatch=p.dispatch)

    @T.macro
    def dq_stage(sm, rg, c, t):
        for cc in range(NC):                         # (a ring's barriers are picked at build time)
            if c == cc:
                sm.dqr[cc].wait_empty(t)
        Tx.wg.copy(sm.dQs[c, :, :], rg.dq)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        for cc in range(NC):
            if T.thread_id() == 128 * (1 + cc):
                sm.dqr[cc].arrive_full(t)

    return dq_product, dq_stage


def convert_layout(w):
    """A ``(64, w)`` float32 register tile over a warpgroup for :func:`dq_writer_part`'s conversion: 4 consecutive
    floats of a row per thread (one 16-byte load), ``w / 4`` lanes along a row, the warps' rows stacked, then
    repeated down the 64 rows.

        >>> convert_layout(64).apply(5, 13, shape=(64, 64))
        {'m': 1, 'wid_in_wg': 2, 'laneid': 19}
    """
    lanes = w // 4
    per_warp = 32 // lanes
    return TileLayout(S[(64 // (4 * per_warp), 4, per_warp, lanes, 4) :
                        (4 @ m, 1 @ wid_in_wg, lanes @ laneid, 1 @ laneid, 1 @ m)])


def dq_writer_part(p):
    """The macros of ``dQ``'s accumulation: ``write(dQacc, SEM, sm, c, b, ln, n0, hk, n_steps)``, run by one thread
    of warp ``1 + c`` of the producer warpgroup (consumer ``c``'s writer), and ``convert(dQacc, dQ, sm, rg, c, b,
    ln, n0, hk, n_steps)``, run by consumer ``c`` after its epilogue when ``fuse_dq``.

    Per step the writer waits for the consumer's staged block (:func:`dq_part`), reduce-adds it into ``dQacc``
    (``cp.reduce.async.bulk.tensor .add``, 128-byte-swizzled boxes of 32 floats) and hands the buffer back once the
    add has read it. ``deterministic``: before its add it spins (``ld.acquire``) until the block's counter in ``SEM``
    reaches its turn (key-block order), and after its add it waits for the add to land and counts it in ``SEM`` (a
    release). ``fuse_dq``: it counts every add once it has landed (without ``deterministic``, step ``t``'s after
    issuing step ``t + 1``'s, so that no wait for an add to land stands between two adds), with an ``atom.acq_rel``
    whose old value it keeps in the step's count slot, and once its walk is done it meets the consumer (named
    barrier ``5 + c``). The consumer then converts the blocks whose count was the last (:func:`adds_per_block`:
    every other add had landed) from ``dQacc`` into ``dQ`` (rows past a sequence's end clipped, as the adds are).
    The writer keeps the count and the consumers compare it: they have registers to spare after their epilogue, the
    writer has the producer's 24."""
    BM, NC, DQC = p.BM, p.NC, p.dq_cols

    @T.macro
    def count(SEM, sm, c, b, hq, mi, si, t):
        """Count step ``t``'s landed add in its block's counter; keep the count it found in slot ``t``."""
        T.ptx.fence_proxy_async_global()
        old = T.ptx.atom_acq_rel_gpu_add_u32(T.address_of(SEM[b, hq, mi, si]), T.uint32(1))
        sm.counts[c, t] = T.cast(old, "uint16")

    @T.macro
    def write(dQacc, SEM, sm, c, b, ln, n0, hk, n_steps):
        kb = n0 // p.BN
        col0, si = (c * DQC, c) if p.dq_split == "cols" else (0, 0)
        for t in T.serial(n_steps):
            _, _, hq, mi = query_walk(p, n0, hk, t, ln)
            sm.dqr[c].wait_full(t)
            if p.deterministic:
                turn = kb if p.dq_split == "cols" else kb * NC + c
                while T.ptx.ld_acquire_gpu_u32(T.address_of(SEM[b, hq, mi, si])) != T.cast(turn, "uint32"):
                    T.ptx.nanosleep(T.uint32(32))
                T.ptx.fence_proxy_async_global()
            for j in range(DQC // 32):               # one 128-byte-swizzled box of 32 floats at a time
                Tx.copy_async(q_out(p, dQacc, b, ln, mi * BM, hq, col0 + j * 32, 32),
                              sm.dQs[c, :, j * 32:j * 32 + 32], reduce="add")
            T.ptx.bulk_wait_group_read(0)
            sm.dqr[c].release(t)
            if p.deterministic:                      # the next turn waits for this add to land
                T.ptx.bulk_wait_group(0)
                if p.fuse_dq:
                    count(SEM, sm, c, b, hq, mi, si, t)
                else:
                    T.ptx.fence_proxy_async_global()
                    T.ptx.red_global_add_release_gpu_u32(T.address_of(SEM[b, hq, mi, si]), T.uint32(1))
            elif p.fuse_dq:                          # the add before this one has landed: count it
                if t > 0:
                    T.ptx.bulk_wait_group(1)
                    wp = query_walk(p, n0, hk, t - 1, ln)
                    count(SEM, sm, c, b, wp[2], wp[3], si, t - 1)
        T.ptx.bulk_wait_group(0)
        if p.fuse_dq and not p.deterministic:
            if n_steps > 0:
                wl = query_walk(p, n0, hk, n_steps - 1, ln)
                count(SEM, sm, c, b, wl[2], wl[3], si, n_steps - 1)

    @T.macro
    def convert(dQacc, dQ, sm, rg, c, b, ln, n0, hk, n_steps):
        T.ptx.barrier_sync(5 + c, 128 + 32)          # writer c has counted every add
        col0 = c * DQC if p.dq_split == "cols" else 0
        for t in T.serial(n_steps):
            _, _, hq, mi = query_walk(p, n0, hk, t, ln)
            if T.cast(sm.counts[c, t], "int32") + 1 == adds_per_block(p, mi, ln[1]):   # the block's last add
                Tx.wg.copy(rg.cv, q_out(p, dQacc, b, ln, mi * BM, hq, col0, DQC))
                Tx.wg.cast(rg.cvo, rg.cv)
                Tx.wg.copy(q_out(p, dQ, b, ln, mi * BM, hq, col0, DQC), rg.cvo)

    return write, convert


def consumer_part(p, scale):
    """The consumer's macro ``consume(dK, dV, sm, rg, c, n0, hk, b, ln, n_steps)``: the steps of the
    module docstring, then the epilogue."""
    BM, BN, D, NC, DC = p.BM, p.BN, p.D, p.NC, p.d_chunks
    sl2 = scale * LOG2E
    dq_product, dq_stage = dq_part(p)
    KW = 16                                      # dS^T's columns per store / dK wgmma (one k-step)
    NB = p.ds_bufs
    LAG = 1 if p.lag else 0                      # steps between a dS^T and its dQ product

    @T.macro
    def step(sm, rg, c, n0, hk, b, ln, t, ragged):
        m0 = query_walk(p, n0, hk, t, ln)[3] * BM
        s = sm.qr.stage(t)
        sm.qr.wait_full(t)
        if p.trail:
            if p.packed:
                if c == 0:                           # consumer 1 reads the block after the meeting below
                    if ln[0] - m0 < BM:
                        zero_tails(p, [sm.Qs, sm.dOs], True, s, ln[0] - m0, 0)
            if c == 1:                               # consumer 1 starts step t once consumer 0 stored its dS^T(t)
                T.ptx.barrier_sync(3, 128 * NC)
        elif p.packed:
            if ln[0] - m0 < BM:                      # the sequence's last, partial query block
                zero_tails(p, [sm.Qs, sm.dOs], True, s, ln[0] - m0)
        Tx.wg.gemm_async(rg.sacc, sm.Ks[c * 64:c * 64 + 64, :], sm.Qs[s], transpose_b=True, accumulate=False,
                         dispatch=p.dispatch)
        if t > LAG:                                  # the dQ in dP^T's registers (issued last step) under S^T
            dq_stage(sm, rg, c, t - 1 - LAG)
        Tx.wg.gemm_async(rg.dpacc, sm.Vs[c * 64:c * 64 + 64, :], sm.dOs[s], transpose_b=True, accumulate=False,
                         dispatch=p.dispatch)
        Tx.wg.copy(rg.lcol, sm.Ls[s, :])
        Tx.wg.mul(rg.lcol, rg.lcol, T.float32(-LOG2E))
        Tx.wg.gemm_wait(1, rg.sacc)                  # S^T done; dP^T in flight
        # keys past the real ones; causal: key n0 + 64 c + r > query m0 + q on a diagonal block
        st = rg.sacc.alias((BM, 64), layout=transposed_accumulator(BM))
        key_mask(p, st, 64, ln[1] - n0 - c * 64, m0 - n0 - c * 64, m0, n0, ragged)
        Tx.wg.fma(rg.sacc, rg.sacc, T.float32(sl2), rg.lcol)
        Tx.wg.copy(rg.dcol, sm.Ds[s, :])             # D's load (over LSE's registers) lands under the exp2s
        Tx.wg.exp2(rg.sacc, rg.sacc)                 # P^T
        Tx.wg.cast(rg.pfr, rg.sacc)
        Tx.wg.gemm_async(rg.dvacc, rg.pfr, sm.dOs[s], accumulate=True, dispatch=p.dispatch)
        Tx.wg.gemm_wait(1, rg.dpacc)                 # dP^T done; dV in flight
        Tx.wg.mul(rg.dcol, rg.dcol, T.float32(-scale))
        Tx.wg.fma(rg.dpacc, rg.dpacc, T.float32(scale), rg.dcol)
        Tx.wg.mul(rg.dpacc, rg.dpacc, rg.sacc)       # scale dS^T
        Tx.wg.cast(rg.dsfr, rg.dpacc)
        # dK += dS^T Q, one 16-query k-step at a time, each after its dS^T columns are stored: no store reads A
        # registers of a wgmma in flight (PTX: undefined), and the tensor cores wait only for the first store
        for j in range(BM // KW):
            Tx.wg.copy(sm.dSs[t % NB, c * 64:c * 64 + 64, j * KW:j * KW + KW], rg.dsfr[:, j * KW:j * KW + KW])
            Tx.wg.gemm_async(rg.dkacc, rg.dsfr[:, j * KW:j * KW + KW], sm.Qs[s, j * KW:j * KW + KW, :],
                             accumulate=True, dispatch=p.dispatch)
        T.ptx.fence_proxy_async()
        if p.trail:
            if c == 0:                               # consumer 1 is past step t - 1: its dS^T(t - 1) is stored
                T.ptx.barrier_sync(3, 128 * NC)
        if p.lag:
            dq_product(sm, rg, c, t + NB - 1)        # step t - 1's (at step 0: the zeroed last buffer's, unused)
        else:
            if p.dq_split == "cols":
                T.ptx.barrier_sync(3, 128 * NC)      # every consumer's dS^T is in shared memory
            else:
                T.ptx.barrier_sync(1 + c, 128)
            dq_product(sm, rg, c, t)
        Tx.wg.gemm_wait(0, rg.dq, rg.dvacc, rg.dkacc)
        if T.lane_id() == 0:
            sm.qr.release(t)

    @T.macro
    def epilogue(dK, dV, sm, rg, c, n0, hk, b, ln):
        T.ptx.barrier_sync(3, 128 * NC)              # both consumers are past their last read of K and V
        for j in range(DC):
            Tx.wg.cast(rg.och, rg.dkacc[:, j * 64:j * 64 + 64])
            Tx.wg.copy(sm.Ks[c * 64:c * 64 + 64, j * 64:j * 64 + 64], rg.och)
            Tx.wg.cast(rg.och, rg.dvacc[:, j * 64:j * 64 + 64])
            Tx.wg.copy(sm.Vs[c * 64:c * 64 + 64, j * 64:j * 64 + 64], rg.och)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        for cc in range(NC):                         # one issuing thread per call site
            if T.thread_id() == 128 * (cc + 1):
                r0 = n0 + cc * 64
                for j in range(D // p.k_box):
                    KB = p.k_box
                    Tx.copy_async(k_out(p, dK, b, ln, r0, 64, hk, j * KB, KB),
                                  sm.Ks[cc * 64:cc * 64 + 64, j * KB:j * KB + KB])
                for j in range(DC):
                    Tx.copy_async(k_out(p, dV, b, ln, r0, 64, hk, j * 64, 64),
                                  sm.Vs[cc * 64:cc * 64 + 64, j * 64:j * 64 + 64])
                T.ptx.bulk_wait_group(0)

    @T.macro
    def consume(dK, dV, sm, rg, c, n0, hk, b, ln, n_steps):
        Tx.wg.fill(rg.dvacc, T.float32(0))
        Tx.wg.fill(rg.dkacc, T.float32(0))
        # dQ's registers (dP^T's) get a plain definition ahead of the loop: defined by wgmmas alone, ptxas would wait
        # for each step's S^T before the staging reads them (ptxas info C7517), and the staging would not run under it
        Tx.wg.fill(rg.dpacc, T.float32(0))
        T.ptx.mbarrier_wait_parity(sm.kv[0], 0)
        if p.packed:
            if ln[1] - n0 < BN:                      # keys past the sequence's end (its neighbour's)
                zero_tails(p, [sm.Ks, sm.Vs], False, 0, ln[1] - n0)
        if p.lag:       # step 0's dQ product reads the last dS^T buffer (a plain wgmma each step: see step)
            Tx.wg.fill(rg.dsfr, T.cast(0, rg.dsfr.dtype))
            Tx.wg.copy(sm.dSs[NB - 1, c * 64:c * 64 + 64, :], rg.dsfr)
            T.ptx.fence_proxy_async()
        walk(p, step, (sm, rg, c, n0, hk, b, ln), n0, ln, n_steps)
        if p.lag:
            if n_steps > 0:                          # the last two steps' dQ
                T.ptx.barrier_sync(3, 128 * NC)      # both consumers' last dS^T is in shared memory
                if n_steps > 1:
                    dq_stage(sm, rg, c, n_steps - 2)
                dq_product(sm, rg, c, n_steps - 1)
                Tx.wg.gemm_wait(0, rg.dq)
        if n_steps > 0:                              # the last step's dQ
            dq_stage(sm, rg, c, n_steps - 1)
        epilogue(dK, dV, sm, rg, c, n0, hk, b, ln)

    return consume


def consumer_cols_part(p, scale):
    """The consumer's macro ``consume(dK, dV, sm, rg, c, n0, hk, b, ln, n_steps)`` for
    ``kv_split="cols"`` (head dim 256): both consumers share the CTA's 64 keys; consumer ``c`` computes ``S^T``
    and ``dP^T`` for the query columns ``c BM / NC ..`` of the block, writes its ``P^T`` and ``dS^T`` columns to
    shared memory, and after a named barrier (both halves written) accumulates the columns ``c D / NC ..`` of
    ``dV += P^T dO`` and ``dK += dS^T Q`` and computes those columns of ``dQ = dS K`` (all from shared
    memory), which it adds into ``dQacc`` in the same step. ``P^T`` and ``dS^T`` alternate between two buffers
    by step parity (a consumer at step ``t + 2`` has met the other past its products of step ``t``)."""
    BM, BN, NC, DQC = p.BM, p.BN, p.NC, p.dq_cols
    HQ = BM // NC
    sl2 = scale * LOG2E
    _, dq_stage = dq_part(p)

    @T.macro
    def step(sm, rg, c, n0, hk, b, ln, t, ragged):
        wq = query_walk(p, n0, hk, t, ln)
        m0 = wq[3] * BM
        s = sm.qr.stage(t)
        db = t % 2
        q0 = c * HQ
        sm.qr.wait_full(t)
        if p.packed:
            if ln[0] - m0 < BM:                      # the sequence's last, partial query block
                zero_tails(p, [sm.Qs, sm.dOs], True, s, ln[0] - m0)
        Tx.wg.gemm_async(rg.sacc, sm.Ks, sm.Qs[s, q0:q0 + HQ, :], transpose_b=True, accumulate=False,
                         dispatch=p.dispatch)
        Tx.wg.gemm_async(rg.dpacc, sm.Vs, sm.dOs[s, q0:q0 + HQ, :], transpose_b=True, accumulate=False,
                         dispatch=p.dispatch)
        Tx.wg.copy(rg.lcol, sm.Ls[s, q0:q0 + HQ])
        Tx.wg.mul(rg.lcol, rg.lcol, T.float32(-LOG2E))
        Tx.wg.gemm_wait(1, rg.sacc)                  # S^T done; dP^T in flight
        # keys past the real ones; causal: key n0 + r > query m0 + q0 + q on a diagonal block
        st = rg.sacc.alias((HQ, BN), layout=transposed_accumulator(HQ))
        key_mask(p, st, BN, ln[1] - n0, m0 + q0 - n0, m0, n0, ragged)
        Tx.wg.fma(rg.sacc, rg.sacc, T.float32(sl2), rg.lcol)
        Tx.wg.copy(rg.dcol, sm.Ds[s, q0:q0 + HQ])    # D's load (over LSE's registers) lands under the exp2s
        Tx.wg.exp2(rg.sacc, rg.sacc)                 # P^T
        Tx.wg.cast(rg.pfr, rg.sacc)
        Tx.wg.copy(sm.Ps[db, :, q0:q0 + HQ], rg.pfr)
        Tx.wg.gemm_wait(0, rg.dpacc)
        Tx.wg.mul(rg.dcol, rg.dcol, T.float32(-scale))
        Tx.wg.fma(rg.dpacc, rg.dpacc, T.float32(scale), rg.dcol)
        Tx.wg.mul(rg.dpacc, rg.dpacc, rg.sacc)       # scale dS^T
        Tx.wg.cast(rg.dsfr, rg.dpacc)
        Tx.wg.copy(sm.dSs[db, :, q0:q0 + HQ], rg.dsfr)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(3, 128 * NC)              # every consumer's P^T and dS^T columns are in shared memory
        c0 = c * DQC
        Tx.wg.gemm_async(rg.dvacc, sm.Ps[db], sm.dOs[s, :, c0:c0 + DQC], accumulate=True, dispatch=p.dispatch)
        Tx.wg.gemm_async(rg.dkacc, sm.dSs[db], sm.Qs[s, :, c0:c0 + DQC], accumulate=True, dispatch=p.dispatch)
        Tx.wg.gemm_async(rg.dq, sm.dSs[db], sm.Ks[:, c0:c0 + DQC], transpose_a=True, accumulate=False,
                         dispatch=p.dispatch)
        Tx.wg.gemm_wait(0, rg.dq, rg.dvacc, rg.dkacc)
        if T.lane_id() == 0:
            sm.qr.release(t)
        dq_stage(sm, rg, c, t)

    @T.macro
    def epilogue(dK, dV, sm, rg, c, n0, hk, b, ln):
        T.ptx.barrier_sync(3, 128 * NC)              # both consumers are past their last read of K and V
        for j in range(DQC // HQ):                   # HQ-column chunks through P^T's registers
            Tx.wg.cast(rg.pfr, rg.dkacc[:, j * HQ:j * HQ + HQ])
            Tx.wg.copy(sm.Ks[:, c * DQC + j * HQ:c * DQC + j * HQ + HQ], rg.pfr)
            Tx.wg.cast(rg.pfr, rg.dvacc[:, j * HQ:j * HQ + HQ])
            Tx.wg.copy(sm.Vs[:, c * DQC + j * HQ:c * DQC + j * HQ + HQ], rg.pfr)
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        for cc in range(NC):                         # one issuing thread per call site
            if T.thread_id() == 128 * (cc + 1):
                for j in range(DQC // 64):
                    k0 = cc * DQC + j * 64
                    Tx.copy_async(k_out(p, dK, b, ln, n0, BN, hk, k0, 64), sm.Ks[:, k0:k0 + 64])
                    Tx.copy_async(k_out(p, dV, b, ln, n0, BN, hk, k0, 64), sm.Vs[:, k0:k0 + 64])
                T.ptx.bulk_wait_group(0)

    @T.macro
    def consume(dK, dV, sm, rg, c, n0, hk, b, ln, n_steps):
        Tx.wg.fill(rg.dvacc, T.float32(0))
        Tx.wg.fill(rg.dkacc, T.float32(0))
        T.ptx.mbarrier_wait_parity(sm.kv[0], 0)
        if p.packed:
            if ln[1] - n0 < BN:                      # keys past the sequence's end (its neighbour's)
                zero_tails(p, [sm.Ks, sm.Vs], False, 0, ln[1] - n0)
        walk(p, step, (sm, rg, c, n0, hk, b, ln), n0, ln, n_steps)
        epilogue(dK, dV, sm, rg, c, n0, hk, b, ln)

    return consume


def build_kernel(p, scale, SQT, SKT, strides=None, grad_strides=None, pdl=False, dq_strides=None):
    """The ``@T.prim_func`` of plan ``p`` for tensors of ``SQT`` / ``SKT`` rows and softmax scale ``scale``
    (``strides``: the checked strides of ``Q``, ``K``, ``V``, ``dO``, or None; ``grad_strides``: those of ``dK``,
    ``dV``, or None; ``pdl``: launched with programmatic dependent launch; ``dq_strides``: the checked batch and
    token strides of ``dQ`` with ``fuse_dq``, or None for a dense one)."""
    B, H, HKV, D, dtype = p.B, p.H, p.HKV, p.D, p.dtype
    qs, ks, vs, ds = strides or (None,) * 4
    dks, dvs = grad_strides or (None,) * 2
    DKT, DVT = tensor((B, SKT, HKV, D), dtype, dks), tensor((B, SKT, HKV, D), dtype, dvs)
    lead = () if p.packed else (B,)
    QT, KT, VT, DT = (tensor(lead + (SQT, H, D), dtype, qs), tensor(lead + (SKT, HKV, D), dtype, ks),
                      tensor(lead + (SKT, HKV, D), dtype, vs), tensor(lead + (SQT, H, D), dtype, ds))
    BM, BN, ST, NC, DQC = p.BM, p.BN, p.STAGES, p.NC, p.dq_cols
    SQP = p.q_blocks * BM
    roles = WarpRoles(p.threads, *p.regs, kernel="attention_bwd_sm90")
    produce = producer_part(p)
    KVC = p.kv_split == "cols"
    consume = consumer_cols_part(p, scale) if KVC else consumer_part(p, scale)
    write, convert = dq_writer_part(p)
    SW = BM // NC if KVC else BM                 # columns of a consumer's S^T / dP^T
    DW = D // NC if KVC else D                   # columns of a consumer's dK / dV
    ACC, DACC, OCH = wgmma_accumulator(SW), wgmma_accumulator(DW), wgmma_accumulator(64)
    # dQ staging: 128-byte-swizzled boxes of 32 floats (2-way bank conflicts on the accumulator's stores, not 4)
    DQL = tile_layout(64, DQC, NC, dtype="float32")

    @T.macro
    def writer(dQacc, SEM, sm, c, b, ln, n0, hk, n_steps):
        if T.elect_one():
            write(dQacc, SEM, sm, c, b, ln, n0, hk, n_steps)
        if p.fuse_dq:
            T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
            T.ptx.barrier_arrive(5 + c, 128 + 32)

    @T.macro
    def run_roles(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, sm, rg, n0, hk, b, ln, n_steps):
        wg = T.warpgroup_id()
        if wg == 0:
            roles.enter_producer()
            # one if / else chain, so that no role's values are live through another's code (24 registers)
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    produce(Q, K, V, dO, LSE, DL, sm, n0, hk, b, ln, n_steps)
            elif T.warp_id_in_wg() == 1:             # warp 1 + c: consumer c's dQ writer (NC = 2)
                writer(dQacc, SEM, sm, 0, b, ln, n0, hk, n_steps)
            elif T.warp_id_in_wg() == 2:
                writer(dQacc, SEM, sm, 1, b, ln, n0, hk, n_steps)
        else:
            roles.enter_consumer()
            consume(dK, dV, sm, rg, wg - 1, n0, hk, b, ln, n_steps)
            if p.fuse_dq:
                convert(dQacc, dQ, sm, rg, wg - 1, b, ln, n0, hk, n_steps)

    @T.macro
    def body(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, CU):
        Ks = T.alloc_shared((BN, D), dtype, layout=tile_layout(BN, D, swizzle=2 * p.k_box))
        Vs = T.alloc_shared((BN, D), dtype, layout=tile_layout(BN, D))
        Qs = T.alloc_shared((ST, BM, D), dtype, layout=tile_layout(BM, D, ST))
        dOs = T.alloc_shared((ST, BM, D), dtype, layout=tile_layout(BM, D, ST))
        dSs = T.alloc_shared((p.ds_bufs, BN, BM), dtype, layout=tile_layout(BN, BM, p.ds_bufs))
        dQs = T.alloc_shared((NC, 64, DQC), "float32", layout=DQL)
        Ls = T.alloc_shared((ST, BM), "float32")
        Ds = T.alloc_shared((ST, BM), "float32")
        q_full = T.alloc_shared((ST,), "uint64")
        q_empty = T.alloc_shared((ST,), "uint64")
        kv = T.alloc_shared((1,), "uint64")
        kv_empty = T.alloc_shared((1,), "uint64")
        dq_full0 = T.alloc_shared((1,), "uint64")
        dq_empty0 = T.alloc_shared((1,), "uint64")
        dq_full1 = T.alloc_shared((1,), "uint64")
        dq_empty1 = T.alloc_shared((1,), "uint64")
        dqr = (StageRing(dq_full0, dq_empty0, 1), StageRing(dq_full1, dq_empty1, 1))    # (NC = 2)
        counts = None
        if p.fuse_dq:
            counts = T.alloc_shared((NC, p.count_slots), "uint16")
        Ps = dSs                                     # P^T goes through shared memory only when kv_split="cols"
        if KVC:
            Ps = T.alloc_shared((2, BN, BM), dtype, layout=tile_layout(BN, BM, 2))
        sm = Tiles(Ks=Ks, Vs=Vs, Qs=Qs, dOs=dOs, dSs=dSs, dQs=dQs, Ls=Ls, Ds=Ds, qr=StageRing(q_full, q_empty, ST),
                   kv=kv, kvr=StageRing(kv, kv_empty, 1), Ps=Ps, dqr=dqr, counts=counts)
        sacc = T.alloc_local((64, SW), "float32", layout=ACC)
        dpacc = T.alloc_local((64, SW), "float32", layout=ACC)
        pfr = T.alloc_local((64, SW), dtype, layout=ACC)
        dsfr = T.alloc_local((64, SW), dtype, layout=ACC)
        dvacc = T.alloc_local((64, DW), "float32", layout=DACC)
        dkacc = T.alloc_local((64, DW), "float32", layout=DACC)
        och = pfr                                    # the epilogue's 64-column chunks reuse P^T's registers
        if BM != 64:
            och = T.alloc_local((64, 64), dtype, layout=OCH)
        lcol = T.alloc_local((SW,), "float32", layout=col_vector(SW))
        dcol = lcol                                  # D's columns, read once LSE's are used up
        if KVC:                                      # kv_split="cols": dQ (64 x dq_cols) is wider than S^T
            dq = T.alloc_local((64, DQC), "float32", layout=wgmma_accumulator(DQC))
        elif DQC == SW:                              # dQ (64 x dq_cols) reuses dP^T's registers ...
            dq = dpacc
        else:                                        # ... or their first dq_cols columns (head dim 64, by columns)
            dq = dpacc[:, 0:DQC]
        # the conversion's tiles (float32, then dtype) over dV's and dK's registers: used past the epilogue
        cv = dvacc.alias((64, DQC), layout=convert_layout(DQC))
        cvo = dkacc.alias((64, DQC), dtype, layout=convert_layout(DQC))
        rg = Tiles(sacc=sacc, dpacc=dpacc, pfr=pfr, dsfr=dsfr, dvacc=dvacc, dkacc=dkacc, och=och, lcol=lcol,
                   dcol=dcol, dq=dq, cv=cv, cvo=cvo)
        if pdl:         # the previous kernel's stores (D, the zeroed dQacc) are visible past this wait
            T.ptx.griddepcontrol_wait()
        kb, hk, b = cta_block(p)
        n0 = kb * BN
        ln = lengths(p, CU, b, SQT, SKT)
        if p.packed:        # read cu_seqlens once, into registers: every later use is a register, not a load
            lq, lk, q0, k0 = ln
            ln = (lq, lk, q0, k0)
        _, nq, _, _ = query_walk(p, n0, hk, 0, ln)
        n_steps = nq * p.group
        setup_barriers([(sm.qr, 1, 4 * NC), [(sm.kvr, 1, 1), (dqr[0], 1, 1), (dqr[1], 1, 1)]], 1, False)
        if p.packed:
            if n0 < ln[1]:                           # (a CTA past its sequence's keys has nothing to do)
                run_roles(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, sm, rg, n0, hk, b, ln, n_steps)
        else:
            run_roles(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, sm, rg, n0, hk, b, ln, n_steps)

    if p.packed:
        XQ, XK = p.q_blocks * BM, p.kv_blocks * BN
        QV = TileLayout(S[(SQT + 1, XQ, H, D) : (H * D, H * D, D, 1)])
        KV = TileLayout(S[(SKT + 1, XK, HKV, D) : (HKV * D, HKV * D, D, 1)])
        LT = T.Tensor((H, B, XQ), "float32")
        KVT = T.Tensor((SKT + 1, XK, HKV, D), dtype, layout=KV)
        QAT = T.Tensor((SQT + 1, XQ, H, D), "float32", layout=QV)
        SEMT, CUT = T.Tensor((B, H, p.q_blocks, 2), "int32"), T.Tensor((B + 1,), "int32")
        if p.fuse_dq:
            @T.prim_func
            def attention_bwd_packed_fused_sm90_kernel(Q: QT, K: KT, V: VT, dO: DT, LSE: LT, DL: LT, dK: KVT, dV: KVT,
                                                       dQacc: QAT, SEM: SEMT,
                                                       dQ: T.Tensor((SQT + 1, XQ, H, D), dtype, layout=QV),
                                                       CUQ: CUT, CUK: CUT):
                T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
                body(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, (CUQ, CUK))

            return attention_bwd_packed_fused_sm90_kernel

        @T.prim_func
        def attention_bwd_packed_sm90_kernel(Q: QT, K: KT, V: VT, dO: DT, LSE: LT, DL: LT, dK: KVT, dV: KVT,
                                             dQacc: QAT, SEM: SEMT, CUQ: CUT, CUK: CUT):
            T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
            body(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, None, (CUQ, CUK))

        return attention_bwd_packed_sm90_kernel

    LT = T.Tensor((B, H, SQP), "float32")
    QAT, SEMT = T.Tensor((B, SQT, H, D), "float32"), T.Tensor((B, H, p.q_blocks, 2), "int32")
    if p.fuse_dq:
        sb, ss = dq_strides or (p.SQ * H * D, H * D)
        DQT = tensor((B, p.SQ, H, D), dtype, (sb, ss, D, 1))

        @T.prim_func
        def attention_bwd_fused_sm90_kernel(Q: QT, K: KT, V: VT, dO: DT, LSE: LT, DL: LT, dK: DKT, dV: DVT,
                                            dQacc: QAT, SEM: SEMT, dQ: DQT):
            T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
            body(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, dQ, None)

        return attention_bwd_fused_sm90_kernel

    @T.prim_func
    def attention_bwd_sm90_kernel(Q: QT, K: KT, V: VT, dO: DT, LSE: LT, DL: LT, dK: DKT, dV: DVT, dQacc: QAT,
                                  SEM: SEMT):
        T.launch(grid=p.grid, threads=p.threads, pdl=pdl)
        body(Q, K, V, dO, LSE, DL, dK, dV, dQacc, SEM, None, None)

    return attention_bwd_sm90_kernel


@tirxpy.jit
def example():
    """The kernel ``python -m tirxpy compile tirxpy_kernels/attention_bwd_sm90.py`` builds: head dim 128, 4096
    tokens, 16 heads, batch 8, causal."""
    return attention_bwd_sm90(8, 16, 16, 4096, 4096, 128, causal=True)
