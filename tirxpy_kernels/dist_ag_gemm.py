"""All-gather + GEMM over NVLink peers, one persistent kernel per rank: ``C = A_full @ B`` where ``A_full``
is the row shards ``A_r`` (``Ms`` rows each) of every rank stacked in rank order.

Built on the Hopper GEMM's parts (:mod:`tirxpy_kernels.gemm_sm90`: its stage loads, consumers and epilogue,
unchanged). The shards reach the peers one of two ways (``transfer=``):

- **the copy engines** (``"copy_engine"``, :func:`build_ce`): the host's side stream copies this rank's shard
  in chunks (:func:`chunk_rows`) into the peer's buffer and after each chunk stores the count of chunks sent on
  the peer's flag ``F[me]`` (:func:`tirxpy_kernels.dist_api.all_gather_gemm`; :func:`ce_model` is that stream
  as the simulator runs it). No warp of the kernel moves data.
- **movers** (``"movers"``, :func:`build`; warps 1..3 of warpgroup 0, every CTA; ``3 * grid`` units): each
  takes pieces ``u, u + units, ..`` of its rank's shard (``PR`` rows each; ``PR`` divides both ``Ms`` and the
  tile height, so no piece straddles a tile row or a shard), and *pushes* each piece into row ``me * Ms + j *
  PR`` of the symmetric buffer of every rank, itself included where a tile row is shared (16-byte
  ``ld.global`` / ``st.global``, over NVLink for a peer). After a piece, lane 0 counts it in on that rank's
  flag ``F[me, tile_row]``: ``red.release.gpu`` locally, ``red.release.sys`` on a peer. They push only after
  the peer signalled that it started the previous call (``G[peer] >= epoch - 1``; every rank stores ``epoch``
  into each peer's pad at its start), so the peer is done reading the buffer slot being written.

**The producer** (warp 0, one thread) walks the GEMM's tiles in the GEMM's own order, own rows first
(:func:`tile_of`); a tile row this rank holds alone is loaded from its shard, and before any other tile row's
first TMA load it waits (``wait_geq_sys_u32``: acquire at system scope) until the flags hold every chunk
(:func:`ce_need_table`) or piece (:func:`need_table`) the row needs, then ``fence.proxy.async`` (the rows
were not written through the async proxy; TMA reads through it) and loads as the plain GEMM does. The API
alternates two buffer slots by call parity. Flags only grow (counts times the call number ``epoch``), so
nothing is reset between calls, and a flag counts one source rank's rows only, so a fast peer's next call can
never complete a slow one's row.

    >>> from tirxpy_kernels.dist_ag_gemm import ag_gemm, piece_rows
    >>> piece_rows(100), piece_rows(4096)
    (4, 16)
    >>> k = ag_gemm(200, 136, 104, me=1, world=2, BN=128, STAGES=2, sms=2)
    >>> [p.name for p in k.params][:6]
    ['A', 'B', 'Bias', 'C', 'AS', 'DL']
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

from .errors import KernelConfigError, int_option, shown
from .gemm_plan import BM, CONSUMER_REGS, GROUP, PRODUCER_REGS, THREADS, TARGET, kernel_plan
from .gemm_scales import Scales
from .gemm_sm90 import bias_layout, k_loop, load_stage, operand_shapes, staging_layout, staging_shape, \
    store_round, tile_at, tile_epilogue

MOVERS = 3          # warps 1 .. 3 of the producer warpgroup
WORLD = 2           # the kernel's parameter list names one peer
MAX_CHUNKS = 1024   # copy-engine chunks per shard: each is a copy and a flag write of the side stream per call


def piece_rows(ms: int) -> int:
    """Rows per moved piece: the largest power of two <= 16 dividing the shard height ``ms`` (so a piece never
    straddles a shard, nor a 128-row tile row)."""
    p = 16
    while ms % p:
        p //= 2
    return p


def own_range(M: int, world: int, me: int) -> tuple:
    """``(lo, hi)``: the tile rows ``lo .. hi`` hold rank ``me``'s rows only (none when ``lo > hi``, and none for
    a shard shorter than a tile row). The GEMM loads those straight from the rank's shard; every other tile row
    comes from the symmetric buffer.

        >>> own_range(400, 2, 0), own_range(400, 2, 1), own_range(512, 2, 1), own_range(200, 2, 1)
        ((0, 0), (2, 3), (2, 3), (0, -1))
    """
    ms = M // world
    if ms < BM:
        return 0, -1
    lo = -(-me * ms // BM)
    hi = lo - 1
    while (hi + 1) * BM < M and min((hi + 2) * BM, M) <= me * ms + ms:
        hi += 1
    return lo, hi


def need_table(M: int, world: int, me: int) -> np.ndarray:
    """``Need[q, t]`` on rank ``me``: the pieces of rank ``q``'s shard that land in tile row ``t`` of this rank's
    buffer (``uint32``): all of a peer's; of its own, only those in tile rows it shares with a peer (the rows it
    holds alone are read from the shard itself)."""
    ms = M // world
    pr = piece_rows(ms)
    rows = -(-M // BM)
    need = np.zeros((world, rows), np.uint32)
    lo, hi = own_range(M, world, me)
    for q in range(world):
        for j in range(ms // pr):
            t = (q * ms + j * pr) // BM
            if q != me or not lo <= t <= hi:
                need[q, t] += 1
    return need


def chunk_rows(ms: int, q: int, chunks: int) -> list:
    """The copy engines' chunks of rank ``q``'s shard (``ms`` rows): ``[(r0, r1), ..]`` in shard rows, at most
    ``chunks`` of them, cut where the global row ``q ms + r`` starts a 128-row tile row (so a chunk fills whole
    tile rows of the receiver's buffer wherever the shard allows). Both ranks compute the same list.

        >>> chunk_rows(8192, 1, 4), chunk_rows(200, 1, 4)
        ([(0, 2048), (2048, 4096), (4096, 6144), (6144, 8192)], [(0, 56), (56, 184), (184, 200)])
    """
    chunks = int_option("dist_ag_gemm", "CHUNKS", chunks, lo=1, hi=MAX_CHUNKS)
    base = q * ms
    cuts = {0, ms}
    for i in range(1, chunks):
        g = round((base + i * ms / chunks) / BM) * BM - base
        if 0 < g < ms:
            cuts.add(g)
    cuts = sorted(cuts)
    return list(zip(cuts[:-1], cuts[1:]))


def ce_need_table(M: int, world: int, me: int, chunks: int) -> np.ndarray:
    """``Need[q, t]`` on rank ``me`` with the copy engines: how many of peer ``q``'s chunks (:func:`chunk_rows`,
    sent in order) must be in before tile row ``t`` is read from the buffer (``uint32``; 0: none of ``q``'s
    rows are in it, and always 0 for ``q = me``, whose rows in shared tile rows are copied before the launch).

        >>> ce_need_table(512, 2, 0, 2)[1].tolist()
        [0, 0, 1, 2]
    """
    ms = M // world
    rows = -(-M // BM)
    need = np.zeros((world, rows), np.uint32)
    for q in range(world):
        if q == me:
            continue
        for c, (r0, r1) in enumerate(chunk_rows(ms, q, chunks)):
            for t in range((q * ms + r0) // BM, (q * ms + r1 - 1) // BM + 1):
                need[q, t] = c + 1
    return need


def shared_own_rows(M: int, world: int, me: int) -> list:
    """The rows ``[(r0, r1), ..]`` of rank ``me``'s shard (shard rows) that lie in tile rows shared with a peer:
    with the copy engines they are copied into this rank's own buffer before the launch (the kernel reads every
    other own row from the shard itself).

        >>> shared_own_rows(400, 2, 0), shared_own_rows(400, 2, 1), shared_own_rows(512, 2, 1)
        ([(128, 200)], [(0, 56)], [])
    """
    ms = M // world
    lo, hi = own_range(M, world, me)
    out = []
    if lo > hi:
        return [(0, ms)]
    a, b = lo * BM - me * ms, min((hi + 1) * BM, M) - me * ms
    if a > 0:
        out.append((0, a))
    if b < ms:
        out.append((b, ms))
    return out


def tile_of(P, t, me, world):
    """``(m0, n0, wide)`` of the CTA's tile ``t``: the GEMM's walk with its tile rows rotated so that rank
    ``me`` starts at the first tile row of its own shard (its own rows need no transfer; the peer's arrive
    meanwhile). A bijection of the tiles, like the walk it rotates."""
    m0, n0, wide = tile_at(P, t, 0)
    rows = -(-P.M // BM)
    lo, hi = own_range(P.M, world, me)
    off = lo % rows if lo <= hi else 0
    if off == 0:
        return m0, n0, wide
    return (m0 + off * BM) % (rows * BM), n0, wide


def check_world(M, world, me, where="dist GEMM"):
    """``(M, world, me)`` as Python ints when ``world`` is :data:`WORLD`, ``me`` a rank of it and ``M`` rows split
    evenly over the ranks (each an int: a numpy int is taken, a float or a bool is not);
    :class:`~tirxpy_kernels.errors.KernelConfigError` from ``where`` naming the first bad one otherwise.

        >>> check_world(np.int64(256), 2, 1)
        (256, 2, 1)
        >>> check_world(256, 2.0, 0, "ag_gemm")
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: ag_gemm: world must be an int, got 2.0 (float)
    """
    world = int_option(where, "world", world)
    if world != WORLD:
        raise KernelConfigError(f"dist GEMM kernels take world = {WORLD} ranks (the parameter list names one peer), "
                                f"got {world}; docs/distributed.md says how the kernel extends to more GPUs")
    me = int_option(where, "me", me)
    if not 0 <= me < world:
        raise KernelConfigError(f"me = {shown(me)} must be a rank in 0 .. {world - 1}")
    M = int_option(where, "M", M, lo=1)
    if M % world:
        raise KernelConfigError(f"M = {M} rows must split evenly over {world} ranks (each rank's shard has M / world rows)")
    return M, world, me


@T.macro
def ag_producer(P, ring, A, AS, B, As, Bs, FL, Need, epoch, unit, n_tiles, me, world, per):
    """One thread: the GEMM's tiles (own rows first) and k-blocks; a tile row this rank holds alone is loaded
    from its shard ``AS``, any other waits for its rows first (:func:`ag_wait_rows`, or with the copy engines
    (``per``: chunks per source and call) :func:`ce_wait_rows`) and is loaded from the buffer ``A``."""
    ms = P.M // world
    for i in T.serial(n_tiles):
        m0, n0, _wide = tile_of(P, unit + i * P.units, me, world)
        tr = m0 // BM
        lo, hi = own_range(P.M, world, me)
        if lo <= hi:
            own = tr >= lo and tr <= hi
            if not own:
                if per:
                    ce_wait_rows(P, FL, Need, epoch, tr, me, world, per)
                else:
                    ag_wait_rows(P, FL, Need, epoch, tr, world)
            for k in T.serial(P.k_blocks):
                ag_stage(P, ring, A, B, As, Bs, i, k, m0, n0)
                if own:
                    load_stage(P, AS, B, As, Bs, ring.full, ring.stage(i * P.k_blocks + k), m0 - me * ms, n0,
                               k * P.BK, 0)
                else:
                    load_stage(P, A, B, As, Bs, ring.full, ring.stage(i * P.k_blocks + k), m0, n0, k * P.BK, 0)
        else:                   # a shard shorter than a tile row: every tile row is shared
            if per:
                ce_wait_rows(P, FL, Need, epoch, tr, me, world, per)
            else:
                ag_wait_rows(P, FL, Need, epoch, tr, world)
            for k in T.serial(P.k_blocks):
                ag_stage(P, ring, A, B, As, Bs, i, k, m0, n0)
                load_stage(P, A, B, As, Bs, ring.full, ring.stage(i * P.k_blocks + k), m0, n0, k * P.BK, 0)


@T.macro
def ce_wait_rows(P, FL, Need, epoch, tr, me, world, per):
    """Copy engines: wait until each peer's chunks that tile row ``tr`` needs are in (``FL[q]`` counts rank
    ``q``'s chunks, ``per`` a call: ``(epoch - 1) per + Need[q, tr]``), then order the async proxy's reads
    after them."""
    if P.drop != "flag_wait":
        for q in range(world):
            if q != me:
                T.ptx.wait_geq_sys_u32(FL[q], (epoch - 1) * per + Need[q, tr])
    T.ptx.fence_proxy_async()


@T.macro
def ag_wait_rows(P, FL, Need, epoch, tr, world):
    """Wait until every source's pieces of tile row ``tr`` are in, then order the async proxy's reads after them."""
    if P.drop != "flag_wait":
        for q in range(world):
            T.ptx.wait_geq_sys_u32(FL[q, tr], Need[q, tr] * epoch)
    T.ptx.fence_proxy_async()


@T.macro
def ag_stage(P, ring, A, B, As, Bs, i, k, m0, n0):
    """Wait for k-block ``k``'s stage to be free and expect its bytes."""
    g = i * P.k_blocks + k
    ring.wait_empty(g)
    ring.expect_bytes(g, P.stage_bytes)


