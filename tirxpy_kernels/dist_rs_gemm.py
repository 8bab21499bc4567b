"""GEMM + reduce-scatter over NVLink peers, one persistent kernel per rank: rank ``r`` holds ``A_r (M, Kr)``
and ``B_r (Kr, N)`` (a shard of ``K``) and gets rows ``r Ms .. r Ms + Ms - 1`` of ``sum_q A_q @ B_q``
(``Ms = M / world``).

Built on the Hopper GEMM's parts (:mod:`tirxpy_kernels.gemm_sm90`: its stage loads, k-block step ``k_step`` and
deferred store rounds ``store_round``, unchanged) with its own tile walk and epilogue:

- **the walk**: each shard's rows are tiled from the shard's first row (``tr = ceil(Ms / 128)`` tile rows per
  shard, so no tile straddles two shards), and each rank walks the *peer's* tile rows first, then its own, in
  the GEMM's grouped order over those ``2 tr`` rows. Both ranks walk the rows of one shard in the same order,
  so the peer computes a tile of this rank's rows about half a GEMM before this rank needs it.
- **a peer tile**: its partial sum (bf16) is stored by the deferred rounds under the next tile's k-loop, by
  TMA, straight into the peer's receive buffer ``R`` (``(Ms, N)``, shard-local rows) over NVLink; after that
  k-loop (the stores long complete, ``cp.async.bulk.wait_group 0``) the consumer counts its half in on the
  peer's flag ``F[tile]`` (``red.release.sys``; two halves per tile and call). No consumer waits for NVLink.
- **an own tile**: during its k-loop (after the previous tile's store rounds have freed the staging
  registers) the consumer waits until ``F[tile] >= 2 epoch`` (acquire at system scope, every thread) and
  loads the peer's partial from its own ``R`` into registers; after the k-loop it adds it to the float32
  accumulator and the deferred rounds store the sum into ``OUT``. Nothing is reduced after the GEMM, and
  partial sums cross HBM once (written by the peer, read once).
- before its first push a consumer waits until the peer started this call (``G[peer] >= epoch``): the peer is
  past the previous call's reads of the buffer being overwritten. Flags only grow (``2 epoch`` after call
  ``epoch``), so nothing is reset between calls.

    >>> from tirxpy_kernels.dist_rs_gemm import rs_gemm, shard_tile_rows
    >>> shard_tile_rows(200, 2), shard_tile_rows(512, 2)     # Ms = 100: one tile row; Ms = 256: two
    (1, 2)
    >>> [p.name for p in rs_gemm(200, 256, 128, me=0, BN=128, STAGES=2, sms=2).params][:5]
    ['A', 'B', 'OUT', 'RL', 'RP']
"""
from __future__ import annotations

import dataclasses

import numpy as np

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.lang.schedule import tiles_of_unit
from tirxpy.layout import S, TileLayout, rank
from tirxpy.layout.atoms import wgmma_accumulator

from .dist_ag_gemm import check_world
from .errors import KernelConfigError
from .gemm_plan import BM, CONSUMER_REGS, PRODUCER_REGS, THREADS, TARGET, kernel_plan
from .gemm_sm90 import k_step, load_stage, operand_shapes, staging_layout, staging_shape, store_round, tile_at

DROPS = ("flag_wait", "push_wait", "peer_signal")
HALVES = 2          # consumer halves counted on a tile's flag per call


