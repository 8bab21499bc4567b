"""Launch plans of the Hopper attention kernel (:mod:`kernels.attention_sm90`): the measured defaults
per head dim and mask, and :func:`plan`, which resolves and checks every schedule option of a problem
before anything is built (ValueError naming what to change).

    >>> p = plan(32, 16, 16, 1024, 1024, 64, causal=True)
    >>> p["BN"], p["STAGES"], p["NC"], p["chain"], p["pingpong"], p["grid"]
    (128, 3, 2, True, False, (132, 1, 1))
"""
from __future__ import annotations

from .errors import KernelConfigError, flag_option, int_option
from .schedule import SM_COUNT_H100
from tirxpy.lang.schedule import cdiv, persistent_units

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256)
SMEM_LIMIT = 232448  # sm_90 dynamic shared memory per CTA (227 KiB)


def default_config(D, causal=False, SK=None):
    """``(BN, STAGES, NC)`` per head dim: key block rows, ring stages, consumer warpgroups.

    Measured on the H100 (docs/performance.md, 2026-11-22): 3 stages or BN = 176 at head dim 128
    were within noise of these or slower across sequence lengths; at head dim 64, 3 stages gained
    8% at S = 1k with CHAIN and were even elsewhere, 3 consumers (NC = 3) lost up to 30% causal; at
    head dim 256, BN = 80 beat BN = 64 by 2-8%, except causal with at most 1024 keys: there 64-key
    blocks end where the 128-row query tiles do, so the diagonal blocks hold 6% fewer computed
    scores than 80-key ones (S = 1k: +6-9% over BN = 80; 1.5k: -2%; 2k: -7%).

        >>> default_config(256), default_config(256, causal=True, SK=1024)
        ((80, 2, 2), (64, 2, 2))
    """
    if D == 256 and causal and SK is not None and SK <= 1024:
        return 64, 2, 2
    return {64: (128, 3, 2), 128: (128, 2, 2), 256: (80, 2, 2)}[D]


def default_pingpong(D, causal, NC=2, OVERLAP=True, CHAIN=False, BN=None):
    """Whether the two consumer warpgroups take turns on the tensor cores by default: for head dim
    256, and for causal masks without CHAIN. With the softmax overlapping the warpgroup's own P V
    (the loop below), non-causal head dims 64 / 128 ran 2-6% faster without the turn-taking
    barriers on the H100; with CHAIN, causal head dims 64 / 128 ran 2-4% faster without them (S =
    4k), one tile per CTA (S = 16k) causal ran faster with them. Not for causal head dim 256 with
    64-key blocks (:func:`default_config`'s short causal case: +1-2.5% without the turns, S = 1k)."""
    if D == 256 and causal and BN == 64:
        return False
    return NC == 2 and OVERLAP and (D == 256 or (causal and not CHAIN))


def default_lazy(D):
    """Whether O is rescaled lazily by default (:func:`~kernels.attention_sm90.attention_sm90`'s ``LAZY``):
    at head dim 256, where the rescale is 128 multiplies per thread and key block, 3.2 per score of an
    80-key block (H100, same process: +0-3.5%). At head dims 64 / 128 the branch around the rescale cost
    more than it saved (-1-4% at 128, -15-25% at 64)."""
    return D == 256


def default_fold(D, causal):
    """Whether the matrix products use the ``wgmma_folded`` variant by default
    (:func:`~kernels.attention_sm90.attention_sm90`'s ``FOLD``): for causal head dim 256. Its descriptors
    take one uniform add per k-step and operand (the head-dim-256 key-block loop: 540 instructions instead
    of 644), and the H100 ran causal head dim 256 1-3% faster with it in four same-process A/B calls (S = 1k
    / 2k / 4k); elsewhere the fewer instructions moved how ptxas scheduled the loop, from -3.2% (head dim 64
    causal, 1k) to +2.5%.

        >>> default_fold(256, True), default_fold(256, False), default_fold(128, True)
        (True, False, False)
    """
    return D == 256 and causal


def default_trim(D, causal, SK, BN, PINGPONG, CHAIN, OVERLAP=True):
    """Whether each consumer stops at its own rows' last key block by default
    (:func:`~kernels.attention_sm90.attention_sm90`'s ``TRIM``): for the short causal head dim 256 case of
    :func:`default_config` (64-key blocks, no turns), where the first consumer of a 128-row tile skips one
    block in every tile."""
    return D == 256 and causal and BN == 64 and SK <= 1024 and OVERLAP and not PINGPONG and not CHAIN


