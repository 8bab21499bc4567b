"""GEMM + reduce-scatter over NVLink peers, one persistent kernel per rank: rank ``r`` holds ``A_r (M, Kr)``
and ``B_r (Kr, N)`` (a shard of ``K``) and gets rows ``r Ms .. r Ms + Ms - 1`` of ``sum_q A_q @ B_q``
(``Ms = M / world``).

Built on the Hopper GEMM's parts (:mod:`tirxpy_kernels.gemm_sm90`: its stage loads, k-block step ``k_step`` and
deferred store rounds ``store_round``, unchanged) over the walk of :mod:`tirxpy_kernels.dist_rs_walk` (each
shard tiled from its own first row, the peer's rows before this rank's). The partials move one of two ways:

- **copy engines** (``transfer="copy_engine"``, :func:`build_ce`): every peer tile first, then every own
  tile (with ``SPLIT``, some of the peer's rows in the GEMM's narrower tiles so that the tiles fill the last
  round; own tiles stay ``BN`` wide). A peer tile's bf16 partial goes by local TMA stores into this rank's
  send buffer ``S``; one k-loop later (its stores complete, ``cp.async.bulk.wait_group 0``) the consumer
  counts its half in on the peer's flag ``F[chunk]`` (``red.release.sys``; a chunk is whole tile rows,
  :func:`~tirxpy_kernels.dist_rs_walk.rs_chunks`). The peer's host side stream waits for each chunk's count,
  copies its rows of ``S`` into the peer's ``OUT`` and sets the peer's ready flag ``H[chunk]`` to the call
  number (:func:`tirxpy_kernels.dist_api.gemm_reduce_scatter`; :func:`ce_model` is that stream in the
  simulator). An own tile's first store round waits until ``H[chunk] >= epoch``, and its rounds reduce-add
  into ``OUT``. Deadlock-free on any grid: waits happen only in own tiles' rounds, and every CTA sends all
  its peer tiles' signals before it reaches an own tile.
- **pushes** (``transfer="push"``, :func:`build`): ``lag`` peer rows first, then blocks of both interleaved.
  A peer tile is stored by TMA straight into the peer's receive buffer ``R`` over NVLink and counted on its
  per-tile flag (two halves per tile and call, so flags only grow, ``2 epoch`` after call ``epoch``); an own
  tile waits for that flag inside its k-loop (acquire at system scope, every thread), loads the peer's partial
  into registers, adds it to the float32 accumulator and stores the sum into ``OUT``.

Before its first store into a buffer the peer reads, a consumer waits until the peer started this call
(``G[peer] >= epoch``): the peer is past the previous call's reads of it.

    >>> from tirxpy_kernels.dist_rs_gemm import rs_gemm
    >>> [p.name for p in rs_gemm(200, 256, 128, me=0, BN=128, STAGES=2, sms=2).params][:6]
    ['A', 'B', 'OUT', 'SL', 'FP', 'HL']
    >>> [p.name for p in rs_gemm(200, 256, 128, me=0, BN=128, STAGES=2, sms=2, transfer="push").params][:6]
    ['A', 'B', 'OUT', 'RL', 'RP', 'FL']
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
from .dist_rs_walk import HALVES, chunk_halves, chunk_shard_rows, rs_chunks, rs_lag, rs_tile, shard_tile_rows
from .errors import KernelConfigError, shown
from .gemm_plan import BM, CONSUMER_REGS, GROUP, PRODUCER_REGS, THREADS, TARGET, kernel_plan
from .gemm_sm90 import k_step, load_stage, operand_shapes, staging_layout, staging_shape, store_round

DROPS = ("flag_wait", "push_wait", "peer_signal")
TRANSFERS = ("copy_engine", "push")


@T.macro
def rs_producer(P, ring, A, B, As, Bs, unit, n_tiles, me, tr, ms, lag):
    """One thread: every k-block of every tile of the CTA (the walk of :func:`rs_tile`), through the ring."""
    for i in T.serial(n_tiles):
        a0, _l0, n0, _own, _wide = rs_tile(P, unit + i * P.units, me, tr, ms, lag)
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
def signal_half(P, FP, c, l0, n0, per=0):
    """Consumer ``c``'s half of the peer tile at ``(l0, n0)``, stored earlier: once its TMA stores completed
    (``cp.async.bulk.wait_group 0``: every store this thread issued so far), count it in on the peer's flag:
    the tile's ``FP[l0 / 128, n0 / BN]`` (pushed partials), or with the copy engines (``per`` tile rows a
    chunk) its chunk's ``FP[l0 / 128 / per]``."""
    if T.thread_id_in_wg() == 0:
        if P.drop != "push_wait":
            T.ptx.bulk_wait_group(0)
        T.ptx.fence_proxy_async()
        if P.drop != "peer_signal":
            if per:
                T.ptx.red_release_sys_add_u32(FP[l0 // BM // per], T.uint32(1))
            else:
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
        _a0, l0, n0, own, _wide = rs_tile(P, unit + i * P.units, me, tr, ms, lag)
        _pa0, pl0, pn0, pown, _pwide = rs_tile(P, unit + (i - 1) * P.units, me, tr, ms, lag)
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
        _la0, ll0, ln0, lown, _lwide = rs_tile(P, unit + (n_tiles - 1) * P.units, me, tr, ms, lag)
        for j in range(P.rounds):
            rs_round(P, Cs, OUT, RP, pk, n_tiles - 1, j, c, ll0, ln0, lown)
        if not lown:
            signal_half(P, FP, c, ll0, ln0)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


@T.macro
def ce_round(P, Cs, OUT, SL, HL, pk, t, j, c, l0, n0, own, wide, epoch, per):
    """Copy-engine transfer, deferred round ``j`` of the CTA's ``t``-th tile: an own tile (always ``BN`` wide)
    is reduce-added into ``OUT`` (which holds the peer's partial once ``HL[chunk] >= epoch``: the issuing thread
    waits for that before the tile's first round), a peer tile (``wide`` false: a split's narrow one) stored
    into this rank's send buffer ``SL``."""
    if own:
        if j == 0:
            if T.thread_id_in_wg() == 0:
                if P.drop != "flag_wait":
                    T.ptx.wait_geq_sys_u32(HL[l0 // BM // per], epoch)
                T.ptx.fence_proxy_async()       # the copy engine wrote OUT; the reduce reads it through TMA
        store_round(P, OUT, Cs, pk, t, j, c, l0, n0, True, "add")
    else:
        store_round(P, SL, Cs, pk, t, j, c, l0, n0, wide)


@T.macro
def ce_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, SL, HL, epoch, i, c, pl0, pn0, pown, pwide, per, n):
    """The copy-engine consumer ``c``'s k-loop over the CTA's ``i``-th tile, ``n`` columns wide (``BN``, or a
    split's narrow tile's): round ``j`` of tile ``i - 1`` (at ``(pl0, pn0)``, in ``pk``) under k-block ``j``."""
    for k in range(min(P.rounds, P.k_blocks)):
        k_step(P, ring, acc, As, Bs, i, c, k, n)
        if i > 0:
            ce_round(P, Cs, OUT, SL, HL, pk, i - 1, k, c, pl0, pn0, pown, pwide, epoch, per)
    if P.k_blocks > P.rounds:
        for k in T.serial(P.rounds, P.k_blocks):
            k_step(P, ring, acc, As, Bs, i, c, k, n)


@T.macro
def ce_consumer(P, ring, acc, pk, As, Bs, Cs, OUT, SL, FP, HL, GL, epoch, unit, n_tiles, c, me, tr, ms, per):
    """Consumer ``c`` with the copy-engine transfer: the GEMM's k-loop and deferred rounds (:func:`ce_round`)
    over the walk; a peer tile's half counted in on its chunk's flag one k-loop after its rounds."""
    if c == 1:          # the GEMM's stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        T.ptx.barrier_arrive(5, 256)
    if T.thread_id_in_wg() == 0:
        T.ptx.wait_geq_sys_u32(GL[1 - me], epoch)          # the peer's copy engine is past the last call's SL
    for i in T.serial(n_tiles):
        _pa0, pl0, pn0, pown, pwide = rs_tile(P, unit + (i - 1) * P.units, me, tr, ms, None)
        if P.split is None:
            ce_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, SL, HL, epoch, i, c, pl0, pn0, pown, pwide, per, P.BN)
        else:
            _a0, _l0, _n0, _own, wide = rs_tile(P, unit + i * P.units, me, tr, ms, None)
            if wide:
                ce_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, SL, HL, epoch, i, c, pl0, pn0, pown, pwide, per, P.BN)
            else:
                ce_k_loop(P, ring, acc, pk, As, Bs, Cs, OUT, SL, HL, epoch, i, c, pl0, pn0, pown, pwide, per,
                          P.narrow_bn)
        for j in range(P.k_blocks, P.rounds):       # rounds left over when a tile has fewer k-blocks than rounds
            if i > 0:
                ce_round(P, Cs, OUT, SL, HL, pk, i - 1, j, c, pl0, pn0, pown, pwide, epoch, per)
        if i > 0:       # the previous tile's stores had this whole k-loop to complete: count them in now
            if not pown:
                signal_half(P, FP, c, pl0, pn0, per)
        Tx.wg.gemm_wait(0, acc)
        if T.thread_id_in_wg() == 0:
            ring.release(i * P.k_blocks + P.k_blocks - 1)
        Tx.wg.cast(pk, acc)             # frees acc for the next tile's first wgmma
    if n_tiles > 0:                     # the CTA's last tile
        _la0, ll0, ln0, lown, lwide = rs_tile(P, unit + (n_tiles - 1) * P.units, me, tr, ms, None)
        for j in range(P.rounds):
            ce_round(P, Cs, OUT, SL, HL, pk, n_tiles - 1, j, c, ll0, ln0, lown, lwide, epoch, per)
        if not lown:
            signal_half(P, FP, c, ll0, ln0, per)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


@T.macro
def rs_body(P, G, A, B, OUT, X1, X2, X3, X4, GL, GP, epoch, me, lag, per):
    """The kernel body of both transfers (``G``: shapes and layouts of :func:`_frame`): shared and register
    tiles, the stage ring, then the producer (after it stored this call's start flag) and the consumers. ``per``
    tile rows a chunk: the copy engines (``X1 .. X3`` are ``SL, FP, HL``); 0: pushes (``RL, RP, FL, FP``)."""
    As = T.alloc_shared(G.as_shape, P.dtype, layout=G.a_layout)
    Bs = T.alloc_shared(G.bs_shape, P.dtype, layout=G.b_layout)
    Cs = T.alloc_shared(staging_shape(P), P.dtype, layout=staging_layout(P))
    full = T.alloc_shared((P.stages,), "uint64")
    empty = T.alloc_shared((P.stages,), "uint64")
    acc = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))
    pk = T.alloc_local((64, P.BN), P.dtype, layout=wgmma_accumulator(P.BN))
    unit = T.cta_id(0)
    n_tiles = tiles_of_unit(unit, P.units, P.tiles)
    ring = StageRing(full, empty, P.stages, 1)
    setup_barriers([(ring, 1, P.empty_arrivals)], 1, P.pdl)
    roles = WarpRoles(THREADS, PRODUCER_REGS, CONSUMER_REGS, G.name)
    wg = T.warpgroup_id()
    if wg == 0:
        roles.enter_producer()
        if T.warp_id_in_wg() == 0:
            if T.elect_one():
                if unit == 0:
                    T.ptx.st_release_sys_u32(GP[me], epoch)      # this rank started call `epoch`
                rs_producer(P, ring, A, B, As, Bs, unit, n_tiles, me, G.tr, G.ms, lag)
    else:
        roles.enter_consumer()
        if per:
            ce_consumer(P, ring, acc, pk, As, Bs, Cs, OUT, X1, X2, X3, GL, epoch, unit, n_tiles, wg - 1, me, G.tr,
                        G.ms, per)
        else:
            rs_consumer(P, ring, acc, pk, As, Bs, Cs, OUT, X1, X2, X3, X4, GL, epoch, unit, n_tiles, wg - 1, me, G.tr,
                        G.ms, lag)


