"""copy between a register tile and global / shared memory: each active thread moves the
elements its layout gives it.

The register tile's layout is inverted per thread (:mod:`tirxpy.primitives.fragment`): slot
``r`` of the executing thread holds the element at a closed-form coordinate of the thread ids.
Runs of ``v`` consecutive slots that hold ``v`` consecutive elements of the innermost dimension,
where the memory view is contiguous and aligned for ``v`` (:mod:`.common`), move with one
``ld/st.{global,shared}.v{1,2,4}.b32``; everything else moves element by element. Register
replicas store only from their base copy. Global views with symbolic starts are guarded at the
tensor edge (loads read 0 outside).

Variants: ``reg_mem_vec`` (priority 20: needs at least 4-byte vectors) and ``reg_mem_scalar``
(priority 0: any dtype pair, converts when the dtypes differ).
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.expr import Cast
from tirxpy.ir.stmt import BufferStore, Evaluate, IfThenElse

from ..dispatch import fail, register_impl
from ..fragment import FragmentError, thread_ids, tile_fragment
from .common import contiguous_run, edge_guard, map_coord, max_vector, same_logical_shape, vector_intrinsic


def _split(ctx):
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if dst.storage == "local" and src.storage in ("global", "shared"):
        return dst, src, "load"
    if src.storage == "local" and dst.storage in ("global", "shared"):
        return src, dst, "store"
    return None


def is_reg_mem(ctx):
    """One operand in registers, the other in global or shared memory."""
    if len(ctx.operands) != 2:
        return f"copy takes (dst, src), got {len(ctx.operands)} operands"
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if _split(ctx) is None:
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant moves registers <-> global/shared"
    return same_logical_shape(dst, src)


def _fragment(ctx, reg):
    if not reg.static_starts:
        fail(f"{reg.name}: a register view needs static starts (register slots are compile-time)")
    try:
        return tile_fragment(reg, ctx.threads)
    except FragmentError as e:
        fail(f"{reg.name}: {e.reason}")


def owners_active(ctx):
    """Every thread that owns part of the register tile runs the call."""
    sp = _split(ctx)
    reg = sp[0]
    names, t = reg.layout.owner_table()
    axes = [a for a in names if a != "m"]
    if not axes:
        return None
    need = {tuple(int(x) for x in row) for row in t[:, :, [names.index(a) for a in axes]].reshape(-1, len(axes)).tolist()}
    from ..fragment import pinned_axes

    pin = pinned_axes(reg)
    have = set()
    for tid in ctx.threads.tids:
        ids = thread_ids(tid)
        if all(ids[a] == v for a, v in pin.items()):
            have.add(tuple(ids[a] for a in axes))
    missing = sorted(need - have)
    if missing:
        who = ", ".join(f"{a}={v}" for a, v in zip(axes, missing[0]))
        return (f"{reg.name}: the thread with {who} owns elements of the tile but does not run the call "
                f"(it runs on {ctx.threads.describe()})")
    return None


def _vector_plan(ctx, frag, reg, mem):
    """The vector width in elements (>= 1) and the slot groups."""
    if reg.dtype != mem.dtype:
        return 1
    v = max_vector([mem])
    last = len(reg.shape) - 1
    inner_w = [w for a, s, e, w, o in frag.thread_terms[last]]
    while v > 1:
        ok = v * reg.dtype.bits in (32, 64, 128) and all(w % v == 0 for w in inner_w)
        k = 0
        while ok and k < frag.nslots:
            s0, c0 = frag.slots[k], frag.const_coords[k]
            if s0 % v or (s0 * reg.dtype.bits) % 32 or c0[last] % v or k + v > frag.nslots:
                ok = False
                break
            for j in range(1, v):
                cj = frag.const_coords[k + j]
                if frag.slots[k + j] != s0 + j or cj[:last] != c0[:last] or cj[last] != c0[last] + j:
                    ok = False
                    break
            k += v
        if ok:
            return v
        v //= 2
    return 1


def _converted(ctx, reg, mem, direction):
    """For a vector store that converts: a register copy of ``reg`` in ``mem``'s dtype (same layout)."""
    from tirxpy.ir.buffer import footprint

    from ..context import Tile

    if reg.dtype == mem.dtype or direction != "store" or not reg.is_whole:
        return reg, []
    tmp, alloc = ctx.local(f"{reg.name}_as_{mem.dtype.name}", reg.buffer.shape, mem.dtype, reg.buffer.layout)
    t = Tile(tmp, reg.position)
    a, b = reg.slots(), t.slots()
    conv = [BufferStore(b, (ops.const(r),), Cast(mem.dtype, a[r])) for r in range(footprint(reg.layout))]
    return t, [alloc] + conv


