"""The Hopper GEMM's plan: checked options, tile choice, cost model and the balanced split.

Everything here is plain Python on ints: :func:`check_config` resolves and checks every option of
:func:`tirxpy_kernels.gemm_sm90.gemm_sm90` for one problem, :func:`kernel_plan` turns that into the
:class:`GemmPlan` the kernel is built from (every derived size named), and :func:`choose_tile` /
:func:`balanced_split` are what :func:`tirxpy_kernels.gemm` runs when it is given no tile. The FP8 parts (formats,
scalings, the block scaling's parts and passes) are :mod:`tirxpy_kernels.gemm_fp8_plan`'s.

    >>> p = kernel_plan(4096, 4096, 4096, SPLIT=(16, 1, 240))
    >>> p.k_blocks, p.chunk_cols, p.chunks, p.rounds, p.narrow_bn, p.tiles, p.grid
    (64, 64, 4, 4, 240, 528, 132)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tirxpy.ir.dtype import DataType
from tirxpy.lang.schedule import cdiv, persistent_units
from tirxpy.target import as_target

from .errors import KernelConfigError, choice_option, flag_option, int_option, is_int, plain_ints, shown
from .gemm_fp8_plan import BLOCK_SCALE, FP8_DTYPES, block_part, check_pass, check_scaling, part_buffers, scale_bytes

#: The target the Hopper GEMM is built for: a plan fits its shared memory per CTA, and its SM count (an
#: H100 SXM's) is the persistent grid's size where no device is given.
TARGET = as_target("sm_90a")
SMEM_LIMIT = TARGET.smem_per_cta
IN_DTYPES = ("bfloat16", "float16")
OUT_DTYPES = ("bfloat16", "float16", "float32")
ACTIVATIONS = (None, "relu", "silu")
# protocol steps ``drop=`` can remove (the simulator's mutation tests only; tirxpy_kernels.gemm refuses it)
GROUP = 4               # tile rows of a band of the grouped walk (grouped_tile): the default ``group``
MAX_SIZE = 2 ** 31 - 1   # the largest M, N, K and group: the kernel's tile coordinates and walk are 32-bit
DROPS = ("full_wait", "empty_wait", "expect_tx", "wgmma_wait", "acc_wait", "fence_proxy_async", "store_wait", "turn")


def k_block(dtype):
    """The k-block depth for inputs of ``dtype``: one 128-byte swizzle atom of elements (64 16-bit, 128 8-bit).

        >>> k_block("bfloat16"), k_block("float8_e4m3")
        (64, 128)
    """
    return 128 // DataType.get(dtype).itemsize


def plan(M, N, K, BM=128, BN=256, BK=None, STAGES=4, CM=1, sms=TARGET.sm_count, group=GROUP,
         dtype="bfloat16", out_dtype="bfloat16", PINGPONG=False, split=None, scaling=None):
    """Checked tile plan: tile counts, persistent grid and shared-memory bytes (raises ValueError).
    ``PINGPONG``: each consumer warpgroup stages its own ``(BM, EPI)`` output chunks (two buffers each).
    ``split``: ``gemm_sm90``'s ``SPLIT = (rows, wide, bn2)`` (checked by the kernel). ``BK``:
    :func:`k_block` of ``dtype``."""
    if type(dtype) is not str or dtype not in IN_DTYPES + FP8_DTYPES:
        raise KernelConfigError(f"gemm_sm90: dtype (the inputs') must be one of {IN_DTYPES + FP8_DTYPES}, got "
                                f"{shown(dtype)}")
    if type(out_dtype) is not str or out_dtype not in OUT_DTYPES:
        raise KernelConfigError(f"gemm_sm90: out_dtype must be one of {OUT_DTYPES}, got {shown(out_dtype)}")
    M, N, K, BM, STAGES, sms, group = (int_option("gemm_sm90", name, v) for name, v in (
        ("M", M), ("N", N), ("K", K), ("BM", BM), ("STAGES", STAGES), ("sms", sms), ("group", group)))
    BK = int_option("gemm_sm90", "BK", BK, none=True)
    if BM != 128:
        raise KernelConfigError(f"gemm_sm90: BM = {BM}; the kernel has two consumer warpgroups of 64 rows (BM = 128)")
    BK = k_block(dtype) if BK is None else BK
    if BK != k_block(dtype):
        raise KernelConfigError(f"gemm_sm90: BK = {BK} must be {k_block(dtype)} (one 128-byte swizzle atom of {dtype})")
    if not (type(BN) is int and 64 <= BN <= 256 and BN % 16 == 0):
        raise KernelConfigError(f"gemm_sm90: BN = {shown(BN)} must be a multiple of 16 in [64, 256] (the wgmma N)")
    epi = 128 // DataType.get(out_dtype).itemsize   # output chunk: 128 bytes, or the widest 2^k share of BN below
    while BN % epi:
        epi //= 2
    check_cluster(CM)
    if STAGES < 2:
        raise KernelConfigError(f"gemm_sm90: STAGES = {shown(STAGES, 60)}; a pipeline needs at least 2 stages")
    if min(M, N, K) <= 0:
        raise KernelConfigError(f"gemm_sm90: M, N, K must be positive, got {shown((M, N, K))}")
    stage = (BM + BN) * 128 + scale_bytes(BM, scaling)
    # two 128-byte-wide staging buffers; with PINGPONG two per consumer, each as wide as one output chunk
    staging = 2 * 2 * BM * epi * DataType.get(out_dtype).itemsize if PINGPONG else 2 * BM * 128
    smem = STAGES * stage + staging + 1024 + 2 * STAGES * 8
    if smem > SMEM_LIMIT:
        raise KernelConfigError(f"gemm_sm90: {shown(STAGES, 60)} stages of {shown(stage, 60)} bytes plus the "
                                f"epilogue ({shown(staging, 60)} bytes) need "
                                f"{shown(smem, 60)} bytes of shared memory, over the {SMEM_LIMIT} a CTA may "
                                "have: use fewer stages or a smaller BN")
    tm, tn = cdiv(M, BM), cdiv(N, BN)
    tmc = cdiv(tm, CM)
    if split is None:
        tiles = tmc * tn
    else:       # split rows: `wide` tiles of BN, then tiles of bn2 to the end of N
        rows, wide, bn2 = split
        tiles = rows * (wide + cdiv(N - wide * BN, bn2)) + (tmc - rows) * tn
    if tiles > MAX_SIZE:
        raise KernelConfigError(f"gemm_sm90: a {shown(M, 60)} x {shown(N, 60)} output is {shown(tiles, 60)} "
                                f"tiles of {BM} x {BN}, past the {MAX_SIZE} "
                                "the kernel's 32-bit tile index reaches: split the product")
    units = persistent_units(tiles, sms, CM)
    return {"tiles_m": tm, "tiles_n": tn, "cluster_tiles_m": tmc, "tiles": tiles, "units": units,
            "grid": units * CM, "kt": cdiv(K, BK), "smem": smem, "epi": epi, "group": group}


# Relative per-SM throughput of a cooperative 128 x BN tile: narrower tiles move more operand bytes per
# FLOP (128 + BN rows per 128 x BN products) and issue narrower wgmma (fitted on the H100: docs/performance.md)
_BN_EFFICIENCY = {256: 1.0, 192: 0.97, 176: 0.95, 128: 0.90}


def check_cluster(CM):
    """KernelConfigError unless ``CM`` is a cluster size the kernel has: 1 or 2 CTAs along M.

        >>> check_cluster(2)
        >>> check_cluster(0)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: gemm_sm90: the cluster size CM = 0 must be 1 or 2 (an int)
    """
    if not is_int(CM) or int(CM) not in (1, 2):
        raise KernelConfigError(f"gemm_sm90: the cluster size CM = {shown(CM, 60)} must be 1 or 2 (an int)")


def bn_candidates(CM=1, b_major="K"):
    """Tile widths :func:`choose_tile` picks from: 256, 192, 176 (K-major ``B`` only: an MN-major one is
    loaded in 64-column boxes) and 128 without a cluster; widths of whole 64-column multicast slices
    (256, 128) with ``CM = 2``.

        >>> bn_candidates(), bn_candidates(b_major="MN"), bn_candidates(CM=2)
        ((256, 192, 176, 128), (256, 192, 128), (256, 128))
    """
    check_cluster(CM)
    return tuple(b for b in (256, 192, 176, 128)
                 if (b % 64 == 0 and (b // 64) % CM == 0) or (b == 176 and CM == 1 and b_major == "K"))


# Ping-pong tiles' efficiency (PINGPONG: one consumer warpgroup per 128 x BN tile, two m64 wgmma per k-step)
# and the cooperative schedule's exposed time per tile (the deferred epilogue's barrier rounds and the turn
# between tiles, in k-blocks of a 256-wide tile; ping-pong hides its epilogue under the other consumer's
# k-loop). The rule they encode: ping-pong wins where its narrower tiles fill the persistent grid's rounds
# better than the cooperative widths (N = 2112, 24576 x 1536, 7168 x 2048), the cooperative 256 (with its
# balanced split) elsewhere, including N a multiple of 256 at K = 2048 (8192 x 2048 x 2048, 4096 x 8192 x 2048),
# where the cooperative 256 has no partial column tile. Fitted to same-process A/B runs on the H100
# (docs/performance.md).
_PP_EFFICIENCY = {192: 0.965, 176: 0.962}
_TILE_OVERHEAD = 2.4


def tile_cost(M, N, K, BN, PINGPONG=False, sms=TARGET.sm_count, CM=1):
    """Estimated time of the persistent schedule, in units of one 256-wide tile's k-block over its
    efficiency: rounds (``ceil(tiles / units)``, every round as long as its slowest tile) times a tile's
    k-blocks times ``BN`` over the width's efficiency (``_BN_EFFICIENCY``; ``_PP_EFFICIENCY`` with
    ``PINGPONG``), plus ``_TILE_OVERHEAD`` k-blocks per tile for the cooperative schedule. Wave
    quantization decides narrow-N shapes: N = 2112 has 8.25 tiles of 256 columns (9 launched, the
    last one 3/4 empty), exactly 11 of 192 (2.67 waves on 132 SMs) and exactly 12 of 176 (2.91
    waves; cuBLAS's tile there too).

        >>> round(tile_cost(4096, 4096, 4096, 256)), round(tile_cost(4096, 4096, 4096, 176, PINGPONG=True))
        (67994, 70254)
    """
    tiles = cdiv(cdiv(M, 128), CM) * cdiv(N, BN)
    rounds = cdiv(tiles, persistent_units(tiles, sms, CM))
    eff = _PP_EFFICIENCY[BN] if PINGPONG else _BN_EFFICIENCY[BN]
    return rounds * (cdiv(K, 64) * BN / eff + (0 if PINGPONG else _TILE_OVERHEAD * 256))


def default_stages(BN, PINGPONG=False):
    """Ring stages :func:`gemm_sm90` takes by default: 4, the most a cooperative 256-wide tile and a
    ping-pong 192-wide one fit next to their epilogue buffers; 5 for ping-pong tiles at most 176 wide,
    whose per-consumer staging is one narrow chunk (the deeper ring hides more load latency).

        >>> default_stages(256), default_stages(192, True), default_stages(176, True)
        (4, 4, 5)
    """
    return 5 if PINGPONG and BN <= 176 else 4


def widest_bn(PINGPONG=False, bias=False, activation=None, out_dtype="bfloat16"):
    """The widest ``BN`` whose kernel compiles without register spills (NVRTC 13.0, sm_90a): 256 cooperative,
    192 ping-pong (its accumulator is a whole ``(128, BN)`` tile per consumer); with a fused bias *and* silu
    into a 16-bit output (the bias row, silu's temporaries and the converted chunk live next to the
    accumulator) the cooperative schedule stops at 192. tests/kernels/test_gemm_sm90.py compiles each width
    and checks that the next wider one spills.

        >>> widest_bn(), widest_bn(bias=True, activation="silu"), widest_bn(True, True, "silu", "bfloat16")
        (256, 192, 192)
    """
    if PINGPONG:
        return 192
    return 192 if bias and activation == "silu" and out_dtype != "float32" else 256


def choose_tile(M, N, K, sms=TARGET.sm_count, CM=1, b_major="K", PINGPONG=None, bias=False, activation=None,
                out_dtype="bfloat16"):
    """``(BN, PINGPONG)`` with the least :func:`schedule_cost`: the widths of :func:`bn_candidates` in the
    cooperative schedule, those of them in ``_PP_EFFICIENCY`` (192, 176) in ping-pong (``PINGPONG``
    True / False restricts the choice to one schedule), none wider than :func:`widest_bn` for the
    epilogue (``bias``, ``activation``, ``out_dtype``). What :func:`tirxpy_kernels.gemm` runs when given
    neither ``BN`` nor ``PINGPONG`` (with :func:`balanced_split`'s ``SPLIT`` for a cooperative 256).

        >>> choose_tile(4096, 4096, 4096), choose_tile(8192, 8192, 8192), choose_tile(4096, 2112, 7168)
        ((256, False), (256, False), (176, True))
        >>> choose_tile(4096, 2112, 7168, PINGPONG=False), choose_tile(4096, 4096, 4096, bias=True, activation="silu")
        ((176, False), (176, True))
    """
    best = None
    for pp in (False, True):
        if PINGPONG is not None and bool(PINGPONG) != pp:
            continue
        for bn in bn_candidates(CM, b_major):
            if (pp and bn not in _PP_EFFICIENCY) or bn > widest_bn(pp, bias, activation, out_dtype):
                continue
            cost = schedule_cost(M, N, K, bn, pp, sms, CM, b_major, bias, out_dtype)
            if best is None or cost < best[0]:
                best = (cost, bn, pp)
    if best is None:
        raise KernelConfigError(f"gemm_sm90: no ping-pong tile width for CM = {CM} with a {b_major}-major B (ping-pong takes "
                                f"{tuple(_PP_EFFICIENCY)}; {bn_candidates(CM, b_major)} fit here): pass BN, or PINGPONG=False")
    return best[1], best[2]


def schedule_cost(M, N, K, BN, PINGPONG=False, sms=TARGET.sm_count, CM=1, b_major="K", bias=False,
                  out_dtype="bfloat16"):
    """What :func:`choose_tile` minimizes: :func:`tile_cost`, or for a cooperative tile that
    :func:`tirxpy_kernels.gemm` would split (``CM = 1``, K-major ``B``, no bias, a 16-bit output) the busiest CTA's
    work under :func:`balanced_split`'s ``SPLIT`` (its walk's slower tile boundary, ``_SPLIT_WALK``, included),
    in the same units.

        >>> round(schedule_cost(4096, 4096, 4096, 256)), round(tile_cost(4096, 4096, 4096, 256))
        (67226, 67994)
    """
    cost = tile_cost(M, N, K, BN, PINGPONG, sms, CM)
    if splittable(PINGPONG, CM, b_major, bias, out_dtype):
        best = _best_split(M, N, K, BN, sms, GROUP, out_dtype)
        if best is not None:
            cost = min(cost, best[0])
    return cost


def splittable(PINGPONG=False, CM=1, b_major="K", bias=False, out_dtype="bfloat16", DEFER=None):
    """Whether :func:`gemm_sm90` takes a ``SPLIT`` for these options (and so :func:`tirxpy_kernels.gemm` applies
    :func:`balanced_split`): the cooperative deferred schedule without a cluster, a K-major ``B``, no bias and
    a 16-bit output (``DEFER`` None or true).

        >>> splittable(), splittable(PINGPONG=True), splittable(b_major="MN"), splittable(DEFER=False)
        (True, False, False, False)
    """
    return (not PINGPONG and CM == 1 and b_major == "K" and not bias and out_dtype != "float32"
            and DEFER in (None, True, 1))


# The split walk's extra cost per tile boundary (its tile_at is longer), in k-blocks of a 256-wide tile
# (measured on the H100: docs/performance.md).
_SPLIT_WALK = 0.25
# The most tile costs :func:`balanced_split` weighs (candidate splits times tiles, about a second of NumPy); a
# larger search finds no split (the plain grid).
_SPLIT_SEARCH = 1 << 25


def _unit_loads(widths, KT, units, extra=0.0):
    """Per-unit cost of a persistent walk of tiles of ``widths`` (unit ``u`` takes tiles ``u, u + units, ...``),
    in :func:`tile_cost`'s units: ``KT`` k-blocks of the tile's width plus ``_TILE_OVERHEAD + extra`` per tile."""
    cost = KT * np.asarray(widths, dtype=np.float64) + (_TILE_OVERHEAD + extra) * 256
    cost = np.concatenate([cost, np.zeros(-len(cost) % units)])
    return cost.reshape(-1, units).sum(axis=0)


def _split_widths(rows, wide, narrow, bn2, TM, TN, BN, group):
    """Tile widths in the order :func:`tirxpy.lang.schedule.split_tile` lists them."""
    per_row = wide + narrow
    t = np.arange(rows * per_row)
    per_group = group * per_row
    size = np.minimum(rows - (t // per_group) * group, group)
    yn = (t % per_group) // size
    return np.concatenate([np.where(yn < wide, BN, bn2), np.full((TM - rows) * TN, BN)])


def balanced_split(M, N, K, BN=256, sms=TARGET.sm_count, group=GROUP, out_dtype="bfloat16", margin=0.005,
                   rows_max=None):
    """A ``SPLIT = (rows, wide, bn2)`` for :func:`gemm_sm90`'s cooperative deferred schedule that deals its
    tiles over the ``sms`` persistent CTAs more evenly than the plain grid, or None. The first ``rows`` tile
    rows become ``wide`` tiles of ``BN`` columns and then tiles of ``bn2 < BN`` (the rest of ``N``), so that
    the tile count fills the last round: the CTA with the most work (:func:`tile_cost`'s units, summed over
    the tiles dealt to it) must do at least ``margin`` less than in the plain grid. ``bn2`` keeps as many
    output chunks as ``BN`` (``BN - EPI < bn2``) and a multiple of 16; ``rows`` a multiple of ``group``, or with
    ``rows_max`` at most ``rows_max`` and a multiple of ``group`` short of it (the split rows then end at a
    band boundary of the grouped walk, so its tiles of rows from ``rows_max`` on come after every other). Only
    for ``BN = 256`` and a plain grid of more than one round (the cost model does not weigh a narrower
    wgmma's lower efficiency, which matters more for narrower tiles).

    4096^3: 512 tiles of 128 x 256 are 3.88 rounds on 132 SMs (the busiest CTA: 4 wide tiles); 16 rows of
    1 x 256 + 16 x 240 and 16 rows of 16 x 256 are 528 tiles, 4 per CTA, none with four wide ones:

        >>> balanced_split(4096, 4096, 4096), balanced_split(2048, 2048, 2048)
        ((16, 1, 240), None)
        >>> balanced_split(4096, 4096, 4096, rows_max=14)     # rows 14, 10, 6 or 2
        (14, 1, 240)
    """
    best = _best_split(M, N, K, BN, sms, group, out_dtype, margin, rows_max)
    return None if best is None else best[1]


def _best_split(M, N, K, BN, sms, group, out_dtype, margin=0.005, rows_max=None):
    """``(busiest CTA's work, SPLIT)`` of :func:`balanced_split`, or None."""
    epi = 128 // DataType.get(out_dtype).itemsize
    TM, TN, KT = cdiv(M, 128), cdiv(N, BN), cdiv(K, 64)
    if BN != 256 or out_dtype == "float32" or TM * TN <= sms:
        return None
    if cdiv(TM * TN, persistent_units(TM * TN, sms)) * margin > 1:
        # past 1 / margin rounds the last round is less than `margin` of the busiest CTA's work: no split can
        # gain that much (and the search over every split, linear in the tiles per candidate, would be long)
        return None
    bn2s, rows_list = range(BN - 16, BN - epi, -16), _split_rows(TM, group, rows_max)
    if 2 * len(bn2s) * len(rows_list) * TM * TN > _SPLIT_SEARCH:
        return None     # a grid so large (or a band so thin) that weighing every split would take seconds
    plain = _unit_loads([BN] * (TM * TN), KT, persistent_units(TM * TN, sms)).max()
    best = None
    for bn2 in bn2s:
        # the wide counts whose split rows cover N with the least overhang, two of them
        wides = sorted(range(cdiv(N, BN)), key=lambda w: w * BN + cdiv(N - w * BN, bn2) * bn2 - N)[:2]
        for wide in wides:
            narrow = cdiv(N - wide * BN, bn2)
            if wide + narrow <= TN:
                continue
            for rows in rows_list:
                widths = _split_widths(rows, wide, narrow, bn2, TM, TN, BN, group)
                loads = _unit_loads(widths, KT, persistent_units(len(widths), sms), _SPLIT_WALK)
                cost = (loads.max(), int((loads == loads.max()).sum()))     # ties: fewer CTAs with the most work
                if best is None or cost < best[0]:
                    best = (cost, (rows, wide, bn2))
    if best is None or best[0][0] > plain * (1 - margin):
        return None
    return float(best[0][0]), best[1]


def _split_rows(TM, group, rows_max=None):
    """The split row counts :func:`balanced_split` tries: multiples of ``group`` and ``TM``, or with ``rows_max``
    the counts ``rows_max - i group`` down to 1."""
    if rows_max is None:
        return sorted(set(range(group, TM + 1, group)) | {TM})
    return list(range(min(rows_max, TM), 0, -group))[::-1]


def _split_checked(SPLIT, M, N, BN, EPI, wide_chunks, CM, PP, DEFER, b_major):
    """``(rows, wide, narrow, bn2)`` from ``gemm_sm90``'s ``SPLIT = (rows, wide, bn2)``, or ValueError
    (``wide_chunks``: the output chunks are 128 bytes wide)."""
    if not (isinstance(SPLIT, tuple) and len(SPLIT) == 3 and all(type(v) is int for v in SPLIT)):
        raise KernelConfigError(f"gemm_sm90: SPLIT must be a tuple (rows, wide, bn2) of ints, got {shown(SPLIT)}")
    rows, wide, bn2 = SPLIT
    if PP or CM != 1 or not DEFER or b_major != "K" or not wide_chunks:
        raise KernelConfigError("gemm_sm90: SPLIT is a tiling of the cooperative deferred schedule without a cluster, with a "
                                "K-major B and 128-byte output chunks (PINGPONG=False, CM=1, DEFER, BN a multiple of 64 for a "
                                f"16-bit output); got PINGPONG={PP}, CM={CM}, DEFER={DEFER}, "
                                f"b_major={shown(b_major)}, BN={BN}")
    if not (bn2 % 16 == 0 and BN - EPI < bn2 < BN):
        raise KernelConfigError(f"gemm_sm90: SPLIT's narrow width {bn2} must be a multiple of 16 in ({BN - EPI}, {BN}): "
                                f"narrower than BN = {BN}, with as many {EPI}-column output chunks")
    if not (1 <= rows <= cdiv(M, 128)) or not (0 <= wide and wide * BN < N):
        raise KernelConfigError(f"gemm_sm90: SPLIT = {SPLIT}: rows must be in [1, {cdiv(M, 128)}] (tile rows of M = {M}) and "
                                f"wide tiles of {BN} columns must leave part of N = {N} to the narrow ones "
                                f"(wide < {cdiv(N, BN)})")
    return rows, wide, cdiv(N - wide * BN, bn2), bn2


def check_options(BN=256, STAGES=None, CM=1, group=GROUP, DEFER=None, PINGPONG=False, PDL=True, SPLIT=None,
                  sms=TARGET.sm_count, PART=None, PASS=None):
    """Each tuning option of :func:`gemm_sm90` on its own, its kind and the range no other option moves
    (:class:`~tirxpy_kernels.errors.KernelConfigError` naming the first bad one). ``PINGPONG=None`` passes (tirxpy_kernels.gemm
    then picks the schedule). :func:`check_config` runs this first; :func:`tirxpy_kernels.gemm` runs it before it picks
    a tile.

        >>> check_options(BN=192, STAGES=4, SPLIT=(16, 1, 240))
        >>> check_options(group=0)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: gemm_sm90: group = 0 is out of range; it must be in [1, 2147483647]
    """
    w = "gemm_sm90"
    if not 64 <= int_option(w, "BN", BN) <= 256 or BN % 16:      # on its own: a caller may pad a problem to BN
        raise KernelConfigError(f"gemm_sm90: BN = {shown(BN)} must be a multiple of 16 in [64, 256] (the wgmma N)")
    int_option(w, "STAGES", STAGES, none=True)
    int_option(w, "CM", CM)
    check_cluster(CM)
    int_option(w, "group", group, lo=1, hi=MAX_SIZE)
    int_option(w, "sms", sms, lo=1)
    int_option(w, "PART", PART, none=True)
    int_option(w, "PASS", PASS, none=True)
    flag_option(w, "PINGPONG", PINGPONG, none=True)
    flag_option(w, "DEFER", DEFER, none=True)
    flag_option(w, "PDL", PDL)
    if SPLIT is not None and not (isinstance(SPLIT, tuple) and len(SPLIT) == 3
                                  and all(type(v) is int for v in SPLIT)):
        raise KernelConfigError(f"gemm_sm90: SPLIT must be a tuple (rows, wide, bn2) of ints, got {shown(SPLIT, 60)}")


def block_stages(BN):
    """The block scaling's default ring depth: four stages, or as many as fit next to the epilogue's staging
    (three at ``BN = 256``, whose stages carry 128 row scales each besides the operands).

        >>> block_stages(128), block_stages(256)
        (4, 3)
    """
    stage = (BM + BN) * 128 + scale_bytes(BM, "block")
    return min(4, (SMEM_LIMIT - 2 * BM * 128 - 1024) // (stage + 16))


def check_config(M, N, K, BN=256, STAGES=None, CM=1, a_major="K", b_major="K", dtype="bfloat16",
                 out_dtype="bfloat16", bias=False, activation=None, sms=TARGET.sm_count, group=GROUP, DEFER=None,
                 PINGPONG=False, drop=None, PDL=True, SPLIT=None, scaling=None, b_dtype=None, PART=None, PASS=None,
                 gate=False):
    """Every check :func:`gemm_sm90` makes of its arguments, before anything is built: the options
    (:func:`check_options`), the plan (:func:`plan`) and how they combine; the first failure raises
    :class:`~tirxpy_kernels.errors.KernelConfigError` naming the option and the fix. Returns the resolved schedule:
    ``{"PP", "STAGES", "plan", "DEFER", "SPLIT" (rows, wide, narrow, bn2), "PDL"}``.

        >>> c = check_config(4096, 4096, 4096)
        >>> c["PP"], c["STAGES"], c["DEFER"], c["plan"]["grid"]
        (False, 4, True, 132)
    """
    for name, v in (("M", M), ("N", N), ("K", K)):
        # tile coordinates (TMA's, the walk's) are 32-bit: a size past 2**31 - 1 would wrap them
        int_option("gemm_sm90", name, v, lo=1, hi=MAX_SIZE)
    check_options(BN, STAGES, CM, group, DEFER, False if PINGPONG is None else PINGPONG, PDL, SPLIT, sms)
    M, N, K, BN, STAGES, CM, sms, group, PART, PASS = plain_ints(M, N, K, BN, STAGES, CM, sms, group, PART, PASS)
    if PINGPONG is None:
        raise KernelConfigError("gemm_sm90: PINGPONG must be True or False (tirxpy_kernels.gemm picks it when given None)")
    flag_option("gemm_sm90", "bias", bias)
    flag_option("gemm_sm90", "gate", gate)
    if gate and scaling is not None:
        raise KernelConfigError("gemm_sm90: a gate (ReLU's backward mask in the epilogue) takes 16-bit inputs; an FP8 "
                                f"product (scaling={shown(scaling, 20)}) has no gated epilogue: apply the mask after "
                                "it")
    activation = choice_option("gemm_sm90", "activation", activation, ACTIVATIONS)
    BM = 128
    if type(dtype) is not str or dtype not in IN_DTYPES + FP8_DTYPES:
        raise KernelConfigError(f"gemm_sm90: dtype (the inputs') must be one of {IN_DTYPES + FP8_DTYPES}, got "
                                f"{shown(dtype, 60)}")
    BK = k_block(dtype)
    if b_dtype is not None and (type(b_dtype) is not str
                                or b_dtype != dtype and not (dtype in FP8_DTYPES and b_dtype in FP8_DTYPES)):
        raise KernelConfigError(f"gemm_sm90: b_dtype = {shown(b_dtype, 40)} (B's dtype) may differ from A's ({dtype}) "
                                f"only between the FP8 formats {FP8_DTYPES}")
    check_scaling(dtype, scaling, a_major, b_major, BN, CM, PINGPONG, SPLIT, PART)
    PP = bool(PINGPONG)
    if PP and BN > widest_bn(True):
        raise KernelConfigError(f"gemm_sm90: PINGPONG keeps a whole (128, {BN}) float32 tile in each consumer's registers, "
                                f"{BN} per thread, more than fit next to the rest (at most 240): use BN <= {widest_bn(True)} or "
                                "PINGPONG=False")
    if STAGES is None:
        STAGES = block_stages(BN) if scaling == "block" else default_stages(BN, PP)
    p = plan(M, N, K, BM, BN, BK, STAGES, CM, sms, group, dtype, out_dtype, PP, scaling=scaling)
    if not all(type(v) is str and v in ("K", "MN") for v in (a_major, b_major)):
        raise KernelConfigError(f"gemm_sm90: a_major / b_major must be 'K' or 'MN', got {shown(a_major)}, "
                                f"{shown(b_major)}")
    if b_major == "MN" and BN % (64 * CM):
        raise KernelConfigError(f"gemm_sm90: BN = {BN}: an MN-major B is loaded in 64-column boxes, "
                                + ("so BN must be a multiple of 64" if CM == 1 else
                            f"{CM} multicast slices of them, so BN must be a multiple of {64 * CM}")
                         + " (or pass B K-major)")
    for name, inner in (("A", K if a_major == "K" else M), ("B", K if b_major == "K" else N), ("C", N)):
        if inner * DataType.get(dtype if name != "C" else out_dtype).itemsize % 16:
            raise KernelConfigError(f"gemm_sm90: the rows of {name} ({inner} elements) are not a multiple of 16 bytes, "
                                    "which TMA needs: pad that dimension (tirxpy_kernels.gemm does this for you)")
    for name, size, tile in (("M", M, BM), ("N", N, BN), ("K", K, BK)):
        if size < tile:
            raise KernelConfigError(f"gemm_sm90: {name} = {size} is smaller than one tile ({tile}), and a TMA box may not be "
                                    f"larger than its tensor: pad {name} to {tile} with zeros (tirxpy_kernels.gemm does this for you)")
    if PP and DEFER:
        raise KernelConfigError("gemm_sm90: with PINGPONG each consumer stores its own tile while the other one's k-loop runs, "
                                f"so DEFER does not apply (got DEFER={shown(DEFER)})")
    if DEFER and gate:
        raise KernelConfigError("gemm_sm90: a gate is read chunk by chunk from global memory in the epilogue, which a "
                                "deferred tile has no registers for: use DEFER=False or None (got "
                                f"DEFER={shown(DEFER)})")
    if DEFER and scaling == "block":
        raise KernelConfigError("gemm_sm90: scaling='block' keeps its k-block products next to the tile in registers, "
                                f"which leaves no room for a deferred tile: use DEFER=False (got DEFER={shown(DEFER)})")
    if DEFER is None:
        # not with a fused bias: ptxas hoists its predicated loads, which (with silu) do not fit in the
        # registers next to a deferred tile and spill
        DEFER = out_dtype != "float32" and not bias and not gate and not PP and scaling != "block"
    if DEFER and out_dtype == "float32":
        raise KernelConfigError("gemm_sm90: DEFER keeps a converted tile in registers until the next tile's k-loop, which "
                                "a float32 output (as many registers as the accumulator) does not leave room for: "
                                "use DEFER=False or a 16-bit output")
    DEFER = bool(DEFER)
    if scaling == "block":
        PART = block_part(BN, PART)
    PASS = check_pass(scaling, BN, PART, p["kt"], PASS)
    if SPLIT is not None:
        wide_chunks = p["epi"] * DataType.get(out_dtype).itemsize == 128
        checked = _split_checked(SPLIT, M, N, BN, p["epi"], wide_chunks, CM, PP, DEFER, b_major)
        p = plan(M, N, K, BM, BN, BK, STAGES, CM, sms, group, dtype, out_dtype, PP, SPLIT, scaling)
        SPLIT = checked         # (rows, wide, narrow, bn2), as split_tile takes it
    PDL = bool(PDL)
    if drop is not None and not (type(drop) is str and drop in DROPS):
        raise KernelConfigError(f"gemm_sm90: unknown drop={shown(drop)}; one of {DROPS}")
    if drop == "turn" and not PP:
        raise KernelConfigError("gemm_sm90: drop='turn' removes the ping-pong turns, which only PINGPONG=True has")
    return {"PP": PP, "STAGES": STAGES, "plan": p, "DEFER": DEFER, "SPLIT": SPLIT, "PDL": PDL, "PART": PART,
            "PASS": PASS}


BM = 128                # tile rows: two consumer warpgroups of 64
THREADS = 384           # a producer warpgroup and two consumer warpgroups
PRODUCER_REGS, CONSUMER_REGS = 40, 232      # the setmaxnreg split of those 384 threads' registers
GATE_COLS = 16          # gate columns read into registers at a time (GemmPlan.gate_cols)


@dataclass(frozen=True)


class GemmPlan:
    """Every size and switch :func:`tirxpy_kernels.gemm_sm90.gemm_sm90` builds its kernel from, resolved and checked
    (:func:`kernel_plan`). The kernel's parts read these names; none of them is derived again there."""

    M: int
    N: int
    K: int
    BN: int                 # tile width: the wgmma N
    stages: int             # shared-memory ring stages
    CM: int                 # CTAs per cluster (they multicast B)
    a_major: str
    b_major: str
    dtype: str              # inputs
    out_dtype: str
    bias: bool
    activation: str | None
    gate: bool              # the output is 0 where a (M, N) Gate tensor is <= 0 (ReLU's backward), after act
    group: int              # band height of the grouped tile order
    pingpong: bool          # consumers take whole tiles in turn (else: the cooperative schedule)
    defer: bool             # a tile is stored under the next tile's k-loop
    pdl: bool
    split: tuple | None     # (rows, wide, narrow, bn2) of the balanced split, as split_tile takes it
    drop: str | None        # a protocol step removed (simulator mutation tests only)
    grid: int               # CTAs launched
    units: int              # persistent units (clusters)
    tiles: int              # tiles of the whole walk
    cluster_tile_rows: int  # tile rows of the plain grid, counted in clusters
    tile_cols: int          # tile columns of the plain grid
    BK: int                 # k-block depth: one 128-byte swizzle atom of the inputs (k_block)
    scaling: str | None     # how an FP8 product is scaled (gemm_fp8_plan.SCALINGS); None for 16-bit inputs
    b_dtype: str            # B's dtype: A's, or the other FP8 format
    k_blocks: int           # k-blocks per tile (BK deep each)
    chunk_cols: int         # columns of one output chunk: 128 bytes, or the widest 2^k share of BN below
    chunks: int             # output chunks per tile
    boxes_per_round: int    # chunks one deferred store round writes (128 bytes of columns)
    rounds: int             # store rounds per tile
    narrow_bn: int          # a split's narrow tile width (BN without a split)
    b_rows_per_cta: int     # rows of B's (BN, BK) box each CTA of the cluster loads and multicasts
    stage_bytes: int        # bytes landing in one stage: A's box and all of B's
    a_boxes: int            # TMA boxes of A per stage (an MN-major A comes in 64-column boxes)
    b_boxes: int            # TMA boxes of B per stage and CTA
    multicast_mask: int     # the cluster's CTAs, as a TMA multicast mask
    empty_arrivals: int     # arrivals that release a stage: one per reading consumer warpgroup and CTA
    kloop_wait: int | None  # wgmma groups left pending in the k-loop before a stage is released
    expect_tx: bool         # the producer announces the stage's bytes
    part: int               # block scaling: columns of one part of a k-block's product (block_part; else BN)
    part_bufs: int          # block scaling: scratch accumulators the parts alternate over (part_buffers)
    pass_blocks: int        # block scaling: k-blocks per pass of the k-loop (check_pass); no wgmma stays in flight
                            # across the loop's back edge (ptxas would serialize every wgmma)
    b_window: int = 32      # block scaling: k-blocks per window of B's scales, one per lane (2 .. 32; load_b_window)
    staging_bufs: int = 2   # buffers of the epilogue's staging tile: two, or a whole tile's chunks (whole_staging)

    @property
    def cluster(self):
        """``T.launch``'s cluster shape, or None without a cluster."""
        return (self.CM,) if self.CM > 1 else None

    @property
    def bias_shape(self):
        """The ``Bias`` parameter's shape: a row of ``N`` values, or a placeholder ``(1, 1)``."""
        return (1, self.N) if self.bias else (1, 1)

    @property
    def gate_shape(self):
        """The ``Gate`` parameter's shape (a kernel with ``gate`` takes one: ``(A, B, Bias, Gate, C)``)."""
        return (self.M, self.N)

    @property
    def gate_cols(self):
        """With ``gate``: columns of the gate read into registers at a time (``GATE_COLS``, or the chunk when
        narrower), so that a ping-pong tile's two accumulators and the gate fit without spills."""
        return min(GATE_COLS, self.chunk_cols)

    @property
    def gate_box_bytes(self):
        """With ``gate``: bytes of one consumer's gate chunk (its staging rows: 128 ping-pong, 64 cooperative)."""
        return (BM if self.pingpong else 64) * self.chunk_cols * DataType.get(self.out_dtype).itemsize

    @property
    def neg_zero_guard(self):
        """Whether the store-at-once epilogue adds -0.0 to the accumulator first: without a write ahead of the
        chunk-by-chunk 16-bit conversions, ptxas takes those reads for reads inside the last wgmma's pipeline
        stage and serializes every wgmma of the kernel (C7514); a bias, an activation, a float32 output or the
        deferred epilogue's whole-tile cast write the accumulator anyway, as does an FP8 product's scaling."""
        return (not self.defer and not self.bias and self.activation is None and self.out_dtype != "float32"
                and self.scaling is None and not self.gate)

    @property
    def whole_staging(self):
        """Whether the epilogue stages the whole tile at once (:func:`~tirxpy_kernels.gemm_sm90.store_tile`): one
        buffer per chunk, so a consumer writes every chunk behind one barrier pair and issues their TMA stores
        together, instead of a chunk per barrier pair over two alternating buffers."""
        return self.staging_bufs == self.chunks and self.chunks > 2

    @property
    def first_under_epilogue(self):
        """Block scaling: whether a tile's k-block 0 starts under the previous tile's epilogue
        (:func:`~tirxpy_kernels.gemm_sm90.block_consumer`): with one scratch accumulator, whose k-loop waits for each
        k-block before its promotion; with two, the k-loop pipelines k-block 0 under k-block 1 itself, and a
        k-block 0 run apart would drain that pipeline once more per tile."""
        return self.scaling == "block" and self.part_bufs == 1

    @property
    def parts(self):
        """Block scaling: column parts of a tile (``BN / part``)."""
        return self.BN // self.part

    @property
    def scale_seg(self):
        """Block scaling: the columns of the tile one B block scale covers in every tile: 128 when ``BN`` is a
        multiple of 128 (tiles start on a block), else 64 (a tile may start mid-block)."""
        return BLOCK_SCALE if self.BN % BLOCK_SCALE == 0 else 64

    @property
    def scale_cols(self):
        """Block scaling: the column offsets in the tile of the B block scales a consumer holds per k-block, one
        per :attr:`scale_seg` columns.

            >>> kernel_plan(256, 256, 256, BN=256, dtype="float8_e4m3", scaling="block").scale_cols
            (0, 128)
            >>> kernel_plan(256, 384, 256, BN=192, dtype="float8_e4m3", scaling="block").scale_cols
            (0, 64, 128)
        """
        return tuple(range(0, self.BN, self.scale_seg))

    def pass_units(self, nb):
        """Block scaling: the ``(k-block of the pass, part)`` pairs of a pass of ``nb`` k-blocks, in issue order."""
        return [(l, p) for l in range(nb) for p in range(self.parts)]

    def part_segments(self, p):
        """Block scaling: ``(first column in the part, width, scale slot)`` of each run of part ``p``'s columns
        that one of :attr:`scale_cols` scales (a part lies in one block, or a whole-tile part spans several).

            >>> kernel_plan(256, 384, 256, BN=192, dtype="float8_e4m3", scaling="block", PART=192).part_segments(0)
            [(0, 64, 0), (64, 64, 1), (128, 64, 2)]
            >>> kernel_plan(256, 256, 256, BN=256, dtype="float8_e4m3", scaling="block").part_segments(3)
            [(0, 64, 1)]
        """
        lo, hi = p * self.part, (p + 1) * self.part
        return [(max(lo, c) - lo, min(hi, c + self.scale_seg) - max(lo, c), q) for q, c in enumerate(self.scale_cols)
                if c < hi and c + self.scale_seg > lo]


def kernel_plan(M, N, K, BN=256, STAGES=None, CM=1, a_major="K", b_major="K", dtype="bfloat16", out_dtype="bfloat16",
                bias=False, activation=None, sms=TARGET.sm_count, group=GROUP, DEFER=None, PINGPONG=False, drop=None,
                PDL=True, SPLIT=None, scaling=None, b_dtype=None, PART=None, PASS=None, gate=False) -> GemmPlan:
    """The :class:`GemmPlan` of these options (:func:`check_config` checks them first)."""
    M, N, K, BN, STAGES, CM, sms, group, PART, PASS = plain_ints(M, N, K, BN, STAGES, CM, sms, group, PART, PASS)
    c = check_config(M, N, K, BN, STAGES, CM, a_major, b_major, dtype, out_dtype, bias, activation, sms, group,
                     DEFER, PINGPONG, drop, PDL, SPLIT, scaling, b_dtype, PART, PASS, gate)
    part = c["PART"] or BN
    p, defer, split = c["plan"], c["DEFER"], c["SPLIT"]
    epi = p["epi"]
    chunks = BN // epi
    # the deferred epilogue stores 128 bytes of columns per round (several boxes when chunks are narrower), so
    # a tile takes as many barrier rounds in the next tile's k-loop as a 64-multiple BN would
    per_round = 128 // DataType.get(out_dtype).itemsize // epi if defer else 1
    return GemmPlan(
        M=M, N=N, K=K, BN=BN, BK=k_block(dtype), scaling=scaling, b_dtype=b_dtype or dtype, stages=c["STAGES"], CM=CM, a_major=a_major, b_major=b_major, dtype=dtype,
        out_dtype=out_dtype, bias=bias, activation=activation, gate=bool(gate), group=group, pingpong=c["PP"],
        defer=defer, pdl=c["PDL"], split=split, drop=drop, grid=p["grid"], units=p["units"], tiles=p["tiles"],
        cluster_tile_rows=p["cluster_tiles_m"], tile_cols=p["tiles_n"], k_blocks=p["kt"], chunk_cols=epi,
        chunks=chunks, boxes_per_round=per_round, rounds=cdiv(chunks, per_round),
        narrow_bn=BN if split is None else split[3], b_rows_per_cta=BN // CM, stage_bytes=(BM + BN) * 128 + scale_bytes(BM, scaling),
        a_boxes=1 if a_major == "K" else BM // 64, b_boxes=1 if b_major == "K" else BN // CM // 64,
        multicast_mask=(1 << CM) - 1,
        empty_arrivals=(1 if c["PP"] else 2) * CM * (4 if scaling == "block" else 1),
        kloop_wait=None if drop == "wgmma_wait" else 1, expect_tx=drop != "expect_tx",
        part=part, part_bufs=part_buffers(BN, part), pass_blocks=c["PASS"] or 2,
        staging_bufs=staging_buffers(p["smem"], chunks, epi, out_dtype, scaling, defer or gate or c["PP"]))


def staging_buffers(smem, chunks, epi, out_dtype, scaling, other_epilogue):
    """Buffers of the epilogue's staging tile: the block scaling's store-at-once epilogue stages its whole tile
    (one buffer per chunk) where the shared memory ``smem`` planned with two buffers has room for the rest; every
    other epilogue (deferred, gated, ping-pong: ``other_epilogue``) alternates two.

        >>> staging_buffers(200000, 3, 64, "bfloat16", "block", False), staging_buffers(200000, 3, 64, "bfloat16", None, False)
        (3, 2)
        >>> staging_buffers(220000, 3, 64, "bfloat16", "block", False)     # no room for a third buffer
        2
    """
    whole = smem + (chunks - 2) * BM * epi * DataType.get(out_dtype).itemsize
    return chunks if scaling == "block" and not other_epilogue and chunks > 2 and whole <= SMEM_LIMIT else 2