@dataclasses.dataclass(frozen=True)
class RsFrame:
    """Shapes and layouts both kernels' parameters and :func:`rs_body` take (:func:`_frame`)."""
    ms: int
    tr: int
    a_shape: tuple
    as_shape: tuple
    a_layout: object
    b_shape: tuple
    bs_shape: tuple
    b_layout: object
    name: str


def _frame(P, M, world, name):
    _a, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    return RsFrame(M // world, shard_tile_rows(M, world), (M, P.K), as_shape, a_layout, b_shape, bs_shape, b_layout,
                   name)


def _ranked(me, world, specs):
    """``{name: layout}``: each ``(name, shape, owner)`` as a tensor on rank ``owner``."""
    return {k: TileLayout(S[shape] + who @ rank) for k, shape, who in specs} | {
        "GL": TileLayout(S[(world,)] + me @ rank), "GP": TileLayout(S[(world,)] + (1 - me) @ rank)}


def build(P, M: int, me: int, world: int, lag: int):
    """The ``@T.prim_func`` of the pushed partials for rank ``me`` (module docstring); ``P`` is planned over the
    ``2 tr`` walk rows, ``lag`` those of :func:`~tirxpy_kernels.dist_rs_walk.walk_row`."""
    G = _frame(P, M, world, "dist_rs_gemm")
    ms, tr, dt, cols = G.ms, G.tr, P.dtype, P.tile_cols
    lay = _ranked(me, world, (("RL", (ms, P.N), me), ("RP", (ms, P.N), 1 - me), ("FL", (tr, cols), me),
                              ("FP", (tr, cols), 1 - me)))

    @T.prim_func
    def rs_gemm_kernel(A: T.Tensor(G.a_shape, dt), B: T.Tensor(G.b_shape, dt), OUT: T.Tensor((ms, P.N), dt),
                       RL: T.Tensor((ms, P.N), dt, layout=lay["RL"]), RP: T.Tensor((ms, P.N), dt, layout=lay["RP"]),
                       FL: T.Tensor((tr, cols), "uint32", layout=lay["FL"]),
                       FP: T.Tensor((tr, cols), "uint32", layout=lay["FP"]),
                       GL: T.Tensor((world,), "uint32", layout=lay["GL"]),
                       GP: T.Tensor((world,), "uint32", layout=lay["GP"]), epoch: T.uint32):
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl)
        rs_body(P, G, A, B, OUT, RL, RP, FL, FP, GL, GP, epoch, me, lag, 0)

    return rs_gemm_kernel