def default_tail(MT, D=None):
    """Whether a persistent causal walk deals its last pairs' query tiles one by one, heaviest first
    (:func:`~kernels.attention_sm90.attention_sm90`'s ``TAIL``), by default: from 32 query tiles on (S >= 4k
    at 128-row tiles), and at head dims 64 and 256 up to 8 query tiles (S <= 1k). H100, same process, TAIL=1
    against 0: causal S = 4k head dim 128 +3.0 / +3.5% (two runs), 256 +1.1%, 64 +0.2%; 8k head dim 128 +1.8%
    (twelfth session). S = 1k (nineteenth session, five and three same-process comparisons): head dim 64
    +1.2 to +2.1%, 256 +1.2 to +2.1%, but 128 -2.1% (twice); S = 2k: 64 -0.6%, 128 +1.6%, 256 -0.2%, so off
    between 9 and 31 query tiles. Shorter sequences than 1k were not measured and follow 1k.

        >>> default_tail(8, 128), default_tail(8, 64), default_tail(16, 64), default_tail(32, 128)
        (False, True, False, True)
    """
    return MT >= 32 or (MT <= 8 and D in (64, 256))


def check_options(BN=None, STAGES=None, NC=None, PINGPONG=None, PERSIST=None, CHAIN=None, sms=SM_COUNT_H100,
                  OSTAGE=None, LAZY=None, TRIM=None, TAIL=None, FOLD=None):
    """Each schedule option of :func:`plan` on its own, its kind (``None`` is the default everywhere but
    ``sms``): :class:`~kernels.errors.KernelConfigError` naming the first bad one. :func:`plan` runs it first;
    :func:`kernels.attention` runs it before it plans.

        >>> check_options(BN=64, OSTAGE="kv", TAIL=1)
        >>> check_options(NC=True)
        Traceback (most recent call last):
        ...
        kernels.errors.KernelConfigError: attention_sm90: NC must be an int or None, got True (bool)
    """
    w = "attention_sm90"
    for name, v in (("BN", BN), ("STAGES", STAGES), ("NC", NC)):
        int_option(w, name, v, none=True)
    if isinstance(sms, bool) or not isinstance(sms, int) or sms < 1:
        raise KernelConfigError(f"attention_sm90: sms = {sms!r:.60} must be the GPU's SM count (a positive int)")
    for name, v in (("PINGPONG", PINGPONG), ("PERSIST", PERSIST), ("CHAIN", CHAIN), ("LAZY", LAZY), ("TRIM", TRIM),
                    ("TAIL", TAIL), ("FOLD", FOLD)):
        flag_option(w, name, v, none=True)
    if OSTAGE is not None and not (type(OSTAGE) is str and OSTAGE in ("own", "q", "kv")):
        raise KernelConfigError(f"attention_sm90: OSTAGE = {OSTAGE!r:.60}; use 'own' (O staged in its own buffer), 'q' "
                                "(over the tile's Q) or 'kv' (over the last key block's K / V stages)")


