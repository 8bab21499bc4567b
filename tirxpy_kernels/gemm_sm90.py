"""Warp-specialized persistent GEMM for Hopper (sm_90a): TMA -> wgmma -> registers -> TMA.

``C[M, N] = act(A @ B + bias)`` with bf16 / f16 inputs, float32 accumulation, and a bf16 / f16 /
f32 output; or an FP8 product ``(A * sa) @ (B * sb) + bias`` with per-tensor, row-wise or block-wise
scales (``scaling=``, :mod:`tirxpy_kernels.gemm_scales`). Written only with tirxpy's public API: tile primitives for every data movement and
MMA (``Tx.copy_async`` -> TMA load with multicast / TMA store, ``Tx.wg.gemm_async`` ->
``wgmma.mma_async`` m64nBNk16, ``Tx.wg.copy`` -> ``stmatrix``), :mod:`tirxpy.lang` for the
orchestration (the stage ring, the warp roles and their register split, the barrier set-up, the
persistent tile schedulers) and intrinsics (``T.ptx.*``) for the named barriers between consumers.
The plan (every size the kernel uses, checked) is :mod:`tirxpy_kernels.gemm_plan`; the torch API is
:mod:`tirxpy_kernels.gemm_api`.

Operands (``a_major`` / ``b_major`` say which dimension is contiguous in memory):

- ``a_major="K"``: ``A`` is ``(M, K)`` row-major; ``"MN"``: the kernel takes ``At = A^T``, ``(K, M)``.
- ``b_major="K"``: the kernel takes ``Bt = B^T``, ``(N, K)`` (an ``nn.Linear`` weight);
  ``"MN"``: ``B`` is ``(K, N)`` row-major.

The parts (each a macro below; the kernel is their composition in :func:`gemm_sm90`):

- :func:`producer` (warpgroup 0, ``setmaxnreg.dec``): one elected thread walks the CTA's tiles and
  k-blocks; for k-block ``g`` (counted over all tiles of the CTA) it waits until the ring's stage
  ``g % stages`` was read in its previous round, arms its own ``full`` barrier with every byte that
  will land in the stage (its ``(BM, BK)`` box of A and all of B's ``(BN, BK)`` box: its own ``1 / CM``
  share plus the shares its peers multicast) and issues the TMA loads. A peer's bytes may land before
  this CTA arms the stage (the tx-count goes negative for a while, which PTX allows); they cannot land
  in an earlier round, because a peer refills a stage only after this CTA's consumers released it.
- :func:`cooperative_consumer` (warpgroups 1, 2, ``setmaxnreg.inc``; the default schedule): consumer
  ``c`` owns rows ``64 c .. 64 c + 63`` of each ``BM = 128`` tile, a ``(64, BN)`` float32 accumulator.
  Its :func:`k_loop` waits ``full``, issues the wgmma of the k-block, keeps one wgmma group pending
  (``wait_group 1``) and then releases the previous k-block's stage in every CTA of the cluster (one
  arrival per consumer warpgroup, at CTA scope: a cluster-scope release is a GPU-wide fence per
  arrival). Consumer 1 starts its first k-block once consumer 0 has issued its own (named barrier 5),
  so the two consumers' tile boundaries (the wait for the last wgmma, the cast of the tile) do not fall
  together.
- the epilogue: ``chunk_cols``-column chunks (128 bytes of output; when that does not divide ``BN``,
  the widest power-of-two share of it: 16 columns at ``BN = 176``) are biased / activated in float32
  (:func:`bias_and_activation`, the one place that math is written), converted, written with
  ``stmatrix`` (plain stores for f32) into the consumer's 64 rows of a double-buffered swizzled staging
  tile, fenced to the async proxy and TMA-stored (which clips the ragged edges) by the consumer's first
  thread after a 128-thread named barrier: :func:`store_chunk`. The two staging buffers alternate over
  the CTA's sequence of chunks (not the chunk index: with an odd number of chunks per tile that would
  race with the previous tile's last store).
- **Gate** (``gate``, ReLU's backward fused into the product that makes its incoming gradient): before a chunk
  is staged, the consumer's first thread TMA-loads the same box of ``Gate`` into the staging buffer the chunk
  will take (:func:`load_gate`, on a ring of its own), and each thread zeroes its elements where the gate is
  <= 0 (:func:`apply_gate`) before it overwrites them with the result. Not with ``DEFER``.
- **Deferred epilogue** (``DEFER``): after the tile's last wait the whole accumulator is converted into
  16-bit registers (``pk``), which frees it for the next tile; store round ``j`` of that tile
  (:func:`store_round`) runs while the next tile's k-block ``j`` runs its wgmma, so the tensor cores do
  not idle during stores. The CTA's last tile is stored after its tile loop; rounds a short k-loop
  (``k_blocks < rounds``) has no k-block for are stored right after it. Narrow chunks go out in rounds
  of 128 bytes of columns (four 16-column boxes at ``BN = 176``), one barrier pair each.
- **Balanced split** (``SPLIT``, :func:`tirxpy_kernels.gemm_plan.balanced_split`): where the plain grid of 128 x
  256 tiles leaves a partial last round, some tile rows are cut into narrower tiles so no CTA has more
  wide tiles than the others. A narrow tile loads the same box of ``B`` and runs ``m64n{bn2}k16`` into a
  prefix of the accumulator.
- :func:`block_consumer` (``scaling="block"``): the cooperative consumer's rows, with each k-block's product
  taken in column parts into scratch accumulators and promoted into the float32 tile
  (:mod:`tirxpy_kernels.gemm_scales`); no ``DEFER`` (the scratch takes its registers). With one scratch
  accumulator a tile's k-block 0 runs under the previous tile's epilogue instead.
- :func:`pingpong_consumer` (``PINGPONG``): consumer ``c`` takes the CTA's tiles ``c, c + 2, ...`` whole,
  a ``(128, BN)`` accumulator (two ``(64, BN)`` halves, two ``m64nBNk16`` per k-step, ``wait_group 2``
  before a stage is released; ``BN <= 192`` for the registers); each stage is read by one warpgroup.
  The k-loops take turns (named barriers 3 / 4: a tile's k-loop starts once the previous tile's has
  waited for all of its stages), so one consumer's epilogue runs under the other's k-loop. The turns
  also keep the parity waits sound: a stage's earlier rounds belong to the other consumer, and without
  them a wait for round ``r`` passed on its parity while round ``r - 1`` was still loading (the
  simulator reports that race, ``drop="turn"``).

Schedule: persistent; cluster ``u`` of ``G`` takes cluster tiles ``u, u + G, ...`` of the
``ceil(M / (CM BM)) x ceil(N / BN)`` grid in the grouped order of :mod:`tirxpy.lang.schedule`.
Every barrier phase is a closed form of the loop counters (:class:`tirxpy.lang.StageRing`: k-block
``g = i * k_blocks + k`` of the CTA's ``i``-th tile), so the pipeline runs across tile boundaries: the
producer fills stages of the next tile while consumers store this one. Ragged M, N, K need no guard:
TMA zero-fills out-of-range loads and drops out-of-range stores.

    >>> k = gemm_sm90(256, 256, 128, BN=128, STAGES=2)           # default: no cluster (CM=1)
    >>> k.launch.threads, k.launch.cluster, plan(256, 256, 128, BN=128)["tiles"]
    (384, None, 4)
    >>> gemm_sm90(256, 256, 128, BN=128, STAGES=2, CM=2).launch.cluster
    (2,)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* signatures)
from tirxpy import T, Tx
from tirxpy.intrinsics import register_intrinsic
from tirxpy.ir.dtype import DataType
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.lang.schedule import cdiv, grouped_tile, split_tile, tiles_of_unit
from tirxpy.layout import ComposeLayout, R, S, TileLayout, laneid, m, swizzle_for, wid_in_wg
from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.sim import register_model

from .gemm_plan import (  # noqa: F401  (the plan's public names, re-exported: tirxpy_kernels.gemm_sm90 is the kernel's home)
    ACTIVATIONS, BLOCK_SCALE, BM, CONSUMER_REGS, DROPS, GROUP, IN_DTYPES, OUT_DTYPES, PRODUCER_REGS, SMEM_LIMIT, TARGET,
    THREADS, GemmPlan, balanced_split, bn_candidates, check_config, check_options, choose_tile, default_stages,
    kernel_plan, plan, schedule_cost, splittable, tile_cost, widest_bn)
from .gemm_plan import _PP_EFFICIENCY, _split_widths, _unit_loads  # noqa: F401  (tests of the cost model)
from .gemm_scales import (Scales, advance_b_window, chunk_col_scales, col_registers, load_b_window, load_block_scales,
                          load_col_scales, load_row_scales, promote, row_layout, scale_chunk, scale_tile,
                          stage_row_scales)

# -0.0 from an asm the C++ compiler cannot fold through: ``acc + NEG_ZERO()`` keeps an add (the identity on
# every float, signed zeros and NaN included) in the PTX (GemmPlan.neg_zero_guard says when it is needed)
NEG_ZERO = register_intrinsic("gemm_neg_zero_f32", "mov.b32 {r}, 0x80000000;", [("r", "reg", "float32", "w")],
                              ret="r", memory=False, replace=True, doc="-0.0 as an opaque float32 register")
register_model("gemm_neg_zero_f32", lambda ctx: np.full(32, -0.0, np.float32))


# ---- shared-memory and register layouts ------------------------------------------------------------------

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


def staging_shape(P: GemmPlan):
    """The epilogue's staging tile: two buffers of ``(BM, chunk_cols)`` (per consumer with ping-pong; of
    ``boxes_per_round`` boxes each when a deferred round writes several narrow chunks), or one per chunk with
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.whole_staging`."""
    if P.pingpong:
        return (2, 2, BM, P.chunk_cols)
    if P.boxes_per_round == 1:
        return (P.staging_bufs, BM, P.chunk_cols)
    return (2, P.boxes_per_round, BM, P.chunk_cols)


def operand_shapes(P: GemmPlan):
    """``(a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout)``: the global operands as the kernel takes
    them and their shared-memory stages."""
    if P.a_major == "K":
        a = (P.M, P.K), (P.stages, BM, P.BK), _k_major_stages(P.stages, BM, P.BK, P.dtype)
    else:
        a = (P.K, P.M), (P.stages, P.BK, BM), _mn_major_stages(P.stages, P.BK, BM, P.dtype)
    if P.b_major == "K":
        b = (P.N, P.K), (P.stages, P.BN, P.BK), _k_major_stages(P.stages, P.BN, P.BK, P.b_dtype)
    else:
        b = (P.K, P.N), (P.stages, P.BK, P.BN), _mn_major_stages(P.stages, P.BK, P.BN, P.b_dtype)
    return a + b


# ---- the walk --------------------------------------------------------------------------------------------

def tile_at(P: GemmPlan, t, rank):
    """``(m0, n0, wide)`` of tile ``t`` of the persistent walk for the cluster's CTA ``rank`` (``wide``:
    ``BN`` columns, else a split's narrow tile)."""
    if P.split is None:
        tmc, tn = grouped_tile(t, P.cluster_tile_rows, P.tile_cols, P.group)
        return (tmc * P.CM + rank) * BM, tn * P.BN, True
    tm, n0, wide = split_tile(t, P.cluster_tile_rows, P.tile_cols, P.group, P.split, P.BN)
    return tm * BM, n0, wide


# ---- producer --------------------------------------------------------------------------------------------

@T.macro
def load_stage(P, A, B, As, Bs, full, s, m0, n0, k0, rank):
    """TMA loads of one stage ``s``: this CTA's share of B's ``(BN, BK)`` box, multicast to the cluster, and
    A's ``(BM, BK)`` box; all complete on ``full[s]``."""
    for j in range(P.b_boxes):
        c0 = rank * P.b_rows_per_cta + j * 64
        if P.b_major == "K":
            dst_b = Bs[s, rank * P.b_rows_per_cta:rank * P.b_rows_per_cta + P.b_rows_per_cta, :]
            src_b = B[n0 + rank * P.b_rows_per_cta:n0 + rank * P.b_rows_per_cta + P.b_rows_per_cta, k0:k0 + P.BK]
        else:
            dst_b = Bs[s, :, c0:c0 + 64]
            src_b = B[k0:k0 + P.BK, n0 + c0:n0 + c0 + 64]
        if P.CM > 1:
            Tx.copy_async(dst_b, src_b, mbar=full[s], arrive=False, multicast=P.multicast_mask, expect_tx=False)
        else:
            Tx.copy_async(dst_b, src_b, mbar=full[s], arrive=False, expect_tx=False)
    for j in range(P.a_boxes):
        if P.a_major == "K":
            Tx.copy_async(As[s], A[m0:m0 + BM, k0:k0 + P.BK], mbar=full[s], arrive=False, expect_tx=False)
        else:
            Tx.copy_async(As[s, :, j * 64:j * 64 + 64], A[k0:k0 + P.BK, m0 + j * 64:m0 + j * 64 + 64],
                          mbar=full[s], arrive=False, expect_tx=False)


@T.macro
def producer(P, ring, A, B, As, Bs, SC, unit, rank, n_tiles):
    """One thread: every k-block of every tile of the CTA, through the ring."""
    for i in T.serial(n_tiles):
        m0, n0, _wide = tile_at(P, unit + i * P.units, rank)
        for k in T.serial(P.k_blocks):
            g = i * P.k_blocks + k
            s = ring.stage(g)
            if P.drop != "empty_wait":
                ring.wait_empty(g)
            k0 = k * P.BK
            if P.expect_tx:     # every byte landing in this stage: A, our B slice, the peers' slices
                ring.expect_bytes(g, P.stage_bytes)
            else:
                ring.arrive_full(g)
            load_stage(P, A, B, As, Bs, ring.full, s, m0, n0, k0, rank)
            if P.scaling == "block":
                load_block_scales(P, SC, ring.full, s, m0, k)


# ---- consumers: the k-loop -------------------------------------------------------------------------------

@T.macro
def mma(P, dst, As, Bs, s, r0, k, wt, n):
    """``dst[:, :n] (+)= A[r0 .. r0 + 63] B[:, :n]`` from stage ``s`` (wgmma, A K- or MN-major), accumulating
    from k-block 1 on; ``wt``: the ``wait_group`` after it, or None. ``n``: ``BN``, or a split's narrow tile
    width (``B`` K-major: its first ``n`` rows)."""
    if n == P.BN:
        if P.a_major == "K":
            Tx.wg.gemm_async(dst, As[s, r0:r0 + 64, :], Bs[s], transpose_b=P.b_major == "K", accumulate=k > 0, wait=wt)
        else:
            Tx.wg.gemm_async(dst, As[s, :, r0:r0 + 64], Bs[s], transpose_a=True, transpose_b=P.b_major == "K",
                             accumulate=k > 0, wait=wt)
    else:
        if P.a_major == "K":
            Tx.wg.gemm_async(dst[:, 0:n], As[s, r0:r0 + 64, :], Bs[s, 0:n, :], transpose_b=True, accumulate=k > 0,
                             wait=wt)
        else:
            Tx.wg.gemm_async(dst[:, 0:n], As[s, :, r0:r0 + 64], Bs[s, 0:n, :], transpose_a=True, transpose_b=True,
                             accumulate=k > 0, wait=wt)


@T.macro
def k_step(P, ring, acc, As, Bs, i, c, k, n):
    """K-block ``k`` of the cooperative consumer ``c``'s ``i``-th tile (``n`` columns): wait for its stage, issue
    its wgmma (:func:`mma`, ``kloop_wait`` groups left pending), the stagger's arrive, and release the previous
    k-block's stage (its wgmma is done with it)."""
    g = i * P.k_blocks + k
    s = ring.stage(g)
    if P.drop != "full_wait":
        ring.wait_full(g)
    mma(P, acc, As, Bs, s, c * 64, k, P.kloop_wait, n)
    if c == 0:      # the stagger: consumer 1 waits for consumer 0's first k-block
        if i == 0:
            if k == 0:
                T.ptx.barrier_arrive(5, 256)
    if k > 0:     # the previous k-block's wgmma is done with its stage
        if T.thread_id_in_wg() == 0:
            ring.release(g + P.stages - 1)


@T.macro
def k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, n):
    """The cooperative consumer ``c``'s k-loop over the CTA's ``i``-th tile, ``n`` columns wide (``BN``, or a
    split's narrow tile's); with ``DEFER``, round ``j`` of tile ``i - 1`` (at ``(pm0, pn0)``, in ``pk``) is
    stored under k-block ``j``. (Block scales take :func:`block_k_loop`.)"""
    for k in T.serial(P.k_blocks):
        k_step(P, ring, acc, As, Bs, i, c, k, n)
        if P.defer:     # round k of the previous tile is stored while this k-block's wgmma runs
            for j in range(min(P.rounds, P.k_blocks)):
                if k == j:
                    if i > 0:
                        store_round(P, C, Cs, pk, i - 1, j, c, pm0, pn0, pwide)


def block_stage(ring, g, live):
    """The stage :func:`block_issue` reads for k-block ``g``: its own, or where it is not ``live`` (a run-time
    condition) the previous k-block's."""
    if live is True:
        return ring.stage(g)
    return ring.stage(T.max(g - T.select(live, 0, 1), 0))


@T.macro
def block_issue(P, ring, tmp, As, Bs, i, c, k, p, live=True, stagger=None, SC=None, rows=None, ahead=False):
    """Block scaling, part ``p`` of k-block ``k`` of the CTA's ``i``-th tile: its wgmma into ``tmp`` (one commit
    group); the first part waits for the stage first. A k-block that is not ``live`` (past the CTA's last tile;
    its product is discarded) waits for nothing and reads the stage of the k-block before it, which every CTA
    with a tile has filled once and no load refills. After the CTA's first k-block consumer 0
    lets consumer 1 start (named barrier 5): ``stagger`` says whether this is it (None: part 0 of tile 0's
    k-block 0). With ``SC`` the first part then works out the k-block's scales into ``rows``
    (:func:`~tirxpy_kernels.gemm_scales.stage_row_scales`) while its wgmma runs, off the path from the wait to the
    promotion (a set no other k-block's promotion reads meanwhile)."""
    g = i * P.k_blocks + k
    s = block_stage(ring, g, live)
    if p == 0:
        if P.drop != "full_wait":
            if live:
                ring.wait_full(g)
    Tx.wg.gemm_async(tmp, As[s, c * 64:c * 64 + 64, :], Bs[s, p * P.part:p * P.part + P.part, :], transpose_b=True,
                     accumulate=False)
    if SC is not None:
        if p == 0:
            stage_row_scales(P, SC, s, c, k, rows, ahead)
    if stagger is None:
        if p == 0:
            if c == 0:
                if i == 0:
                    if k == 0:
                        T.ptx.barrier_arrive(5, 256)
    elif stagger:
        if c == 0:
            T.ptx.barrier_arrive(5, 256)


@T.macro
def block_retire(P, ring, acc, tmp, SC, i, c, n0, k, l, p, pending, live=True, scales=True, rows=None):
    """Block scaling: wait until part ``p`` of k-block ``k`` (the pass's ``l``-th; ``tmp``) is done with ``pending``
    later groups still running. The first part reads the k-block's scales (:func:`~tirxpy_kernels.gemm_scales.
    stage_row_scales`); the last one releases the stage (each warp read its rows' scales from it), and after its
    promotion advances the window of B's scales (:func:`~tirxpy_kernels.gemm_scales.advance_b_window`). A k-block
    that is not ``live`` (:func:`block_issue`) is only waited for; ``scales=False``: :func:`block_issue` read them
    into ``rows`` (default ``SC.srows``)."""
    Tx.wg.gemm_wait(pending, tmp)
    if live:
        block_promote(P, ring, acc, tmp, SC, i, c, n0, k, p, scales, SC.srows if rows is None else rows)


@T.macro
def block_promote(P, ring, acc, tmp, SC, i, c, n0, k, p, scales, rows):
    """:func:`block_retire`'s work once part ``p`` of k-block ``k`` is waited for (its scales in ``rows``)."""
    g = i * P.k_blocks + k
    if p == 0:
        if scales:
            stage_row_scales(P, SC, ring.stage(g), c, k, rows)
    if p == P.parts - 1:
        if T.lane_id() == 0:
            ring.release(g)
    for o, w, q in P.part_segments(p):
        promote(P, SC, acc[:, p * P.part + o:p * P.part + o + w], tmp[:, o:o + w], k, rows[q])
    if p == P.parts - 1:
        advance_b_window(P, SC, n0, k)


@T.macro
def block_pass(P, ring, acc, tmps, SC, As, Bs, i, n0, c, k0, nb):
    """Block scaling: ``nb`` k-blocks from ``k0``, part by part. With two scratch accumulators each part's wgmma
    is issued before the previous part is waited for and promoted, and the pass ends with every wgmma waited
    for; with one, each part is issued (the k-block's scales worked out under its wgmma), waited for and promoted
    in turn."""
    units = P.pass_units(nb)
    for j, (l, p) in enumerate(units):
        if P.part_bufs == 1:    # the k-block's scales worked out under its wgmma
            block_issue(P, ring, tmps[0], As, Bs, i, c, k0 + l, p, SC=SC)
            block_retire(P, ring, acc, tmps[0], SC, i, c, n0, k0 + l, l, p, 0, scales=False)
        else:                   # k-block l's scales into set l % 2 while k-block l - 1 is promoted from the other
            sets = [SC.srows, SC.srows2]
            block_issue(P, ring, tmps[j % 2], As, Bs, i, c, k0 + l, p, SC=SC, rows=sets[l % 2], ahead=j > 0)
            if j > 0:           # the previous part, one wgmma group still running behind it
                lq, pq = units[j - 1]
                block_retire(P, ring, acc, tmps[(j - 1) % 2], SC, i, c, n0, k0 + lq, lq, pq, 1, scales=False,
                             rows=sets[lq % 2])
    if P.part_bufs == 2:    # the pass's last part, with nothing behind it
        lq, pq = units[len(units) - 1]
        block_retire(P, ring, acc, tmps[(len(units) - 1) % 2], SC, i, c, n0, k0 + lq, lq, pq, 0, scales=False,
                     rows=[SC.srows, SC.srows2][lq % 2])


@T.macro
def block_k_loop(P, ring, acc, tmps, SC, As, Bs, i, n0, nn0, c):
    """The cooperative consumer ``c``'s k-loop with block scales over tile ``i`` (at column ``n0``) from k-block 0, or
    from k-block 1 with :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.first_under_epilogue` (k-block 0 ran under the
    previous tile's epilogue, :func:`block_consumer`): passes of
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.pass_blocks` k-blocks (:func:`block_pass`), each part of a
    k-block's product promoted into ``acc`` (:func:`tirxpy_kernels.gemm_scales.promote`); each stage is
    released by every warp once its last part is waited for (each warp read its rows' scales from it). Then
    the first window of B's scales of the next tile (at column ``nn0``) is loaded, to land under the epilogue."""
    first = 1 if P.first_under_epilogue else 0
    rest = P.k_blocks - first
    if rest >= P.pass_blocks:      # (a K shorter than one pass has only the short one)
        for kk in T.serial(rest // P.pass_blocks):
            block_pass(P, ring, acc, tmps, SC, As, Bs, i, n0, c, first + kk * P.pass_blocks, P.pass_blocks)
    if rest % P.pass_blocks:       # the last k-blocks: a shorter pass
        block_pass(P, ring, acc, tmps, SC, As, Bs, i, n0, c, P.k_blocks - rest % P.pass_blocks, rest % P.pass_blocks)
    load_b_window(P, SC, nn0, 0, 0)


@T.macro
def block_first_issue(P, ring, tmps, As, Bs, i, c, live, stagger=False):
    """Block scaling: part 0 of k-block 0 of the CTA's ``i``-th tile, issued into the first scratch accumulator
    (:func:`block_issue`; not ``live``: a tile past the CTA's last)."""
    block_issue(P, ring, tmps[0], As, Bs, i, c, 0, 0, live, stagger)


@T.macro
def block_first_finish(P, ring, acc, tmps, SC, As, Bs, i, n0, c, live):
    """Block scaling with one scratch accumulator: the rest of k-block 0 of the CTA's ``i``-th tile (at column
    ``n0``) after :func:`block_first_issue`, part by part waited for and promoted into ``acc`` (which k-block 0's
    promotion overwrites) and the next part issued."""
    for p in range(1, P.parts):
        block_retire(P, ring, acc, tmps[0], SC, i, c, n0, 0, 0, p - 1, 0, live)
        block_issue(P, ring, tmps[0], As, Bs, i, c, 0, p, live)
    block_retire(P, ring, acc, tmps[0], SC, i, c, n0, 0, 0, P.parts - 1, 0, live)


# ---- the epilogue ----------------------------------------------------------------------------------------

@T.macro
def load_bias(P, brow, Bias, n0, j):
    """With a fused bias: the bias of output chunk ``j`` of the tile at column ``n0``, in accumulator layout."""
    if P.bias:
        Tx.wg.fill(brow, T.cast(0, P.out_dtype))
        Tx.wg.copy(brow, Bias[0:1, n0 + j * P.chunk_cols:n0 + j * P.chunk_cols + P.chunk_cols])


@T.macro
def bias_and_activation(P, chunk, brow):
    """``chunk = act(chunk + bias)`` in float32 (the bias row from :func:`load_bias`)."""
    if P.bias:
        Tx.wg.add(chunk, chunk, brow)
    if P.activation == "relu":
        Tx.wg.relu(chunk, chunk)
    if P.activation == "silu":
        Tx.wg.silu(chunk, chunk)


class GateIO(NamedTuple):
    """With ``gate``: the gate's ring (:func:`gate_ring`), its register chunk and the ``Gate`` tensor."""
    ring: StageRing
    gt: object
    Gate: object


def gate_ring(full, empty):
    """The gate's barriers as a ring of 4 stages: consumer ``c``'s ``q``-th output chunk (staging buffer ``q %
    2``) is position ``2 q + c``, so stage ``2 (q % 2) + c`` is one consumer's one buffer, and its parity counts
    that buffer's rounds."""
    return StageRing(full, empty, 4)


@T.macro
def load_gate(P, gio, dst, src, q, c):
    """With ``gate`` (the consumer's first thread, once its staging buffer ``dst`` is free): TMA-load the gate's
    chunk ``src`` into it, completing on the ring's position ``2 q + c``."""
    if P.gate:
        gio.ring.expect_bytes(2 * q + c, P.gate_box_bytes)
        Tx.copy_async(dst, src, mbar=gio.ring.full[gio.ring.stage(2 * q + c)], arrive=False, expect_tx=False)


@T.macro
def wait_gate(P, gio, q, c):
    """With ``gate``: wait until :func:`load_gate`'s chunk ``q`` of consumer ``c`` has landed (once per chunk)."""
    if P.gate:
        gio.ring.wait_full(2 * q + c)


@T.macro
def apply_gate(P, gio, reg, s0, Cs, b, r0, c):
    """With ``gate``: the chunk in columns ``s0 ..`` of the register tile ``reg`` (64 rows: the float32 accumulator,
    or the converted chunk) is 0 where the gate is <= 0 (ReLU's backward, ``Tx.wg.relu_grad``, a select, exact in
    either dtype). The gate's chunk waits in the staging buffer ``b``'s rows ``r0 ..``
    (``Cs[c, b]`` ping-pong, ``Cs[b]`` cooperative; :func:`load_gate`, :func:`wait_gate`), which the converted
    chunk then overwrites element for element (each thread reads and writes the elements it holds);
    ``gate_cols`` columns at a time, so that a ping-pong tile's two accumulators and the gate fit in registers."""
    if P.gate:
        w = P.gate_cols
        for h in range(P.chunk_cols // w):
            if P.pingpong:
                Tx.wg.copy(gio.gt, Cs[c, b, r0:r0 + 64, h * w:h * w + w])
            else:
                Tx.wg.copy(gio.gt, Cs[b, r0:r0 + 64, h * w:h * w + w])
            Tx.wg.relu_grad(reg[:, s0 + h * w:s0 + h * w + w], reg[:, s0 + h * w:s0 + h * w + w], gio.gt)


@T.macro
def store_chunk(P, C, Cs, src, s0, t, j, nper, nb, c, m0, n0, col, red=None, gio=None):
    """Round ``j`` (of ``nper`` per tile) of the CTA's ``t``-th tile, at ``(m0, n0)``: ``nb`` chunks from the
    tile's column ``col`` (this consumer's 64 rows, accumulator layout, in columns ``s0 ..`` of ``src``) ->
    staging buffer -> TMA stores (``red="add"``: TMA reduce-adds into ``C``), behind the consumer's own
    128-thread barrier. The two buffers alternate
    over the CTA's round sequence ``t nper + j`` (with an odd ``nper``, ``j % 2`` would give a tile's first
    round the buffer its previous tile's last store may still read)."""
    b = (t * nper + j) % 2 if nper % 2 else j % 2
    w = P.chunk_cols
    if P.drop != "store_wait":
        if T.thread_id_in_wg() == 0:
            T.ptx.bulk_wait_group_read(1)    # the store that last read this buffer is done
    if P.gate:
        for cc in range(2):     # one issuing thread per call site (the one that waited above)
            if T.thread_id() == 128 * (cc + 1):
                load_gate(P, gio, Cs[b, cc * 64:cc * 64 + 64, :],
                          gio.Gate[m0 + cc * 64:m0 + cc * 64 + 64, n0 + col:n0 + col + w], t * nper + j, cc)
    T.ptx.barrier_sync(1 + c, 128)
    if P.boxes_per_round == 1:
        wait_gate(P, gio, t * nper + j, c)
        apply_gate(P, gio, src, s0, Cs, b, c * 64, c)     # (no gate with DEFER: src is the converted out)
        Tx.wg.copy(Cs[b, c * 64:c * 64 + 64, :], src[:, s0:s0 + w])
    else:
        for g in range(nb):
            Tx.wg.copy(Cs[b, g, c * 64:c * 64 + 64, :], src[:, s0 + g * w:s0 + g * w + w])
    if P.drop != "fence_proxy_async":
        T.ptx.fence_proxy_async()
    T.ptx.barrier_sync(1 + c, 128)
    for cc in range(2):         # one issuing thread per call site
        if T.thread_id() == 128 * (cc + 1):
            if P.boxes_per_round == 1:
                Tx.copy_async(C[m0 + cc * 64:m0 + cc * 64 + 64, n0 + col:n0 + col + w], Cs[b, cc * 64:cc * 64 + 64, :],
                              reduce=red)
            else:
                for g in range(nb):
                    Tx.copy_async(C[m0 + cc * 64:m0 + cc * 64 + 64, n0 + col + g * w:n0 + col + g * w + w],
                                  Cs[b, g, cc * 64:cc * 64 + 64, :], reduce=red)


@T.macro
def store_round(P, C, Cs, src, t, j, c, m0, n0, wide, red=None):
    """Deferred round ``j`` of the CTA's ``t``-th tile (at ``(m0, n0)``, its values in ``src``); a split's
    narrow tile (``wide`` false) has its last round at the ``chunk_cols`` columns that end it (they overlap
    the chunk before, whose values they write again, so a reduce-add, ``red="add"``, takes no split)."""
    w = P.chunk_cols
    if (j + 1) * w > P.narrow_bn:
        if wide:
            store_chunk(P, C, Cs, src, j * w, t, j, P.rounds, 1, c, m0, n0, j * w, red)
        else:
            store_chunk(P, C, Cs, src, P.narrow_bn - w, t, j, P.rounds, 1, c, m0, n0, P.narrow_bn - w, red)
    else:
        per = P.boxes_per_round
        store_chunk(P, C, Cs, src, j * per * w, t, j, P.rounds, min(per, P.chunks - j * per), c, m0, n0, j * per * w,
                    red)


@T.macro
def tile_epilogue(P, ring, acc, SC, pk, out, brow, Bias, C, Cs, i, c, m0, n0, gio=None):
    """After the k-loop of the CTA's ``i``-th tile: wait for its wgmma, release its last stage (block scales:
    the k-loop released every stage), scale (FP8), bias / activate / gate each chunk, then store it at once
    (``out``) or convert the whole tile into ``pk`` for the deferred rounds."""
    if P.scaling != "block":
        if P.drop != "acc_wait":
            Tx.wg.gemm_wait(0, acc)
        if T.thread_id_in_wg() == 0:
            ring.release(i * P.k_blocks + P.k_blocks - 1)
    if P.neg_zero_guard:
        Tx.wg.add(acc, acc, NEG_ZERO())
    scale_tile(P, SC, acc, m0 + c * 64)
    if P.whole_staging:
        store_tile(P, C, Cs, acc, out, brow, Bias, c, m0, n0)
    else:
        for j in range(P.chunks):
            chunk = acc[:, j * P.chunk_cols:j * P.chunk_cols + P.chunk_cols]
            chunk_col_scales(P, SC, j)
            scale_chunk(P, SC, chunk)
            load_bias(P, brow, Bias, n0, j)
            bias_and_activation(P, chunk, brow)
            if not P.defer:
                Tx.wg.cast(out, chunk)
                store_chunk(P, C, Cs, out, 0, i, j, P.chunks, 1, c, m0, n0, j * P.chunk_cols, None, gio)
    if P.defer:
        Tx.wg.cast(pk, acc)     # frees acc for the next tile's first wgmma


@T.macro
def store_tile(P, C, Cs, acc, out, brow, Bias, c, m0, n0):
    """Consumer ``c``'s rows of the tile at ``(m0, n0)`` with
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.whole_staging`: once the consumer's stores of the previous tile have read the staging tile, every chunk (bias, activation,
    cast) into its own buffer, then one TMA store per chunk, behind one barrier pair."""
    if P.drop != "store_wait":
        if T.thread_id_in_wg() == 0:
            T.ptx.bulk_wait_group_read(0)
    T.ptx.barrier_sync(1 + c, 128)
    w = P.chunk_cols
    for j in range(P.chunks):
        chunk = acc[:, j * w:j * w + w]
        load_bias(P, brow, Bias, n0, j)
        bias_and_activation(P, chunk, brow)
        Tx.wg.cast(out, chunk)
        Tx.wg.copy(Cs[j, c * 64:c * 64 + 64, :], out)
    if P.drop != "fence_proxy_async":
        T.ptx.fence_proxy_async()
    T.ptx.barrier_sync(1 + c, 128)
    for cc in range(2):         # one issuing thread per call site
        if T.thread_id() == 128 * (cc + 1):
            for j in range(P.chunks):
                Tx.copy_async(C[m0 + cc * 64:m0 + cc * 64 + 64, n0 + j * w:n0 + j * w + w],
                              Cs[j, cc * 64:cc * 64 + 64, :])


# ---- the two consumer schedules --------------------------------------------------------------------------

@T.macro
def cooperative_consumer(P, ring, acc, SC, pk, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c,
                         gio=None):
    """Consumer ``c`` of the cooperative schedule: rows ``64 c ..`` of every tile of the CTA (``pk``: the
    deferred tile's registers, ``out``: a converted chunk; only the one the plan uses is read)."""
    if c == 1:          # the stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        T.ptx.barrier_arrive(5, 256)
    for i in T.serial(n_tiles):
        m0, n0, wide = tile_at(P, unit + i * P.units, rank)
        if P.defer:     # the previous tile, whose 16-bit values wait in pk
            pm0, pn0, pwide = tile_at(P, unit + (i - 1) * P.units, rank)
        if P.scaling == "row":
            load_col_scales(P, SC, n0)
        if P.split is None:
            if P.defer:
                k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.BN)
            else:
                k_loop(P, ring, acc, As, Bs, C, Cs, acc, i, c, 0, 0, True, P.BN)
        else:
            if wide:
                k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.BN)
            else:
                k_loop(P, ring, acc, As, Bs, C, Cs, pk, i, c, pm0, pn0, pwide, P.narrow_bn)
        if P.defer:     # rounds left over when the tile has fewer k-blocks than rounds
            for j in range(P.k_blocks, P.rounds):
                if i > 0:
                    store_round(P, C, Cs, pk, i - 1, j, c, pm0, pn0, pwide)
        tile_epilogue(P, ring, acc, SC, pk, out, brow, Bias, C, Cs, i, c, m0, n0, gio)
    if P.defer:
        if n_tiles > 0:             # the CTA's last tile
            lm0, ln0, lwide = tile_at(P, unit + (n_tiles - 1) * P.units, rank)
            for j in range(P.rounds):
                store_round(P, C, Cs, pk, n_tiles - 1, j, c, lm0, ln0, lwide)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


