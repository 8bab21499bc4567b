"""GEMM + reduce-scatter over NVLink peers, one persistent kernel per rank: rank ``r`` holds ``A_r (M, Kr)``
and ``B_r (Kr, N)`` (a shard of ``K``) and gets rows ``r Ms .. r Ms + Ms - 1`` of ``sum_q A_q @ B_q``.

Built on the Hopper GEMM's parts (:mod:`tirxpy_kernels.gemm_sm90`: its producer, stage loads and k-loop,
unchanged) with its own epilogue and a reducing role:

- **consumers** (warpgroups 1, 2) run the GEMM's k-loop over every tile of ``A_r @ B_r``; each 64-row half
  of a finished tile is converted to bf16, staged in shared memory and TMA-stored into the receive buffer of
  the rank that owns those rows (``R_src``, one ``(M, N)`` buffer per source rank on every rank: the
  owner's, over NVLink, or this rank's own). Once its stores completed (``cp.async.bulk.wait_group 0``),
  the half is counted in on the owner's flag ``F[me, tile_row]`` (``red.release.sys`` / ``.gpu``). A half
  that straddles two shards (ragged ``M``) goes to both owners; the reducers read only their own rows.
- **reducers** (warps 1..3 of warpgroup 0, every CTA) take pieces of this rank's rows; a piece waits until
  every source's halves of its tile row are in (``Need[q, tile_row] * epoch``, acquire at system scope),
  then writes ``OUT = R_0 + R_1`` (float32 sum of the two bf16 partials, 8 columns per lane).
- before its first push a consumer waits until the peer started this call (``G[peer] >= epoch``): the peer
  has then finished reducing the previous call's partials out of the buffers being overwritten.

The ranks walk the tiles in the same order, so the tiles one rank pushes arrive while both keep computing,
and a tile row is reduced as soon as both partials are in: the reduction trails the GEMM by about one tile
row.

    >>> from tirxpy_kernels.dist_rs_gemm import rs_gemm, rs_need
    >>> rs_need(200, 2, 2, me=1).tolist()   # Ms = 100: rows 64..127 straddle, so rank 1 gets one half of row 0
    [[2, 4], [2, 4]]
    >>> [p.name for p in rs_gemm(200, 256, 128, me=0, BN=128, STAGES=2, sms=2).params][:5]
    ['A', 'B', 'Bias', 'OUT', 'RL']
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

from .dist_ag_gemm import MOVERS, check_world, piece_rows
from .errors import KernelConfigError
from .gemm_plan import BM, CONSUMER_REGS, PRODUCER_REGS, THREADS, TARGET, kernel_plan
from .gemm_scales import Scales
from .gemm_sm90 import k_loop, operand_shapes, producer, staging_layout, staging_shape, tile_at

DROPS = ("flag_wait", "store_wait")
VEC = 8             # bf16 columns a reducer lane adds at once (16 bytes)


def _owners(r0, M, ms):
    """Ranks owning the first and the last row of the 64-row half starting at row ``r0`` (None: no row < M)."""
    if r0 >= M:
        return None
    return r0 // ms, (min(r0 + 63, M - 1)) // ms


def rs_need(M: int, world: int, tile_cols: int, me: int) -> np.ndarray:
    """``Need[q, t]``: the tile halves source ``q`` stores into rank ``me``'s rows of tile row ``t`` (every
    source computes every tile, so the rows of the table are equal)."""
    ms = M // world
    rows = -(-M // BM)
    need = np.zeros((world, rows), np.uint32)
    for t in range(rows):
        for h in range(2):
            o = _owners(t * BM + 64 * h, M, ms)
            if o is not None and me in o:
                need[:, t] += tile_cols
    return need


@T.macro
def rs_consumer(P, ring, acc, out, As, Bs, Cs, RL, RP, FL, FP, GL, epoch, unit, n_tiles, c, me, ms):
    """Consumer ``c``: the k-loop of each tile, then its 64-row half pushed to the owner(s), counted in."""
    peer = 1 - me
    if c == 1:          # the GEMM's stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        T.ptx.barrier_arrive(5, 256)
    if T.thread_id_in_wg() == 0:
        T.ptx.wait_geq_sys_u32(GL[peer], epoch)          # the peer is past the last call's reduction
    for i in T.serial(n_tiles):
        m0, n0, _wide = tile_at(P, unit + i * P.units, 0)
        k_loop(P, ring, acc, As, Bs, RL, Cs, acc, i, c, 0, 0, True, P.BN)
        Tx.wg.gemm_wait(0, acc)
        if T.thread_id_in_wg() == 0:
            ring.release(i * P.k_blocks + P.k_blocks - 1)
        if i > 0:               # the previous tile's stores had this whole k-loop to complete: count them in now
            pm0, _pn0, _pw = tile_at(P, unit + (i - 1) * P.units, 0)
            signal_half(P, FL, FP, c, pm0, me, ms)
        r0 = m0 + c * 64
        first = r0 < ms                                  # the half has rows of rank 0
        second = r0 + 63 >= ms and r0 < P.M              # ... of rank 1
        to_me = first if me == 0 else second
        to_peer = second if me == 0 else first
        Tx.wg.cast(out, acc)            # the whole tile in bf16 at once: acc is read right after its wait only
        # one branch per destination set around the whole store sequence (a branch around the stores alone, or a
        # computed row coordinate, makes ptxas serialize the k-loop's wgmma)
        if to_me and to_peer:
            push_half(P, out, Cs, RL, RP, FL, FP, c, m0, n0, me, True, True)
        elif to_me:
            push_half(P, out, Cs, RL, RP, FL, FP, c, m0, n0, me, True, False)
        elif to_peer:
            push_half(P, out, Cs, RL, RP, FL, FP, c, m0, n0, me, False, True)
    if n_tiles > 0:             # the CTA's last tile
        lm0, _ln0, _lw = tile_at(P, unit + (n_tiles - 1) * P.units, 0)
        signal_half(P, FL, FP, c, lm0, me, ms)


@T.macro
def signal_half(P, FL, FP, c, m0, me, ms):
    """Consumer ``c``'s half of the tile at row ``m0``, pushed earlier: once its TMA stores completed
    (``cp.async.bulk.wait_group 0``: every store this thread issued so far), count it in on the flag of each
    rank that received it."""
    r0 = m0 + c * 64
    first = r0 < ms
    second = r0 + 63 >= ms and r0 < P.M
    to_me = first if me == 0 else second
    to_peer = second if me == 0 else first
    if T.thread_id_in_wg() == 0:
        if P.drop != "store_wait":
            T.ptx.bulk_wait_group(0)
        T.ptx.fence_proxy_async()
        if to_me:
            T.ptx.red_release_gpu_add_u32(FL[me, m0 // BM], T.uint32(1))
        if to_peer:
            T.ptx.red_release_sys_add_u32(FP[me, m0 // BM], T.uint32(1))


@T.macro
def push_half(P, out, Cs, RL, RP, FL, FP, c, m0, n0, me, mine, theirs):
    """Consumer ``c``'s half of the tile at ``(m0, n0)`` (bf16 in ``out``): staged chunk by chunk, TMA-stored into
    this rank's receive buffer (``mine``) and / or the peer's (``theirs``). It is counted in later
    (:func:`signal_half`, after the next tile's k-loop), so no consumer waits for its stores to land."""
    w = P.chunk_cols
    for j in range(P.chunks):
        if T.thread_id_in_wg() == 0:
            T.ptx.bulk_wait_group_read(1)            # the store that last read buffer j % 2 is done
        T.ptx.barrier_sync(1 + c, 128)
        Tx.wg.copy(Cs[j % 2, c * 64:c * 64 + 64, :], out[:, j * w:j * w + w])
        T.ptx.fence_proxy_async()
        T.ptx.barrier_sync(1 + c, 128)
        for cc in range(2):                          # one issuing thread per call site
            if T.thread_id() == 128 * (cc + 1):
                if mine:
                    Tx.copy_async(RL[m0 + cc * 64:m0 + cc * 64 + 64, n0 + j * w:n0 + j * w + w],
                                  Cs[j % 2, cc * 64:cc * 64 + 64, :])
                if theirs:
                    Tx.copy_async(RP[m0 + cc * 64:m0 + cc * 64 + 64, n0 + j * w:n0 + j * w + w],
                                  Cs[j % 2, cc * 64:cc * 64 + 64, :])


@T.macro
def reducers(P, OUT, R0, R1, FL, Need, epoch, me, ms, pr, w, xs, f0, f1):
    """Warp ``w`` (1 .. 3) of warpgroup 0: ``OUT = R0 + R1`` over this rank's pieces, each once its tile row's
    halves from every source are in. A lane adds two 8-column vectors per step (``xs``: four 16-byte registers
    slots), their four loads issued before any sum, so four loads are in flight."""
    units = P.grid * MOVERS
    u = T.cta_id(0) * MOVERS + (w - 1)
    steps = (P.N + 2 * 32 * VEC - 1) // (2 * 32 * VEC)
    for p in T.serial((ms // pr - u + units - 1) // units):
        j = u + p * units
        g0 = me * ms + j * pr
        if P.drop != "flag_wait":
            for q in range(2):
                T.ptx.wait_geq_sys_u32(FL[q, g0 // BM], Need[q, g0 // BM] * epoch)
        for rr in T.serial(pr):
            for cb in T.serial(steps):
                # lanes past the row's end redo its last 8 columns (the same values): every lane loads a real
                # element, none is masked off
                c0 = T.min(cb * 64 * VEC + T.lane_id() * VEC, P.N - VEC)
                c1 = T.min(cb * 64 * VEC + 32 * VEC + T.lane_id() * VEC, P.N - VEC)
                Tx.copy(xs[0], R0[g0 + rr, c0:c0 + VEC])
                Tx.copy(xs[1], R1[g0 + rr, c0:c0 + VEC])
                Tx.copy(xs[2], R0[g0 + rr, c1:c1 + VEC])
                Tx.copy(xs[3], R1[g0 + rr, c1:c1 + VEC])
                for h in range(2):
                    Tx.cast(f0, xs[2 * h])
                    Tx.cast(f1, xs[2 * h + 1])
                    Tx.add(f0, f0, f1)
                    Tx.cast(xs[2 * h], f0)
                Tx.copy(OUT[j * pr + rr, c0:c0 + VEC], xs[0])
                Tx.copy(OUT[j * pr + rr, c1:c1 + VEC], xs[2])


def build(P, me: int, world: int):
    """The ``@T.prim_func`` for rank ``me`` (module docstring)."""
    ms = P.M // world
    pr = piece_rows(ms)
    rows = -(-P.M // BM)
    a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    dt = P.dtype
    lay = {k: TileLayout(S[shape] + who @ rank) for k, shape, who in (
        ("RL", (P.M, P.N), me), ("RP", (P.M, P.N), 1 - me), ("R0", (P.M, P.N), me), ("R1", (P.M, P.N), me),
        ("FL", (world, rows), me), ("FP", (world, rows), 1 - me), ("GL", (world,), me), ("GP", (world,), 1 - me))}

    @T.prim_func
    def rs_gemm_kernel(A: T.Tensor(a_shape, dt), B: T.Tensor(b_shape, dt), Bias: T.Tensor(P.bias_shape, dt),
                       OUT: T.Tensor((ms, P.N), dt), RL: T.Tensor((P.M, P.N), dt, layout=lay["RL"]),
                       RP: T.Tensor((P.M, P.N), dt, layout=lay["RP"]), R0: T.Tensor((P.M, P.N), dt, layout=lay["R0"]),
                       R1: T.Tensor((P.M, P.N), dt, layout=lay["R1"]),
                       FL: T.Tensor((world, rows), "uint32", layout=lay["FL"]),
                       FP: T.Tensor((world, rows), "uint32", layout=lay["FP"]),
                       GL: T.Tensor((world,), "uint32", layout=lay["GL"]), GP: T.Tensor((world,), "uint32", layout=lay["GP"]),
                       Need: T.Tensor((world, rows), "uint32"), epoch: T.uint32):
        T.launch(grid=(P.grid,), threads=THREADS, pdl=P.pdl)
        As = T.alloc_shared(as_shape, dt, layout=a_layout)
        Bs = T.alloc_shared(bs_shape, dt, layout=b_layout)
        Cs = T.alloc_shared(staging_shape(P), dt, layout=staging_layout(P))
        full = T.alloc_shared((P.stages,), "uint64")
        empty = T.alloc_shared((P.stages,), "uint64")
        acc = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))
        out = T.alloc_local((64, P.BN), dt, layout=wgmma_accumulator(P.BN))
        x0 = T.alloc_local((VEC,), dt)
        x1 = T.alloc_local((VEC,), dt)
        x2 = T.alloc_local((VEC,), dt)
        x3 = T.alloc_local((VEC,), dt)
        f0 = T.alloc_local((VEC,), "float32")
        f1 = T.alloc_local((VEC,), "float32")
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
                    producer(P, ring, A, B, As, Bs, Scales(), unit, 0, n_tiles)
            for w in range(1, 1 + MOVERS):
                if T.warp_id_in_wg() == w:
                    reducers(P, OUT, R0, R1, FL, Need, epoch, me, ms, pr, w, (x0, x1, x2, x3), f0, f1)
        else:
            roles.enter_consumer()
            rs_consumer(P, ring, acc, out, As, Bs, Cs, RL, RP, FL, FP, GL, epoch, unit, n_tiles, wg - 1, me, ms)

    return rs_gemm_kernel


@tirxpy.jit
def rs_gemm(M, N, K, me, world=2, BN=256, STAGES=None, b_major="MN", dtype="bfloat16", sms=TARGET.sm_count,
            PDL=True, drop=None):
    """The GEMM + reduce-scatter kernel of rank ``me``: ``A (M, K)`` (this rank's ``K`` shard), ``B`` ``(K, N)``
    row-major (``b_major="MN"``) or ``(N, K)`` (``"K"``), ``OUT (M / world, N)`` bf16. ``BN`` a multiple of 64
    (128-byte output chunks). ``drop=`` removes one protocol step, for the simulator's mutation tests only:
    ``"flag_wait"`` (the reducers' wait) or ``"store_wait"`` (a half signalled before its stores completed)."""
    check_world(M, world, me)
    if drop is not None and drop not in DROPS:
        raise KernelConfigError(f"rs_gemm: unknown drop={drop!r}; one of {DROPS}")
    if BN % 64:
        raise KernelConfigError(f"rs_gemm: BN = {BN} must be a multiple of 64 (its epilogue stores 64-column chunks)")
    if N % VEC:
        raise KernelConfigError(f"rs_gemm: N = {N} must be a multiple of {VEC} (16-byte rows for TMA and the reducers)")
    P = kernel_plan(M, N, K, BN, STAGES, 1, "K", b_major, dtype, dtype, False, None, sms, 4, False, False,
                    None, PDL, None)
    return build(dataclasses.replace(P, drop=drop), me, world)


def simulate(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, drop=None, check=True, world=2):
    """Run the kernel on ``world`` simulated ranks (:func:`tirxpy.sim.ranks.run_ranks`) on fresh bf16 inputs,
    rank ``r`` holding ``A[:, K shard r]`` and ``B[K shard r, :]``, as call number ``epoch``, with NaN-poisoned
    outputs. Returns ``(OUT per rank, A, B, problems)`` (torch tensors, float32 values)."""
    import torch

    from tirxpy.sim.ranks import Symmetric, run_ranks

    g = torch.Generator().manual_seed(seed)
    kr = K // world
    a = torch.randn(M, K, generator=g).bfloat16().float()
    b = torch.randn(K, N, generator=g).bfloat16().float()
    rows = -(-M // BM)
    recv = [Symmetric(f"R{q}", (M, N), "bfloat16", world) for q in range(world)]
    flags = Symmetric("flags", (world, rows), "uint32", world)
    sig = Symmetric("sig", (world,), "uint32", world)
    needs = [rs_need(M, world, -(-N // BN), r) for r in range(world)]
    for r in range(world):
        flags.set(r, needs[r] * np.uint32(epoch - 1))
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    outs = [torch.full((M // world, N), float("nan")) for _ in range(world)]
    ks = [rs_gemm(M, N, kr, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=drop) for r in range(world)]
    args = [(a[:, r * kr:(r + 1) * kr].contiguous(), b[r * kr:(r + 1) * kr].contiguous(), torch.zeros(1, 1), outs[r],
             recv[r].on(r), recv[r].on(1 - r), recv[0].on(r), recv[1].on(r), flags.on(r), flags.on(1 - r),
             sig.on(r), sig.on(1 - r), needs[r], epoch) for r in range(world)]
    res = run_ranks(ks, args, seed=seed, late=late, check=check)
    return outs, a, b, res[0].problems
