"""``copy_async`` with the Tensor Memory Accelerator (sm_90+): one issuing thread moves a whole
box between a global view and a shared tile.

- load ``Tx.copy_async(s_tile, A[r0:r0 + BM, k0:k0 + BK], mbar=bar[s])``: ``cp.async.bulk.tensor``
  into shared memory, completing on ``mbar``. The copy also does ``mbarrier.arrive.expect_tx``
  with the box's bytes (initialize the barrier with the number of copies per phase), or with
  ``arrive=False`` only ``mbarrier.expect_tx`` (arrive yourself). ``multicast=mask`` (sm_90a)
  writes the box into the shared tile of every CTA of the cluster in the 16-bit mask.
  ``cta_group=2`` (sm_100a, a tcgen05 CTA pair): the box lands in this CTA's tile but completes
  on ``mbar``'s barrier in the pair's even (leader) CTA (``.cta_group::2``, address from
  ``mapa``), with a remote ``arrive.expect_tx`` there (or none with ``arrive=False``).
  ``expect_tx=False``: the copy announces no bytes (a plain ``mbarrier.arrive``, or nothing with
  ``arrive=False``) -- for a stage whose bytes you announced yourself with one
  ``T.ptx.mbarrier_arrive_expect_tx`` (and for the simulator's mutation tests).
- store ``Tx.copy_async(A[...], s_tile)``: ``cp.async.bulk.tensor`` shared -> global, then
  ``cp.async.bulk.commit_group`` (wait with ``T.ptx.bulk_wait_group(0)``); ``reduce="add"``
  makes it ``cp.reduce.async.bulk.tensor ... .add``.

The box is the global view's extents (outermost first); the shared tile must be that box written
densely row-major, optionally under a TMA swizzle (32/64/128 B) -- read from its layout. Codegen
builds the tensor map (a hidden kernel parameter) from the global view and the shared tile.
Out-of-range parts of the box are filled with zeros on loads and dropped on stores by the
hardware, so ragged edges need no guard. A box must start at a multiple of 16 bytes in the innermost
dimension (the hardware faults otherwise): a constant start that is not is refused here, a device value is
the kernel's to keep aligned (the simulator reports it).

    A[r0:r0 + 64, 4:68]   (float32: 16 bytes in)  -- a TMA box
    A[r0:r0 + 64, 2:66]   (8 bytes in)            -- refused
"""
from __future__ import annotations

from math import prod

from tirxpy.ir import ops
from tirxpy.ir.expr import BufferLoad, IntImm
from tirxpy.layout import ComposeLayout, TileLayout, hardware_swizzle_bytes

from ..dispatch import fail, register_impl


def box_swizzle(tile, box) -> int | str:
    """Swizzle width in bytes (0/32/64/128) of a shared tile that is the dense row-major ``box``,
    or a reason string naming the element that is out of place."""
    lay = tile.layout
    mode = 0
    dt = tile.dtype.name
    if isinstance(lay, ComposeLayout):
        mode = hardware_swizzle_bytes(lay.swizzle, dt)
        if mode is None:
            return f"{tile.name}'s swizzle {lay.swizzle!r} is not a TMA swizzle for {dt}"
    elif not isinstance(lay, TileLayout):
        return f"{tile.name}'s layout is not a tile layout"
    # (a symbolic stage offset moves the whole box: checked by codegen's alignment)
    wrong = lay.dense_box_mismatch(box)
    if wrong:
        el, got, want = wrong
        return (f"{tile.name} is not the dense row-major box {tuple(box)} TMA writes: element {el} "
                f"is at offset {got}, TMA puts it at {want}")
    inner = box[-1] * tile.dtype.bits // 8
    if inner % 16:
        return f"the box's inner extent is {inner} bytes; TMA needs a multiple of 16"
    if mode and inner > mode:
        return f"the box's inner extent is {inner} bytes, wider than the {mode}-byte swizzle of {tile.name}"
    if any(b > 256 for b in box):
        return f"box {tuple(box)} has an extent over 256"
    return mode


def _one_thread(ctx):
    if len(ctx.threads) != 1:
        return (f"call runs on {ctx.threads.describe()}; a TMA copy is issued by one thread "
                "(put it under `if T.elect_one():`)")
    return None


def _gs(ctx):
    if len(ctx.operands) != 2:
        return None
    return ctx.tensor(0), ctx.tensor(1)


def is_tma_load(ctx):
    p = _gs(ctx)
    if p is None:
        return "copy_async takes (dst, src)"
    dst, src = p
    if dst.storage != "shared" or src.storage != "global":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; a TMA load writes 'shared' from 'global'"
    if ctx.attr("mbar") is None:
        return "a TMA load completes on an mbarrier: pass mbar=bar[stage]"
    return _common(ctx, dst, src)


def is_tma_store(ctx):
    p = _gs(ctx)
    if p is None:
        return "copy_async takes (dst, src)"
    dst, src = p
    if dst.storage != "global" or src.storage != "shared":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; a TMA store writes 'global' from 'shared'"
    return _common(ctx, src, dst)