@T.macro
def block_consumer(P, ring, acc, tmps, SC, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c):
    """Consumer ``c`` of the block-scaled cooperative schedule: rows ``64 c ..`` of every tile of the CTA. With
    :attr:`~tirxpy_kernels.gemm_plan.GemmPlan.first_under_epilogue`, the first part of a tile's k-block 0 is issued
    before the previous tile's epilogue, into the scratch accumulator, which the epilogue does not read, so the
    tensor cores run it while that tile is stored; it is waited for and promoted after the epilogue
    (:func:`block_first_issue`, :func:`block_first_finish`). The CTA's last tile then issues one more, on the stage
    its last k-block filled (:func:`block_stage`), and discards it, so that no wgmma is issued under a branch or
    left in flight across the tile loop's back edge (either makes ptxas serialize every wgmma of the kernel)."""
    early = P.first_under_epilogue
    if c == 1:          # the stagger (named barrier 5), once per CTA
        T.ptx.barrier_sync(5, 256)
    elif n_tiles == 0:
        if not early:   # (with early, tile 0's k-block 0 is issued, and arrives, even then)
            T.ptx.barrier_arrive(5, 256)
    fm0, fn0, fwide = tile_at(P, unit, rank)
    if P.part_bufs == 2:    # the next window's registers, read (and discarded) by a select before their first load
        for q in range(len(P.scale_cols)):
            SC.sbv[len(P.scale_cols) + q] = T.float32(0)
    load_b_window(P, SC, fn0, 0, 0)     # the first tile's first window of B's scales
    if early:
        block_first_issue(P, ring, tmps, As, Bs, 0, c, n_tiles > 0, True)
        block_first_finish(P, ring, acc, tmps, SC, As, Bs, 0, fn0, c, n_tiles > 0)
    for i in T.serial(n_tiles):
        m0, n0, wide = tile_at(P, unit + i * P.units, rank)
        nm0, nn0, nwide = tile_at(P, unit + (i + 1) * P.units, rank)
        block_k_loop(P, ring, acc, tmps, SC, As, Bs, i, n0, nn0, c)
        if early:
            block_first_issue(P, ring, tmps, As, Bs, i + 1, c, i + 1 < n_tiles)     # under this tile's epilogue
        tile_epilogue(P, ring, acc, SC, acc, out, brow, Bias, C, Cs, i, c, m0, n0)
        if early:
            block_first_finish(P, ring, acc, tmps, SC, As, Bs, i + 1, nn0, c, i + 1 < n_tiles)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