def build_ce(P, M: int, me: int, world: int, chunks: int):
    """The ``@T.prim_func`` of the copy-engine transfer for rank ``me``: peer tiles into this rank's send buffer
    ``SL`` (counted on the peer's chunk flags ``FP``), own tiles reduce-added into ``OUT`` once ``HL`` says the
    copy engine put the peer's partial there (module docstring)."""
    G = _frame(P, M, world, "dist_rs_gemm_ce")
    ms, dt = G.ms, P.dtype
    per, n = rs_chunks(G.tr, chunks)
    lay = _ranked(me, world, (("SL", (ms, P.N), me), ("FP", (n,), 1 - me)))

    @T.prim_func
    def rs_gemm_ce_kernel(A: T.Tensor(G.a_shape, dt), B: T.Tensor(G.b_shape, dt), OUT: T.Tensor((ms, P.N), dt),
                          SL: T.Tensor((ms, P.N), dt, layout=lay["SL"]), FP: T.Tensor((n,), "uint32", layout=lay["FP"]),
                          HL: T.Tensor((n,), "uint32"),
                          GL: T.Tensor((world,), "uint32", layout=lay["GL"]),
                          GP: T.Tensor((world,), "uint32", layout=lay["GP"]), epoch: T.uint32):
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl)
        rs_body(P, G, A, B, OUT, SL, FP, HL, None, GL, GP, epoch, me, None, per)

    return rs_gemm_ce_kernel