@T.macro
def ag_consumer(P, ring, acc, pk, out, brow, As, Bs, Bias, C, Cs, unit, n_tiles, c, me, world):
    """Consumer ``c``: the Hopper GEMM's cooperative consumer (its k-loop and deferred epilogue, unchanged) over
    the rotated tile walk of :func:`tile_of`."""
    if c == 1:          # the GEMM's stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        T.ptx.barrier_arrive(5, 256)
    for i in T.serial(n_tiles):
        m0, n0, wide = tile_of(P, unit + i * P.units, me, world)
        pm0, pn0, pwide = tile_of(P, unit + (i - 1) * P.units, me, world)
        if P.split is None:
            k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.BN)
        elif wide:
            k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.BN)
        else:
            k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.narrow_bn)
        for j in range(P.k_blocks, P.rounds):       # rounds left over when a tile has fewer k-blocks than rounds
            if i > 0:
                store_round(P, C, Cs, pk, i - 1, j, c, pm0, pn0, pwide)
        tile_epilogue(P, ring, acc, Scales(), pk, out, brow, Bias, C, Cs, i, c, m0, n0)
    if n_tiles > 0:             # the CTA's last tile
        lm0, ln0, lwide = tile_of(P, unit + (n_tiles - 1) * P.units, me, world)
        for j in range(P.rounds):
            store_round(P, C, Cs, pk, n_tiles - 1, j, c, lm0, ln0, lwide)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


