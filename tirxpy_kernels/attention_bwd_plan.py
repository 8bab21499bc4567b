"""Launch plans of the Hopper attention backward kernel (:mod:`tirxpy_kernels.attention_bwd_sm90`): tile sizes
per head dim, how the consumers share the ``dQ`` product, shared memory, and :func:`plan`, which checks every
option before anything is built (:class:`~tirxpy_kernels.errors.KernelConfigError` naming what to change).

One CTA owns ``BN`` keys of one key / value head and walks the query blocks of ``BM`` rows of every query head
of its group. ``kv_split`` says how its ``NC`` consumer warpgroups share the keys: ``"keys"`` (head dims 64 and
128: each owns 64 keys, ``BN = 64 * NC``) or ``"cols"`` (head dim 256: all share 64 keys, ``BN = 64``, and each
owns ``D / NC`` columns of ``dK`` and ``dV``, since the two ``64 x 256`` float32 accumulators of one warpgroup
would take all of a thread's registers).

    >>> p = plan(2, 8, 2, 1000, 1000, 128, causal=True)
    >>> p.BM, p.BN, p.NC, p.STAGES, p.dq_split, p.grid, p.group
    (64, 128, 2, 2, 'cols', (8, 2, 2), 4)
    >>> plan(1, 4, 4, 512, 512, 64).dq_split, plan(1, 4, 4, 512, 512, 64, deterministic=True).dq_split
    ('cols', 'keys')
    >>> p = plan(1, 4, 4, 512, 512, 256)
    >>> p.BN, p.kv_split, p.STAGES, p.dq_cols, p.grid
    (64, 'cols', 1, 128, (8, 4, 1))
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from tirxpy.lang.schedule import cdiv
from tirxpy.target import as_target

from .errors import KernelConfigError, flag_option, int_option, shown

TARGET = as_target("sm_90a")
SMEM_LIMIT = TARGET.smem_per_cta
DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128, 256)
W = "attention_bwd_sm90"
TAIL_WAVES = 3      # rounds of CTAs at the end of a causal grid ordered by key block (:func:`tail_heads`)


@dataclass(frozen=True)
class AttentionBwdPlan:
    """Every constant the backward kernel is built from.

    Problem: ``B, H, HKV, SQ, SK, D, causal, dtype, deterministic``. Tiles: ``BM`` query rows per block,
    ``BN`` keys per CTA (``64 * NC`` when ``kv_split == "keys"``, 64 when ``"cols"``: see the module docstring),
    ``STAGES`` ring stages of ``(Q, dO, LSE, D)`` blocks. ``dq_split``: how the
    consumers share ``dQ = dS K`` of a query block: ``"cols"`` (consumer ``c`` computes columns ``c D / NC ..``
    over all ``BN`` keys, from the ``dS`` both wrote to shared memory) or ``"keys"`` (consumer ``c`` computes all
    columns over its own 64 keys; both add into ``dQ``); ``kv_split="cols"`` takes ``"cols"``. Derived: ``q_blocks`` per head, ``kv_blocks``,
    ``group`` query heads per key / value head, ``d_chunks`` (64-column boxes of a row), ``dq_cols`` (columns of
    one consumer's ``dQ``), ``grid`` ``(kv_blocks, HKV, B)``, ``threads``, ``smem`` bytes, ``regs`` (the
    ``setmaxnreg`` split); ``packed``: the batch elements are packed sequences (``cu_seqlens``), ``SQ`` / ``SK`` the
    longest; ``fold``: the matrix products use the ``wgmma_folded`` variant (descriptors advanced by one uniform add
    per k-step and operand, in place of about five: on by default, as a step issues five chains of wgmmas);
    ``tail_heads``: the last ``tail_heads`` (batch, key / value head) pairs' CTAs run key block by key block
    (:func:`tail_heads`), 0 for the plain grid order; ``rotate``: not causal, each CTA walks its query blocks from
    block ``n0 / BM`` on, wrapping around (the CTAs of a head then add into different blocks of ``dQacc`` at a
    time); off when ``deterministic``, whose adds into a block go in key-block order; ``trail``: consumer 1 runs
    about half a step behind consumer 0 (:func:`default_trail`); with ``dQ`` split by columns (``lag``) each
    step's ``dQ`` product is then issued one step later, from ``ds_bufs`` (3) ``dS^T`` buffers; ``fuse_dq``: the
    kernel converts each block of ``dQacc`` into the output ``dQ`` once its last add has landed (a count of adds per
    block in ``SEM``, :func:`~tirxpy_kernels.attention_bwd_sm90.adds_per_block`), so that no conversion pass
    follows it; ``count_slots``: 16-bit slots of shared memory per consumer, one per step of a CTA's walk, for the
    count each of its adds found (:func:`count_slots`)."""
    B: int
    H: int
    HKV: int
    SQ: int
    SK: int
    D: int
    causal: bool
    dtype: str
    deterministic: bool
    BM: int
    BN: int
    NC: int
    STAGES: int
    dq_split: str
    kv_split: str
    q_blocks: int
    kv_blocks: int
    group: int
    d_chunks: int
    dq_cols: int
    grid: tuple
    threads: int
    smem: int
    regs: tuple
    packed: bool = False
    fold: bool = True
    tail_heads: int = 0
    rotate: bool = False
    trail: bool = False
    fuse_dq: bool = False

    @property
    def lag(self):
        """Whether each step's ``dQ`` product is issued one step late (:func:`dq_lags`)."""
        return dq_lags(self.trail, self.dq_split)

    @property
    def k_box(self):
        """Columns of one swizzled box of ``K`` in shared memory (:func:`k_box`)."""
        return k_box(self.dq_cols)

    @property
    def ds_bufs(self):
        """``dS^T`` buffers in shared memory (:func:`ds_buffers`)."""
        return ds_buffers(self.lag)

    @property
    def count_slots(self):
        """16-bit slots of shared memory per consumer for the counts its ``dQ`` adds found (:func:`count_slots`);
        0 without ``fuse_dq``."""
        return count_slots(self.q_blocks, self.group) if self.fuse_dq else 0

    @property
    def dispatch(self):
        """The wgmma variant of the matrix products: ``"wgmma_folded"`` with ``fold``, else the default."""
        return "wgmma_folded" if self.fold else None

    def __getitem__(self, name):
        if name not in _FIELDS:
            raise KeyError(f"AttentionBwdPlan has no field {shown(name)}; its fields: {sorted(_FIELDS)}")
        return getattr(self, name)


