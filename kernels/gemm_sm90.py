"""Warp-specialized persistent GEMM for Hopper (sm_90a): TMA -> wgmma -> registers -> TMA.

``C[M, N] = act(A @ B + bias)`` with bf16 / f16 inputs, float32 accumulation, and a bf16 / f16 /
f32 output. Written only with tirxpy's public API: tile primitives for every data movement and
MMA (``Tx.copy_async`` -> TMA load with multicast / TMA store, ``Tx.wg.gemm_async`` ->
``wgmma.mma_async`` m64nBNk16, ``Tx.wg.copy`` -> ``stmatrix``), intrinsics (``T.ptx.*``) for the
orchestration (mbarriers, named barriers, ``setmaxnreg``, cluster addressing).

Operands (``a_major`` / ``b_major`` say which dimension is contiguous in memory):

- ``a_major="K"``: ``A`` is ``(M, K)`` row-major; ``"MN"``: the kernel takes ``At = A^T``, ``(K, M)``.
- ``b_major="K"``: the kernel takes ``Bt = B^T``, ``(N, K)`` (an ``nn.Linear`` weight);
  ``"MN"``: ``B`` is ``(K, N)`` row-major.

Roles (``threads = 384``, three warpgroups; ``setmaxnreg`` moves registers to the consumers):

- warpgroup 0, **producer** (``setmaxnreg.dec 40``): one elected thread of warp 0 walks the
  CTA's tiles and k-blocks; for k-block ``g`` (counted over all tiles of the CTA) it waits
  ``empty[g % STAGES]`` (parity of the previous round), arms its own ``full[s]`` with one
  ``arrive.expect_tx`` of every byte that will land in the stage (its ``(BM, BK)`` box of A and
  all of B's ``(BN, BK)`` box: its own ``1 / CM`` share plus the shares its peers multicast), and
  issues the TMA loads: A, and its share of B multicast to the ``CM`` CTAs of the cluster (they
  all compute the same N columns, so each loads a slice of B once for all of them). A peer's
  bytes may land before this CTA arms the stage (the tx-count goes negative for a while, which
  PTX allows); they cannot land in an earlier round, because a peer refills stage ``s`` only
  after this CTA's consumers have released it.
- warpgroups 1, 2, **consumers** (``setmaxnreg.inc 232``): consumer ``c`` owns rows
  ``64 c .. 64 c + 63`` of the ``BM = 128`` tile, a ``(64, BN)`` float32 accumulator in
  registers. Per k-block: wait ``full[s]``, ``wgmma`` (``BK / 16`` instructions of
  ``m64nBNk16``), ``wait_group 1`` so the previous k-block's wgmma has finished reading its
  stage, then the consumer's first thread arrives on ``empty`` of that stage in every CTA of the
  cluster (``mapa`` + ``mbarrier.arrive.shared::cluster``, release at CTA scope: the cluster-scope
  release is a GPU-wide fence per arrival, which made the 2-CTA kernel 2.5x slower). Epilogue per tile:
  ``EPI``-column chunks (128 bytes of output; when that does not divide ``BN``, the widest
  power-of-two share of it: 16 columns at ``BN = 176``) are optionally biased / activated in float32,
  converted, written with ``stmatrix`` (or plain stores for f32) into the consumer's 64 rows of
  a double-buffered swizzled staging tile (128B swizzle; 32B for 16-column chunks), fenced to the
  async proxy and stored with a TMA store (which also clips the ragged edges) by the consumer's
  first thread after a 128-thread
  named barrier (``STORE="wg"``, the default: the two consumers never wait for each other), or
  for the whole ``(BM, EPI)`` box by one thread after a 256-thread barrier (``STORE="cta"``).
  The two staging buffers alternate over the CTA's sequence of chunks (not the chunk index: with
  an odd number of chunks per tile that would race with the previous tile's last store).
- **Deferred epilogue** (``DEFER``, the default for bf16 / f16 outputs without a fused bias):
  after the tile's last wait the whole ``(64, BN)`` accumulator is converted into 16-bit
  registers (``pk``, 64 of them at ``BN = 256``), which frees the accumulator for the next tile;
  chunk ``j`` of that converted tile is staged and TMA-stored while the next tile's k-block
  ``j`` runs its wgmma, so the tensor cores do not idle during stores (+1-1.5% on the H100). The
  CTA's last tile is stored after its tile loop; chunks a short k-loop (``KT < BN / EPI``) has
  no k-block for are stored right after it. Narrow chunks (``EPI`` below 128 bytes) go out in
  rounds of 128 bytes of columns (e.g. four 16-column boxes at ``BN = 176``), one barrier pair each.
- **Stagger** (``STAGGER``, on by default in this cooperative schedule): consumer 1 starts its first k-block
  once consumer 0 has issued its own (named barrier 5, once per CTA), so the two consumers' tile boundaries
  (the wait for the last wgmma, the cast of the tile) do not fall together (+0.0-1.5% at 4096^3, H100).
- **Balanced split** (``SPLIT``; :func:`balanced_split`, which :func:`kernels.gemm` applies): where the
  plain grid of 128 x 256 tiles leaves a partial last round (4096^3: 512 tiles on 132 SMs, 3.88 rounds),
  some tile rows are cut into 240-wide tiles instead (4096^3: 16 rows of 1 x 256 + 16 x 240, 528 tiles,
  4 per CTA), so no CTA has four wide tiles. A narrow tile loads the same box of ``B`` and runs
  ``m64n240k16`` into a prefix of the accumulator. H100, same process: +1.6-2.6% at 4096^3, +1.1-2.8% at
  8192 x 4096 x 4096 and 4096 x 8192 x 4096, +1.8-2.4% at 2048 x 8192 and 8192 x 2048 (K = 4096).
- **Ping-pong** (``PINGPONG``; :func:`choose_tile` picks it where it measured faster, e.g. N = 2112 and
  4096 x 24576 x 1536 at ``BN = 176``): consumer ``c`` takes the CTA's tiles ``c, c + 2, ...`` whole, a
  ``(128, BN)`` accumulator (two ``(64, BN)`` halves, two ``m64nBNk16`` per k-step, ``wait_group 2``
  before a stage is released; ``BN <= 192`` for the registers), and each k-block's stage is read by
  one warpgroup (``empty`` counts one arrival per CTA of the cluster). The k-loops take turns (named
  barriers 3 / 4: a tile's k-loop starts once the previous tile's has waited for all of its stages),
  so one consumer's epilogue (chunks staged in its own two buffers, TMA-stored by its first thread)
  runs under the other's k-loop. The turns also keep the parity waits sound: a stage's earlier rounds belong to the
  other consumer, and without them a wait for round ``r`` passed on its parity while round ``r - 1``
  was still loading (the simulator reports that race, ``drop="turn"``).

Schedule: persistent; cluster ``u`` of ``G`` takes cluster tiles ``u, u + G, ...`` of the
``ceil(M / (CM BM)) x ceil(N / BN)`` grid in the grouped order of :mod:`tirxpy.lang.schedule`.
Every barrier phase is a closed form of the loop counters (k-block ``g = i * KT + k`` of the
CTA's ``i``-th tile: stage ``g % STAGES``, parity ``(g / STAGES) % 2``), so the pipeline runs
across tile boundaries: the producer fills stages of the next tile while consumers store this
one. Ragged M, N, K need no guard: TMA zero-fills out-of-range loads and drops out-of-range
stores.

    >>> k = gemm_sm90(256, 256, 128, BN=128, STAGES=2)           # default: no cluster (CM=1)
    >>> k.launch.threads, k.launch.cluster, plan(256, 256, 128, BN=128)["tiles"]
    (384, None, 4)
    >>> gemm_sm90(256, 256, 128, BN=128, STAGES=2, CM=2).launch.cluster
    (2,)
"""
from __future__ import annotations

