"""registers <-> tensor memory with ``tcgen05.ld`` / ``tcgen05.st`` ``.32x32b`` (sm_100a).

``Tx.wg.copy(regs, acc_tmem, taddr=tmem_base[0])`` (and the reverse) where ``taddr`` is the TMEM
base address ``tcgen05.alloc`` wrote to shared memory. ``.32x32b.xN``: warp ``w`` of a warpgroup
reaches TMEM lanes ``32 * (w % 4) .. + 31``; lane ``t`` moves TMEM lane ``32 * (w % 4) + t``,
columns ``C .. C + N - 1`` into / from its registers ``0 .. N - 1`` (PTX ISA 9.7.16.2.3.1, Figure
183; 9.7.16.8.1). The copy applies when, for every thread and register slot ``r`` of the register
tile, the element's TMEM owner (from the TMEM tile's layout) is exactly that lane and column
``C + r``; the reason otherwise names the element and both owners. Registers move in
power-of-two chunks of up to 128 columns; the copy ends with ``tcgen05.wait::ld`` /
``tcgen05.wait::st``.
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.expr import ScopeId

from ..dispatch import fail, register_impl
from ..fragment import FragmentError, thread_ids, tile_fragment


def _pair(ctx, load):
    if len(ctx.operands) != 2:
        return None
    dst, src = ctx.tensor(0), ctx.tensor(1)
    reg, tm = (dst, src) if load else (src, dst)
    if reg.storage != "local" or tm.storage != "tmem":
        return None
    return reg, tm


def _pred(load):
    def pred(ctx):
        p = _pair(ctx, load)
        if p is None:
            d, s = ctx.tensor(0), ctx.tensor(1)
            return (f"dst is '{d.storage}' and src is '{s.storage}'; tcgen05.{'ld' if load else 'st'} moves "
                    + ("registers <- tmem" if load else "tmem <- registers"))
        reg, tm = p
        if reg.dtype.bits != 32 or tm.dtype.bits != 32 or reg.dtype != tm.dtype:
            return f"tcgen05.ld/st .32x32b move 32-bit columns; {reg.name} is {reg.dtype}, {tm.name} is {tm.dtype}"
        if ctx.attr("taddr") is None:
            return "pass taddr= the TMEM base address tcgen05.alloc wrote (e.g. taddr=tmem_base[0])"
        if not ctx.threads.covers("warp"):
            return f"tcgen05.ld/st are warp-collective; the call runs on {ctx.threads.describe()}"
        if reg.shape != tm.shape:
            return f"{reg.name} {reg.shape} and {tm.name} {tm.shape} differ in shape"
        return None

    pred.__name__ = "tcgen05_ld_operands" if load else "tcgen05_st_operands"
    return pred


def _check(ctx, reg, tm):
    try:
        f = tile_fragment(reg, ctx.threads)
    except FragmentError as e:
        fail(f"{reg.name}: {e.reason}")
    if sorted(f.slots) != list(range(f.nslots)):
        fail(f"{reg.name}: its register slots {sorted(f.slots)[:8]}... are not 0..{f.nslots - 1}")
    col0 = None
    for tid in sorted(f.holders):
        ids = thread_ids(tid)
        for k, slot in enumerate(f.slots):
            c = f.static_coord(k, ids)
            at = tm.layout.apply(*c, shape=tm.shape)
            lane = 32 * ((tid // 32) % 4) + tid % 32
            if col0 is None:
                col0 = at.get("TCol", 0) - slot
            want = {"TLane": lane, "TCol": col0 + slot}
            got = {"TLane": at.get("TLane", 0), "TCol": at.get("TCol", 0)}
            if got != want:
                fail(f"{tm.name}: element {c} is at TMEM (lane {got['TLane']}, column {got['TCol']}), but "
                     f"tcgen05 .32x32b gives it to warp {tid // 32} lane {tid % 32} register {slot}, which reaches "
                     f"(lane {want['TLane']}, column {want['TCol']})")
    return f, col0


def _lower(ctx, load):
    reg, tm = _pair(ctx, load)
    f, col0 = _check(ctx, reg, tm)
    words = reg.slots() if reg.dtype.name == "uint32" else reg.slots("uint32")
    base = ops.cast(ctx.attr("taddr"), "uint32")
    warp_lane = ops.shl(ops.cast(ops.mul(ops.floormod(ScopeId("warp_id"), 4), 32), "uint32"), ops.const(16, "uint32"))
    for ax, v in tm.offset.items():
        base = ops.add(base, ops.cast(ops.mul(v, 1 << 16) if ax == "TLane" else v, "uint32"))
    stmts, j, n = [], 0, f.nslots
    while j < n:
        size = 1
        while size * 2 <= min(128, n - j):
            size *= 2
        addr = ops.add(ops.add(base, warp_lane), ops.const(col0 + j, "uint32"))
        name = f"tcgen05_{'ld' if load else 'st'}_32x32b_x{size}"
        stmts.append(ctx.emit(name, addr, words[j:j + size]))
        j += size
    stmts.append(ctx.emit("tcgen05_wait_ld" if load else "tcgen05_wait_st"))
    return ctx.seq(stmts)


@register_impl("copy", "sm_100a", variant="tcgen05_ld", priority=30, when=[_pred(True)])
def tcgen05_ld(ctx):
    """tmem -> registers with tcgen05.ld.32x32b (one TMEM lane per thread, columns in registers)."""
    return _lower(ctx, True)


@register_impl("copy", "sm_100a", variant="tcgen05_st", priority=30, when=[_pred(False)])
def tcgen05_st(ctx):
    """registers -> tmem with tcgen05.st.32x32b."""
    return _lower(ctx, False)