_FIELDS = frozenset(f.name for f in fields(AttentionBwdPlan))


def default_config(D, deterministic=False):
    """``(BM, STAGES, dq_split)`` per head dim, with two consumers and 64-row query blocks. Head dims 64 and 128
    (consumers of 64 keys each, ``BN = 128``): 2 stages; ``dQ`` split by columns (each consumer reduce-adds
    ``D / 2`` columns of the block into ``dQacc``, half the bytes of a split by keys, where both add the whole
    block), except at head dim 64 with ``deterministic``, whose consumers run in step (no ``trail``): there the
    split by keys needs no meeting. Head dim 256 (the consumers share 64 keys): 1 stage, since K, V and one stage
    of Q, dO are already 128 KiB, and the float32 ``dQ`` staging of two 128-column halves another 64 KiB; ``dQ``
    by columns.

        >>> default_config(128), default_config(64), default_config(256), default_config(64, deterministic=True)
        ((64, 2, 'cols'), (64, 2, 'cols'), (64, 1, 'cols'), (64, 2, 'keys'))
    """
    if D == 64 and deterministic:
        return 64, 2, "keys"
    return {64: (64, 2, "cols"), 128: (64, 2, "cols"), 256: (64, 1, "cols")}[D]


def kv_split_of(D):
    """How the consumers share a CTA's keys at head dim ``D``: ``"keys"`` (64 keys each) while one warpgroup's
    float32 ``dK`` and ``dV`` of 64 keys (``D`` registers a thread) leave room for the rest, else ``"cols"`` (one
    64-key block, ``D / 2`` columns of ``dK`` and ``dV`` each: ``D / 2`` registers a thread).

        >>> kv_split_of(128), kv_split_of(256)
        ('keys', 'cols')
    """
    return "cols" if D > 128 else "keys"


