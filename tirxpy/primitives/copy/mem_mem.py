"""copy between memories (global <-> shared, shared <-> shared) by the active threads together,
and ``copy_async`` global -> shared with ``cp.async`` (sm_80+).

The active threads (a regular set: ``ThreadSet.layout()``) split the tile into chunks of ``v``
elements, ``v`` the widest vector both layouts allow (:func:`.common.max_vector`, swizzles
included); thread ``rank`` moves chunks ``rank, rank + N, ...`` (consecutive threads take
consecutive chunks: coalesced). A chunk of 4/8/16 bytes moves as one vector load + store through
registers, or one ``cp.async`` (``cg`` for 16 bytes, else ``ca``). Global views with symbolic
starts are guarded at the tensor edge: loads and ``cp.async`` write zeros outside (``zfill``),
stores skip.

``copy_async`` with ``cp.async`` issues the copies and commits them as one group
(``cp.async.commit_group``); wait with ``T.ptx.cp_async_wait_group(n)`` and a barrier.
"""
from __future__ import annotations

from math import prod

from tirxpy.ir import ops
from tirxpy.ir.expr import AddressOf, Cast, ScopeId
from tirxpy.ir.stmt import BufferStore, IfThenElse

from ..dispatch import fail, register_impl
from .common import edge_guard, map_coord, max_vector, same_logical_shape, vector_intrinsic

MEMS = ("global", "shared")


def is_mem_mem(ctx):
    """Both operands in global / shared memory, same logical shape."""
    if len(ctx.operands) != 2:
        return f"copy takes (dst, src), got {len(ctx.operands)} operands"
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if dst.storage not in MEMS or src.storage not in MEMS:
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant moves between global/shared memories"
    if dst.storage == "global" and src.storage == "global":
        return "global -> global copies are not a tile primitive (stage through shared memory or registers)"
    return same_logical_shape(dst, src)


def regular_threads(ctx):
    """The active threads form a (warps x lanes) grid the chunks can be dealt over."""
    if ctx.threads.layout() is None:
        return f"the active threads ({ctx.threads.describe()}) are not a regular warps x lanes grid"
    if not ctx.threads.exact:
        return f"the active thread set is only known as an upper bound ({ctx.threads.describe()})"
    return None


def _rank(ctx):
    """Position of the executing thread among the active threads (IR), and their count."""
    lay = ctx.threads.layout()
    its = {it.axis.name: it for it in lay.shard}
    off = lay.offset
    lane = ScopeId("lane_id")
    r = ops.const(0)
    nl = its["laneid"].extent if "laneid" in its else 1
    if "laneid" in its:
        it = its["laneid"]
        x = ops.sub(lane, off.get("laneid", 0)) if off.get("laneid", 0) else lane
        r = ops.floordiv(x, it.stride) if it.stride > 1 else x
    if "warpid" in its:
        it = its["warpid"]
        w = ScopeId("warp_id")
        x = ops.sub(w, off.get("warpid", 0)) if off.get("warpid", 0) else w
        r = ops.add(ops.mul(ops.floordiv(x, it.stride) if it.stride > 1 else x, nl), r)
    return r, len(ctx.threads)


def _coord(e, shape):
    """Row-major unflatten of linear index ``e`` (< prod(shape)) over ``shape``."""
    out, stride = [], prod(shape)
    for d, n in enumerate(shape):
        stride //= n
        c = ops.floordiv(e, stride) if stride > 1 else e
        out.append(c if d == 0 else ops.floormod(c, n))
    return tuple(out)


