"""sum / max / min of a register tile over one axis: in-thread over slots, then warp shuffles.

``Tx.<scope>.sum(dst, src, axis=-1)`` (also ``max``, ``min``, or ``Tx.reduce(dst, src, op="sum",
axis=...)``; ``accum=True`` folds the old ``dst`` in). ``dst`` has ``src``'s shape with ``axis``
removed or kept as 1. Steps, all read from the layouts:

1. in thread: each destination row the thread holds folds the ``src`` slots of that row
   (slots whose element differs only along ``axis``);
2. across lanes: the lane bits that the ``src`` layout spends on ``axis`` (its shard iterators
   on ``laneid`` within that dimension; replicas are not summed twice) are combined with
   ``shfl.sync.bfly`` butterflies, so every participating lane ends with the total;
3. the thread writes the rows it holds in ``dst`` (any replica of a ``dst`` element may be
   written: all participating lanes hold the total).

An axis spread over warps needs shared memory and is rejected with that reason.
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.dtype import DataType
from tirxpy.ir.expr import Cast, IntrinsicCall, ScopeId
from tirxpy.ir.stmt import BufferStore, IfThenElse

from ..context import Tile
from ..dispatch import fail, register_impl
from ..elementwise.slots import register_fragment
from ..fragment import thread_ids

COMBINE = {"sum": ops.add, "max": ops.maximum, "min": ops.minimum}


def _kind(ctx):
    return ctx.attr("op", "sum") if ctx.op == "reduce" else ctx.op


def _axis(ctx, src):
    ax = ctx.attr("axis", -1)
    if not isinstance(ax, int) or not -len(src.shape) <= ax < len(src.shape):
        fail(f"axis={ax!r} is not a dimension of {src.name} {src.shape}")
    return ax % len(src.shape)


def is_register_reduce(ctx):
    """dst and src are register tiles; dst is src's shape without the axis."""
    if _kind(ctx) not in COMBINE:
        return f"reduce op={_kind(ctx)!r}; supported: {sorted(COMBINE)}"
    if len(ctx.operands) != 2 or not all(isinstance(o, Tile) for o in ctx.operands):
        return "reduce takes (dst, src) tensors"
    dst, src = ctx.operands
    if src.storage != "local" or dst.storage != "local":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant reduces register tiles"
    ax = ctx.attr("axis", -1)
    if not isinstance(ax, int) or not -len(src.shape) <= ax < len(src.shape):
        return f"axis={ax!r} is not a dimension of {src.name} {src.shape}"
    ax %= len(src.shape)
    want = src.shape[:ax] + src.shape[ax + 1:]
    keep = src.shape[:ax] + (1,) + src.shape[ax + 1:]
    if dst.shape not in (want or (1,), keep):
        return f"{dst.name} has shape {dst.shape}; reducing {src.name} {src.shape} over axis {ax} gives {want or (1,)}"
    return None


def _row(coord, ax):
    return coord[:ax] + coord[ax + 1:]


@register_impl("reduce", "sm_80", variant="warp_shuffle", priority=10, when=[is_register_reduce])
def warp_shuffle(ctx):
    """Register tile reduction: in-thread fold, then shfl.bfly over the axis's lane bits."""
    return _reduce(ctx, cross_warp=False)