def dq_lags(trail, dq_split):
    """Whether each step's ``dQ`` product is issued one step late: with ``trail`` and ``dQ`` split by columns (the
    product reads both consumers' ``dS``, which the trailing consumer has stored only for the step before).

        >>> dq_lags(True, "cols"), dq_lags(True, "keys"), dq_lags(False, "cols")
        (True, False, False)
    """
    return trail and dq_split == "cols"


def k_box(dq_cols):
    """Columns of one swizzled box of the resident ``K`` (bf16 / f16): 64 (128-byte swizzle) unless a consumer's
    ``dQ = dS K`` takes fewer columns of ``K`` than that (``dq_cols = 32``: head dim 64 with ``dQ`` split by
    columns), whose wgmma ``B`` operand must then be whole swizzle atoms: 32 (64-byte swizzle).

        >>> k_box(64), k_box(32), k_box(128)
        (64, 32, 64)
    """
    return min(dq_cols, 64)


def ds_buffers(lag):
    """``dS^T`` buffers in shared memory: 3 when the ``dQ`` products lag a step (:class:`AttentionBwdPlan`'s
    ``lag``: a buffer is rewritten only once both consumers' products that read it are done,
    :mod:`tirxpy_kernels.attention_bwd_sm90`), else 2 (by step parity).

        >>> ds_buffers(True), ds_buffers(False)
        (3, 2)
    """
    return 3 if lag else 2


def count_slots(q_blocks, group):
    """16-bit slots, one per step of a CTA's walk (at most ``q_blocks`` query blocks of each of the ``group`` query
    heads), rounded up to 8 (16 bytes): the count of adds each step's ``dQ`` add found in its block's counter
    (``fuse_dq`` of :class:`AttentionBwdPlan`).

        >>> count_slots(64, 1), count_slots(64, 8), count_slots(1, 1)
        (64, 512, 8)
    """
    return cdiv(q_blocks * group, 8) * 8


def smem_bytes(BM, BN, D, STAGES, dq_cols, NC, kv_split="keys", ds_bufs=2, slots=0):
    """Shared memory of a plan: K and V (``BN x D``), ``STAGES`` stages of Q and dO (``BM x D``) and of LSE and
    D (``BM`` floats each), ``ds_bufs`` ``dS`` buffers (``BN x BM``; ``kv_split="cols"``: two ``P`` buffers more),
    each consumer's ``dQ`` staging (``64 x dq_cols`` float32 for ``BM = 64``) and ``slots`` count slots
    (:func:`count_slots`), the barriers and 1 KiB of alignment.

        >>> smem_bytes(64, 128, 128, 2, 64, 2), smem_bytes(64, 64, 256, 1, 128, 2, "cols")
        (198728, 230968)
        >>> smem_bytes(64, 128, 128, 2, 64, 2, ds_bufs=3), smem_bytes(64, 128, 128, 2, 64, 2, ds_bufs=3, slots=8)
        (215112, 215144)
    """
    ps = 2 * BN * BM if kv_split == "cols" else 0
    return (2 * BN * D + 2 * STAGES * BM * D + ds_bufs * BN * BM + ps) * 2 + 8 * STAGES * BM \
        + NC * (4 * BM * dq_cols + 2 * slots) + 1024 + 8 * (1 + 2 * STAGES + 2 * NC)