def plan(B, H, HKV, SQ, SK, D, dtype="bfloat16", BN=None, STAGES=None, NC=None, causal=False, OVERLAP=True,
         PINGPONG=None, PERSIST=None, CHAIN=None, sms=SM_COUNT_H100, OSTAGE=None, LAZY=None, TRIM=None, TAIL=None,
         FOLD=None):
    """Checked launch plan (raises ValueError with what to change). ``LAZY``, ``TRIM``, ``TAIL`` and
    ``FOLD`` (the schedule's, see :func:`kernels.attention_sm90.attention_sm90`; defaults
    :func:`default_lazy`, :func:`default_trim`, :func:`default_tail`, :func:`default_fold`) are resolved
    and checked here too. ``STAGES`` defaults to :func:`default_config`'s, but head dim 64 runs 2
    stages past 32 key blocks (past 16 when causal).

    ``PERSIST`` launches at most ``sms`` CTAs that walk the ``(query tile, head, batch)`` tiles;
    ``O`` is staged apart from ``Q`` (``OSTAGE``), so that the next tile's ``Q`` can load during this
    tile's epilogue. Causal CTAs walk pairs of query tiles ``(MT - 1 - j,
    j)``, which hold about equal numbers of key blocks (a plain static walk lost 3-14% to the hardware's
    dynamic CTA scheduling). Default: on where a tile has at most 32 key blocks (64 when causal).
    Measured on the H100, persistent vs one tile per CTA: head dim 128, S = 1k +13-23%, 4k +2-5%,
    16k -2-3% (so off there); causal S = 8k +3-4% at head dims 64 and 128; head dim 256 (same
    process), S = 1k +6%, 2k +4%, causal 1k / 2k / 4k +2 / +3 / +4% (with ``OSTAGE="kv"``; over
    Q it was -3% causal at 1k).

    ``CHAIN`` (persistent, overlapped loop only) adds a second ``(BM, D)`` Q buffer so that each
    tile's first key block runs under the previous tile's last ``P V`` (module docstring); default:
    on where that buffer fits (head dims 64 / 128 at the default tiles).

    ``OSTAGE``: where ``O`` is staged for its TMA store. ``"own"``: a ``(BM, D)`` buffer of its own
    (persistent only; the next tile's Q loads while this tile's O is stored); ``"q"``: over the
    tile's Q, which every ``S`` of the tile has finished reading. A persistent CTA then reloads Q
    only once the store has read it (``q_empty`` waits for that), while the next tile's first K / V
    blocks load under the epilogue. ``"kv"``: consumer 0's rows over the tile's last K stage and
    consumer 1's over its last V stage (``BN >= 64``, ``NC <= 2``, overlapped loop), once both
    consumers are done with them (named barrier 5); each stage goes back to the producer when its
    store has read it, so Q reloads as early as with ``"own"`` and only the next tile's second K /
    V block waits for the store. Default: ``"own"`` where persistent and it fits, ``"kv"`` where
    persistent and it does not (head dim 256: same process, causal 1k / 2k / 4k +2.5 / +2.7 / +1%
    over ``"q"``, non-causal within 1%), else ``"q"``."""
    check_options(BN, STAGES, NC, PINGPONG, PERSIST, CHAIN, sms, OSTAGE, LAZY, TRIM, TAIL, FOLD)
    if type(dtype) is not str or dtype not in DTYPES:
        raise KernelConfigError(f"attention_sm90: dtype must be one of {DTYPES}, got {dtype!r:.60}")
    for name, x in (("B", B), ("H", H), ("HKV", HKV), ("SQ", SQ), ("SK", SK), ("D", D)):
        int_option("attention_sm90", name, x)
    bn, st, nc = default_config(D, causal, SK) if D in HEAD_DIMS else (None, None, None)
    BN, NC = (bn if BN is None else BN), (nc if NC is None else NC)
    if D not in HEAD_DIMS:
        raise KernelConfigError(f"attention_sm90: head dim {D} is not supported; use one of {HEAD_DIMS}")
    if min(B, H, HKV, SQ, SK) <= 0:
        raise KernelConfigError(f"attention_sm90: B, H, HKV, SQ, SK must be positive, got {(B, H, HKV, SQ, SK)}")
    if H % HKV:
        raise KernelConfigError(f"attention_sm90: {H} query heads do not split into {HKV} key / value head groups "
                                "(grouped-query attention needs H % HKV == 0)")
    if not (16 <= BN <= 256 and BN % 16 == 0):
        raise KernelConfigError(f"attention_sm90: BN = {BN} must be a multiple of 16 in [16, 256] (the k of P V)")
    if NC not in (1, 2, 3):
        raise KernelConfigError(f"attention_sm90: NC = {NC} consumer warpgroups; use 1, 2 or 3")
    if STAGES is None:      # head dim 64: the third stage pays off with CHAIN (S = 1k +6%), not one tile per
        # CTA (16k: -4%) past 32 key blocks, nor causal past 16 (H100, 2026-11-24: S = 4k 2 stages +5-8%,
        # 2k 3 stages +3%)
        STAGES = 2 if D == 64 and cdiv(SK, BN) > (16 if causal else 32) else st
    if STAGES < 1:
        raise KernelConfigError(f"attention_sm90: STAGES = {STAGES} must be at least 1")
    if not isinstance(sms, int) or sms < 1:
        raise KernelConfigError(f"attention_sm90: sms = {sms!r} must be the GPU's SM count (a positive int)")
    BM = 64 * NC
    smem = (BM * D + 2 * STAGES * BN * D) * 2 + 1024 + 8 * (2 + 4 * STAGES)
    if smem > SMEM_LIMIT:
        raise KernelConfigError(f"attention_sm90: Q ({BM} x {D}) and {STAGES} K / V stages of {BN} rows need {smem} bytes "
                                f"of shared memory, over the {SMEM_LIMIT} a CTA may have: use fewer stages or a smaller BN")
    fits = smem + BM * D * 2 <= SMEM_LIMIT
    if PERSIST is None:         # the H100 measurements in the docstring
        nb = cdiv(SK, BN)
        PERSIST = nb <= (64 if causal else 32)
    PERSIST = bool(PERSIST)
    if OSTAGE is None:
        OSTAGE = ("own" if fits else "kv") if PERSIST else "q"
    if OSTAGE not in ("own", "q", "kv"):
        raise KernelConfigError(f"attention_sm90: OSTAGE = {OSTAGE!r}; use 'own' (O staged in its own buffer), 'q' "
                                "(over the tile's Q) or 'kv' (over the last key block's K / V stages)")
    if OSTAGE == "kv" and not (OVERLAP and NC <= 2 and BN >= 64):
        raise KernelConfigError(f"attention_sm90: OSTAGE='kv' stages consumer 0's O rows over the last K stage and consumer "
                                f"1's over the last V stage: it needs the overlapped loop, NC <= 2 and BN >= 64 "
                                f"(got OVERLAP={OVERLAP}, NC={NC}, BN={BN})")
    if OSTAGE == "own" and not PERSIST:
        raise KernelConfigError("attention_sm90: OSTAGE='own' is for persistent CTAs (PERSIST=True); one tile per CTA "
                                "stages O over Q, which needs no buffer of its own")
    if OSTAGE == "own" and not fits:
        raise KernelConfigError(f"attention_sm90: OSTAGE='own' stages O in its own ({BM} x {D}) buffer, {smem + BM * D * 2} "
                                f"bytes of shared memory in all, over the {SMEM_LIMIT} a CTA may have: use OSTAGE='q', "
                                "fewer stages or a smaller BN")
    chain_smem = smem + 2 * BM * D * 2 + 16     # the O buffer, a second Q buffer and its two barriers
    if CHAIN is None:
        CHAIN = PERSIST and OVERLAP and OSTAGE == "own" and chain_smem <= SMEM_LIMIT
    CHAIN = bool(CHAIN)
    if CHAIN and not (PERSIST and OVERLAP):
        raise KernelConfigError("attention_sm90: CHAIN runs a tile's first key block under the previous tile's last P V, "
                                "which needs persistent CTAs (PERSIST=True) and the overlapped loop (OVERLAP=True)")
    if CHAIN and chain_smem > SMEM_LIMIT:
        raise KernelConfigError(f"attention_sm90: CHAIN double-buffers Q ({BM} x {D}) next to the O buffer, {chain_smem} "
                                f"bytes of shared memory in all, over the {SMEM_LIMIT} a CTA may have: use CHAIN=False, "
                                "fewer stages or a smaller BN")
    if CHAIN and OSTAGE != "own":
        raise KernelConfigError("attention_sm90: CHAIN stores a tile's O while the next tile's Q is in use, so O needs "
                                "its own buffer: use OSTAGE='own' (or CHAIN=False)")
    PINGPONG = default_pingpong(D, causal, NC, OVERLAP, CHAIN, BN) if PINGPONG is None else bool(PINGPONG)
    if PINGPONG and (NC != 2 or not OVERLAP):
        raise KernelConfigError("attention_sm90: PINGPONG schedules two consumer warpgroups (NC = 2) in the overlapped "
                                "loop (OVERLAP=True)")
    if LAZY is None:
        LAZY = default_lazy(D)
    if LAZY not in (True, False, 0, 1):
        raise KernelConfigError(f"attention_sm90: LAZY must be True or False (or None: the default), got {LAZY!r}")
    if TRIM is None:
        TRIM = default_trim(D, causal, SK, BN, PINGPONG, CHAIN, OVERLAP)
    if TRIM not in (True, False, 0, 1):
        raise KernelConfigError(f"attention_sm90: TRIM must be True or False (or None: the default), got {TRIM!r}")
    TRIM = bool(TRIM) and causal        # without a causal mask every consumer reads every key block
    if TRIM and (PINGPONG or CHAIN or not OVERLAP):
        raise KernelConfigError("attention_sm90: TRIM lets each consumer stop at its own rows' last key block, which needs "
                                "the overlapped loop without ping-pong turns (they count one turn per block) and without "
                                f"CHAIN; got PINGPONG={PINGPONG}, CHAIN={CHAIN}, OVERLAP={OVERLAP}: pass "
                                "PINGPONG=False, CHAIN=False")
    if TAIL is None:
        TAIL = default_tail(cdiv(SQ, BM), D)
    if TAIL not in (True, False, 0, 1):
        raise KernelConfigError(f"attention_sm90: TAIL must be True or False (or None: the default), got {TAIL!r}")
    TAIL = bool(TAIL) and causal and PERSIST    # (a walk of pairs exists only for persistent causal CTAs)
    if FOLD not in (None, True, False, 0, 1):
        raise KernelConfigError(f"attention_sm90: FOLD must be True or False (or None: the default), got {FOLD!r}")
    FOLD = default_fold(D, causal) if FOLD is None else bool(FOLD)
    tiles = cdiv(SQ, BM) * H * B
    work = cdiv(cdiv(SQ, BM), 2) * H * B if causal else tiles     # causal: pairs of query tiles
    grid = (persistent_units(work, sms), 1, 1) if PERSIST else (cdiv(SQ, BM), H, B)
    used = chain_smem if CHAIN else smem + (BM * D * 2 if OSTAGE == "own" else 0)
    return {"BM": BM, "BN": BN, "STAGES": STAGES, "NC": NC, "smem": used, "grid": grid, "threads": 128 * (1 + NC),
            "pingpong": PINGPONG, "persist": PERSIST, "chain": CHAIN, "ostage": OSTAGE, "tiles": tiles,
            "work": work, "lazy": bool(LAZY), "trim": TRIM, "tail": TAIL, "fold": FOLD}