@T.macro
def pingpong_store(P, C, Cs, acc, acc2, SC, out, brow, Bias, j2, j, c, m0, n0, gio=None):
    """Ping-pong: chunk ``j`` of consumer ``c``'s ``j2``-th tile (both 64-row halves) through its own two
    staging buffers, which alternate over its chunk sequence."""
    w = P.chunk_cols
    b = (j2 * P.chunks + j) % 2
    if P.drop != "store_wait":
        if T.thread_id_in_wg() == 0:
            T.ptx.bulk_wait_group_read(1)    # the store that last read buffer b is done
    if P.gate:
        for cc in range(2):     # one issuing thread per call site (the one that waited above)
            if T.thread_id() == 128 * (cc + 1):
                load_gate(P, gio, Cs[cc, b], gio.Gate[m0:m0 + BM, n0 + j * w:n0 + j * w + w], j2 * P.chunks + j, cc)
    T.ptx.barrier_sync(1 + c, 128)
    wait_gate(P, gio, j2 * P.chunks + j, c)
    load_bias(P, brow, Bias, n0, j)
    chunk_col_scales(P, SC, j)
    for hh in range(2):
        chunk = (acc if hh == 0 else acc2)[:, j * w:j * w + w]
        if P.scaling == "row":
            load_row_scales(P, SC, m0 + hh * 64)
            scale_chunk(P, SC, chunk)
        bias_and_activation(P, chunk, brow)
        apply_gate(P, gio, acc if hh == 0 else acc2, j * w, Cs, b, hh * 64, c)
        Tx.wg.cast(out, chunk)
        Tx.wg.copy(Cs[c, b, hh * 64:hh * 64 + 64, :], out)
    if P.drop != "fence_proxy_async":
        T.ptx.fence_proxy_async()
    T.ptx.barrier_sync(1 + c, 128)
    for cc in range(2):         # one issuing thread per call site
        if T.thread_id() == 128 * (cc + 1):
            Tx.copy_async(C[m0:m0 + BM, n0 + j * w:n0 + j * w + w], Cs[cc, b])


