"""Launch plans of the Hopper attention kernel (:mod:`tirxpy_kernels.attention_sm90`): the default of every schedule
option as a rule of the problem (head dim, mask, sequence length), and :func:`plan`, which resolves and checks
every option before anything is built (:class:`~tirxpy_kernels.errors.KernelConfigError` naming what to change) and
returns an :class:`AttentionPlan`, the one object the kernel is built from.

    >>> p = plan(32, 16, 16, 1024, 1024, 64, causal=True)
    >>> p.BN, p.STAGES, p.NC, p.chain, p.pingpong, p.grid
    (128, 3, 2, True, False, (132, 1, 1))

The measurements behind each rule are in docs/performance.md ("Attention defaults").
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

from tirxpy.lang.schedule import cdiv, persistent_units
from tirxpy.target import as_target

from .errors import KernelConfigError, flag_option, int_option, is_int, plain_ints, shown

#: The target the Hopper attention kernel is built for: a plan fits its shared memory per CTA, and its SM
#: count (an H100 SXM's) is the persistent grid's size where no device is given.
TARGET = as_target("sm_90a")
SMEM_LIMIT = TARGET.smem_per_cta
DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256)
MAX_SIZE = 2 ** 31 - 1      # B, H, HKV, SQ, SK and the tile count: the kernel's coordinates and tile walk are 32-bit
MAX_GRID_YZ = 65535         # the y and z extents of a grid: heads and batch of the one-tile-per-CTA grid
MAX_SCALE = 3.4028234663852886e38 / 1.4426950408889634     # scale * log2(e) is a float32 constant of the kernel


@dataclass(frozen=True)
class AttentionPlan:
    """Every constant the kernel is built from: the problem, the tiles, the schedule options (resolved), and
    the quantities derived from them. ``plan[name]`` reads a field too (``p["BM"]`` is ``p.BM``).

    Problem: ``B, H, HKV, SQ, SK, D, causal, dtype``. Tiles: ``BM`` query rows (``64 * NC``), ``BN`` key rows
    per block, ``STAGES`` K / V ring stages, ``NC`` consumer warpgroups, ``threads``, ``grid``, ``smem`` bytes,
    ``tiles`` query tiles in all, ``work`` units of work (causal persistent CTAs walk pairs of query tiles).
    Schedule (see :func:`plan`): ``pingpong, persist, chain, ostage, lazy, trim, tail, fold``. Derived:

    - ``q_buffers``: Q buffers, 2 with ``chain`` (the next tile's Q loads while this tile runs), else 1;
    - ``kv_blocks`` key blocks of the whole sequence, ``q_tiles`` query tiles of one head, ``units`` persistent
      CTAs (1 without ``persist``), ``group`` query heads per key / value head, ``d_chunks`` 64-column boxes
      of a row, ``ragged`` whether the last key block is partial;
    - ``o_own`` / ``o_over_kv``: O is staged in its own buffer / over the tile's last K and V stages;
      ``q_after_o``: a persistent CTA stages O over Q and reloads Q only once the O store has read it;
    - ``q_release_arrivals``: arrivals that free a Q buffer (one per consumer warp after its last ``S``, or
      one per consumer after its O store with ``q_after_o``);
    - ``regs``: the ``setmaxnreg`` split ``(producer, consumer)`` (:func:`default_regs`);
    - ``dispatch``: the wgmma variant of the matrix products (``"wgmma_folded"`` with ``fold``);
    - ``varlen``: packed variable-length sequences (:func:`plan`'s ``VARLEN``): ``B`` sequences whose starts
      and lengths the kernel reads from ``cu_seqlens``, ``SQ`` / ``SK`` their longest; ``xq``: the window of
      the output views (:func:`varlen_window` of ``SQ``; 0 without ``VARLEN``); ``per_cta``: the query tiles of
      one sequence a ``VARLEN`` CTA takes (:func:`plan`'s ``PAIRS``: 2, else 1)."""
    B: int
    H: int
    HKV: int
    SQ: int
    SK: int
    D: int
    causal: bool
    dtype: str
    BM: int
    BN: int
    STAGES: int
    NC: int
    threads: int
    grid: tuple
    smem: int
    tiles: int
    work: int
    pingpong: bool
    persist: bool
    chain: bool
    ostage: str
    lazy: bool
    trim: bool
    tail: bool
    fold: bool
    q_buffers: int
    kv_blocks: int
    q_tiles: int
    units: int
    group: int
    d_chunks: int
    ragged: bool
    o_own: bool
    o_over_kv: bool
    q_after_o: bool
    q_release_arrivals: int
    regs: tuple
    dispatch: str | None
    varlen: bool = False
    xq: int = 0
    per_cta: int = 1

    def __getitem__(self, name):
        if name not in _FIELDS:
            raise KeyError(f"AttentionPlan has no field {shown(name)}; its fields: {sorted(_FIELDS)}")
        return getattr(self, name)


_FIELDS = frozenset(f.name for f in fields(AttentionPlan))


def default_config(D, causal=False, SK=None):
    """``(BN, STAGES, NC)`` per head dim: key block rows, ring stages, consumer warpgroups. Two consumers of 64
    rows each (128-row query tiles); 128-key blocks at head dims 64 / 128, in 3 stages at 64 (2 at 128, where a
    third does not pay for its shared memory); 80-key blocks in 2 stages at head dim 256, except causal with at
    most 1024 keys: there 64-key blocks end where the 128-row query tiles do, so the diagonal blocks compute
    fewer masked scores. :func:`plan` lowers head dim 64 to 2 stages on long sequences.

        >>> default_config(256), default_config(256, causal=True, SK=1024)
        ((80, 2, 2), (64, 2, 2))
    """
    if D == 256 and causal and SK is not None and SK <= 1024:
        return 64, 2, 2
    return {64: (128, 3, 2), 128: (128, 2, 2), 256: (80, 2, 2)}[D]


def default_stages(D, causal, SK, BN, stages):
    """Ring stages: :func:`default_config`'s ``stages``, but 2 at head dim 64 past 32 key blocks (past 16 when
    causal), where tiles are long and a third stage no longer hides a load the second does not.

        >>> default_stages(64, False, 4096, 128, 3), default_stages(64, True, 4096, 128, 3)
        (3, 2)
    """
    return 2 if D == 64 and cdiv(SK, BN) > (16 if causal else 32) else stages


def default_persist(SK, BN, causal):
    """Whether CTAs are persistent by default: where a tile reads at most 32 key blocks (64 when causal), so
    that starting and finishing tiles (a large share of a short tile's time) overlap the next tile's loads;
    longer tiles have little of it to hide, and the hardware's dynamic CTA scheduling balances them better
    than a static walk."""
    return cdiv(SK, BN) <= (64 if causal else 32)


def default_ostage(persist, own_fits):
    """Where O is staged by default: ``"own"`` (its own buffer) where persistent and it fits, ``"kv"`` (over
    the last K / V stages) where persistent and it does not (head dim 256), ``"q"`` (over Q) for one tile per
    CTA, whose Q is not read again."""
    return ("own" if own_fits else "kv") if persist else "q"


def default_pingpong(D, causal, NC=2, CHAIN=False, BN=None, per_cta=1):
    """Whether the two consumer warpgroups take turns on the tensor cores by default: for head dim 256, and for
    causal masks without CHAIN and one tile per CTA; not for causal head dim 256 with 64-key blocks
    (:func:`default_config`'s short causal case). Each warpgroup already overlaps its softmax with its own
    ``P V``; the turns pay where the softmax is long next to the GEMMs (head dim 256, causal diagonal blocks),
    and chained tiles, or a ``VARLEN`` pair of tiles (``per_cta = 2``), keep the tensor cores busy without them.

        >>> default_pingpong(128, True), default_pingpong(128, True, CHAIN=True), default_pingpong(128, True, per_cta=2)
        (True, False, False)
    """
    if D == 256 and causal and BN == 64:
        return False
    return NC == 2 and (D == 256 or (causal and not CHAIN and per_cta == 1))


def default_lazy(D):
    """Whether O is rescaled lazily by default (:func:`~tirxpy_kernels.attention_sm90.attention_sm90`'s ``LAZY``): at
    head dim 256, where the rescale is 128 multiplies per thread and key block. At head dims 64 / 128 the
    branch around the rescale costs more than the multiplies it skips."""
    return D == 256


def default_fold(D, causal):
    """Whether the matrix products use the ``wgmma_folded`` variant by default
    (:func:`~tirxpy_kernels.attention_sm90.attention_sm90`'s ``FOLD``): for causal head dim 256, whose key-block loop
    it shortens by one uniform add per k-step and operand in place of about five; elsewhere the shorter loop
    schedules no better.

        >>> default_fold(256, True), default_fold(256, False), default_fold(128, True)
        (True, False, False)
    """
    return D == 256 and causal


def default_trim(D, causal, SK, BN, PINGPONG, CHAIN):
    """Whether each consumer stops at its own rows' last key block by default
    (:func:`~tirxpy_kernels.attention_sm90.attention_sm90`'s ``TRIM``): for the short causal head dim 256 case of
    :func:`default_config` (64-key blocks, no turns), where the first consumer of a 128-row tile skips one
    block in every tile."""
    return D == 256 and causal and BN == 64 and SK <= 1024 and not PINGPONG and not CHAIN


def default_tail(MT, D=None):
    """Whether a persistent causal walk deals its last pairs' query tiles one by one, heaviest first
    (:func:`~tirxpy_kernels.attention_sm90.attention_sm90`'s ``TAIL``), by default: from 32 query tiles on (S >= 4k at
    128-row tiles), where the pairs' last round would leave most CTAs idle, and at head dims 64 and 256 up to 8
    query tiles (S <= 1k); off between 9 and 31 query tiles and at head dim 128 up to 8, where dealing single
    tiles did not beat the pairs' last round.

        >>> default_tail(8, 128), default_tail(8, 64), default_tail(16, 64), default_tail(32, 128)
        (False, True, False, True)
    """
    return MT >= 32 or (MT <= 8 and D in (64, 256))


def default_regs(NC, persist, D, ostage):
    """``(producer, consumer)`` registers per thread of the ``setmaxnreg`` split: ``(40, 232)`` with one
    consumer, ``(24, 240)`` with two; ``(48, 224)`` for a persistent producer at head dim 256, or whose Q or K /
    V loads wait on the O store (``ostage`` ``"q"`` / ``"kv"``): its tile walk spills with fewer."""
    if NC == 2 and persist and (D == 256 or ostage != "own"):
        return 48, 224
    return {1: (40, 232), 2: (24, 240)}[NC]


def check_options(BN=None, STAGES=None, NC=None, PINGPONG=None, PERSIST=None, CHAIN=None, sms=TARGET.sm_count,
                  OSTAGE=None, LAZY=None, TRIM=None, TAIL=None, FOLD=None):
    """Each schedule option of :func:`plan` on its own, its kind (``None`` is the default everywhere but
    ``sms``): :class:`~tirxpy_kernels.errors.KernelConfigError` naming the first bad one. :func:`plan` runs it first;
    :func:`tirxpy_kernels.attention` runs it before it plans.

        >>> check_options(BN=64, OSTAGE="kv", TAIL=1)
        >>> check_options(NC=True)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: attention_sm90: NC must be an int or None, got True (bool)
    """
    w = "attention_sm90"
    for name, v in (("BN", BN), ("STAGES", STAGES), ("NC", NC)):
        int_option(w, name, v, none=True)
    if BN is not None and not (16 <= BN <= 256 and BN % 16 == 0):
        raise KernelConfigError(f"attention_sm90: BN = {shown(BN, 60)} must be a multiple of 16 in [16, 256] "
                                "(the k of P V)")
    if NC is not None and NC not in (1, 2):
        raise KernelConfigError(f"attention_sm90: NC = {shown(NC, 60)} consumer warpgroups; use 1 or 2")
    if STAGES is not None and STAGES < 1:
        raise KernelConfigError(f"attention_sm90: STAGES = {shown(STAGES, 60)} must be at least 1")
    if not is_int(sms) or sms < 1:
        raise KernelConfigError(f"attention_sm90: sms = {shown(sms, 60)} must be the GPU's SM count (a positive int)")
    for name, v in (("PINGPONG", PINGPONG), ("PERSIST", PERSIST), ("CHAIN", CHAIN), ("LAZY", LAZY), ("TRIM", TRIM),
                    ("TAIL", TAIL), ("FOLD", FOLD)):
        flag_option(w, name, v, none=True)
    if OSTAGE is not None and not (type(OSTAGE) is str and OSTAGE in ("own", "q", "kv")):
        raise KernelConfigError(f"attention_sm90: OSTAGE = {shown(OSTAGE, 60)}; use 'own' (O staged in its own "
                                "buffer), 'q' (over the tile's Q) or 'kv' (over the last key block's K / V stages)")


def _check_problem(B, H, HKV, SQ, SK, D, dtype):
    if type(dtype) is not str or dtype not in DTYPES:
        raise KernelConfigError(f"attention_sm90: dtype must be one of {DTYPES}, got {shown(dtype, 60)}")
    for name, x in (("B", B), ("H", H), ("HKV", HKV), ("SQ", SQ), ("SK", SK), ("D", D)):
        int_option("attention_sm90", name, x, hi=MAX_SIZE)     # (a size past it would wrap a 32-bit coordinate)
    if D not in HEAD_DIMS:
        raise KernelConfigError(f"attention_sm90: head dim {shown(D, 60)} is not supported; use one of {HEAD_DIMS}")
    if min(B, H, HKV, SQ, SK) <= 0:
        raise KernelConfigError(f"attention_sm90: B, H, HKV, SQ, SK must be positive, got {shown((B, H, HKV, SQ, SK))}")
    if H % HKV:
        raise KernelConfigError(f"attention_sm90: {H} query heads do not split into {HKV} key / value head groups "
                                "(grouped-query attention needs H % HKV == 0)")


def _check_staging(OSTAGE, PERSIST, BN, BM, D, smem, own_fits):
    if OSTAGE == "kv" and not BN >= 64:
        raise KernelConfigError(f"attention_sm90: OSTAGE='kv' stages consumer 0's O rows over the last K stage and consumer "
                                f"1's over the last V stage: it needs BN >= 64 (got BN={BN})")
    if OSTAGE == "own" and not PERSIST:
        raise KernelConfigError("attention_sm90: OSTAGE='own' is for CTAs of several tiles (PERSIST=True, or VARLEN with "
                                "PAIRS); one tile per CTA stages O over Q, which needs no buffer of its own")
    if OSTAGE == "own" and not own_fits:
        raise KernelConfigError(f"attention_sm90: OSTAGE='own' stages O in its own ({BM} x {D}) buffer, {smem + BM * D * 2} "
                                f"bytes of shared memory in all, over the {SMEM_LIMIT} a CTA may have: use OSTAGE='q', "
                                "fewer stages or a smaller BN")


def _check_chain(CHAIN, PERSIST, OSTAGE, BM, D, chain_smem):
    if CHAIN and not PERSIST:
        raise KernelConfigError("attention_sm90: CHAIN runs a tile's first key block under the previous tile's last P V, "
                                "which needs persistent CTAs (PERSIST=True)")
    if CHAIN and chain_smem > SMEM_LIMIT:
        raise KernelConfigError(f"attention_sm90: CHAIN double-buffers Q ({BM} x {D}) next to the O buffer, {chain_smem} "
                                f"bytes of shared memory in all, over the {SMEM_LIMIT} a CTA may have: use CHAIN=False, "
                                "fewer stages or a smaller BN")
    if CHAIN and OSTAGE != "own":
        raise KernelConfigError("attention_sm90: CHAIN stores a tile's O while the next tile's Q is in use, so O needs "
                                "its own buffer: use OSTAGE='own' (or CHAIN=False)")


def plan(B, H, HKV, SQ, SK, D, dtype="bfloat16", BN=None, STAGES=None, NC=None, causal=False, PINGPONG=None,
         PERSIST=None, CHAIN=None, sms=TARGET.sm_count, OSTAGE=None, LAZY=None, TRIM=None, TAIL=None,
         FOLD=None, VARLEN=False, PAIRS=None) -> AttentionPlan:
    """The checked :class:`AttentionPlan` of one problem. Every option left ``None`` takes its default rule:

    - ``BN``, ``STAGES``, ``NC``: :func:`default_config`, :func:`default_stages`;
    - ``PERSIST`` (:func:`default_persist`): at most ``sms`` CTAs walk the ``(query tile, head, batch)`` tiles
      (:mod:`tirxpy_kernels.attention_walk`; causal: pairs of query tiles ``(MT - 1 - j, j)``, which hold about equal
      numbers of key blocks); the K / V ring and the Q buffer carry over from tile to tile;
    - ``OSTAGE`` (:func:`default_ostage`): where ``O`` is staged for its TMA store. ``"own"``: a ``(BM, D)``
      buffer (persistent only; the next tile's Q loads while this tile's O is stored). ``"q"``: over the tile's
      Q, which every ``S`` of the tile has finished reading; a persistent CTA then reloads Q only once the
      store has read it, while the next tile's first K / V blocks load under the epilogue. ``"kv"``: consumer
      0's rows over the tile's last K stage, consumer 1's over its last V stage (``BN >= 64``), once both
      consumers are done with them; each stage goes back to the producer when its store has read it;
    - ``CHAIN`` (persistent, ``OSTAGE="own"``; default where the second Q buffer fits, head dims 64 / 128): Q
      is double-buffered and each tile's first key block runs under the previous tile's last ``P V``;
    - ``PINGPONG``: :func:`default_pingpong`; ``LAZY``: :func:`default_lazy`; ``TRIM``: :func:`default_trim`;
      ``TAIL``: :func:`default_tail`; ``FOLD``: :func:`default_fold` (what each does:
      :func:`tirxpy_kernels.attention_sm90.attention_sm90`);
    - ``VARLEN``: ``B`` packed sequences of at most ``SQ`` query / ``SK`` key rows, each tile's start and length
      read from ``cu_seqlens`` (:mod:`tirxpy_kernels.attention_varlen_api`), not persistent (``PERSIST`` False):
      each CTA takes one slot of the tile map, whose CTAs the hardware deals out as SMs free up; ``grid`` here is
      the bound ``(ceil(SQ / BM), H, B)``, and :func:`tirxpy_kernels.attention_sm90.attention_sm90` launches one
      CTA per head and slot (:func:`tirxpy_kernels.attention_walk.varlen_slots`);
    - ``PAIRS`` (``VARLEN``; default where O's own buffer fits, head dims 64 / 128): a slot holds two query tiles of
      one sequence, its ``j``-th from the last and its ``j``-th (about equal work under a causal mask), run one
      after the other with O staged in its own buffer (``OSTAGE="own"``), so the second tile's Q and first K / V
      load under the first one's last blocks and epilogue, and a CTA's fixed costs are paid once per two tiles.

        >>> plan(3, 16, 16, 2048, 2048, 128, VARLEN=True).grid
        (16, 16, 3)
    """
    check_options(BN, STAGES, NC, PINGPONG, PERSIST, CHAIN, sms, OSTAGE, LAZY, TRIM, TAIL, FOLD)
    causal = flag_option("attention_sm90", "causal", causal)
    VARLEN = flag_option("attention_sm90", "VARLEN", VARLEN)
    PAIRS = flag_option("attention_sm90", "PAIRS", PAIRS, none=True)
    if PAIRS and not VARLEN:
        raise KernelConfigError("attention_sm90: PAIRS puts two query tiles of a packed sequence in one slot of the VARLEN "
                                "tile map: pass VARLEN=True, or leave PAIRS unset")
    if VARLEN and PERSIST:
        raise KernelConfigError("attention_sm90: VARLEN runs one slot of its tile map per CTA (each CTA reads its "
                                "sequence's start and length), not persistent CTAs; pass PERSIST=False or None")
    if VARLEN:
        PERSIST = False
    _check_problem(B, H, HKV, SQ, SK, D, dtype)
    B, H, HKV, SQ, SK, D, BN, STAGES, NC, sms = plain_ints(B, H, HKV, SQ, SK, D, BN, STAGES, NC, sms)
    bn, st, nc = default_config(D, causal, SK)
    BN, NC = (bn if BN is None else BN), (nc if NC is None else NC)
    STAGES = default_stages(D, causal, SK, BN, st) if STAGES is None else STAGES
    BM = 64 * NC
    smem = (BM * D + 2 * STAGES * BN * D) * 2 + 1024 + 8 * (2 + 4 * STAGES)
    if smem > SMEM_LIMIT:
        raise KernelConfigError(f"attention_sm90: Q ({BM} x {D}) and {STAGES} K / V stages of {BN} rows need {smem} bytes "
                                f"of shared memory, over the {SMEM_LIMIT} a CTA may have: use fewer stages or a smaller BN")
    own_fits = smem + BM * D * 2 <= SMEM_LIMIT
    if PERSIST is None:         # one tile per CTA only where its (tiles, H, B) grid can be launched
        PERSIST = default_persist(SK, BN, causal) or (not VARLEN and max(H, B) > MAX_GRID_YZ)
    PERSIST = bool(PERSIST)
    if not PERSIST and not VARLEN and max(H, B) > MAX_GRID_YZ:
        raise KernelConfigError(f"attention_sm90: PERSIST=False launches a (query tiles, H, B) grid, and H = {H}, "
                                f"B = {B} must be at most {MAX_GRID_YZ} there: pass PERSIST=True (or None)")
    per_cta = (2 if (own_fits if PAIRS is None else PAIRS) else 1) if VARLEN else 1
    if OSTAGE is None:
        OSTAGE = "own" if per_cta == 2 else default_ostage(PERSIST, own_fits)
    _check_staging(OSTAGE, PERSIST or per_cta == 2, BN, BM, D, smem, own_fits)
    chain_smem = smem + 2 * BM * D * 2 + 16     # the O buffer, a second Q buffer and its two barriers
    CHAIN = (PERSIST and OSTAGE == "own" and chain_smem <= SMEM_LIMIT) if CHAIN is None else bool(CHAIN)
    _check_chain(CHAIN, PERSIST, OSTAGE, BM, D, chain_smem)
    PINGPONG = default_pingpong(D, causal, NC, CHAIN, BN, per_cta) if PINGPONG is None else bool(PINGPONG)
    if PINGPONG and NC != 2:
        raise KernelConfigError("attention_sm90: PINGPONG schedules two consumer warpgroups (NC = 2)")
    LAZY = default_lazy(D) if LAZY is None else bool(LAZY)
    TRIM = default_trim(D, causal, SK, BN, PINGPONG, CHAIN) if TRIM is None else bool(TRIM)
    TRIM = TRIM and causal          # without a causal mask every consumer reads every key block
    if TRIM and (PINGPONG or CHAIN):
        raise KernelConfigError("attention_sm90: TRIM lets each consumer stop at its own rows' last key block, which needs "
                                "a schedule without ping-pong turns (they count one turn per block) and without "
                                f"CHAIN; got PINGPONG={PINGPONG}, CHAIN={CHAIN}: pass PINGPONG=False, CHAIN=False")
    MT = cdiv(SQ, BM)
    TAIL = (default_tail(MT, D) if TAIL is None else bool(TAIL)) and causal and PERSIST   # (pairs: persistent causal)
    FOLD = default_fold(D, causal) if FOLD is None else bool(FOLD)
    tiles = MT * H * B
    if tiles > MAX_SIZE:
        raise KernelConfigError(f"attention_sm90: {B} x {H} heads of {MT} query tiles are {tiles} tiles, past the "
                                f"{MAX_SIZE} the kernel's 32-bit tile index reaches: split the batch")
    work = cdiv(MT, 2) * H * B if causal else tiles     # causal: pairs of query tiles
    grid = (persistent_units(work, sms), 1, 1) if PERSIST else (MT, H, B)
    used = chain_smem if CHAIN else smem + (BM * D * 2 if OSTAGE == "own" else 0)
    q_after_o = PERSIST and OSTAGE == "q"
    return AttentionPlan(
        B=B, H=H, HKV=HKV, SQ=SQ, SK=SK, D=D, causal=causal, dtype=dtype, BM=BM, BN=BN, STAGES=STAGES, NC=NC,
        threads=128 * (1 + NC), grid=grid, smem=used, tiles=tiles, work=work, pingpong=PINGPONG, persist=PERSIST,
        chain=CHAIN, ostage=OSTAGE, lazy=LAZY, trim=TRIM, tail=TAIL, fold=FOLD, q_buffers=2 if CHAIN else 1,
        kv_blocks=cdiv(SK, BN), q_tiles=MT, units=grid[0] if PERSIST else 1, group=H // HKV, d_chunks=D // 64,
        ragged=SK % BN != 0, o_own=OSTAGE == "own", o_over_kv=OSTAGE == "kv", q_after_o=q_after_o,
        q_release_arrivals=NC if q_after_o else 4 * NC, regs=default_regs(NC, PERSIST, D, OSTAGE),
        dispatch="wgmma_folded" if FOLD else None, varlen=VARLEN, xq=varlen_window(SQ) if VARLEN else 0,
        per_cta=per_cta)


def check_scale(where, scale, error=KernelConfigError):
    """``scale`` as a float, or None (the default, ``1 / sqrt(D)``): a real number (numpy's too, not a bool) in
    ``(0, MAX_SCALE]``. The kernel takes each row's maximum of the unscaled scores and multiplies by the float32
    constant ``scale * log2(e)``, so a scale that is not positive, or past float32 there, computes a wrong
    softmax; ``error`` (the caller's class) names it.

        >>> import numpy as np
        >>> check_scale("k", np.float32(0.5)), check_scale("k", None)
        (0.5, None)
        >>> check_scale("k", -1.0)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: k: scale must be a positive finite number or None (1 / sqrt(head dim)) of at most 2.36e+38 (scale * log2(e) is a float32), got -1.0
    """
    if scale is None:
        return None
    try:
        value = float(scale) if isinstance(scale, numbers.Real) and not isinstance(scale, bool) else math.nan
    except OverflowError:       # an int or fraction past every float
        value = math.inf
    if not (0 < value <= MAX_SCALE):
        raise error(f"{where}: scale must be a positive finite number or None (1 / sqrt(head dim)) of at most "
                    f"{MAX_SCALE:.3g} (scale * log2(e) is a float32), got {shown(scale, 60)}")
    return value


def varlen_window(max_seqlen):
    """The longest packed sequence a ``VARLEN`` kernel is built for: ``max_seqlen`` rounded up to a multiple of
    128 (so that nearby maxima share one kernel). It is also the window ``XQ`` of the overlapping output views
    (:func:`tirxpy_kernels.attention_sm90.attention_sm90`): a sequence's rows sit at ``x < XQ`` of view row ``y``
    = the sequence's end, so the stores clip at the end of each sequence.

        >>> varlen_window(1), varlen_window(128), varlen_window(1000)
        (128, 128, 1024)
    """
    return -(-max_seqlen // 128) * 128