def tail_heads(B, HKV, kv_blocks, causal, packed, waves, sms):
    """How many (batch, key / value head) pairs end the CTA order key block by key block: the CTAs of key block
    0 (under a causal mask the heaviest: it sees every query block) of each such pair, then those of block 1,
    and so on, so that a causal grid ends with its lightest CTAs rather than with whole heads, whose heavy blocks
    would keep a few SMs busy while the rest idle. The pairs before them keep the grid's order (a pair's key
    blocks one after another, so that the CTAs running at once share their heads' Q, dO and dQ in L2). The window
    spans ``waves`` rounds of ``sms`` CTAs, rounded up to whole pairs; 0 when not causal (every CTA of a head does
    the same work) or ``packed`` (a packed grid's work is set by its sequences' lengths, which the window's order
    does not follow).

        >>> tail_heads(4, 16, 16, True, False, 3, 132), tail_heads(4, 16, 16, False, False, 3, 132)
        (25, 0)
        >>> tail_heads(1, 4, 64, True, False, 3, 132)          # every pair
        4
    """
    if not causal or packed or waves == 0:
        return 0
    return min(B * HKV, cdiv(waves * sms, kv_blocks))


def default_rotate(D, causal, deterministic, packed):
    """Whether a CTA's query walk starts at its own diagonal block by default (``rotate`` of
    :class:`AttentionBwdPlan`): for the dense, non-causal, non-deterministic kernel at head dims 64 and 256, where
    more adds meet in one ``dQacc`` block at a time (at 64 a step is short; at 256 a head has a CTA per 64 keys);
    not at head dim 128 or in the packed kernel, where it does not pay.

        >>> default_rotate(64, False, False, False), default_rotate(128, False, False, False)
        (True, False)
    """
    return D != 128 and not (causal or deterministic or packed)


def default_trail(D, deterministic=False):
    """Whether consumer 1 trails consumer 0 by default (``trail`` of :class:`AttentionBwdPlan`): at head dims 64
    and 128, where the consumers otherwise meet once a step at the same point (before the ``dQ`` product, which
    reads both consumers' ``dS``: ``dQ`` split by columns) and so run their exponentials at the same time while
    the tensor cores wait, and their matrix products at the same time. Off at head dim 256, whose consumers share
    their keys (``kv_split="cols"``), and with ``deterministic`` (its ordered ``dQ`` adds keep the consumers in
    step).

        >>> default_trail(128), default_trail(64), default_trail(256), default_trail(128, deterministic=True)
        (True, True, False, False)
    """
    return D in (64, 128) and not deterministic


def check_problem(B, H, HKV, SQ, SK, D, dtype):
    """The problem on its own: sizes positive ints, ``H % HKV == 0``, a supported head dim and dtype."""
    if type(dtype) is not str or dtype not in DTYPES:
        raise KernelConfigError(f"{W}: dtype must be one of {DTYPES}, got {shown(dtype, 60)}")
    for name, x in (("B", B), ("H", H), ("HKV", HKV), ("SQ", SQ), ("SK", SK), ("D", D)):
        int_option(W, name, x)
    if D not in HEAD_DIMS:
        raise KernelConfigError(f"{W}: head dim {shown(D, 60)} is not supported by the backward kernel; use one "
                                f"of {HEAD_DIMS}")
    if min(B, H, HKV, SQ, SK) <= 0:
        raise KernelConfigError(f"{W}: B, H, HKV, SQ, SK must be positive, got {shown((B, H, HKV, SQ, SK))}")
    if H % HKV:
        raise KernelConfigError(f"{W}: {shown(H, 60)} query heads do not split into {shown(HKV, 60)} key / "
                                "value head groups "
                                "(grouped-query attention needs H % HKV == 0)")