@T.macro
def pingpong_consumer(P, ring, acc, acc2, SC, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c, gio=None):
    """Consumer ``c`` of the ping-pong schedule: the CTA's tiles ``c, c + 2, ...``, whole."""
    for j2 in T.serial((n_tiles + 1 - c) // 2):
        i = c + 2 * j2
        m0, n0, _wide = tile_at(P, unit + i * P.units, rank)
        if P.scaling == "row":
            load_col_scales(P, SC, n0)
        # turns: tile i's k-loop starts once tile i - 1's has waited for all of its stages (named barriers 3:
        # consumer 1's turn, 4: consumer 0's); they also make the parity waits below sound (module docstring)
        if P.drop != "turn":
            if i > 0:
                T.ptx.barrier_sync(4 - c, 256)
        for k in T.serial(P.k_blocks):
            g = i * P.k_blocks + k
            s = ring.stage(g)
            if P.drop != "full_wait":
                ring.wait_full(g)
            for hh in range(2):         # rows 0 .. 63 and 64 .. 127: two commit groups per k-block
                mma(P, acc if hh == 0 else acc2, As, Bs, s, hh * 64, k,
                    None if hh == 0 else (None if P.drop == "wgmma_wait" else 2), P.BN)
            if k > 0:                   # the previous k-block's two groups are done with its stage
                if T.thread_id_in_wg() == 0:
                    ring.release(g + P.stages - 1)
        if P.drop != "turn":
            if i + 1 < n_tiles:         # the other consumer's turn
                T.ptx.barrier_arrive(3 + c, 256)
        if P.drop != "acc_wait":
            Tx.wg.gemm_wait(0, acc, acc2)
        if T.thread_id_in_wg() == 0:
            ring.release(i * P.k_blocks + P.k_blocks - 1)
        if P.scaling == "tensor":
            scale_tile(P, SC, acc, m0)
            scale_tile(P, SC, acc2, m0 + 64)
        for j in range(P.chunks):
            pingpong_store(P, C, Cs, acc, acc2, SC, out, brow, Bias, j2, j, c, m0, n0, gio)
    if T.thread_id_in_wg() == 0:
        T.ptx.bulk_wait_group(0)


# ---- the kernel ------------------------------------------------------------------------------------------

def scale_shapes(P: GemmPlan):
    """``(SA, SB)`` parameter shapes of plan ``P`` (:mod:`tirxpy_kernels.gemm_scales` says what each holds);
    ``(1, 1)`` placeholders without scales."""
    if P.scaling == "row":
        return (P.M, 1), (1, P.N)
    if P.scaling == "block":
        return (P.k_blocks, cdiv(P.M, 4) * 4), (P.k_blocks, cdiv(P.N, BLOCK_SCALE))
    return (1, 1), (1, 1)


@T.macro
def kernel_body(P, A, B, SA, SB, Bias, C, Gate=None):
    """Everything after ``T.launch``: buffers, the barrier set-up, then one role per warpgroup."""
    a_shape, as_shape, a_layout, b_shape, bs_shape, b_layout = operand_shapes(P)
    As = T.alloc_shared(as_shape, P.dtype, layout=a_layout)
    Bs = T.alloc_shared(bs_shape, P.b_dtype, layout=b_layout)
    Cs = T.alloc_shared(staging_shape(P), P.out_dtype, layout=staging_layout(P))
    full = T.alloc_shared((P.stages,), "uint64")
    empty = T.alloc_shared((P.stages,), "uint64")
    acc = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))
    if P.pingpong:
        acc2 = T.alloc_local((64, P.BN), "float32", layout=wgmma_accumulator(P.BN))   # rows 64 .. 127 of the tile
    if P.defer:
        pk = T.alloc_local((64, P.BN), P.out_dtype, layout=wgmma_accumulator(P.BN))     # the whole tile, converted
    else:
        out = T.alloc_local((64, P.chunk_cols), P.out_dtype, layout=wgmma_accumulator(P.chunk_cols))
    brow = T.alloc_local((1, P.chunk_cols), P.out_dtype, layout=bias_layout(P.chunk_cols))
    gio = None
    if P.gate:
        gfull = T.alloc_shared((4,), "uint64")
        gempty = T.alloc_shared((4,), "uint64")       # (unused: a consumer frees its own buffer)
        gt = T.alloc_local((64, P.gate_cols), P.out_dtype, layout=wgmma_accumulator(P.gate_cols))
        gio = GateIO(gate_ring(gfull, gempty), gt, Gate)
    SC = Scales(SA, SB)
    if P.scaling == "block":
        t0 = T.alloc_local((64, P.part), "float32", layout=wgmma_accumulator(P.part))       # the parts' products
        tmps = [t0]
        if P.part_bufs == 2:
            t1 = T.alloc_local((64, P.part), "float32", layout=wgmma_accumulator(P.part))
            tmps = [t0, t1]
        srows = []      # the promoted k-block's scales, per B scale
        for q in range(len(P.scale_cols)):
            qr = T.alloc_local((64, 1), "float32", layout=row_layout())
            srows = srows + [qr]
        sas = T.alloc_shared((P.stages, 1, BM), "float32")
        sbv = T.alloc_local((2 * len(P.scale_cols),), "float32")
        srows2 = None
        if P.part_bufs == 2:        # a second set: a k-block's scales worked out while the previous one's are read
            srows2 = []
            for q in range(len(P.scale_cols)):
                qr2 = T.alloc_local((64, 1), "float32", layout=row_layout())
                srows2 = srows2 + [qr2]
        SC = Scales(SA, SB, None, None, sas, sbv, srows, srows2=srows2)
    if P.scaling == "row":
        srow = T.alloc_local((64, 1), "float32", layout=row_layout())
        scol = T.alloc_local((1, P.chunk_cols), "float32", layout=bias_layout(P.chunk_cols))
        scv = T.alloc_local((col_registers(P),), "float32")
        SC = Scales(SA, SB, srow, scol, scv=scv)
    unit = T.cta_id(0) // P.CM
    rank = T.cta_id(0) % P.CM
    n_tiles = tiles_of_unit(unit, P.units, P.tiles)
    ring = StageRing(full, empty, P.stages, P.CM)
    if P.gate:
        setup_barriers([(ring, 1, P.empty_arrivals), (gio.ring, 1, 1)], P.CM, P.pdl)
    else:
        setup_barriers([(ring, 1, P.empty_arrivals)], P.CM, P.pdl)
    roles = WarpRoles(THREADS, PRODUCER_REGS, CONSUMER_REGS, "gemm_sm90")
    wg = T.warpgroup_id()
    if wg == 0:
        roles.enter_producer()
        if T.warp_id_in_wg() == 0:
            if T.elect_one():
                producer(P, ring, A, B, As, Bs, SC, unit, rank, n_tiles)
    elif P.pingpong:
        roles.enter_consumer()
        c = wg - 1
        pingpong_consumer(P, ring, acc, acc2, SC, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c, gio)
    elif P.scaling == "block":
        roles.enter_consumer()
        c = wg - 1
        block_consumer(P, ring, acc, tmps, SC, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c)
    elif P.defer:
        roles.enter_consumer()
        c = wg - 1
        cooperative_consumer(P, ring, acc, SC, pk, pk, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c)
    else:
        roles.enter_consumer()
        c = wg - 1
        cooperative_consumer(P, ring, acc, SC, acc, out, brow, As, Bs, Bias, C, Cs, unit, rank, n_tiles, c,
                             gio)
    if P.CM > 1:
        T.ptx.cluster_sync()     # no CTA leaves while a peer may still multicast into it / arrive on it