def shard_tile_rows(M: int, world: int) -> int:
    """Tile rows per shard, ``ceil((M / world) / 128)``: each shard's rows are tiled from its own first row."""
    return -(-(M // world) // BM)


def rs_lag(tr: int, cols: int, units: int, group: int = 4) -> int:
    """Walk rows of the peer's shard before the walk starts interleaving own rows (:func:`walk_row`): about three
    rounds of tiles (``3 units / cols`` rows), rounded up so that the ``tr - lag`` interleaved peer rows fill
    whole ``group``-row blocks; ``tr`` (peer rows first, then own rows) when the shard is too short to interleave.

        >>> rs_lag(64, 32, 132), rs_lag(32, 112, 132), rs_lag(8, 32, 132)
        (16, 4, 8)
    """
    want = -(-3 * units // cols)
    inter = max(0, (tr - want) // group * group)
    return tr - inter


def walk_row(w, tr, lag, group=4):
    """``(own, row)`` of walk row ``w`` (of ``2 tr``): the peer's rows ``0 .. lag - 1`` first, then blocks of
    ``group`` rows alternating between the peer's next rows and this rank's first rows, then this rank's
    remaining rows. Each of this rank's rows comes at least ``lag + group`` walk rows after the peer walks the
    same shard row (both ranks walk alike), so the peer's partial of it is long pushed when it is needed, and
    the pushes spread over the whole walk instead of its first half. Works on ints and on device expressions.

        >>> [walk_row(w, 6, 2, 2) for w in range(12)]      # peer rows 0 1 | 2 3 own 0 1 | 4 5 own 2 3 | own 4 5
        [(False, 0), (False, 1), (False, 2), (False, 3), (True, 0), (True, 1), (False, 4), (False, 5),
         (True, 2), (True, 3), (True, 4), (True, 5)]
    """
    inter = tr - lag
    d = _max(w - lag, 0)
    q, r = d // group, d % group
    mid = _select(q % 2 < 1, lag + q // 2 * group + r, q // 2 * group + r)
    own = _select(w < lag, 0, _select(w < lag + 2 * inter, q % 2, 1)) >= 1     # (an expression's == compares trees)
    row = _select(w < lag, w, _select(w < lag + 2 * inter, mid, w - tr))
    return own, row


def rs_tile(P, t, me, tr, ms, lag):
    """``(a0, l0, n0, own)`` of walk tile ``t``: ``a0`` its first row of ``A``, ``l0`` the same row in its
    shard (the row of ``OUT`` / ``R``), ``n0`` its first column, ``own`` whether the shard is rank ``me``'s.
    Walk rows map to shard rows by :func:`walk_row` (``lag`` peer rows first, then both interleaved).

        >>> P = rs_plan(512, 256, 64, BN=256, sms=2)     # Ms = 256: two tile rows per shard, one column
        >>> [rs_tile(P, t, 0, 2, 256, 2) for t in range(4)]      # rank 0: rank 1's rows, then its own
        [(256, 0, 0, False), (384, 128, 0, False), (0, 0, 0, True), (128, 128, 0, True)]
    """
    m0, n0, _wide = tile_at(P, t, 0)
    own, row = walk_row(m0 // BM, tr, lag, P.group)
    l0 = row * BM
    a0 = _select(own, me * ms, (1 - me) * ms) + l0
    return a0, l0, n0, own


def _max(a, b):
    return max(a, b) if isinstance(a, int) else T.max(a, b)


def _select(cond, a, b):
    """``T.select`` on device expressions, plain Python on a Python bool (the walk evaluated on the host)."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return T.select(cond, a, b)


@T.macro
def rs_producer(P, ring, A, B, As, Bs, unit, n_tiles, me, tr, ms, lag):
    """One thread: every k-block of every tile of the CTA (the walk of :func:`rs_tile`), through the ring."""
    for i in T.serial(n_tiles):
        a0, _l0, n0, _own = rs_tile(P, unit + i * P.units, me, tr, ms, lag)
        for k in T.serial(P.k_blocks):
            g = i * P.k_blocks + k
            ring.wait_empty(g)
            ring.expect_bytes(g, P.stage_bytes)
            load_stage(P, A, B, As, Bs, ring.full, ring.stage(g), a0, n0, k * P.BK, 0)


@T.macro
def fetch_partial(P, RL, FL, pk, c, l0, n0, epoch, ms):
    """Own tile at ``(l0, n0)``: wait (every thread, acquire at system scope) until the peer's two halves of it
    are in, then load consumer ``c``'s 64 rows of the peer's partial into ``pk`` (rows past the shard read 0)."""
    if P.drop != "flag_wait":
        T.ptx.wait_geq_sys_u32(FL[l0 // BM, n0 // P.BN], T.uint32(HALVES) * epoch)
    # the starts written out (a macro's local name is a variable of unknown divisibility): 4-byte vectors; edge
    # guards only where the shard or N ends inside a tile
    Tx.wg.copy(pk, RL[(l0 // BM) * BM + c * 64:(l0 // BM) * BM + c * 64 + 64, (n0 // P.BN) * P.BN:(n0 // P.BN) * P.BN + P.BN],
               guard=ms % BM != 0 or P.N % P.BN != 0)


@T.macro
def rs_round(P, Cs, OUT, RP, pk, t, j, c, l0, n0, own):
    """Deferred round ``j`` of the CTA's ``t``-th tile (values in ``pk``): into ``OUT`` (own tile) or the peer's
    receive buffer (peer tile), at the tile's shard-local row ``l0``."""
    if own:
        store_round(P, OUT, Cs, pk, t, j, c, l0, n0, True)
    else:
        store_round(P, RP, Cs, pk, t, j, c, l0, n0, True)


@T.macro
def signal_half(P, FP, c, l0, n0):
    """Consumer ``c``'s half of the peer tile at ``(l0, n0)``, stored earlier: once its TMA stores completed
    (``cp.async.bulk.wait_group 0``: every store this thread issued so far), count it in on the peer's flag."""
    if T.thread_id_in_wg() == 0:
        if P.drop != "push_wait":
            T.ptx.bulk_wait_group(0)
        T.ptx.fence_proxy_async()
        if P.drop != "peer_signal":
            T.ptx.red_release_sys_add_u32(FP[l0 // BM, n0 // P.BN], T.uint32(1))


@T.macro
def rs_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, RL, RP, FL, FP, i, c, pl0, pn0, pown, l0, n0, own, epoch, ms):
    """Consumer ``c``'s k-loop over the CTA's ``i``-th tile: round ``j`` of tile ``i - 1`` (in ``pk``) is stored
    under k-block ``j`` (those k-blocks unrolled); then an own tile's peer partial is fetched into ``pk`` (between
    two loops, so no address of it is kept live across one) and the other k-blocks run."""
    for k in range(min(P.rounds, P.k_blocks)):
        k_step(P, ring, acc, As, Bs, i, c, k, P.BN)
        if i > 0:
            rs_round(P, Cs, OUT, RP, pk, i - 1, k, c, pl0, pn0, pown)
    if P.k_blocks > P.rounds:
        if own:
            if i > 0:       # a peer tile's half is counted in before any wait (no two ranks wait on each other)
                if not pown:
                    signal_half(P, FP, c, pl0, pn0)
            fetch_partial(P, RL, FL, pk, c, l0, n0, epoch, ms)
        for k in T.serial(P.rounds, P.k_blocks):
            k_step(P, ring, acc, As, Bs, i, c, k, P.BN)


@T.macro
def rs_consumer(P, ring, acc, pk, As, Bs, Cs, OUT, RL, RP, FL, FP, GL, epoch, unit, n_tiles, c, me, tr, ms, lag):
    """Consumer ``c`` (rows ``64 c ..`` of each tile): k-loop, the peer's partial added to an own tile, the tile
    converted into ``pk`` and stored under the next tile's k-loop; a peer tile's half counted in after it."""
    if c == 1:          # the GEMM's stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        T.ptx.barrier_arrive(5, 256)
    if T.thread_id_in_wg() == 0:
        T.ptx.wait_geq_sys_u32(GL[1 - me], epoch)          # the peer is past the last call's reads of R
    for i in T.serial(n_tiles):
        _a0, l0, n0, own = rs_tile(P, unit + i * P.units, me, tr, ms, lag)
        _pa0, pl0, pn0, pown = rs_tile(P, unit + (i - 1) * P.units, me, tr, ms, lag)
        rs_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, RL, RP, FL, FP, i, c, pl0, pn0, pown, l0, n0, own, epoch, ms)
        for j in range(P.k_blocks, P.rounds):       # rounds left over when a tile has fewer k-blocks than rounds
            if i > 0:
                rs_round(P, Cs, OUT, RP, pk, i - 1, j, c, pl0, pn0, pown)
        if i > 0:       # the previous tile's stores had this whole k-loop to complete: count them in now
            if not pown:
                if P.k_blocks <= P.rounds:
                    signal_half(P, FP, c, pl0, pn0)
                elif not own:           # (an own tile counted it in before its fetch)
                    signal_half(P, FP, c, pl0, pn0)
        if P.k_blocks <= P.rounds:
            if own:
                fetch_partial(P, RL, FL, pk, c, l0, n0, epoch, ms)
        Tx.wg.gemm_wait(0, acc)
        if T.thread_id_in_wg() == 0:
            ring.release(i * P.k_blocks + P.k_blocks - 1)
        if own:
            Tx.wg.add(acc, acc, pk)
        Tx.wg.cast(pk, acc)             # frees acc for the next tile's first wgmma
    if n_tiles > 0:                     # the CTA's last tile
        _la0, ll0, ln0, lown = rs_tile(P, unit + (n_tiles - 1) * P.units, me, tr, ms, lag)
        for j in range(P.rounds):
            rs_round(P, Cs, OUT, RP, pk, n_tiles - 1, j, c, ll0, ln0, lown)
        if not lown:
            signal_half(P, FP, c, ll0, ln0)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


def build(P, M: int, me: int, world: int, lag: int):
    """The ``@T.prim_func`` for rank ``me`` (module docstring); ``P`` is planned over the ``2 tr`` walk rows,
    ``lag`` those of :func:`walk_row`."""
    ms = M // world
    tr = shard_tile_rows(M, world)
    _a, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    a_shape = (M, P.K)
    dt = P.dtype
    cols = P.tile_cols
    lay = {k: TileLayout(S[shape] + who @ rank) for k, shape, who in (
        ("RL", (ms, P.N), me), ("RP", (ms, P.N), 1 - me), ("FL", (tr, cols), me), ("FP", (tr, cols), 1 - me),
        ("GL", (world,), me), ("GP", (world,), 1 - me))}

    @T.prim_func
    def rs_gemm_kernel(A: T.Tensor(a_shape, dt), B: T.Tensor(b_shape, dt), OUT: T.Tensor((ms, P.N), dt),
                       RL: T.Tensor((ms, P.N), dt, layout=lay["RL"]), RP: T.Tensor((ms, P.N), dt, layout=lay["RP"]),
                       FL: T.Tensor((tr, cols), "uint32", layout=lay["FL"]),
                       FP: T.Tensor((tr, cols), "uint32", layout=lay["FP"]),
                       GL: T.Tensor((world,), "uint32", layout=lay["GL"]), GP: T.Tensor((world,), "uint32", layout=lay["GP"]),
                       epoch: T.uint32):
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl)
        As = T.alloc_shared(as_shape, dt, layout=a_layout)
        Bs = T.alloc_shared(bs_shape, dt, layout=b_layout)
        Cs = T.alloc_shared(staging_shape(P), dt, layout=staging_layout(P))
        full = T.alloc_shared((P.stages,), "uint64")
        empty = T.alloc_shared((P.stages,), "uint64")
        acc = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))
        pk = T.alloc_local((64, P.BN), dt, layout=wgmma_accumulator(P.BN))
        unit = T.cta_id(0)
        n_tiles = tiles_of_unit(unit, P.units, P.tiles)
        ring = StageRing(full, empty, P.stages, 1)
        setup_barriers([(ring, 1, P.empty_arrivals)], 1, P.pdl)
        roles = WarpRoles(THREADS, PRODUCER_REGS, CONSUMER_REGS, "dist_rs_gemm")
        wg = T.warpgroup_id()
        if wg == 0:
            roles.enter_producer()
            if T.warp_id_in_wg() == 0:
                if T.elect_one():
                    if unit == 0:
                        T.ptx.st_release_sys_u32(GP[me], epoch)      # this rank started call `epoch`
                    rs_producer(P, ring, A, B, As, Bs, unit, n_tiles, me, tr, ms, lag)
        else:
            roles.enter_consumer()
            rs_consumer(P, ring, acc, pk, As, Bs, Cs, OUT, RL, RP, FL, FP, GL, epoch, unit, n_tiles, wg - 1, me, tr, ms,
                        lag)

    return rs_gemm_kernel


def rs_plan(M, N, K, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count, PDL=True):
    """The GEMM plan of the walk: ``2 tr`` tile rows (each shard tiled from its first row), ``K`` this rank's
    shard, the deferred bf16 epilogue."""
    rows = world * shard_tile_rows(M, world) * BM
    return kernel_plan(rows, N, K, BN, STAGES, 1, "K", b_major, dtype, dtype, False, None, sms, 4, True, False,
                       None, PDL, None)


@tirxpy.jit
def rs_gemm(M, N, K, me, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count,
            PDL=True, drop=None, LAG=None):
    """The GEMM + reduce-scatter kernel of rank ``me``: ``A (M, K)`` (this rank's ``K`` shard), ``B`` ``(K, N)``
    row-major (``b_major="MN"``) or ``(N, K)`` (``"K"``), ``OUT (M / world, N)`` bf16. ``BN`` a multiple of 64
    (128-byte output chunks). ``LAG``: the walk's peer rows before own rows interleave (:func:`walk_row`;
    default :func:`rs_lag`; ``tr``, the shard's tile rows, walks all the peer's rows first). ``drop=`` removes
    one protocol step, for the simulator's mutation tests only: ``"flag_wait"`` (an own tile's wait for the peer's partial), ``"push_wait"`` (a half counted in before its
    stores completed) or ``"peer_signal"`` (a half never counted in)."""
    check_world(M, world, me)
    if drop is not None and drop not in DROPS:
        raise KernelConfigError(f"rs_gemm: unknown drop={drop!r}; one of {DROPS}")
    if BN % 64:
        raise KernelConfigError(f"rs_gemm: BN = {BN} must be a multiple of 64 (its epilogue stores 64-column chunks)")
    if N % 8:
        raise KernelConfigError(f"rs_gemm: N = {N} must be a multiple of 8 (16-byte rows, which TMA needs)")
    P = rs_plan(M, N, K, world, BN, STAGES, b_major, dtype, sms, PDL)
    tr = shard_tile_rows(M, world)
    if LAG is None:
        LAG = rs_lag(tr, P.tile_cols, P.units, P.group)
    if isinstance(LAG, bool) or not isinstance(LAG, int) or not 0 <= LAG <= tr or (tr - LAG) % P.group:
        raise KernelConfigError(f"rs_gemm: LAG = {LAG!r} must be an int in 0 .. {tr} (the shard's tile rows) leaving a "
                                f"multiple of group = {P.group} rows to interleave (tr - LAG); e.g. LAG = {tr}")
    return build(dataclasses.replace(P, drop=drop), M, me, world, LAG)


def simulate(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, drop=None, check=True, world=2, LAG=None):
    """Run the kernel on ``world`` simulated ranks (:func:`tirxpy.sim.ranks.run_ranks`) on fresh bf16 inputs,
    rank ``r`` holding ``A[:, K shard r]`` and ``B[K shard r, :]``, as call number ``epoch`` (flags and signals
    as ``epoch - 1`` calls left them), with NaN-poisoned outputs. Returns ``(OUT per rank, A, B, problems)``
    (torch tensors, float32 values)."""
    import torch

    from tirxpy.sim.ranks import Symmetric, run_ranks

    g = torch.Generator().manual_seed(seed)
    kr = K // world
    ms = M // world
    a = torch.randn(M, K, generator=g).bfloat16().float()
    b = torch.randn(K, N, generator=g).bfloat16().float()
    tr = shard_tile_rows(M, world)
    recv = Symmetric("R", (ms, N), "bfloat16", world)
    flags = Symmetric("flags", (tr, -(-N // BN)), "uint32", world)
    sig = Symmetric("sig", (world,), "uint32", world)
    for r in range(world):
        flags.set(r, np.full((tr, -(-N // BN)), HALVES * (epoch - 1), np.uint32))
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    outs = [torch.full((ms, N), float("nan")) for _ in range(world)]
    ks = [rs_gemm(M, N, kr, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=drop, LAG=LAG) for r in range(world)]
    args = [(a[:, r * kr:(r + 1) * kr].contiguous(), b[r * kr:(r + 1) * kr].contiguous(), outs[r],
             recv.on(r), recv.on(1 - r), flags.on(r), flags.on(1 - r), sig.on(r), sig.on(1 - r), epoch)
            for r in range(world)]
    res = run_ranks(ks, args, seed=seed, late=late, check=check)
    return outs, a, b, res[0].problems