def _vector_limit(reg, mem, v):
    """Why a copy's widest vector is ``v`` elements: the memory view's contiguity or alignment (its start's offset
    named), or the register tile's slot order."""
    vm = max_vector([mem])
    if vm <= v:
        run, align = contiguous_run(mem)
        off = mem.offset.get("m")
        named = f" = {mem.lets[off]}" if off in mem.lets else ""
        at = f" (its offset {off}{named})" if off is not None and align < run else ""
        return (f"{mem.name}'s view allows {vm} element(s) of {mem.dtype}: contiguous runs of {run}, its start a "
                f"provable multiple of {align} element(s){at}")
    return (f"{reg.name}'s layout does not give one thread {vm} consecutive elements in consecutive slots "
            f"({v} element(s) of {reg.dtype} fit)")


def _lower(ctx, vector: bool):
    reg, mem, direction = _split(ctx)
    pre = []
    if vector:
        reg, pre = _converted(ctx, reg, mem, direction)
    frag = _fragment(ctx, reg)
    v = _vector_plan(ctx, frag, reg, mem) if vector else 1
    if vector and (v == 1 or v * reg.dtype.bits < 32):
        fail(f"no vector of >= 4 bytes fits: {_vector_limit(reg, mem, v)}")
    use_guard = ctx.attr("guard", True)
    rep = frag.replica_guard() if direction == "store" else None
    slots = reg.slots()
    words = reg.slots("uint32") if v > 1 else None
    stmts = []
    k = 0
    while k < frag.nslots:
        coord = map_coord(frag.coords[k], reg, mem)
        slot = frag.slots[k]
        g = edge_guard(mem, coord) if use_guard else None
        if v > 1:
            nw = v * reg.dtype.bits // 32
            w0 = slot * reg.dtype.bits // 32
            regs = [words[w0 + j] for j in range(nw)]
            from tirxpy.ir.expr import AddressOf

            addr = AddressOf(mem.load(coord))
            if direction == "load":
                body = ctx.emit(vector_intrinsic("ld", mem.storage, nw), *regs, addr)
                zero = [BufferStore(words, (ops.const(w0 + j),), ops.const(0, "uint32")) for j in range(nw)]
            else:
                body = ctx.emit(vector_intrinsic("st", mem.storage, nw), addr, *regs)
                zero = None
            k += v
        else:
            if direction == "load":
                val = mem.load(coord)
                if val.dtype != reg.dtype:
                    val = Cast(reg.dtype, val)
                body = BufferStore(slots, (ops.const(slot),), val)
                zero = [BufferStore(slots, (ops.const(slot),), ops.const(0, reg.dtype))]
            else:
                val = slots[slot]
                if val.dtype != mem.dtype:
                    val = Cast(mem.dtype, val)
                body = mem.store(coord, val)
                zero = None
            k += 1
        if g is not None:
            body = IfThenElse(g, [body], zero)
        stmts.append(body)
    out = ctx.seq(stmts)
    if frag.guard is not None:
        out = IfThenElse(frag.guard, out)
    if rep is not None:
        out = IfThenElse(rep, out)
    return ctx.seq(pre + [out]) if pre else out


@register_impl("copy", "sm_80", variant="reg_mem_vec", priority=20, when=[is_reg_mem, owners_active])
def reg_mem_vec(ctx):
    """Registers <-> global/shared with 4/8/16-byte vector instructions (width from both layouts)."""
    return _lower(ctx, vector=True)


@register_impl("copy", "any", variant="reg_mem_scalar", priority=0, when=[is_reg_mem, owners_active])
def reg_mem_scalar(ctx):
    """Registers <-> global/shared one element at a time (converting dtypes if they differ)."""
    return _lower(ctx, vector=False)


__all__ = ["reg_mem_vec", "reg_mem_scalar", "Evaluate"]