def staging_layout(P: GemmPlan):
    """The staging tile's swizzled layout: chunks of ``chunk_cols`` output elements."""
    return ComposeLayout(swizzle_for(P.chunk_cols * DataType.get(P.out_dtype).itemsize, P.out_dtype),
                         TileLayout(S[staging_shape(P)]))


def build(P: GemmPlan):
    """The ``@T.prim_func`` of plan ``P``: ``(A, B, Bias, C)``, ``(A, B, Bias, Gate, C)`` with ``gate``, or ``(A, B,
    SA, SB, Bias, C)`` for FP8 inputs (:func:`scale_shapes`); its body is :func:`kernel_body`."""
    a_shape, b_shape = operand_shapes(P)[0], operand_shapes(P)[3]
    dtype, out_dtype = P.dtype, P.out_dtype
    if P.gate:
        @T.prim_func
        def gemm_sm90_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
                             Bias: T.Tensor(P.bias_shape, out_dtype), Gate: T.Tensor(P.gate_shape, out_dtype),
                             C: T.Tensor((P.M, P.N), out_dtype)):
            T.launch(grid=(P.grid,), threads=THREADS, cluster=P.cluster, pdl=P.pdl)
            kernel_body(P, A, B, None, None, Bias, C, Gate)

        return gemm_sm90_kernel
    if P.scaling is None:
        @T.prim_func
        def gemm_sm90_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype),
                             Bias: T.Tensor(P.bias_shape, out_dtype), C: T.Tensor((P.M, P.N), out_dtype)):
            T.launch(grid=(P.grid,), threads=THREADS, cluster=P.cluster, pdl=P.pdl)
            kernel_body(P, A, B, None, None, Bias, C)

        return gemm_sm90_kernel
    sa_shape, sb_shape = scale_shapes(P)

    @T.prim_func
    def gemm_fp8_sm90_kernel(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, P.b_dtype),
                             SA: T.Tensor(sa_shape, "float32"), SB: T.Tensor(sb_shape, "float32"),
                             Bias: T.Tensor(P.bias_shape, out_dtype), C: T.Tensor((P.M, P.N), out_dtype)):
        T.launch(grid=(P.grid,), threads=THREADS, cluster=P.cluster, pdl=P.pdl)
        kernel_body(P, A, B, SA, SB, Bias, C)

    return gemm_fp8_sm90_kernel