def rs_plan(M, N, K, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count, PDL=True,
            SPLIT=None):
    """The GEMM plan of the walk: ``2 tr`` tile rows (each shard tiled from its first row), ``K`` this rank's
    shard, the deferred bf16 epilogue, the GEMM's ``SPLIT`` over the walk's rows."""
    rows = world * shard_tile_rows(M, world) * BM
    return kernel_plan(rows, N, K, BN, STAGES, 1, "K", b_major, dtype, dtype, False, None, sms, GROUP, True, False,
                       None, PDL, SPLIT)


@tirxpy.jit
def rs_gemm(M, N, K, me, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count,
            PDL=True, drop=None, LAG=None, transfer="copy_engine", CHUNKS=8, SPLIT=None):
    """The GEMM + reduce-scatter kernel of rank ``me``: ``A (M, K)`` (this rank's ``K`` shard), ``B`` ``(K, N)``
    row-major (``b_major="MN"``) or ``(N, K)`` (``"K"``), ``OUT (M / world, N)`` bf16. ``BN`` a multiple of 64
    (128-byte output chunks). ``transfer``: ``"copy_engine"`` (:func:`build_ce`: partials stay local, the
    host's copy stream moves them in chunks of whole tile rows, at most ``CHUNKS`` per shard, and own tiles
    reduce-add into ``OUT``) or ``"push"`` (:func:`build`: the kernel stores peer partials over NVLink and adds
    the peer's in registers). ``LAG`` (pushes only; ``None`` with the copy engines, whose walk takes every peer
    tile first): the walk's peer rows before own rows interleave
    (:func:`~tirxpy_kernels.dist_rs_walk.walk_row`; default :func:`~tirxpy_kernels.dist_rs_walk.rs_lag`).
    ``SPLIT`` (copy engines, ``b_major="K"``): the GEMM's ``(rows, wide, bn2)`` over the walk's rows, narrow
    tiles in the peer's first ``rows`` tile rows only (:func:`~tirxpy_kernels.dist_rs_walk.rs_split` picks it).
    ``drop=`` removes one protocol step, for the simulator's mutation tests only: ``"flag_wait"`` (an own tile's
    wait for the peer's partial), ``"push_wait"`` (a half counted in before its stores completed) or
    ``"peer_signal"`` (a half never counted in)."""
    M, world, me = check_world(M, world, me, "rs_gemm")
    if transfer not in TRANSFERS:
        raise KernelConfigError(f"rs_gemm: transfer = {shown(transfer)} must be one of {TRANSFERS}")
    if drop is not None and drop not in DROPS:
        raise KernelConfigError(f"rs_gemm: unknown drop={shown(drop)}; one of {DROPS}")
    if BN % 64:
        raise KernelConfigError(f"rs_gemm: BN = {BN} must be a multiple of 64 (its epilogue stores 64-column chunks)")
    if N % 8:
        raise KernelConfigError(f"rs_gemm: N = {N} must be a multiple of 8 (16-byte rows, which TMA needs)")
    tr = shard_tile_rows(M, world)
    if SPLIT is not None:
        if transfer != "copy_engine":
            raise KernelConfigError(f"rs_gemm: SPLIT = {shown(SPLIT)} tiles the copy-engine walk only; drop it with "
                                    f"transfer={shown(transfer)}")
        if not (isinstance(SPLIT, tuple) and len(SPLIT) == 3 and isinstance(SPLIT[0], int) and 1 <= SPLIT[0] <= tr):
            raise KernelConfigError(f"rs_gemm: SPLIT = {shown(SPLIT)} must be (rows, wide, bn2) with rows in 1 .. {tr} "
                                    "(the peer's tile rows, so every own tile stays wide); rs_split(M, N, K, BN) "
                                    "picks one")
    try:
        P = rs_plan(M, N, K, world, BN, STAGES, b_major, dtype, sms, PDL, SPLIT)
    except KernelConfigError as e:
        raise KernelConfigError(f"rs_gemm: {e}") from None
    if SPLIT is not None and (tr - SPLIT[0]) % P.group:
        raise KernelConfigError(f"rs_gemm: SPLIT = {shown(SPLIT)}: its rows must end a multiple of group = {P.group} "
                                f"rows short of the peer's {tr} (so no band of the walk mixes the shards and every own "
                                "tile comes after every peer tile); rs_split(M, N, K, BN) picks one")
    if transfer == "copy_engine":
        if LAG is not None:
            raise KernelConfigError(f"rs_gemm: LAG = {shown(LAG)} applies to transfer='push'; the copy-engine transfer "
                                    "walks every tile of the peer's rows first (pass LAG=None)")
        try:
            rs_chunks(tr, CHUNKS)
        except KernelConfigError as e:
            raise KernelConfigError(f"rs_gemm: {e}") from None
        return build_ce(dataclasses.replace(P, drop=drop), M, me, world, CHUNKS)
    if LAG is None:
        LAG = rs_lag(tr, P.tile_cols, P.units, P.group)
    if type(LAG) is not int or not 0 <= LAG <= tr or (tr - LAG) % P.group:
        raise KernelConfigError(f"rs_gemm: LAG = {shown(LAG)} must be an int in 0 .. {tr} (the shard's tile rows) "
                                f"leaving a multiple of group = {P.group} rows to interleave (tr - LAG); e.g. LAG = "
                                f"{tr}")
    return build(dataclasses.replace(P, drop=drop), M, me, world, LAG)