def plan(B, H, HKV, SQ, SK, D, causal=False, dtype="bfloat16", deterministic=False, BM=None, STAGES=None,
         DQ_SPLIT=None, PACKED=False, FOLD=None, TAIL=None, sms=TARGET.sm_count, ROTATE=None,
         TRAIL=None, FUSE_DQ=False) -> AttentionBwdPlan:
    """The checked :class:`AttentionBwdPlan` of one problem; options left ``None`` take :func:`default_config`.
    ``BM`` must be 64 (one wgmma row block of ``dQ``), ``STAGES`` at least 1, ``DQ_SPLIT`` ``"cols"`` (head dim
    64: 32 columns per consumer; 128: 64; 256: 128) or ``"keys"`` (head dim 64: 64 keys per consumer).
    ``PACKED``: ``B`` sequences of at most ``SQ`` / ``SK`` rows packed one after another, with ``cu_seqlens`` offsets
    (:func:`~tirxpy_kernels.attention_bwd_sm90.attention_bwd_sm90`). ``FOLD`` (default ``True``): the
    ``wgmma_folded`` variant of the matrix products. ``TAIL`` (default :data:`TAIL_WAVES`): rounds of ``sms`` CTAs
    (the device's SMs) at the end of a causal grid ordered by key block (:func:`tail_heads`); 0 keeps the grid
    order. ``ROTATE`` (default: :func:`default_rotate`; never with ``causal`` or ``deterministic``): the rotated
    query walk (:class:`AttentionBwdPlan`'s ``rotate``). ``TRAIL`` (default: :func:`default_trail`): consumer 1
    behind consumer 0 (``trail``); for consumers of 64 keys each (head dims 64 and 128), not with ``deterministic``.
    ``FUSE_DQ`` (default ``False`` or None: the caller converts ``dQacc``): the kernel converts ``dQ`` itself
    (``fuse_dq``)."""
    check_problem(B, H, HKV, SQ, SK, D, dtype)
    causal = flag_option(W, "causal", causal)
    deterministic = flag_option(W, "deterministic", deterministic)
    PACKED = flag_option(W, "PACKED", PACKED)
    fold = True if FOLD is None else flag_option(W, "FOLD", FOLD)
    waves = TAIL_WAVES if TAIL is None else int_option(W, "TAIL", TAIL, lo=0, hi=64)
    sms = int_option(W, "sms", sms, lo=1, hi=4096)
    rotate = default_rotate(D, causal, deterministic, PACKED) if ROTATE is None else flag_option(W, "ROTATE", ROTATE)
    if rotate and (causal or deterministic):
        raise KernelConfigError(f"{W}: ROTATE=True is for a non-causal, non-deterministic kernel (a causal walk "
                                "already starts at its diagonal block; ordered dQ adds go in key-block order)")
    bm, st, split = default_config(D, deterministic)
    BM = bm if BM is None else int_option(W, "BM", BM)
    STAGES = st if STAGES is None else int_option(W, "STAGES", STAGES, lo=1, hi=4)
    split = split if DQ_SPLIT is None else DQ_SPLIT
    if BM != 64:
        raise KernelConfigError(f"{W}: BM = {BM}; the backward kernel takes 64-row query blocks (BM=64)")
    if type(split) is not str or split not in ("cols", "keys"):
        raise KernelConfigError(f"{W}: DQ_SPLIT = {shown(split, 60)}; use 'cols' or 'keys'")
    NC = 2
    kv_split = kv_split_of(D)
    BN = 64 * NC if kv_split == "keys" else 64
    if kv_split == "cols" and split != "cols":
        raise KernelConfigError(f"{W}: head dim {D}: the consumers share 64 keys and own {D // NC} columns of dK, dV "
                                "and dQ each; use DQ_SPLIT='cols'")
    dq_cols = D // NC if split == "cols" else D
    if split == "keys" and dq_cols != BM:
        raise KernelConfigError(f"{W}: DQ_SPLIT='keys' gives each consumer a (64 x {dq_cols}) dQ accumulator; it must "
                                f"reuse the (64 x {BM}) registers of S^T beside dK and dV (use DQ_SPLIT='cols')")
    trail = default_trail(D, deterministic) if TRAIL is None else flag_option(W, "TRAIL", TRAIL)
    if trail and kv_split != "keys":
        raise KernelConfigError(f"{W}: TRAIL=True is for consumers of 64 keys each (head dims 64 and 128); at head "
                                f"dim {D} they share their keys: use TRAIL=False")
    if trail and deterministic:
        raise KernelConfigError(f"{W}: TRAIL=True is for the unordered dQ adds; deterministic=True runs the consumers "
                                "in step: use TRAIL=False (the default there)")
    fuse = False if FUSE_DQ is None else flag_option(W, "FUSE_DQ", FUSE_DQ)
    lag = dq_lags(trail, split)
    slots = count_slots(cdiv(SQ, BM), H // HKV) if fuse else 0
    smem = smem_bytes(BM, BN, D, STAGES, dq_cols, NC, kv_split, ds_buffers(lag), slots)
    if smem > SMEM_LIMIT:
        more = f" or TRAIL=False (its third dS buffer takes {BN * BM * 2} bytes)" if lag else ""
        more += f" or FUSE_DQ=False (its counts of adds take {NC * 2 * slots} bytes)" if fuse else ""
        raise KernelConfigError(f"{W}: {STAGES} stages need {smem} bytes of shared memory, over the {SMEM_LIMIT} "
                                f"a CTA may have: use fewer stages{more}")
    NKV = cdiv(SK, BN)
    if fuse and NKV * NC > 0xFFFF:
        raise KernelConfigError(f"{W}: FUSE_DQ=True counts the adds into a dQ block in 16 bits; {NKV} key blocks of "
                                f"{BN} add up to {NKV * NC} times: use FUSE_DQ=False")
    return AttentionBwdPlan(
        B=B, H=H, HKV=HKV, SQ=SQ, SK=SK, D=D, causal=bool(causal), dtype=dtype, deterministic=bool(deterministic),
        BM=BM, BN=BN, NC=NC, STAGES=STAGES, dq_split=split, kv_split=kv_split, q_blocks=cdiv(SQ, BM), kv_blocks=NKV, group=H // HKV,
        d_chunks=D // 64, dq_cols=dq_cols, grid=(NKV, HKV, B), threads=128 * (1 + NC), smem=smem, regs=(24, 240),
        packed=bool(PACKED), fold=bool(fold), tail_heads=tail_heads(B, HKV, NKV, causal, PACKED, waves, sms),
        rotate=rotate, trail=trail, fuse_dq=fuse)


def default_fuse_dq(D, causal):
    """Whether :func:`tirxpy_kernels.attention_backward` (and the varlen backward) let the kernel convert ``dQ`` itself
    (``fuse_dq`` of :class:`AttentionBwdPlan`) where it can (:func:`fuses_dq`): under a causal mask at head dims 128
    and 256. There the conversion pass it saves costs more than the kernel's own conversion; elsewhere the kernel's
    conversion costs more than it saves (figures: ``docs/performance.md``, "dQ converted in the kernel").

        >>> default_fuse_dq(128, True), default_fuse_dq(128, False), default_fuse_dq(64, True)
        (True, False, False)
    """
    return causal and D >= 128


def fuses_dq(B, H, HKV, SQ, SK, D, causal=False, dtype="bfloat16", deterministic=False, packed=False):
    """Whether the backward kernel of this problem (default options) can convert ``dQ`` itself: :func:`plan` with
    ``FUSE_DQ=True`` fits (the count slots in shared memory, the adds per block in 16 bits).

        >>> fuses_dq(1, 16, 16, 4096, 4096, 128), fuses_dq(1, 8, 1, 65536, 65536, 256)
        (True, False)
    """
    try:
        plan(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, PACKED=packed, FUSE_DQ=True)
    except KernelConfigError:
        return False
    return True


def fused_by_default(B, H, HKV, SQ, SK, D, causal=False, dtype="bfloat16", deterministic=False, packed=False):
    """Whether the backward's callers (:func:`tirxpy_kernels.attention_backward`, the varlen backward, the bench)
    build the kernel with ``FUSE_DQ=True``: where :func:`default_fuse_dq` wants it and :func:`fuses_dq` can.

        >>> fused_by_default(1, 16, 16, 4096, 4096, 128, causal=True), fused_by_default(1, 16, 16, 4096, 4096, 128)
        (True, False)
    """
    return default_fuse_dq(D, causal) and fuses_dq(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, packed)