@tirxpy.jit
def gemm_sm90(M, N, K, BN=256, STAGES=None, CM=1, a_major="K", b_major="K", dtype="bfloat16",
              out_dtype="bfloat16", bias=False, activation=None, sms=TARGET.sm_count, group=GROUP, DEFER=None,
              PINGPONG=False, drop=None, PDL=True, SPLIT=None, scaling=None, b_dtype=None, PART=None, PASS=None,
              gate=False):
    """The kernel for one problem: ``k(A, B, Bias, C)``, ``k(A, B, Bias, Gate, C)`` with ``gate``, or ``k(A, B, SA, SB,
    Bias, C)`` for FP8 inputs; see the module docstring for the operand orientations and the parts. Each tuning option,
    what it does and when the defaults (:func:`tirxpy_kernels.gemm`, through
    :func:`~tirxpy_kernels.gemm_plan.choose_tile`) choose it:

    ``BN``: the tile width, any multiple of 16 in [64, 256] (the wgmma N); with an MN-major ``B``, a
    multiple of ``64 CM`` (64-column TMA boxes, split over the cluster). Widths that are not a multiple
    of 64 store narrower output chunks, several per barrier round (``BN = 176``: 16-column chunks, four
    per round). Default here 256; :func:`tirxpy_kernels.gemm` takes :func:`~tirxpy_kernels.gemm_plan.choose_tile`'s, the
    width whose persistent rounds :func:`~tirxpy_kernels.gemm_plan.schedule_cost` rates fastest, no wider than
    :func:`~tirxpy_kernels.gemm_plan.widest_bn` allows for the epilogue.

    ``STAGES``: shared-memory ring stages; default :func:`~tirxpy_kernels.gemm_plan.default_stages` (the most that
    fit next to the epilogue's staging buffers: 4, or 5 for ping-pong tiles at most 176 wide).

    ``CM``: CTAs per cluster (1 or 2; 2: the pair computes two tile rows of the same columns and
    multicasts B). No default chooses 2: a 2-CTA cluster sits on the two SMs of one TPC, whose concurrent
    reads of the same lines the L2 request coalescer already merges, and without a cluster consecutive
    CTAs (one TPC, too) share B's columns in the grouped order; it stays as the multicast form of the
    kernel (tutorial 07, level 4).

    ``group``: band height of the grouped tile order (:func:`tirxpy.lang.schedule.grouped_tile`), default 4.

    ``PDL`` (default on): programmatic dependent launch (``T.launch(pdl=True)``): the kernel may start while
    the previous kernel in the stream finishes; every thread waits for it (``griddepcontrol.wait``) after
    the barrier setup, before any global load or store, so the launch and setup overlap that kernel's end.
    The kernel never triggers its dependents early (``griddepcontrol.launch_dependents``: the next launch's
    CTAs would take SMs as they free, and consecutive CTAs would no longer share a TPC). ``PDL=False``
    launches plainly.

    ``DEFER``: store each tile during the next tile's k-loop (module docstring); ``None`` (the default)
    picks it for 16-bit outputs without ``bias`` (a fused bias's hoisted loads do not fit next to a
    deferred tile's registers) in the cooperative schedule; a float32 output has no room for it.

    ``PINGPONG``: the two consumer warpgroups take whole tiles in turn (module docstring); ``BN <= 192``
    (the accumulator's registers); no ``DEFER``. :func:`tirxpy_kernels.gemm` picks it where
    :func:`~tirxpy_kernels.gemm_plan.choose_tile` rates it faster (narrow N such as 2112, where ping-pong tiles
    fill the rounds better).

    ``SPLIT = (rows, wide, bn2)`` (cooperative deferred schedule, ``CM = 1``, K-major ``B``): the first
    ``rows`` tile rows hold ``wide`` tiles of ``BN`` columns and then tiles of ``bn2`` (``BN - chunk_cols <
    bn2 < BN``, a multiple of 16) to the end of ``N``, listed first (:func:`tirxpy.lang.schedule.split_tile`),
    so the tile count fills the persistent grid's last round. :func:`tirxpy_kernels.gemm` applies
    :func:`~tirxpy_kernels.gemm_plan.balanced_split`'s where it lowers the busiest CTA's work.

    ``sms``: persistent units to fill (the device's SM count in :func:`tirxpy_kernels.gemm`).

    ``dtype="float8_e4m3"`` / ``"float8_e5m2"`` (``b_dtype``: B's format when it is the other one) with
    ``scaling="tensor"``, ``"row"`` or ``"block"``: an FP8 product, both operands K-major, 128-deep k-blocks
    (one 128-byte swizzle atom, ``m64nBNk32`` wgmma); the kernel takes ``(A, B, SA, SB, Bias, C)`` with the
    scales of :func:`scale_shapes` and applies them as :mod:`tirxpy_kernels.gemm_scales` describes (the block
    scaling: no ``DEFER``, each k-block promoted into the float32 accumulator in parts of ``PART`` columns,
    :func:`~tirxpy_kernels.gemm_fp8_plan.block_part`, in passes of ``PASS`` k-blocks,
    :func:`~tirxpy_kernels.gemm_fp8_plan.check_pass`).

    ``gate``: the output is 0 where ``Gate`` (``(M, N)``, the output's dtype) is <= 0, applied after the bias and
    activation: ReLU's backward fused into the product that makes its incoming gradient (``dr = (dy @ W2) * (r >
    0)``, a select: a NaN in ``Gate`` passes the product). Each epilogue chunk reads its gate chunk from global
    memory, so ``DEFER`` is off (16-bit inputs; no FP8 scaling).

    ``drop=`` removes one protocol step, for the simulator's mutation tests only: ``"full_wait"``
    (consumers' wait on ``full``), ``"empty_wait"`` (producer's wait on ``empty``), ``"expect_tx"``
    (the TMA loads announce no bytes), ``"wgmma_wait"`` (the k-loop's ``wait=1`` before a stage is
    released), ``"acc_wait"`` (``gemm_wait(0)`` before the epilogue), ``"fence_proxy_async"``
    (before the TMA store), ``"store_wait"`` (the staging buffer's bulk read-wait) or ``"turn"``
    (``PINGPONG``'s turn barriers between the consumers' k-loops)."""
    return build(kernel_plan(M, N, K, BN, STAGES, CM, a_major, b_major, dtype, out_dtype, bias, activation, sms,
                             group, DEFER, PINGPONG, drop, PDL, SPLIT, scaling, b_dtype, PART, PASS, gate))


@tirxpy.jit
def example():
    """The kernel ``python -m tirxpy compile tirxpy_kernels/gemm_sm90.py`` builds: the defaults at 4096^3."""
    return gemm_sm90(4096, 4096, 4096)