import numpy as np

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.intrinsics import register_intrinsic
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.sim import register_model

from .errors import KernelConfigError, choice_option, flag_option, int_option
from .schedule import SM_COUNT_H100
from tirxpy.lang.schedule import cdiv, grouped_tile, persistent_units, split_tile, tiles_of_unit
from tirxpy.lang import register_split

# -0.0 from an asm the C++ compiler cannot fold through: ``acc + NEG_ZERO()`` keeps an add (the identity on
# every float, signed zeros and NaN included) in the PTX; see the store-at-once epilogue in gemm_sm90
NEG_ZERO = register_intrinsic("gemm_neg_zero_f32", "mov.b32 {r}, 0x80000000;", [("r", "reg", "float32", "w")],
                              ret="r", memory=False, replace=True, doc="-0.0 as an opaque float32 register")
register_model("gemm_neg_zero_f32", lambda ctx: np.full(32, -0.0, np.float32))

SMEM_LIMIT = 232448  # sm_90 dynamic shared memory per CTA (227 KiB)
IN_DTYPES = ("bfloat16", "float16")
OUT_DTYPES = ("bfloat16", "float16", "float32")
ACTIVATIONS = (None, "relu", "silu")
_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# protocol steps ``drop=`` can remove (the simulator's mutation tests only; kernels.gemm refuses it)
DROPS = ("full_wait", "empty_wait", "expect_tx", "wgmma_wait", "acc_wait", "fence_proxy_async", "store_wait", "turn")


def plan(M, N, K, BM=128, BN=256, BK=64, STAGES=4, CM=1, sms=SM_COUNT_H100, group=4,
         dtype="bfloat16", out_dtype="bfloat16", PINGPONG=False, split=None):
    """Checked tile plan: tile counts, persistent grid and shared-memory bytes (raises ValueError).
    ``PINGPONG``: each consumer warpgroup stages its own ``(BM, EPI)`` output chunks (two buffers each).
    ``split``: ``gemm_sm90``'s ``SPLIT = (rows, wide, bn2)`` (checked by the kernel)."""
    if type(dtype) is not str or dtype not in IN_DTYPES:
        raise KernelConfigError(f"gemm_sm90: inputs must be one of {IN_DTYPES}, got {dtype!r}")
    if type(out_dtype) is not str or out_dtype not in OUT_DTYPES:
        raise KernelConfigError(f"gemm_sm90: the output dtype must be one of {OUT_DTYPES}, got {out_dtype!r}")
    if BM != 128:
        raise KernelConfigError(f"gemm_sm90: BM = {BM}; the kernel has two consumer warpgroups of 64 rows (BM = 128)")
    if BK != 64:
        raise KernelConfigError(f"gemm_sm90: BK = {BK} must be 64 (one 128-byte swizzle atom of 16-bit elements)")
    if not (isinstance(BN, int) and 64 <= BN <= 256 and BN % 16 == 0):
        raise KernelConfigError(f"gemm_sm90: BN = {BN!r} must be a multiple of 16 in [64, 256] (the wgmma N)")
    epi = 128 // _BYTES[out_dtype]          # output chunk: 128 bytes, or the widest 2^k share of BN below
    while BN % epi:
        epi //= 2
    if CM not in (1, 2):
        raise KernelConfigError(f"gemm_sm90: the cluster size CM = {CM} must be 1 or 2")
    if STAGES < 2:
        raise KernelConfigError(f"gemm_sm90: STAGES = {STAGES}; a pipeline needs at least 2 stages")
    if min(M, N, K) <= 0:
        raise KernelConfigError(f"gemm_sm90: M, N, K must be positive, got {(M, N, K)}")
    stage = (BM + BN) * BK * 2
    # two 128-byte-wide staging buffers; with PINGPONG two per consumer, each as wide as one output chunk
    staging = 2 * 2 * BM * epi * _BYTES[out_dtype] if PINGPONG else 2 * BM * 128
    smem = STAGES * stage + staging + 1024 + 2 * STAGES * 8
    if smem > SMEM_LIMIT:
        raise KernelConfigError(f"gemm_sm90: {STAGES} stages of {stage} bytes plus the epilogue ({staging} bytes) need "
                                f"{smem} bytes of shared memory, over the {SMEM_LIMIT} a CTA may have: use fewer stages or a smaller BN")
    tm, tn = cdiv(M, BM), cdiv(N, BN)
    tmc = cdiv(tm, CM)
    if split is None:
        tiles = tmc * tn
    else:       # split rows: `wide` tiles of BN, then tiles of bn2 to the end of N
        rows, wide, bn2 = split
        tiles = rows * (wide + cdiv(N - wide * BN, bn2)) + (tmc - rows) * tn
    units = persistent_units(tiles, sms, CM)
    return {"tiles_m": tm, "tiles_n": tn, "cluster_tiles_m": tmc, "tiles": tiles, "units": units,
            "grid": units * CM, "kt": cdiv(K, BK), "smem": smem, "epi": epi, "group": group}


# Relative per-SM throughput of a 128 x BN tile (estimated: narrower tiles move more operand bytes
# per FLOP -- 128 + BN rows per 128 x BN products -- and issue narrower wgmma). 176: measured on the
# H100 at N = 2112, 1.05-1.07x BN = 192's speed with 12 / 11 column tiles (kernels/NOTES_gemm_sm90.md)
_BN_EFFICIENCY = {256: 1.0, 192: 0.97, 176: 0.95, 128: 0.90}


