"""shared <-> registers with ``ldmatrix`` (sm_80+) / ``stmatrix`` (sm_90+), when the register
tile's layout is made of the instructions' 8x8 b16 fragments.

``ldmatrix.x{n}`` fills ``n`` 32-bit registers of every lane: register ``q`` of lane ``l`` gets
elements ``2 * (l % 4)`` and ``+1`` of row ``l / 4`` of matrix ``q`` (``.trans``: rows
``2 * (l % 4)``, ``+1`` of column ``l / 4``), and lane ``l`` supplies the address of row
``l % 8`` of matrix ``l / 8`` (PTX ISA, "Warp-level matrix load instruction: ldmatrix").

The register tile's per-thread inversion (:mod:`tirxpy.primitives.fragment`) says, for each
register (slot pair ``2r, 2r + 1``) of every lane, which tile elements it holds; the copy applies
when every register is such a fragment of an 8x8 block whose 8 rows are 16-byte contiguous,
aligned rows of the shared tile (swizzles keep 16-byte chunks whole). Registers group into
``.x4`` / ``.x2`` / ``.x1`` instructions of consecutive registers with the same kind.
Otherwise the reason names the first register and lane that breaks the pattern, and the plain
per-thread copy (``reg_mem_*``) takes over.
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.expr import AddressOf, IntImm, ScopeId

from ..dispatch import fail, register_impl
from ..fragment import FragmentError, thread_ids, tile_fragment
from .common import max_vector, same_logical_shape


def _operands(ctx, load: bool):
    if len(ctx.operands) != 2:
        return None
    dst, src = ctx.tensor(0), ctx.tensor(1)
    reg, sm = (dst, src) if load else (src, dst)
    if reg.storage != "local" or sm.storage != "shared":
        return None
    return reg, sm


def _pred(load):
    name = "ldmatrix" if load else "stmatrix"

    def pred(ctx):
        p = _operands(ctx, load)
        if p is None:
            d, s = ctx.tensor(0), ctx.tensor(1)
            want = "registers <- shared" if load else "shared <- registers"
            return f"dst is '{d.storage}' and src is '{s.storage}'; {name} moves {want}"
        reg, sm = p
        if reg.dtype != sm.dtype or reg.dtype.bits != 16:
            return f"{name} moves 16-bit elements; {reg.name} is {reg.dtype}, {sm.name} is {sm.dtype}"
        if len(reg.shape) != 2:
            return f"{name} needs 2-D tiles, {reg.name} has shape {reg.shape}"
        if not ctx.threads.covers("warp"):
            return f"{name} is warp-collective; the call runs on {ctx.threads.describe()}"
        if max_vector([sm]) < 8:
            return f"{sm.name}: rows of 8 elements are not 16-byte contiguous and aligned in shared memory"
        return same_logical_shape(reg, sm)

    pred.__name__ = f"{name}_operands"
    return pred


def _plan(ctx, reg):
    """[(register r, trans)] for every register of the fragment, checked for every thread."""
    try:
        f = tile_fragment(reg, ctx.threads)
    except FragmentError as e:
        fail(f"{reg.name}: {e.reason}")
    if f.guard is not None:
        fail(f"{reg.name}: only some lanes hold the tile ({f.guard}); ldmatrix fills every lane")
    index = {s: k for k, s in enumerate(f.slots)}
    regs = sorted({s // 2 for s in f.slots})
    plan = []
    for r in regs:
        k0, k1 = index.get(2 * r), index.get(2 * r + 1)
        if k0 is None or k1 is None:
            fail(f"{reg.name}: register {r} (slots {2 * r}, {2 * r + 1}) is only half used")
        kind = None
        for tid in sorted(f.holders):
            ids = thread_ids(tid)
            l = ids["laneid"]
            a, b = f.static_coord(k0, ids), f.static_coord(k1, ids)
            base = f.static_coord(k0, {**ids, "laneid": l - l % 32})
            nt = b == (a[0], a[1] + 1) and a[1] == base[1] + 2 * (l % 4) and base[1] % 8 == 0 and \
                a[0] == f.static_coord(k0, {**ids, "laneid": 4 * (l // 4)})[0]
            tr = b == (a[0] + 1, a[1]) and a == (base[0] + 2 * (l % 4), base[1] + l // 4) and base[1] % 8 == 0
            k = "n" if nt else "t" if tr else None
            if k is None or (kind is not None and k != kind):
                fail(f"{reg.name}: register {r} of lane {l} (warp {tid // 32}) holds elements {a} and {b}, "
                     "not an ldmatrix fragment (row l/4, columns 2*(l%4)+{0,1} of an 8x8 block, or its transpose)")
            kind = k
        plan.append((r, kind == "t", k0))
    return f, plan


def _groups(plan):
    out, i = [], 0
    while i < len(plan):
        for n in (4, 2, 1):
            grp = plan[i:i + n]
            if len(grp) == n and all(g[0] == grp[0][0] + j and g[1] == grp[0][1] for j, g in enumerate(grp)):
                out.append(grp)
                i += n
                break
    return out


def _matrix_coords(f, grp, i):
    """The shared-tile coordinates of row ``i`` of each matrix of the group."""
    out = []
    for r, trans, k0 in grp:
        if trans:  # rows R + i, column base C (lanes 0..3 hold column C)
            c = f.coord_expr(k0, {"laneid": ops.const(0)})
            out.append((ops.add(c[0], i), c[1]))
        else:      # row = the row lanes 4i..4i+3 hold, columns from C
            c = f.coord_expr(k0, {"laneid": ops.mul(i, 4)})
            out.append((c[0], f.coord_expr(k0, {"laneid": ops.const(0)})[1]))
    return out


def _bit_steps(coords):
    """``[(bit, (d_row, d_col)), ...]`` when matrix ``q``'s coordinates are the first matrix's plus the
    constant steps of the bits of ``q`` that are set (``.x2``: matrix 1 = matrix 0 + d; ``.x4``:
    matrix 3 = matrix 0 + (matrix 1 - matrix 0) + (matrix 2 - matrix 0)); None otherwise."""
    d = []
    for cj in coords[1:]:
        dj = tuple(ops.sub(a, b) for a, b in zip(cj, coords[0]))
        if not all(isinstance(x, IntImm) for x in dj):
            return None
        d.append(tuple(x.value for x in dj))
    if len(coords) == 4 and d[2] != tuple(a + b for a, b in zip(d[0], d[1])):
        return None
    return [(b, d[(1 << b) - 1]) for b in range(len(coords).bit_length() - 1)]


def _row_address(f, sm, grp):
    """AddressOf the shared row lane l supplies: row l % 8 of matrix l / 8 of the group. Where the
    matrices sit at constant steps from one another (the usual case), the address is arithmetic in
    the bits of l / 8; otherwise a select over the matrices (which ptxas may turn into branches)."""
    lane = ScopeId("lane_id")
    i = ops.floormod(lane, 8)
    q = ops.floordiv(ops.floormod(lane, 32), 8)
    coords = _matrix_coords(f, grp, i)
    steps = _bit_steps(coords)
    if steps is not None:     # lanes past the group's matrices (.x1 / .x2) repeat its addresses
        coord = list(coords[0])
        for b, delta in steps:
            bit = ops.floormod(ops.floordiv(q, 1 << b), 2)
            coord = [ops.add(c, ops.mul(bit, dd)) if dd else c for c, dd in zip(coord, delta)]
        return AddressOf(sm.load(tuple(coord)))
    coord = None
    for j, cj in reversed(list(enumerate(coords))):
        coord = cj if coord is None else (ops.select(ops.eq(q, j), cj[0], coord[0]),
                                          ops.select(ops.eq(q, j), cj[1], coord[1]))
    return AddressOf(sm.load(coord))


def _lower(ctx, load):
    reg, sm = _operands(ctx, load)
    f, plan = _plan(ctx, reg)
    words = reg.slots("uint32")
    stmts = []
    for grp in _groups(plan):
        n, r0, trans = len(grp), grp[0][0], grp[0][1]
        name = f"{'ldmatrix' if load else 'stmatrix'}_x{n}{'_trans' if trans else ''}"
        vec = words[r0:r0 + n]
        addr = _row_address(f, sm, grp)
        stmts.append(ctx.emit(name, vec, addr) if load else ctx.emit(name, addr, vec))
    return ctx.seq(stmts)


@register_impl("copy", "sm_80", variant="ldmatrix", priority=30, when=[_pred(True)])
def ldmatrix(ctx):
    """shared -> registers with ldmatrix.x4/x2/x1(.trans) when the register layout is ldmatrix fragments."""
    return _lower(ctx, True)


@register_impl("copy", "sm_90", variant="stmatrix", priority=30, when=[_pred(False)])
def stmatrix(ctx):
    """registers -> shared with stmatrix.x4/x2/x1(.trans) when the register layout is ldmatrix fragments."""
    return _lower(ctx, False)