def ce_model(M, N, BN, me, world=2, CHUNKS=8, drop=None, SPLIT=None):
    """Rank ``me``'s copy stream as the simulator runs it (``run_ranks(..., side=)``), a model of the side
    stream of :func:`tirxpy_kernels.dist_api.gemm_reduce_scatter`: for each chunk (:func:`chunk_shard_rows`)
    one warp waits until the peer counted in every half of the chunk's tiles (``F[c]``, acquire at system
    scope: ``cuStreamWaitValue32``), copies the peer's partial rows from its send buffer into ``OUT``, stores
    ``epoch`` on the ready flag ``H[c]`` with release (``cuStreamWriteValue32``'s fence and write) and resets
    ``F[c]`` for the next call. ``drop="ready_signal"`` leaves the ready stores out (a mutation test); ``SPLIT``:
    the kernel's, which sets how many halves a chunk counts."""
    ms = M // world
    rows = chunk_shard_rows(M, world, CHUNKS)
    want = chunk_halves(M, N, BN, world, CHUNKS, SPLIT)
    n = len(rows)
    theirs = TileLayout(S[(ms, N)] + (1 - me) @ rank)
    mine = TileLayout(S[n] + me @ rank)

    @T.prim_func
    def rs_copy_engine_model(OUT: T.Tensor((ms, N), "bfloat16"), SP: T.Tensor((ms, N), "bfloat16", layout=theirs),
                             F: T.Tensor((n,), "uint32", layout=mine), H: T.Tensor((n,), "uint32"), epoch: T.uint32):
        T.launch(grid=(1,), threads=32)
        for c in range(n):
            T.ptx.wait_geq_sys_u32(F[c], T.uint32(want[c]))
            Tx.warp.copy(OUT[rows[c][0]:rows[c][1], :], SP[rows[c][0]:rows[c][1], :], guard=False)
            T.ptx.bar_warp_sync(0xFFFFFFFF)
            if T.lane_id() == 0:
                if drop != "ready_signal":
                    T.ptx.st_release_sys_u32(H[c], epoch)
                T.ptx.st_release_sys_u32(F[c], T.uint32(0))

    return rs_copy_engine_model