def _reduce(ctx, cross_warp: bool):
    dst, src = ctx.operands
    kind = _kind(ctx)
    comb = COMBINE[kind]
    ax = _axis(ctx, src)
    sf = register_fragment(ctx, src)
    df = register_fragment(ctx, dst)
    warp_terms = [t for t in sf.thread_terms[ax] if t[0] != "laneid"]
    for a, s, e, w, o in sf.thread_terms[ax]:
        if a != "laneid" and not cross_warp:
            fail(f"{src.name}: axis {ax} is spread over {a}; combining warps needs shared memory "
                 "(the cta_smem variant does it for a whole-CTA call)")
        if a == "laneid" and e & (e - 1):
            fail(f"{src.name}: axis {ax} spans {e} lanes; butterfly shuffles need a power of two")
    if cross_warp:
        if not warp_terms:
            fail(f"{src.name}: axis {ax} is not spread over warps (the warp_shuffle variant applies)")
        if len({t[0] for t in warp_terms}) > 1 or warp_terms[0][0] not in ("warpid", "wid_in_wg"):
            fail(f"{src.name}: axis {ax} is spread over {[t[0] for t in warp_terms]}; cross-warp reduction "
                 "supports warpid or wid_in_wg iterators (one of them)")
        if sf.guard is not None:
            fail(f"{src.name}: only some threads hold the tile ({sf.guard}); a cross-warp reduction synchronizes "
                 "every thread of the CTA")
        if len(ctx.threads) != ctx.threads_per_cta:
            fail(f"a cross-warp reduction synchronizes the CTA; the call runs on {ctx.threads.describe()} "
                 "(call it where every thread of the CTA runs, e.g. Tx.cta.sum)")
    masks = []
    for a, s, e, w, o in sf.thread_terms[ax]:
        if a != "laneid":
            continue
        b = 1
        while b < e:
            masks.append(s * b)
            b *= 2
    # rows the thread holds in src (as constant parts: thread parts of the other dims are identical)
    rows: dict = {}
    for k in range(sf.nslots):
        rows.setdefault(_row(sf.const_coords[k], ax), []).append(sf.slots[k])
    # dst slots by row, checked for every thread: the thread holding dst row r must have folded r
    rep_slot = {}
    for k in range(sf.nslots):
        rep_slot.setdefault(_row(sf.const_coords[k], ax), k)
    dmap: dict = {}
    for tid in sorted(df.holders):
        ids = thread_ids(tid)
        if tid not in sf.holders:
            fail(f"thread {tid} holds elements of {dst.name} but no element of {src.name}")
        have = {_row(sf.static_coord(k, ids), ax): rk for rk, k in rep_slot.items()}
        for k in range(df.nslots):
            dc = df.static_coord(k, ids)
            row = tuple(dc) if len(dst.shape) == len(src.shape) - 1 else tuple(dc[:ax] + dc[ax + 1:])
            mine = have.get(row)
            if mine is None:
                fail(f"thread {tid} (warp {tid // 32}, lane {tid % 32}) holds element {dc} of {dst.name}, but no "
                     f"element of {src.name} row {row}: the row's owners in {src.name} differ")
            prev = dmap.setdefault(df.slots[k], mine)
            if prev != mine:
                fail(f"{dst.name} slot {df.slots[k]} holds row {prev} in some threads and {mine} in others")
    lanes_by_warp = {}
    for tid in sf.holders:
        lanes_by_warp.setdefault(tid // 32, set()).add(tid % 32)
    lane_sets = {frozenset(v) for v in lanes_by_warp.values()}
    n, part = ctx.threads_per_cta, ctx.threads_per_cta % 32
    if len(lane_sets) > 1 and part and n // 32 in lanes_by_warp:
        fail(f"{src.name}: the launch's {n} threads end {part} lanes into warp {n // 32}, which has no lanes "
             f"{part}..31; warp shuffles need whole warps (launch a multiple of 32 threads, or keep the call off "
             f"warp {n // 32})")
    if len(lane_sets) > 1:
        fail(f"{src.name}: warps hold the tile on different lane sets; shuffles need one member mask")
    lanes = next(iter(lane_sets)) if lane_sets else frozenset(range(32))
    for mk in masks:
        bad = [ln for ln in lanes if ln ^ mk not in lanes]
        if bad:
            fail(f"{src.name}: lane {bad[0]} exchanges with lane {bad[0] ^ mk}, which holds no part of the tile")
    member = sum(1 << ln for ln in lanes)
    cdt = src.dtype if not (src.dtype.is_float and src.dtype.bits < 32) else DataType.get("float32")
    if cdt.bits != 32:
        fail(f"warp shuffles move 32-bit values; {src.name} is {src.dtype} (cast it to float32 or int32 first)")
    sname = "f32" if cdt.is_float else "b32"
    s_slots = src.slots()
    d_slots = dst.slots()
    stmts = []
    accs = {}
    for rk, slots in rows.items():
        if rk not in dmap.values():
            continue
        acc_var = None
        vals = [s_slots[sl] if s_slots[sl].dtype == cdt else Cast(cdt, s_slots[sl]) for sl in slots]
        while len(vals) > 1:  # a balanced tree: independent combines in flight
            vals = [comb(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
        val = vals[0]
        acc_var, let = ctx.let("red", val)
        stmts.append(let)
        for mk in masks:
            shuffled = ctx.intrin(f"shfl_sync_bfly_{sname}", acc_var if cdt.is_float else Cast("uint32", acc_var),
                                  ops.const(mk, "uint32"), ops.const(member, "uint32"))
            if not cdt.is_float:
                shuffled = Cast(cdt, shuffled)
            acc_var, let = ctx.let("red", comb(acc_var, shuffled))
            stmts.append(let)
        accs[rk] = acc_var
    if cross_warp:
        stmts += _combine_warps(ctx, src, sf, ax, rows, accs, warp_terms, comb, cdt)
    for dslot, rk in sorted(dmap.items()):
        val = accs[rk]
        if ctx.attr("accum", False):
            old = d_slots[dslot]
            val = comb(old if old.dtype == cdt else Cast(cdt, old), val)
        stmts.append(BufferStore(d_slots, (ops.const(dslot),), val if dst.dtype == cdt else Cast(dst.dtype, val)))
    out = ctx.seq(stmts)
    return IfThenElse(sf.guard, out) if sf.guard is not None else out


def _combine_warps(ctx, src, sf, ax, rows, accs, wterm, comb, cdt):
    """Warp partials -> shared scratch[row, warp digit] -> barrier -> every thread folds its rows."""
    from tirxpy.ir.buffer import Buffer
    from tirxpy.ir.stmt import Allocate

    from ..fragment import _id_expr

    e = 1
    digit = ops.const(0)
    for a, s, ext, w, o in wterm:  # the warp digits of the axis, as one mixed-radix partial index
        idv = _id_expr(a)
        x = ops.sub(idv, o) if o else idv
        digit = ops.add(ops.mul(digit, ext), ops.floormod(ops.floordiv(x, s) if s > 1 else x, ext))
        e *= ext
    other = [n for d, n in enumerate(src.shape) if d != ax]
    nrows = 1
    for n in other:
        nrows *= n
    # a layout on wid_in_wg alone is one instance per warpgroup: each gets its own scratch rows
    axes = set(src.layout.axes())
    inst, ninst = None, 1
    if wterm[0][0] == "wid_in_wg" and not axes & {"warpid", "wgid", "tx"} and ctx.threads_per_cta > 128:
        inst, ninst = ScopeId("warpgroup_id"), -(-ctx.threads_per_cta // 128)
    scratch = Buffer(ctx.fresh("red_smem"), (max(1, nrows) * ninst, e), cdt, "shared")
    stmts = [Allocate(scratch)]
    lane_zero = None
    for la, ls, le, lw, lo in sf.thread_terms[ax]:
        if la == "laneid":
            lx = _id_expr("laneid")
            c = ops.eq(ops.floormod(ops.floordiv(lx, ls) if ls > 1 else lx, le), 0)
            lane_zero = c if lane_zero is None else ops.logical_and(lane_zero, c)
    first = {}
    for k in range(sf.nslots):
        first.setdefault(_row(sf.const_coords[k], ax), k)
    row_lin = {}
    for rk in accs:
        coord = _row(sf.coords[first[rk]], ax)
        lin = ops.const(0)
        for c, n in zip(coord, other):
            lin = ops.add(ops.mul(lin, n), c)
        row_lin[rk] = lin if inst is None else ops.add(ops.mul(inst, max(1, nrows)), lin)
    writes = [BufferStore(scratch, (row_lin[rk], digit), accs[rk]) for rk in accs]
    stmts.append(IfThenElse(lane_zero, writes) if lane_zero is not None else ctx.seq(writes))
    stmts.append(ctx.emit("syncthreads"))
    for rk in list(accs):
        vals = [scratch[row_lin[rk], j] for j in range(e)]
        while len(vals) > 1:
            vals = [comb(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
        v, let = ctx.let("red", vals[0])
        stmts.append(let)
        accs[rk] = v
    stmts.append(ctx.emit("syncthreads"))  # the scratch may be reused (loops) only after every thread read it
    return stmts


def cta_smem(ctx):
    """Axis spread over warps: warp butterflies, then partials through shared memory (whole-CTA call)."""
    return _reduce(ctx, cross_warp=True)


for _op in ("sum", "max", "min", "reduce"):
    if _op != "reduce":
        register_impl(_op, "sm_80", variant="warp_shuffle", priority=10, when=[is_register_reduce])(warp_shuffle)
    register_impl(_op, "sm_80", variant="cta_smem", priority=5, when=[is_register_reduce])(cta_smem)

__all__ = ["warp_shuffle", "cta_smem", "IntrinsicCall"]