@T.macro
def movers(P, AS, DL, DP, FL, FP, GL, GP, epoch, me, ms, pr, w, world, depth):
    """Warp ``w`` (1 .. MOVERS) of warpgroup 0, alone in its branch (a copy deals its chunks over the active
    threads): push this rank's pieces to the peer (and into this rank's own buffer where a tile row is shared with the
    peer), counting each one in."""
    peer = 1 - me
    units = P.grid * MOVERS
    lo, hi = own_range(P.M, world, me)
    u = T.cta_id(0) * MOVERS + (w - 1)
    if u == 0:
        if T.lane_id() == 0:
            T.ptx.st_release_sys_u32(GP[me], epoch)              # this rank started call `epoch`
    T.ptx.wait_geq_sys_u32(GL[peer], epoch - 1)                  # the peer is done with this slot's last use
    for p in T.serial((ms // pr - u + units - 1) // units):
        j = u + p * units
        r0 = me * ms + j * pr
        Tx.warp.copy(DP[r0:r0 + pr, :], AS[j * pr:j * pr + pr, :], guard=False, depth=depth)
        if ms % BM == 0 and lo <= hi:
            # shards of whole tile rows: no tile row is shared, so no local copy and no local count (none is
            # generated: fewer live values under the producer warpgroup's register cap)
            T.ptx.bar_warp_sync(0xFFFFFFFF)
            if T.lane_id() == 0:
                if P.drop != "peer_signal":
                    T.ptx.red_release_sys_add_u32(FP[me, r0 // BM], T.uint32(1))
        else:
            shared_row = r0 // BM < lo or r0 // BM > hi
            if shared_row:
                # rare (only a tile row shared with the peer), one vector in flight: the registers are spent
                Tx.warp.copy(DL[r0:r0 + pr, :], AS[j * pr:j * pr + pr, :], guard=False, depth=1)
            T.ptx.bar_warp_sync(0xFFFFFFFF)
            if T.lane_id() == 0:
                if shared_row:
                    if P.drop != "local_signal":
                        T.ptx.red_release_gpu_add_u32(FL[me, r0 // BM], T.uint32(1))
                if P.drop != "peer_signal":
                    T.ptx.red_release_sys_add_u32(FP[me, r0 // BM], T.uint32(1))


DROPS = ("flag_wait", "local_signal", "peer_signal")


@T.macro
def ag_body(P, A, B, Bias, C, AS, FL, Need, epoch, me, world, per, mv):
    """The kernel of rank ``me`` after its launch: the GEMM's shared memory, barriers and roles; warps
    1 .. 3 of the producer warpgroup run the movers when ``mv`` holds their tensors
    ``(DL, DP, FP, GL, GP, depth)``, and idle with the copy engines (``mv`` None, ``per`` chunks a call)."""
    dt, out_dt = P.dtype, P.out_dtype
    a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    As = T.alloc_shared(as_shape, dt, layout=a_layout)
    Bs = T.alloc_shared(bs_shape, dt, layout=b_layout)
    Cs = T.alloc_shared(staging_shape(P), out_dt, layout=staging_layout(P))
    full = T.alloc_shared((P.stages,), "uint64")
    empty = T.alloc_shared((P.stages,), "uint64")
    acc = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))
    pk = T.alloc_local((64, P.BN), out_dt, layout=wgmma_accumulator(P.BN))
    brow = T.alloc_local((1, 8), out_dt, layout=bias_layout(8))     # no bias: a placeholder row
    unit = T.cta_id(0)
    n_tiles = tiles_of_unit(unit, P.units, P.tiles)
    ring = StageRing(full, empty, P.stages, 1)
    setup_barriers([(ring, 1, P.empty_arrivals)], 1, P.pdl)
    roles = WarpRoles(THREADS, PRODUCER_REGS, CONSUMER_REGS, "dist_ag_gemm")
    wg = T.warpgroup_id()
    if wg == 0:
        roles.enter_producer()
        if T.warp_id_in_wg() == 0:
            if T.elect_one():
                ag_producer(P, ring, A, AS, B, As, Bs, FL, Need, epoch, unit, n_tiles, me, world, per)
        if mv is not None:
            ms = P.M // world
            for w in range(1, 1 + MOVERS):
                if T.warp_id_in_wg() == w:
                    movers(P, AS, mv[0], mv[1], FL, mv[2], mv[3], mv[4], epoch, me, ms, piece_rows(ms), w, world,
                           mv[5])
    else:
        roles.enter_consumer()
        ag_consumer(P, ring, acc, pk, pk, brow, As, Bs, Bias, C, Cs, unit, n_tiles, wg - 1, me, world)


def build(P, me: int, world: int, depth: int = 4):
    """The ``@T.prim_func`` for rank ``me``: the GEMM of plan ``P`` plus the movers (module docstring)."""
    ms = P.M // world
    rows = -(-P.M // BM)
    a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    dt, out_dt = P.dtype, P.out_dtype
    mine = TileLayout(S[(P.M, P.K)] + me @ rank)
    theirs = TileLayout(S[(P.M, P.K)] + (1 - me) @ rank)
    fl_mine = TileLayout(S[(world, rows)] + me @ rank)
    fl_theirs = TileLayout(S[(world, rows)] + (1 - me) @ rank)
    g_mine = TileLayout(S[world] + me @ rank)
    g_theirs = TileLayout(S[world] + (1 - me) @ rank)

    @T.prim_func
    def ag_gemm_kernel(A: T.Tensor((P.M, P.K), dt), B: T.Tensor(b_shape, dt), Bias: T.Tensor(P.bias_shape, out_dt),
                       C: T.Tensor((P.M, P.N), out_dt), AS: T.Tensor((ms, P.K), dt),
                       DL: T.Tensor((P.M, P.K), dt, layout=mine), DP: T.Tensor((P.M, P.K), dt, layout=theirs),
                       FL: T.Tensor((world, rows), "uint32", layout=fl_mine),
                       FP: T.Tensor((world, rows), "uint32", layout=fl_theirs),
                       GL: T.Tensor((world,), "uint32", layout=g_mine), GP: T.Tensor((world,), "uint32", layout=g_theirs),
                       Need: T.Tensor((world, rows), "uint32"), epoch: T.uint32):
        # DL is A's own buffer slot (the run passes it twice): the movers land rows in it that the producer's TMA
        # loads read once the flags say so
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl, may_alias=(("A", "DL"),))
        ag_body(P, A, B, Bias, C, AS, FL, Need, epoch, me, world, 0, (DL, DP, FP, GL, GP, depth))

    return ag_gemm_kernel


def build_ce(P, me: int, world: int, per: int):
    """The ``@T.prim_func`` for rank ``me`` with the copy engines: the GEMM of plan ``P`` whose producer waits
    on ``FL[q]``, the count of peer ``q``'s chunks written by its copy stream (``per`` a call)."""
    ms = P.M // world
    rows = -(-P.M // BM)
    a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    dt, out_dt = P.dtype, P.out_dtype
    fl_mine = TileLayout(S[world] + me @ rank)

    @T.prim_func
    def ag_gemm_ce_kernel(A: T.Tensor((P.M, P.K), dt), B: T.Tensor(b_shape, dt),
                          Bias: T.Tensor(P.bias_shape, out_dt), C: T.Tensor((P.M, P.N), out_dt),
                          AS: T.Tensor((ms, P.K), dt), FL: T.Tensor((world,), "uint32", layout=fl_mine),
                          Need: T.Tensor((world, rows), "uint32"), epoch: T.uint32):
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl)
        ag_body(P, A, B, Bias, C, AS, FL, Need, epoch, me, world, per, None)

    return ag_gemm_ce_kernel


TRANSFERS = ("movers", "copy_engine")


@tirxpy.jit
def ag_gemm(M, N, K, me, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count,
            PDL=True, drop=None, DEPTH=4, transfer="movers", CHUNKS=4, SPLIT=None):
    """The all-gather GEMM kernel of rank ``me``: ``M`` rows in all (``M / world`` per rank), ``C (M, N)``;
    ``B`` is ``(K, N)`` row-major (``b_major="MN"``) or ``(N, K)`` (``"K"``). The deferred bf16 epilogue of
    the Hopper GEMM; no bias (the ``Bias`` parameter is its ``(1, 1)`` placeholder). ``transfer``: who moves
    the shards, ``"movers"`` (warps of this kernel, :func:`build`; ``DEPTH``: the 16-byte vectors a mover lane
    keeps in flight) or ``"copy_engine"`` (the host's copy stream in ``CHUNKS`` chunks per shard,
    :func:`build_ce`). ``SPLIT``: the GEMM's tiling with narrower tiles in some rows
    (:func:`tirxpy_kernels.gemm_plan.balanced_split`); the rotated walk gives each tile row the columns of the
    row it takes the place of, so the tiles still cover ``C`` once. ``drop=`` removes one protocol step, for the
    simulator's mutation tests only: ``"flag_wait"`` (the producer's wait for a tile row's rows), ``"local_signal"`` (the movers' count of a
    piece on their own rank's flag) or ``"peer_signal"`` (on the peer's)."""
    M, world, me = check_world(M, world, me, "ag_gemm")
    if transfer not in TRANSFERS:
        raise KernelConfigError(f"ag_gemm: transfer = {shown(transfer)} must be one of {TRANSFERS}")
    if drop is not None and drop not in DROPS:
        raise KernelConfigError(f"ag_gemm: unknown drop={shown(drop)}; one of {DROPS}")
    if type(DEPTH) is not int or not 1 <= DEPTH <= 16:
        raise KernelConfigError(f"ag_gemm: DEPTH = {shown(DEPTH)} must be an integer in 1 .. 16 (vectors in flight per "
                                "lane)")
    per = len(chunk_rows(M // world, 1 - me, CHUNKS))       # (CHUNKS checked with either transfer)
    P = kernel_plan(M, N, K, BN, STAGES, 1, "K", b_major, dtype, "bfloat16", False, None, sms, GROUP, True, False,
                    None, PDL, SPLIT)
    P = dataclasses.replace(P, drop=drop)
    if transfer == "copy_engine":
        return build_ce(P, me, world, per)
    return build(P, me, world, DEPTH)


@tirxpy.jit
def ce_model(M, K, me, world=2, CHUNKS=4, drop=None):
    """Rank ``me``'s copy-engine transfer as the simulator runs it (``run_ranks(..., side=)``), a model of the
    side stream of :func:`tirxpy_kernels.dist_api.all_gather_gemm`: one warp copies each chunk of the shard
    (:func:`chunk_rows`) into its rows of the peer's slot, then stores the count of chunks sent on the peer's
    flag ``F[me]`` with release at system scope (what ``cuStreamWriteValue32``'s fence and write amount to).
    ``drop="peer_signal"`` leaves the flag writes out (the simulator's mutation tests)."""
    ms = M // world
    chunks = chunk_rows(ms, me, CHUNKS)
    per = len(chunks)
    theirs = TileLayout(S[(M, K)] + (1 - me) @ rank)
    f_theirs = TileLayout(S[world] + (1 - me) @ rank)

    @T.prim_func
    def ag_copy_engine_model(AS: T.Tensor((ms, K), "bfloat16"), DP: T.Tensor((M, K), "bfloat16", layout=theirs),
                             FP: T.Tensor((world,), "uint32", layout=f_theirs), epoch: T.uint32):
        T.launch(grid=(1,), threads=32)
        for c in range(per):
            Tx.warp.copy(DP[me * ms + chunks[c][0]:me * ms + chunks[c][1], :], AS[chunks[c][0]:chunks[c][1], :],
                         guard=False)
            T.ptx.bar_warp_sync(0xFFFFFFFF)
            if T.lane_id() == 0:
                if drop != "peer_signal":
                    T.ptx.st_release_sys_u32(FP[me], (epoch - 1) * per + c + 1)

    return ag_copy_engine_model


def simulate(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, drop=None, check=True, world=2, SPLIT=None,
             transfer="movers", CHUNKS=4):
    """Run the kernel on ``world`` simulated ranks (:func:`tirxpy.sim.ranks.run_ranks`) on fresh bf16 inputs,
    as call number ``epoch`` (flags and signals as ``epoch - 1`` calls left them), with NaN-poisoned outputs;
    with ``transfer="copy_engine"`` each rank's copy stream runs beside it (:func:`ce_model`), and the own rows
    of shared tile rows are in the rank's slot before the launch. Returns ``(C per rank, A_full, B, flags
    Symmetric, Need per rank, problems)`` (torch tensors, float32 values)."""
    import torch

    from tirxpy.sim.ranks import Symmetric, run_ranks

    g = torch.Generator().manual_seed(seed)
    ms = M // world
    shards = [torch.randn(ms, K, generator=g).bfloat16().float() for _ in range(world)]
    b = torch.randn(K, N, generator=g).bfloat16().float()
    ce = transfer == "copy_engine"
    need = [ce_need_table(M, world, r, CHUNKS) if ce else need_table(M, world, r) for r in range(world)]
    rows = need[0].shape[1]
    slot = Symmetric("A_sym", (M, K), "bfloat16", world)
    flags = Symmetric("flags", (world,) if ce else (world, rows), "uint32", world)
    sig = Symmetric("sig", (world,), "uint32", world)
    for r in range(world):
        if ce:
            flags.set(r, np.array([(epoch - 1) * len(chunk_rows(ms, q, CHUNKS)) for q in range(world)], np.uint32))
            own = np.zeros((M, K), np.float32)
            for r0, r1 in shared_own_rows(M, world, r):
                own[r * ms + r0:r * ms + r1] = shards[r][r0:r1].numpy()
            slot.set(r, own)
        else:
            flags.set(r, need[r] * np.uint32(epoch - 1))
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    outs = [torch.full((M, N), float("nan")) for _ in range(world)]
    major = "MN" if SPLIT is None else "K"       # a split tiles the GEMM with a K-major B
    ks = [ag_gemm(M, N, K, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=None if drop == "peer_signal" and ce
                  else drop, SPLIT=SPLIT, b_major=major, transfer=transfer, CHUNKS=CHUNKS) for r in range(world)]
    b_arg = b if SPLIT is None else b.t().contiguous()
    if ce:
        args = [(slot.on(r), b_arg, torch.zeros(1, 1), outs[r], shards[r].numpy(), flags.on(r), need[r], epoch)
                for r in range(world)]
        side = [(ce_model(M, K, me=r, world=world, CHUNKS=CHUNKS, drop=drop if drop == "peer_signal" else None),
                 (shards[r].numpy(), slot.on(1 - r), flags.on(1 - r), epoch)) for r in range(world)]
    else:
        args = [(slot.on(r), b_arg, torch.zeros(1, 1), outs[r], shards[r].numpy(), slot.on(r), slot.on(1 - r),
                 flags.on(r), flags.on(1 - r), sig.on(r), sig.on(1 - r), need[r], epoch) for r in range(world)]
        side = None
    res = run_ranks(ks, args, seed=seed, late=late, check=check, side=side)
    return outs, torch.cat(shards), b, flags, need, res[0].problems