def _chunks(ctx, dst, src, body_fn, max_bytes=16, min_bytes=1):
    v = max_vector([dst, src], max_bytes)
    if dst.dtype != src.dtype:
        v = 1
    if v * dst.dtype.bits < min_bytes * 8:
        fail(f"the widest vector both layouts allow is {v} element(s) of {src.dtype} "
             f"({v * src.dtype.bits // 8} bytes); this variant moves at least {min_bytes} bytes per instruction")
    rank, n = _rank(ctx)
    total = prod(src.shape)
    nchunks = total // v
    iters = -(-nchunks // n)

    def one(it):
        c = ops.add(ops.mul(it, n), rank) if iters > 1 else rank
        coord = _coord(ops.mul(c, v) if v > 1 else c, src.shape)
        stmt = body_fn(v, coord, map_coord(coord, src, dst))
        if nchunks % n:
            stmt = IfThenElse(ops.lt(c, nchunks), [stmt])
        return stmt

    return ctx.loop(iters, one, kind="unroll" if iters <= 8 else "serial", name="chunk")


def _guarded(ctx, dst, src, scoord, dcoord, load_stmt, zero_stmts):
    g_src = edge_guard(src, scoord) if ctx.attr("guard", True) else None
    g_dst = edge_guard(dst, dcoord) if ctx.attr("guard", True) else None
    stmt = load_stmt
    if g_src is not None:
        stmt = IfThenElse(g_src, [stmt], zero_stmts)
    if g_dst is not None:
        stmt = IfThenElse(g_dst, [stmt])
    return stmt


def same_dtype(ctx):
    """Vector copies move raw bits: source and destination must have one dtype."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if dst.dtype != src.dtype:
        return (f"{src.name} is {src.dtype} and {dst.name} is {dst.dtype}: vector loads / stores move raw bits and "
                "cannot convert (mem_mem_scalar converts element by element)")
    return None


@register_impl("copy", "sm_80", variant="mem_mem_vec", priority=15, when=[is_mem_mem, same_dtype, regular_threads])
def mem_mem_vec(ctx):
    """global/shared <-> shared by all active threads, 4/8/16-byte vectors through registers."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    words, alloc = ctx.local("stage", (4,), "uint32")

    def body(v, sc, dc):
        nw = v * src.dtype.bits // 32
        regs = [words[j] for j in range(nw)]
        ld = ctx.emit(vector_intrinsic("ld", src.storage, nw), *regs, AddressOf(src.load(sc)))
        st = ctx.emit(vector_intrinsic("st", dst.storage, nw), AddressOf(dst.load(dc)), *regs)
        zero = [BufferStore(words, (ops.const(j),), ops.const(0, "uint32")) for j in range(nw)]
        g_src = edge_guard(src, sc) if ctx.attr("guard", True) else None
        g_dst = edge_guard(dst, dc) if ctx.attr("guard", True) else None
        out = [IfThenElse(g_src, [ld], zero) if g_src is not None else ld, st]
        return IfThenElse(g_dst, out) if g_dst is not None else ctx.seq(out)

    return ctx.seq([alloc, _chunks(ctx, dst, src, body, min_bytes=4)])


@register_impl("copy", "any", variant="mem_mem_scalar", priority=1, when=[is_mem_mem, regular_threads])
def mem_mem_scalar(ctx):
    """global/shared <-> shared by all active threads, one element per thread per step."""
    dst, src = ctx.tensor(0), ctx.tensor(1)

    def body(v, sc, dc):
        val = src.load(sc)
        if val.dtype != dst.dtype:
            val = Cast(dst.dtype, val)
        return _guarded(ctx, dst, src, sc, dc, dst.store(dc, val), [dst.store(dc, ops.const(0, dst.dtype))])

    return _chunks(ctx, dst, src, body, max_bytes=src.dtype.bits // 8 or 1)


# ------------------------------------------------------------------ cp.async
def is_global_to_shared(ctx):
    if len(ctx.operands) != 2:
        return f"copy_async takes (dst, src), got {len(ctx.operands)} operands"
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if dst.storage != "shared" or src.storage != "global":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; cp.async copies global -> shared"
    if ctx.attr("mbar") is not None:
        return "mbar= is given: that is a TMA copy (cp.async completes through commit/wait groups)"
    if dst.dtype != src.dtype:
        return f"cp.async cannot convert {src.dtype} to {dst.dtype}"
    return same_logical_shape(dst, src)


@register_impl("copy_async", "sm_80", variant="cp_async", priority=10, when=[is_global_to_shared, regular_threads])
def cp_async(ctx):
    """global -> shared with cp.async of 4/8/16 bytes per thread (zero-fill at ragged edges), one commit group."""
    dst, src = ctx.tensor(0), ctx.tensor(1)

    def body(v, sc, dc):
        nbytes = v * src.dtype.bits // 8
        g = edge_guard(src, sc) if ctx.attr("guard", True) else None
        kind = "cg" if nbytes == 16 else "ca"
        saddr, gaddr = AddressOf(dst.load(dc)), AddressOf(src.load(sc))
        if g is None:
            return ctx.emit(f"cp_async_{kind}_{nbytes}", saddr, gaddr)
        # out of range: zero-fill, reading nothing, from an address that exists (the tensor's first element)
        from tirxpy.ir.expr import BufferLoad

        safe = AddressOf(BufferLoad(src.buffer, tuple(ops.const(0) for _ in src.buffer.shape)))
        return IfThenElse(g, [ctx.emit(f"cp_async_{kind}_{nbytes}_zfill", saddr, gaddr, ops.const(nbytes, "uint32"))],
                          [ctx.emit(f"cp_async_{kind}_{nbytes}_zfill", saddr, safe, ops.const(0, "uint32"))])

    return ctx.seq([_chunks(ctx, dst, src, body, min_bytes=4), ctx.emit("cp_async_commit_group")])