def simulate(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, drop=None, check=True, world=2, LAG=None,
             transfer="copy_engine", CHUNKS=8, SPLIT=None):
    """Run the kernel on ``world`` simulated ranks (:func:`tirxpy.sim.ranks.run_ranks`) on fresh bf16 inputs,
    rank ``r`` holding ``A[:, K shard r]`` and ``B[K shard r, :]``, as call number ``epoch`` (flags and signals
    as ``epoch - 1`` calls left them). Pushed partials: NaN-poisoned outputs. Copy engines: each rank's copy
    stream runs beside it (:func:`ce_model`; ``drop="ready_signal"`` is the model's mutation) and ``OUT`` is a
    symmetric buffer the two share, unwritten before the launch (a read of it before the copy is a race).
    ``SPLIT`` (copy engines): the walk's narrow tiles, with ``B`` passed K-major. Returns ``(OUT per rank, A, B,
    problems)`` (torch tensors, float32 values)."""
    import torch

    from tirxpy.sim.ranks import Symmetric, run_ranks

    g = torch.Generator().manual_seed(seed)
    kr = K // world
    ms = M // world
    a = torch.randn(M, K, generator=g).bfloat16().float()
    b = torch.randn(K, N, generator=g).bfloat16().float()
    tr = shard_tile_rows(M, world)
    sig = Symmetric("sig", (world,), "uint32", world)
    for r in range(world):
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    kdrop = None if drop == "ready_signal" else drop
    major = "MN" if SPLIT is None else "K"       # a split tiles the GEMM with a K-major B
    ks = [rs_gemm(M, N, kr, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=kdrop, LAG=LAG, transfer=transfer,
                  CHUNKS=CHUNKS, SPLIT=SPLIT, b_major=major) for r in range(world)]
    ab = [(a[:, r * kr:(r + 1) * kr].contiguous(),
           b[r * kr:(r + 1) * kr].contiguous() if SPLIT is None else b[r * kr:(r + 1) * kr].t().contiguous())
          for r in range(world)]
    if transfer == "copy_engine":
        n = len(chunk_shard_rows(M, world, CHUNKS))
        out = Symmetric("OUT", (ms, N), "bfloat16", world)
        send = Symmetric("S", (ms, N), "bfloat16", world)
        flags = Symmetric("flags", (n,), "uint32", world)
        ready = Symmetric("ready", (n,), "uint32", world)
        for r in range(world):
            flags.set(r, np.zeros(n, np.uint32))
            ready.set(r, np.full(n, epoch - 1, np.uint32))
        args = [(*ab[r], out.on(r), send.on(r), flags.on(1 - r), ready.on(r), sig.on(r), sig.on(1 - r), epoch)
                for r in range(world)]
        side = [(ce_model(M, N, BN, r, world, CHUNKS, drop if drop == "ready_signal" else None, SPLIT),
                 (out.on(r), send.on(1 - r), flags.on(r), ready.on(r), epoch)) for r in range(world)]
        res = run_ranks(ks, args, seed=seed, late=late, check=check, side=side)
        return [torch.from_numpy(out.get(r)) for r in range(world)], a, b, res[0].problems
    recv = Symmetric("R", (ms, N), "bfloat16", world)
    flags = Symmetric("flags", (tr, -(-N // BN)), "uint32", world)
    for r in range(world):
        flags.set(r, np.full((tr, -(-N // BN)), HALVES * (epoch - 1), np.uint32))
    outs = [torch.full((ms, N), float("nan")) for _ in range(world)]
    args = [(*ab[r], outs[r], recv.on(r), recv.on(1 - r), flags.on(r), flags.on(1 - r), sig.on(r), sig.on(1 - r),
             epoch) for r in range(world)]
    res = run_ranks(ks, args, seed=seed, late=late, check=check)
    return outs, a, b, res[0].problems