def _common(ctx, smem, gmem):
    if smem.dtype != gmem.dtype:
        return f"TMA cannot convert: {gmem.name} is {gmem.dtype}, {smem.name} is {smem.dtype}"
    if gmem.buffer not in ctx.kernel.params:
        return f"{gmem.name} is not a kernel parameter (a tensor map describes a parameter tensor)"
    if not 1 <= gmem.buffer.ndim <= 5:
        return f"{gmem.name} has rank {gmem.buffer.ndim}; TMA moves 1-5 dimensional tensors"
    box = gmem.extents
    inner = gmem.starts[-1]
    if isinstance(inner, IntImm) and inner.value * gmem.dtype.bits % 128:
        return (f"the box starts at element {inner.value} of {gmem.name}'s innermost dimension "
                f"({inner.value * gmem.dtype.bits / 8:g} bytes), not a multiple of 16 bytes, which the TMA unit faults "
                f"on: start it at a multiple of {max(1, 128 // gmem.dtype.bits)} elements")
    if prod(box) != prod(smem.shape):
        return f"the box {box} has {prod(box)} elements, {smem.name} {smem.shape} has {prod(smem.shape)}"
    r = box_swizzle(smem, box)
    return r if isinstance(r, str) else _one_thread(ctx)


def _tile_arg(t):
    return t.obj


@register_impl("copy_async", "sm_90", variant="tma_load", priority=20, when=[is_tma_load])
def tma_load(ctx):
    """TMA box load global -> shared on an mbarrier (expect_tx from the box bytes; multicast on sm_90a)."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    n = src.buffer.ndim
    bar = ctx.attr("mbar")
    if not isinstance(bar, BufferLoad):
        fail(f"mbar= takes an mbarrier element such as bar[stage], got {bar!r}")
    nbytes = prod(src.extents) * src.dtype.bits // 8
    coords = [ops.const(0)] * n
    mc = ctx.attr("multicast")
    stmts = []
    cg = ctx.attr("cta_group", 1)
    if cg not in (1, 2):
        fail(f"cta_group={cg!r}: a TMA load takes cta_group=1 (default) or 2 (a tcgen05 CTA pair)")
    if cg == 2:
        # completes on the barrier at mbar's offset in the pair's even (leader) CTA, where the
        # cta_group::2 MMA is issued: a shared::cluster address from mapa
        if mc is not None:
            fail("cta_group=2 with multicast= is not implemented here; load each CTA's share separately")
        rank = ctx.intrin("cluster_ctarank")
        leader = ops.sub(rank, ops.floormod(rank, 2))
        lbar, let = ctx.let("leader_bar", ctx.intrin("mapa_shared", bar, leader))
        stmts.append(let)
        if ctx.attr("arrive", True):
            if ctx.attr("expect_tx", True):
                stmts.append(ctx.emit("mbarrier_arrive_expect_tx_remote", lbar, ops.const(nbytes, "uint32")))
            else:
                stmts.append(ctx.emit("mbarrier_arrive_remote", lbar))
        stmts.append(ctx.emit(f"tma_load_{n}d_cta_group2", _tile_arg(dst), _tile_arg(src), *coords, lbar))
        return ctx.seq(stmts)
    if not ctx.attr("expect_tx", True):
        if ctx.attr("arrive", True):
            stmts.append(ctx.let("tma_state", ctx.intrin("mbarrier_arrive", bar))[1])
    elif ctx.attr("arrive", True):
        from tirxpy.ir.stmt import LetStmt  # noqa: F401

        state = ctx.intrin("mbarrier_arrive_expect_tx", bar, ops.const(nbytes, "uint32"))
        v, let = ctx.let("tma_state", state)
        stmts.append(let)
    else:
        stmts.append(ctx.emit("mbarrier_expect_tx", bar, ops.const(nbytes, "uint32")))
    if mc is None:
        stmts.append(ctx.emit(f"tma_load_{n}d", _tile_arg(dst), _tile_arg(src), *coords, bar))
    else:
        mask = mc if not isinstance(mc, int) else ops.const(mc, "uint16")
        stmts.append(ctx.emit(f"tma_load_{n}d_multicast", _tile_arg(dst), _tile_arg(src), *coords, bar, mask))
    return ctx.seq(stmts)


@register_impl("copy_async", "sm_90", variant="tma_store", priority=20, when=[is_tma_store])
def tma_store(ctx):
    """TMA box store (or reduce-add) shared -> global, then bulk commit_group."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    n = dst.buffer.ndim
    red = ctx.attr("reduce")
    if red not in (None, "add"):
        fail(f"reduce={red!r}: TMA reductions here support 'add'")
    name = f"tma_reduce_add_{n}d" if red == "add" else f"tma_store_{n}d"
    coords = [ops.const(0)] * n
    return ctx.seq([ctx.emit(name, _tile_arg(dst), *coords, _tile_arg(src)), ctx.emit("bulk_commit_group")])