def bn_candidates(CM=1, b_major="K"):
    """Tile widths :func:`choose_tile` picks from: 256, 192, 176 (K-major ``B`` only: an MN-major one is
    loaded in 64-column boxes) and 128 without a cluster; widths of whole 64-column multicast slices
    (256, 128) with ``CM = 2``.

        >>> bn_candidates(), bn_candidates(b_major="MN"), bn_candidates(CM=2)
        ((256, 192, 176, 128), (256, 192, 128), (256, 128))
    """
    return tuple(b for b in (256, 192, 176, 128)
                 if (b % 64 == 0 and (b // 64) % CM == 0) or (b == 176 and CM == 1 and b_major == "K"))


# Ping-pong tiles (PINGPONG: one consumer warpgroup per 128 x BN tile, two m64 wgmma per k-step) and the
# cooperative schedule's exposed time per tile (the deferred epilogue's barrier rounds and the turn between
# tiles, in k-blocks of a 256-wide tile; ping-pong hides its epilogue under the other consumer's k-loop): fitted
# to same-process A/B runs on the H100 (benchmarks/gemm_ab.py, 2026-11-24; kernels/NOTES_gemm_sm90.md). They
# rank the six large benchmark shapes as measured: ping-pong ahead at 8192^3 (BN 192, 1.5-5%), and with BN 176
# and its 5 stages (:func:`default_stages`) at N = 2112, 24576 x 1536, 7168 x 2048 and 4096 x 7168 x 7168 (there by
# 1.1-2.4%; 176's efficiency refitted for 5 stages in the sixteenth session: within (0.955, 0.969) every ranking
# of those runs holds); 2-4% behind at 4096^3. Against the cooperative 256 with its balanced split (SPLIT, the
# twenty-second session) ping-pong stays ahead at N = 2112, 24576 x 1536 and 7168 x 2048 and falls behind at
# 8192^3 (1.4%) and level at 4096 x 7168 x 7168: :func:`schedule_cost` ranks them so.
_PP_EFFICIENCY = {192: 0.965, 176: 0.962}
_TILE_OVERHEAD = 3.2


def tile_cost(M, N, K, BN, PINGPONG=False, sms=SM_COUNT_H100, CM=1):
    """Estimated time of the persistent schedule, in units of one 256-wide tile's k-block over its
    efficiency: rounds (``ceil(tiles / units)``, every round as long as its slowest tile) times a tile's
    k-blocks times ``BN`` over the width's efficiency (``_BN_EFFICIENCY``; ``_PP_EFFICIENCY`` with
    ``PINGPONG``), plus ``_TILE_OVERHEAD`` k-blocks per tile for the cooperative schedule. Wave
    quantization decides narrow-N shapes: N = 2112 has 8.25 tiles of 256 columns (9 launched, the
    last one 3/4 empty), exactly 11 of 192 (2.67 waves on 132 SMs) and exactly 12 of 176 (2.91
    waves; cuBLAS's tile there too).

        >>> round(tile_cost(4096, 4096, 4096, 256)), round(tile_cost(4096, 4096, 4096, 176, PINGPONG=True))
        (68813, 70254)
    """
    tiles = cdiv(cdiv(M, 128), CM) * cdiv(N, BN)
    rounds = cdiv(tiles, persistent_units(tiles, sms, CM))
    eff = _PP_EFFICIENCY[BN] if PINGPONG else _BN_EFFICIENCY[BN]
    return rounds * (cdiv(K, 64) * BN / eff + (0 if PINGPONG else _TILE_OVERHEAD * 256))


def default_stages(BN, PINGPONG=False):
    """Ring stages :func:`gemm_sm90` takes by default: 4, the most a cooperative 256-wide tile and a
    ping-pong 192-wide one fit next to their epilogue buffers; 5 for ping-pong tiles at most 176 wide,
    whose per-consumer staging is one narrow chunk. H100, same process, 5 against 4 stages at ping-pong
    BN = 176: +1.2-1.7% at 4096 x 2112 x 7168, +1.5-1.8% at 4096 x 24576 x 1536, +2.0-3.1% at 4096 x 7168 x
    2048 (three passes each, docs/performance.md).

        >>> default_stages(256), default_stages(192, True), default_stages(176, True)
        (4, 4, 5)
    """
    return 5 if PINGPONG and BN <= 176 else 4


def widest_bn(PINGPONG=False, bias=False, activation=None, out_dtype="bfloat16"):
    """The widest ``BN`` whose kernel compiles without register spills (NVRTC 13.0, sm_90a): 256 cooperative,
    192 ping-pong; with a fused bias *and* silu into a 16-bit output (the bias row, silu's temporaries and the
    converted chunk live next to the accumulator) the cooperative schedule stops at 192 (256 spills 8 bytes at
    CM = 1, 16 and 4 without the ``STAGGER`` barrier; at CM = 2 it spilled 8 bytes too until the grouped walk's
    divisions became constant where the band height divides the tile rows, and now compiles clean there, a
    margin of a few registers left untried on a GPU, so the cap stays for both). Ping-pong keeps 192 for that
    epilogue too: it spilled 48 bytes there until ldmatrix / stmatrix addresses became lane arithmetic, and since
    then compiles clean and runs right (H100, tests/kernels/test_gemm_sm90_gpu.py) and 0.9-1.1% faster than 176 at
    8192^3 (the one benchmark shape where choose_tile then picks it). tests/kernels/test_gemm_sm90.py compiles each.

        >>> widest_bn(), widest_bn(bias=True, activation="silu"), widest_bn(True, True, "silu", "bfloat16")
        (256, 192, 192)
    """
    if PINGPONG:
        return 192
    return 192 if bias and activation == "silu" and out_dtype != "float32" else 256


def choose_tile(M, N, K, sms=SM_COUNT_H100, CM=1, b_major="K", PINGPONG=None, bias=False, activation=None,
                out_dtype="bfloat16"):
    """``(BN, PINGPONG)`` with the least :func:`schedule_cost`: the widths of :func:`bn_candidates` in the
    cooperative schedule, those of them in ``_PP_EFFICIENCY`` (192, 176) in ping-pong (``PINGPONG``
    True / False restricts the choice to one schedule), none wider than :func:`widest_bn` for the
    epilogue (``bias``, ``activation``, ``out_dtype``). What :func:`kernels.gemm` runs when given
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


def schedule_cost(M, N, K, BN, PINGPONG=False, sms=SM_COUNT_H100, CM=1, b_major="K", bias=False,
                  out_dtype="bfloat16"):
    """What :func:`choose_tile` minimizes: :func:`tile_cost`, or for a cooperative tile that
    :func:`kernels.gemm` would split (``CM = 1``, K-major ``B``, no bias, a 16-bit output) the busiest CTA's
    work under :func:`balanced_split`'s ``SPLIT`` (its walk's slower tile boundary, ``_SPLIT_WALK``, included),
    in the same units. The split moves the choice at 8192^3 (cooperative 256 split, 1.4-1.8% ahead of ping-pong
    192), 4096 x 16384 x 8192 (1.8-2.2%), 1024 x 7168 x 2048 (14%), 4096 x 7168 x 7168 and x 8192 (level to 1.4%
    ahead of ping-pong 176); ping-pong stays ahead in the model and on the H100 at N = 2112, 24576 x 1536,
    7168 x 2048 and 16384 x 16384 x 4096 (same process, docs/performance.md).

        >>> round(schedule_cost(4096, 4096, 4096, 256)), round(tile_cost(4096, 4096, 4096, 256))
        (68045, 68813)
    """
    cost = tile_cost(M, N, K, BN, PINGPONG, sms, CM)
    if splittable(PINGPONG, CM, b_major, bias, out_dtype):
        best = _best_split(M, N, K, BN, sms, 4, out_dtype)
        if best is not None:
            cost = min(cost, best[0])
    return cost


def splittable(PINGPONG=False, CM=1, b_major="K", bias=False, out_dtype="bfloat16", DEFER=None):
    """Whether :func:`gemm_sm90` takes a ``SPLIT`` for these options (and so :func:`kernels.gemm` applies
    :func:`balanced_split`): the cooperative deferred schedule without a cluster, a K-major ``B``, no bias and
    a 16-bit output (``DEFER`` None or true).

        >>> splittable(), splittable(PINGPONG=True), splittable(b_major="MN"), splittable(DEFER=False)
        (True, False, False, False)
    """
    return (not PINGPONG and CM == 1 and b_major == "K" and not bias and out_dtype != "float32"
            and DEFER in (None, True, 1))


# The split walk's tile boundary, in k-blocks of a 256-wide tile: 0.51 us against the plain walk's 0.35 us
# (benchmarks/gemm_timeline.py at 4096^3, H100), a k-block 0.64 us. It keeps choose_tile on ping-pong 192 at
# 16384 x 16384 x 4096, where the split is 1.0-1.7% behind it and the model without it had them level.
_SPLIT_WALK = 0.25


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


def balanced_split(M, N, K, BN=256, sms=SM_COUNT_H100, group=4, out_dtype="bfloat16", margin=0.005):
    """A ``SPLIT = (rows, wide, bn2)`` for :func:`gemm_sm90`'s cooperative deferred schedule that deals its
    tiles over the ``sms`` persistent CTAs more evenly than the plain grid, or None. The first ``rows`` tile
    rows become ``wide`` tiles of ``BN`` columns and then tiles of ``bn2 < BN`` (the rest of ``N``), so that
    the tile count fills the last round: the CTA with the most work (:func:`tile_cost`'s units, summed over
    the tiles dealt to it) must do at least ``margin`` less than in the plain grid. ``bn2`` keeps as many
    output chunks as ``BN`` (``BN - EPI < bn2``) and a multiple of 16; ``rows`` a multiple of ``group``. Only
    for ``BN = 256`` and a plain grid of more than one round (where it was measured; the cost model does
    not weigh a narrower wgmma's lower efficiency, which matters more for narrower tiles).

    4096^3: 512 tiles of 128 x 256 are 3.88 rounds on 132 SMs (the busiest CTA: 4 wide tiles); 16 rows of
    1 x 256 + 16 x 240 and 16 rows of 16 x 256 are 528 tiles, 4 per CTA, none with four wide ones (-1.5%):

        >>> balanced_split(4096, 4096, 4096), balanced_split(2048, 2048, 2048)
        ((16, 1, 240), None)
    """
    best = _best_split(M, N, K, BN, sms, group, out_dtype, margin)
    return None if best is None else best[1]


def _best_split(M, N, K, BN, sms, group, out_dtype, margin=0.005):
    """``(busiest CTA's work, SPLIT)`` of :func:`balanced_split`, or None."""
    epi = 128 // _BYTES[out_dtype]
    TM, TN, KT = cdiv(M, 128), cdiv(N, BN), cdiv(K, 64)
    if BN != 256 or out_dtype == "float32" or TM * TN <= sms:
        return None
    if cdiv(TM * TN, persistent_units(TM * TN, sms)) * margin > 1:
        # past 1 / margin rounds the last round is less than `margin` of the busiest CTA's work: no split can
        # gain that much (and the search over every split, linear in the tiles per candidate, would be long)
        return None
    plain = _unit_loads([BN] * (TM * TN), KT, persistent_units(TM * TN, sms)).max()
    best = None
    for bn2 in range(BN - 16, BN - epi, -16):
        # the wide counts whose split rows cover N with the least overhang, two of them
        wides = sorted(range(cdiv(N, BN)), key=lambda w: w * BN + cdiv(N - w * BN, bn2) * bn2 - N)[:2]
        for wide in wides:
            narrow = cdiv(N - wide * BN, bn2)
            if wide + narrow <= TN:
                continue
            for rows in sorted(set(range(group, TM + 1, group)) | {TM}):
                widths = _split_widths(rows, wide, narrow, bn2, TM, TN, BN, group)
                loads = _unit_loads(widths, KT, persistent_units(len(widths), sms), _SPLIT_WALK)
                cost = (loads.max(), int((loads == loads.max()).sum()))     # ties: fewer CTAs with the most work
                if best is None or cost < best[0]:
                    best = (cost, (rows, wide, bn2))
    if best is None or best[0][0] > plain * (1 - margin):
        return None
    return float(best[0][0]), best[1]


def _split_checked(SPLIT, M, N, BN, EPI, wide_chunks, CM, PP, DEFER, b_major):
    """``(rows, wide, narrow, bn2)`` from ``gemm_sm90``'s ``SPLIT = (rows, wide, bn2)``, or ValueError
    (``wide_chunks``: the output chunks are 128 bytes wide)."""
    if not (isinstance(SPLIT, tuple) and len(SPLIT) == 3 and all(isinstance(v, int) for v in SPLIT)):
        raise KernelConfigError(f"gemm_sm90: SPLIT must be a tuple (rows, wide, bn2) of ints, got {SPLIT!r}")
    rows, wide, bn2 = SPLIT
    if PP or CM != 1 or not DEFER or b_major != "K" or not wide_chunks:
        raise KernelConfigError("gemm_sm90: SPLIT is a tiling of the cooperative deferred schedule without a cluster, with a "
                                "K-major B and 128-byte output chunks (PINGPONG=False, CM=1, DEFER, BN a multiple of 64 for a "
                                f"16-bit output); got PINGPONG={PP}, CM={CM}, DEFER={DEFER}, b_major={b_major!r}, BN={BN}")
    if not (bn2 % 16 == 0 and BN - EPI < bn2 < BN):
        raise KernelConfigError(f"gemm_sm90: SPLIT's narrow width {bn2} must be a multiple of 16 in ({BN - EPI}, {BN}): "
                                f"narrower than BN = {BN}, with as many {EPI}-column output chunks")
    if not (1 <= rows <= cdiv(M, 128)) or not (0 <= wide and wide * BN < N):
        raise KernelConfigError(f"gemm_sm90: SPLIT = {SPLIT}: rows must be in [1, {cdiv(M, 128)}] (tile rows of M = {M}) and "
                                f"wide tiles of {BN} columns must leave part of N = {N} to the narrow ones "
                                f"(wide < {cdiv(N, BN)})")
    return rows, wide, cdiv(N - wide * BN, bn2), bn2


def _mn_major_stages(stages, k, mn, dtype):
    """``(stages, k, mn)`` MN-major operand tiles made of dense ``(k, 64)`` TMA boxes: 64-element
    column chunks one after another, each a canonical 128B-swizzled MN-major tile (8-row K groups
    1024 bytes apart; the chunks are wgmma's 'leading dimension' stride apart)."""
    w = 64
    return ComposeLayout(swizzle_for(128, dtype),
                         TileLayout(S[(stages, k, mn // w, w) : (k * mn, w, k * w, 1)]))


def _k_major_stages(stages, mn, k, dtype):
    return ComposeLayout(swizzle_for(128, dtype), TileLayout(S[(stages, mn, k)]))


def bias_layout(epi):
    """A ``(1, epi)`` row of bias held the way the wgmma accumulator holds its columns: column
    ``8 nb + 2 (lane % 4) + c`` in slot ``2 nb + c`` of every thread of the warpgroup."""
    return TileLayout(S[(1, epi // 8, 4, 2) : (1 @ m, 2 @ m, 1 @ laneid, 1 @ m)]
                      + R[(4, 8) : (1 @ wid_in_wg, 4 @ laneid)])


def check_options(BN=256, STAGES=None, CM=1, group=4, STORE="wg", DEFER=None, PINGPONG=False, STAGGER=None,
                  PDL=True, SPLIT=None, sms=SM_COUNT_H100):
    """Each tuning option of :func:`gemm_sm90` on its own, its kind and the range no other option moves
    (:class:`~kernels.errors.KernelConfigError` naming the first bad one). ``PINGPONG=None`` passes (kernels.gemm
    then picks the schedule). :func:`check_config` runs this first; :func:`kernels.gemm` runs it before it picks
    a tile.

        >>> check_options(BN=192, STAGES=4, SPLIT=(16, 1, 240))
        >>> check_options(group=0)
        Traceback (most recent call last):
        ...
        kernels.errors.KernelConfigError: gemm_sm90: group = 0 is out of range; it must be >= 1
    """
    w = "gemm_sm90"
    int_option(w, "BN", BN)
    int_option(w, "STAGES", STAGES, none=True)
    int_option(w, "CM", CM)
    int_option(w, "group", group, lo=1)
    int_option(w, "sms", sms, lo=1)
    if not (type(STORE) is str and STORE in ("wg", "cta")):
        raise KernelConfigError(f"gemm_sm90: STORE must be 'wg' (each consumer warpgroup stores its 64 rows) or 'cta' "
                                f"(both consumers sync, one thread stores the tile's rows), got {STORE!r:.60}")
    flag_option(w, "PINGPONG", PINGPONG, none=True)
    flag_option(w, "DEFER", DEFER, none=True)
    flag_option(w, "STAGGER", STAGGER, none=True)
    flag_option(w, "PDL", PDL)
    if SPLIT is not None and not (isinstance(SPLIT, tuple) and len(SPLIT) == 3
                                  and all(isinstance(v, int) and not isinstance(v, bool) for v in SPLIT)):
        raise KernelConfigError(f"gemm_sm90: SPLIT must be a tuple (rows, wide, bn2) of ints, got {SPLIT!r:.60}")


def check_config(M, N, K, BN=256, STAGES=None, CM=1, a_major="K", b_major="K", dtype="bfloat16",
                 out_dtype="bfloat16", bias=False, activation=None, sms=SM_COUNT_H100, group=4, STORE="wg", DEFER=None,
                 PINGPONG=False, drop=None, STAGGER=None, PDL=True, SPLIT=None):
    """Every check :func:`gemm_sm90` makes of its arguments, before anything is built: the options
    (:func:`check_options`), the plan (:func:`plan`) and how they combine; the first failure raises
    :class:`~kernels.errors.KernelConfigError` naming the option and the fix. Returns the resolved schedule:
    ``{"PP", "STAGES", "plan", "DEFER", "SPLIT" (rows, wide, narrow, bn2), "STAGGER", "PDL"}``.

        >>> c = check_config(4096, 4096, 4096)
        >>> c["PP"], c["STAGES"], c["DEFER"], c["plan"]["grid"]
        (False, 4, True, 132)
    """
    for name, v in (("M", M), ("N", N), ("K", K)):
        int_option("gemm_sm90", name, v, lo=1)
    check_options(BN, STAGES, CM, group, STORE, DEFER, False if PINGPONG is None else PINGPONG, STAGGER, PDL, SPLIT,
                  sms)
    if PINGPONG is None:
        raise KernelConfigError("gemm_sm90: PINGPONG must be True or False (kernels.gemm picks it when given None)")
    flag_option("gemm_sm90", "bias", bias)
    activation = choice_option("gemm_sm90", "activation", activation, ACTIVATIONS)
    BM, BK = 128, 64
    PP = bool(PINGPONG)
    if PP and BN > widest_bn(True):
        raise KernelConfigError(f"gemm_sm90: PINGPONG keeps a whole (128, {BN}) float32 tile in each consumer's registers, "
                                f"{BN} per thread, more than fit next to the rest (at most 240): use BN <= {widest_bn(True)} or "
                                "PINGPONG=False")
    if STAGES is None:
        STAGES = default_stages(BN, PP)
    p = plan(M, N, K, BM, BN, BK, STAGES, CM, sms, group, dtype, out_dtype, PP)
    if not all(type(v) is str and v in ("K", "MN") for v in (a_major, b_major)):
        raise KernelConfigError(f"gemm_sm90: a_major / b_major must be 'K' or 'MN', got {a_major!r}, {b_major!r}")
    if b_major == "MN" and BN % (64 * CM):
        raise KernelConfigError(f"gemm_sm90: BN = {BN}: an MN-major B is loaded in 64-column boxes, "
                                + ("so BN must be a multiple of 64" if CM == 1 else
                            f"{CM} multicast slices of them, so BN must be a multiple of {64 * CM}")
                         + " (or pass B K-major)")
    for name, inner in (("A", K if a_major == "K" else M), ("B", K if b_major == "K" else N), ("C", N)):
        if inner * _BYTES[dtype if name != "C" else out_dtype] % 16:
            raise KernelConfigError(f"gemm_sm90: the rows of {name} ({inner} elements) are not a multiple of 16 bytes, "
                                    "which TMA needs: pad that dimension (kernels.gemm does this for you)")
    for name, size, tile in (("M", M, BM), ("N", N, BN), ("K", K, BK)):
        if size < tile:
            raise KernelConfigError(f"gemm_sm90: {name} = {size} is smaller than one tile ({tile}), and a TMA box may not be "
                                    f"larger than its tensor: pad {name} to {tile} with zeros (kernels.gemm does this for you)")
    if PP and (DEFER or STORE != "wg"):
        raise KernelConfigError("gemm_sm90: with PINGPONG each consumer stores its own tile while the other one's k-loop runs, "
                                f"so DEFER and STORE='cta' do not apply (got DEFER={DEFER!r}, STORE={STORE!r})")
    if DEFER is None:
        # not with a fused bias: ptxas hoists its predicated loads, which (with silu) do not fit in the
        # registers next to a deferred tile and spill
        DEFER = out_dtype != "float32" and not bias and not PP
    if DEFER and out_dtype == "float32":
        raise KernelConfigError("gemm_sm90: DEFER keeps a converted tile in registers until the next tile's k-loop, which "
                                "a float32 output (as many registers as the accumulator) does not leave room for: "
                                "use DEFER=False or a 16-bit output")
    DEFER = bool(DEFER)
    if SPLIT is not None:
        wide_chunks = p["epi"] * _BYTES[out_dtype] == 128
        checked = _split_checked(SPLIT, M, N, BN, p["epi"], wide_chunks, CM, PP, DEFER, b_major)
        p = plan(M, N, K, BM, BN, BK, STAGES, CM, sms, group, dtype, out_dtype, PP, SPLIT)
        SPLIT = checked         # (rows, wide, narrow, bn2), as split_tile takes it
    if STAGGER and PP:
        raise KernelConfigError("gemm_sm90: STAGGER offsets the two consumers of the cooperative schedule; with PINGPONG "
                                "they already take turns (use STAGGER=None or False)")
    STAGGER = not PP if STAGGER is None else bool(STAGGER)
    PDL = bool(PDL)
    if drop is not None and not (type(drop) is str and drop in DROPS):
        raise KernelConfigError(f"gemm_sm90: unknown drop={drop!r}; one of {DROPS}")
    if drop == "turn" and not PP:
        raise KernelConfigError("gemm_sm90: drop='turn' removes the ping-pong turns, which only PINGPONG=True has")
    return {"PP": PP, "STAGES": STAGES, "plan": p, "DEFER": DEFER, "SPLIT": SPLIT, "STAGGER": STAGGER, "PDL": PDL}


@tirxpy.jit
def gemm_sm90(M, N, K, BN=256, STAGES=None, CM=1, a_major="K", b_major="K", dtype="bfloat16",
              out_dtype="bfloat16", bias=False, activation=None, sms=SM_COUNT_H100, group=4, STORE="wg", DEFER=None,
              PINGPONG=False, drop=None, STAGGER=None, PDL=True, SPLIT=None):
    """The kernel for one problem: ``k(A, B, C)`` (``k(A, B, Bias, C)`` with ``bias=True``); see the
    module docstring for the operand orientations.

    ``BN``: any multiple of 16 in [64, 256] (the wgmma N); with an MN-major ``B``, a multiple of
    ``64 CM`` (64-column TMA boxes, split over the cluster). Widths that are not a multiple of 64
    store narrower output chunks, several per barrier round (``BN = 176``, cuBLAS's tile at N = 2112
    and :func:`choose_tile`'s there: 16-column chunks, four per round; kernels/NOTES_gemm_sm90.md).

    ``STAGES``: shared-memory ring stages; default :func:`default_stages` (4, or 5 for ping-pong tiles at
    most 176 wide).

    ``CM``: CTAs per cluster (1 or 2; 2: the pair computes two tile rows of the same columns and
    multicasts B). On the H100, 1 is faster (``CM = 2`` 0.97-0.99 of it, same process): a 2-CTA cluster
    always sits on the two SMs of one TPC, whose concurrent reads of the same lines the L2 request
    coalescer already merges, and without a cluster consecutive CTAs (one TPC, too) share B's columns in
    the grouped order (``benchmarks/tpc_coalescing.py``, kernels/NOTES_gemm_sm90.md).

    ``PDL`` (default on): programmatic dependent launch (``T.launch(pdl=True)``): the kernel may start while
    the previous kernel in the stream finishes; every thread waits for it (``griddepcontrol.wait``) after
    the barrier setup, before any global load or store, so the launch and setup overlap that kernel's end.
    H100, same process, back-to-back launches (``benchmarks/gemm_ab.py``, PDL on against off): 2048^3 +1.5-2.2%,
    4096^3 +0.1-0.7%, 4096 x 2112 x 7168 level to +0.6%, 4096 x 7168 x 7168 level, 8192^3 0 to -0.9%. The kernel
    never triggers its dependents early (``griddepcontrol.launch_dependents``): that let the next launch's CTAs
    take SMs as they freed, so consecutive CTAs no longer shared a TPC, and it ran 5-8% slower at 8192^3 and
    5-11% at 4096 x 24576 x 1536.

    ``drop=`` removes one protocol step, for the simulator's mutation tests only: ``"full_wait"``
    (consumers' wait on ``full``), ``"empty_wait"`` (producer's wait on ``empty``), ``"expect_tx"``
    (the TMA loads announce no bytes), ``"wgmma_wait"`` (the k-loop's ``wait=1`` before a stage is
    released), ``"acc_wait"`` (``gemm_wait(0)`` before the epilogue), ``"fence_proxy_async"``
    (before the TMA store), ``"store_wait"`` (the staging buffer's bulk read-wait) or ``"turn"``
    (``PINGPONG``'s turn barriers between the consumers' k-loops).

    ``DEFER``: store each tile during the next tile's k-loop (module docstring); ``None`` picks it
    for 16-bit outputs without ``bias``. A float32 output has no room for it (ValueError).

    ``STAGGER`` (cooperative schedule; ``None``: on): consumer 1 starts its first k-block once consumer 0 has
    issued its own (one named barrier at the start), so that the two consumers' tile boundaries, where each
    waits for its last wgmma and converts its tile, fall at different times rather than together. H100,
    same process (``benchmarks/gemm_ab.py``): 4096^3 +0.0-1.5% (8 passes, none behind), 8192^3 (``BN = 256``) -0.2 to
    +1.1%, 4096 x 7168 x 2048 level (kernels/NOTES_gemm_sm90.md).

    ``PINGPONG``: the two consumer warpgroups take whole tiles in turn (consumer ``c`` the CTA's tiles
    ``c, c + 2, ...``, a ``(128, BN)`` accumulator each: two ``m64nBNk16`` per k-step, ``BN`` registers per
    thread), so one warpgroup's epilogue runs while the other's k-loop keeps the tensor cores busy; each
    k-block's stage is read by one warpgroup. ``BN <= 192`` (the accumulator's registers); no ``DEFER``.

    ``SPLIT = (rows, wide, bn2)`` (cooperative deferred schedule, ``CM = 1``, K-major ``B``; :func:`balanced_split`
    finds one, and :func:`kernels.gemm` uses it): the first ``rows`` tile rows hold ``wide`` tiles of ``BN`` columns
    and then tiles of ``bn2`` (``BN - EPI < bn2 < BN``, a multiple of 16) to the end of ``N``, listed first
    (:func:`tirxpy.lang.schedule.split_tile`), so the tile count fills the persistent grid's last round. A narrow
    tile loads the same ``(BN, BK)`` box of ``B`` (its last ``BN - bn2`` rows unused) and runs ``m64n{bn2}k16``
    into a prefix of the accumulator; its last output chunk is the ``EPI`` columns that end the tile (they
    overlap the chunk before it, whose values they write again)."""
    c = check_config(M, N, K, BN, STAGES, CM, a_major, b_major, dtype, out_dtype, bias, activation, sms, group,
                     STORE, DEFER, PINGPONG, drop, STAGGER, PDL, SPLIT)
    BM, BK = 128, 64
    PP, STAGES, p, DEFER, SPLIT, STAGGER, PDL = (c[k] for k in ("PP", "STAGES", "plan", "DEFER", "SPLIT", "STAGGER",
                                                                  "PDL"))
    BN2 = BN if SPLIT is None else SPLIT[3]     # the narrow tiles' width
    d = drop
    XT = d != "expect_tx"
    W1 = None if d == "wgmma_wait" else 1
    KT, EPI, UNITS = p["kt"], p["epi"], p["units"]
    NCH = BN // EPI                     # output chunks per tile (one TMA box of up to 128 bytes wide each)
    # the deferred epilogue stores 128 bytes of columns per round (G boxes when chunks are narrower), so a
    # tile takes as many barrier rounds in the next tile's k-loop as a 64-multiple BN would
    G = 128 // _BYTES[out_dtype] // EPI if DEFER else 1
    NR = cdiv(NCH, G)                  # store rounds per tile
    TMC, TN, TILES = p["cluster_tiles_m"], p["tiles_n"], p["tiles"]
    BNS = BN // CM                      # rows of B's box each CTA of the cluster loads
    STAGE_BYTES = (BM + BN) * BK * 2

    if a_major == "K":
        a_shape, as_shape, SA = (M, K), (STAGES, BM, BK), _k_major_stages(STAGES, BM, BK, dtype)
    else:
        a_shape, as_shape, SA = (K, M), (STAGES, BK, BM), _mn_major_stages(STAGES, BK, BM, dtype)
    if b_major == "K":
        b_shape, bs_shape, SB = (N, K), (STAGES, BN, BK), _k_major_stages(STAGES, BN, BK, dtype)
    else:
        b_shape, bs_shape, SB = (K, N), (STAGES, BK, BN), _mn_major_stages(STAGES, BK, BN, dtype)
    SC = ComposeLayout(swizzle_for(EPI * _BYTES[out_dtype], out_dtype),
                       TileLayout(S[(2, 2, BM, EPI)] if PP else S[(2, BM, EPI)] if G == 1 else S[(2, G, BM, EPI)]))
    ACC = wgmma_accumulator(BN)
    CHUNK = wgmma_accumulator(EPI)
    BIAS = bias_layout(EPI)
    ta, tb = a_major == "MN", b_major == "K"
    NA = 1 if a_major == "K" else BM // 64      # TMA boxes of A per stage
    NB = 1 if b_major == "K" else BNS // 64     # TMA boxes of B per stage and CTA
    MASK = (1 << CM) - 1
    WG_STORE = STORE == "wg"
    cluster = (CM,) if CM > 1 else None
    bias_shape = (1, N) if bias else (1, 1)

    @T.macro
    def store_chunk(C, Cs, src, s0, t, j, nper, nb, c, m0, n0, col):
        """Round ``j`` (of ``nper`` per tile) of the CTA's ``t``-th tile, at ``(m0, n0)``: ``nb`` chunks of
        ``EPI`` columns from the tile's column ``col`` (``j G EPI``, but for a narrow ``SPLIT`` tile's last
        round; this consumer's values, accumulator layout, in columns ``s0 ..`` of ``src``) -> staging buffer
        -> TMA stores. The two buffers alternate over the CTA's round sequence ``t nper + j`` (with an odd
        ``nper``, ``j % 2`` would give a tile's first round the buffer its previous tile's last store may
        still read)."""
        b = (t * nper + j) % 2 if nper % 2 else j % 2
        # STORE "wg": each consumer stages and stores its own 64 rows behind its own barrier; "cta":
        # both consumers stage, one thread stores the (BM, EPI) box
        if d != "store_wait":
            if (T.thread_id_in_wg() == 0) if WG_STORE else (T.thread_id() == 128):
                T.ptx.bulk_wait_group_read(1)    # the store that last read this buffer is done
        T.ptx.barrier_sync(1 + c if WG_STORE else 1, 128 if WG_STORE else 256)
        if G == 1:
            Tx.wg.copy(Cs[b, c * 64:c * 64 + 64, :], src[:, s0:s0 + EPI])
        else:
            for g in range(nb):
                Tx.wg.copy(Cs[b, g, c * 64:c * 64 + 64, :], src[:, s0 + g * EPI:s0 + g * EPI + EPI])
        if d != "fence_proxy_async":
            T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c if WG_STORE else 1, 128 if WG_STORE else 256)
        if WG_STORE:
            for cc in range(2):         # one issuing thread per call site
                if T.thread_id() == 128 * (cc + 1):
                    if G == 1:
                        Tx.copy_async(C[m0 + cc * 64:m0 + cc * 64 + 64, n0 + col:n0 + col + EPI],
                                      Cs[b, cc * 64:cc * 64 + 64, :])
                    else:
                        for g in range(nb):
                            Tx.copy_async(C[m0 + cc * 64:m0 + cc * 64 + 64, n0 + col + g * EPI:n0 + col + g * EPI + EPI],
                                          Cs[b, g, cc * 64:cc * 64 + 64, :])
        else:
            if T.thread_id() == 128:
                if G == 1:
                    Tx.copy_async(C[m0:m0 + BM, n0 + col:n0 + col + EPI], Cs[b])
                else:
                    for g in range(nb):
                        Tx.copy_async(C[m0:m0 + BM, n0 + col + g * EPI:n0 + col + g * EPI + EPI], Cs[b, g])

    @T.macro
    def mma(dst, As, Bs, s, r0, k, wt, n):
        """``dst[:, :n] (+)= A[r0 .. r0 + 63] B[:, :n]`` from stage ``s`` (wgmma, A K- or MN-major),
        accumulating from k-block 1 on; ``wt``: the ``wait_group`` after it, or None. ``n``: ``BN``, or a
        narrow ``SPLIT`` tile's width (``B`` K-major: its first ``n`` rows)."""
        if n == BN:
            if a_major == "K":
                Tx.wg.gemm_async(dst, As[s, r0:r0 + 64, :], Bs[s], transpose_b=tb, accumulate=k > 0, wait=wt)
            else:
                Tx.wg.gemm_async(dst, As[s, :, r0:r0 + 64], Bs[s], transpose_a=ta, transpose_b=tb, accumulate=k > 0,
                                 wait=wt)
        else:
            Tx.wg.gemm_async(dst[:, 0:n], As[s, r0:r0 + 64, :], Bs[s, 0:n, :], transpose_b=tb, accumulate=k > 0,
                             wait=wt)

    @T.macro
    def store_round(C, Cs, src, t, j, c, m0, n0, wide):
        """Deferred round ``j`` of the CTA's ``t``-th tile (at ``(m0, n0)``, its values in ``src``); a narrow
        ``SPLIT`` tile (``wide`` false) has its last round at the ``EPI`` columns that end it."""
        if (j + 1) * EPI > BN2:
            if wide:
                store_chunk(C, Cs, src, j * EPI, t, j, NR, 1, c, m0, n0, j * EPI)
            else:
                store_chunk(C, Cs, src, BN2 - EPI, t, j, NR, 1, c, m0, n0, BN2 - EPI)
        else:
            store_chunk(C, Cs, src, j * G * EPI, t, j, NR, min(G, NCH - j * G), c, m0, n0, j * G * EPI)

    def tile_at(t, rank):
        """``(m0, n0, wide)`` of tile ``t`` of the persistent walk for the cluster's CTA ``rank`` (``wide``:
        ``BN`` columns)."""
        if SPLIT is None:
            tmc, tn = grouped_tile(t, TMC, TN, group)
            return (tmc * CM + rank) * BM, tn * BN, True
        tm, n0, wide = split_tile(t, TMC, TN, group, SPLIT, BN)
        return tm * BM, n0, wide

    @T.macro
    def release(empty, s):
        """Stage ``s`` is read: arrive on its ``empty`` barrier in every CTA of the cluster (each multicasts
        into it). Called by one thread of the consumer warpgroup after its ``wgmma.wait_group``: a
        wgmma is one warpgroup operation, and CUTLASS's pipelines signal the same way (one arrival
        per consumer warpgroup and CTA; one per warp measured 0.5-1% slower on the H100)."""
        if CM == 1:
            T.ptx.mbarrier_arrive(empty[s])
        else:
            for r in range(CM):
                T.ptx.mbarrier_arrive_cluster(T.ptx.mapa_shared(empty[s], r))

    @T.macro
    def k_loop(acc, As, Bs, full, empty, C, Cs, pk, i, c, pm0, pn0, pwide, n):
        """The cooperative consumer ``c``'s k-loop over the CTA's ``i``-th tile, ``n`` columns wide (``BN``, or a
        narrow ``SPLIT`` tile's); with ``DEFER``, round ``j`` of tile ``i - 1`` (at ``(pm0, pn0)``, in ``pk``) is
        stored under k-block ``j``."""
        for k in T.serial(KT):
            g = i * KT + k
            s = g % STAGES
            if d != "full_wait":
                T.ptx.mbarrier_wait_parity(full[s], (g // STAGES) % 2)
            mma(acc, As, Bs, s, c * 64, k, W1, n)
            if STAGGER:
                if c == 0:
                    if i == 0:
                        if k == 0:
                            T.ptx.barrier_arrive(5, 256)
            if k > 0:
                if T.thread_id_in_wg() == 0:
                    release(empty, (g + STAGES - 1) % STAGES)
            if DEFER:   # chunk k of the previous tile is stored while this k-block's wgmma runs
                for j in range(min(NR, KT)):
                    if k == j:
                        if i > 0:
                            store_round(C, Cs, pk, i - 1, j, c, pm0, pn0, pwide)

    THREADS = 384                               # producer + two consumer warpgroups
    REG_DEC, REG_INC = register_split(THREADS, 40, 232, "gemm_sm90")

    @T.prim_func
    def gemm_sm90_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
                         Bias: T.Tensor(bias_shape, out_dtype), C: T.Tensor((M, N), out_dtype)):
        T.launch(grid=(p["grid"],), threads=THREADS, cluster=cluster, pdl=PDL)
        As = T.alloc_shared(as_shape, dtype, layout=SA)
        Bs = T.alloc_shared(bs_shape, dtype, layout=SB)
        Cs = T.alloc_shared((2, 2, BM, EPI) if PP else (2, BM, EPI) if G == 1 else (2, G, BM, EPI), out_dtype,
                            layout=SC)
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        acc = T.alloc_local((64, BN), "float32", layout=ACC)
        if PP:
            acc2 = T.alloc_local((64, BN), "float32", layout=ACC)   # rows 64 .. 127 of the consumer's tile
        if DEFER:
            pk = T.alloc_local((64, BN), out_dtype, layout=ACC)     # the whole tile, converted
        else:
            out = T.alloc_local((64, EPI), out_dtype, layout=CHUNK)
        brow = T.alloc_local((1, EPI), out_dtype, layout=BIAS)
        unit = T.cta_id(0) // CM
        rank = T.cta_id(0) % CM
        n_tiles = tiles_of_unit(unit, UNITS, TILES)
        if T.thread_id() == 0:
            for s in T.serial(STAGES):
                T.ptx.mbarrier_init(full[s], 1)        # our producer's arrive.expect_tx
                T.ptx.mbarrier_init(empty[s], (1 if PP else 2) * CM)   # per consumer (PP: the one reading it)
            T.ptx.fence_mbarrier_init()
        if CM > 1:
            T.ptx.cluster_sync()
        else:
            T.ptx.syncthreads()
        if PDL:     # launched before the previous kernel in the stream has finished: wait for it here
            T.ptx.griddepcontrol_wait()
        wg = T.warpgroup_id()
        if wg == 0:
            T.ptx.setmaxnreg_dec(REG_DEC)
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    for i in T.serial(n_tiles):
                        m0, n0, _wide = tile_at(unit + i * UNITS, rank)
                        for k in T.serial(KT):
                            g = i * KT + k
                            s = g % STAGES
                            if d != "empty_wait":
                                if g >= STAGES:
                                    T.ptx.mbarrier_wait_parity(empty[s], (g // STAGES + 1) % 2)
                            k0 = k * BK
                            if XT:    # every byte landing in this stage: A, our B slice, the peers' slices
                                T.ptx.mbarrier_arrive_expect_tx(full[s], STAGE_BYTES)
                            else:
                                T.ptx.mbarrier_arrive(full[s])
                            for j in range(NB):
                                c0 = rank * BNS + j * 64
                                if b_major == "K":
                                    dst_b = Bs[s, rank * BNS:rank * BNS + BNS, :]
                                    src_b = B[n0 + rank * BNS:n0 + rank * BNS + BNS, k0:k0 + BK]
                                else:
                                    dst_b = Bs[s, :, c0:c0 + 64]
                                    src_b = B[k0:k0 + BK, n0 + c0:n0 + c0 + 64]
                                if CM > 1:
                                    Tx.copy_async(dst_b, src_b, mbar=full[s], arrive=False, multicast=MASK, expect_tx=False)
                                else:
                                    Tx.copy_async(dst_b, src_b, mbar=full[s], arrive=False, expect_tx=False)
                            for j in range(NA):
                                if a_major == "K":
                                    Tx.copy_async(As[s], A[m0:m0 + BM, k0:k0 + BK], mbar=full[s],
                                                  arrive=False, expect_tx=False)
                                else:
                                    Tx.copy_async(As[s, :, j * 64:j * 64 + 64], A[k0:k0 + BK, m0 + j * 64:m0 + j * 64 + 64],
                                                  mbar=full[s], arrive=False, expect_tx=False)
        elif PP:
            T.ptx.setmaxnreg_inc(REG_INC)
            c = wg - 1
            for j2 in T.serial((n_tiles + 1 - c) // 2):       # this consumer's tiles: c, c + 2, ...
                i = c + 2 * j2
                m0, n0, _wide = tile_at(unit + i * UNITS, rank)
                # turns: tile i's k-loop starts once tile i - 1's has waited for all of its stages (named
                # barriers 3: consumer 1's turn, 4: consumer 0's). Besides keeping the k-loops apart, this is
                # what makes the parity waits below sound: a stage's earlier rounds belong to the other
                # consumer, and a wait for round r with round r - 1 still loading would pass on its parity
                if d != "turn":
                    if i > 0:
                        T.ptx.barrier_sync(4 - c, 256)
                for k in T.serial(KT):
                    g = i * KT + k
                    s = g % STAGES
                    if d != "full_wait":
                        T.ptx.mbarrier_wait_parity(full[s], (g // STAGES) % 2)
                    for hh in range(2):         # rows 0 .. 63 and 64 .. 127: two commit groups per k-block
                        mma(acc if hh == 0 else acc2, As, Bs, s, hh * 64, k,
                            None if hh == 0 else (None if d == "wgmma_wait" else 2), BN)
                    if k > 0:                   # the previous k-block's two groups are done with its stage
                        if T.thread_id_in_wg() == 0:
                            release(empty, (g + STAGES - 1) % STAGES)
                if d != "turn":
                    if i + 1 < n_tiles:         # the other consumer's turn
                        T.ptx.barrier_arrive(3 + c, 256)
                if d != "acc_wait":
                    Tx.wg.gemm_wait(0, acc, acc2)
                if T.thread_id_in_wg() == 0:
                    release(empty, (i * KT + KT - 1) % STAGES)
                for j in range(NCH):
                    b = (j2 * NCH + j) % 2      # this consumer's buffers alternate over its chunk sequence
                    if d != "store_wait":
                        if T.thread_id_in_wg() == 0:
                            T.ptx.bulk_wait_group_read(1)    # the store that last read buffer b is done
                    T.ptx.barrier_sync(1 + c, 128)
                    if bias:
                        Tx.wg.fill(brow, T.cast(0, out_dtype))
                        Tx.wg.copy(brow, Bias[0:1, n0 + j * EPI:n0 + j * EPI + EPI])
                    for hh in range(2):
                        chunk = (acc if hh == 0 else acc2)[:, j * EPI:j * EPI + EPI]
                        if bias:
                            Tx.wg.add(chunk, chunk, brow)
                        if activation == "relu":
                            Tx.wg.relu(chunk, chunk)
                        if activation == "silu":
                            Tx.wg.silu(chunk, chunk)
                        Tx.wg.cast(out, chunk)
                        Tx.wg.copy(Cs[c, b, hh * 64:hh * 64 + 64, :], out)
                    if d != "fence_proxy_async":
                        T.ptx.fence_proxy_async()
                    T.ptx.barrier_sync(1 + c, 128)
                    for cc in range(2):         # one issuing thread per call site
                        if T.thread_id() == 128 * (cc + 1):
                            Tx.copy_async(C[m0:m0 + BM, n0 + j * EPI:n0 + j * EPI + EPI], Cs[cc, b])
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group(0)
        else:
            T.ptx.setmaxnreg_inc(REG_INC)
            c = wg - 1
            if STAGGER:     # consumer 1 starts once consumer 0 has issued its first k-block (named barrier 5)
                if c == 1:
                    T.ptx.barrier_sync(5, 256)
                elif n_tiles == 0:
                    T.ptx.barrier_arrive(5, 256)
            for i in T.serial(n_tiles):
                m0, n0, wide = tile_at(unit + i * UNITS, rank)
                if DEFER:       # the previous tile, whose bf16 / f16 values wait in pk
                    pm0, pn0, pwide = tile_at(unit + (i - 1) * UNITS, rank)
                if SPLIT is None:
                    if DEFER:
                        k_loop(acc, As, Bs, full, empty, C, Cs, pk, i, c, pm0, pn0, pwide, BN)
                    else:
                        k_loop(acc, As, Bs, full, empty, C, Cs, acc, i, c, 0, 0, True, BN)
                else:
                    if wide:
                        k_loop(acc, As, Bs, full, empty, C, Cs, pk, i, c, pm0, pn0, pwide, BN)
                    else:
                        k_loop(acc, As, Bs, full, empty, C, Cs, pk, i, c, pm0, pn0, pwide, BN2)
                if DEFER:       # rounds left over when the tile has fewer k-blocks than rounds
                    for j in range(KT, NR):
                        if i > 0:
                            store_round(C, Cs, pk, i - 1, j, c, pm0, pn0, pwide)
                if d != "acc_wait":
                    Tx.wg.gemm_wait(0, acc)
                if T.thread_id_in_wg() == 0:
                    release(empty, (i * KT + KT - 1) % STAGES)
                if not DEFER and not bias and activation is None and out_dtype != "float32":
                    # acc + (-0.0) = acc: without a write ahead of the epilogue's reads (converted to 16 bits
                    # chunk by chunk between the stores), ptxas 13.0 took them for reads inside the last
                    # wgmma's pipeline stage and serialized every wgmma of the kernel (C7514); a bias, an
                    # activation, a float32 output or the deferred epilogue's whole-tile cast do not need it
                    Tx.wg.add(acc, acc, NEG_ZERO())
                for j in range(NCH):
                    chunk = acc[:, j * EPI:j * EPI + EPI]
                    if bias:
                        Tx.wg.fill(brow, T.cast(0, out_dtype))
                        Tx.wg.copy(brow, Bias[0:1, n0 + j * EPI:n0 + j * EPI + EPI])
                        Tx.wg.add(chunk, chunk, brow)
                    if activation == "relu":
                        Tx.wg.relu(chunk, chunk)
                    if activation == "silu":
                        Tx.wg.silu(chunk, chunk)
                    if not DEFER:
                        Tx.wg.cast(out, chunk)
                        store_chunk(C, Cs, out, 0, i, j, NCH, 1, c, m0, n0, j * EPI)
                if DEFER:
                    Tx.wg.cast(pk, acc)     # frees acc for the next tile's first wgmma
            if DEFER:
                if n_tiles > 0:             # the CTA's last tile
                    lm0, ln0, lwide = tile_at(unit + (n_tiles - 1) * UNITS, rank)
                    for j in range(NR):
                        store_round(C, Cs, pk, n_tiles - 1, j, c, lm0, ln0, lwide)
            if T.thread_id_in_wg() == 0:
                T.ptx.bulk_wait_group(0)
        if CM > 1:
            T.ptx.cluster_sync()     # no CTA leaves while a peer may still multicast into it / arrive on it

    return gemm_sm90_kernel


@tirxpy.jit
def example():
    """The kernel ``python -m tirxpy compile kernels/gemm_sm90.py`` builds: the defaults at 4096^3."""
    return gemm_sm90(4096, 4096, 4096)
