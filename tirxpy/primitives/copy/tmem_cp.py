"""``copy_async`` shared -> tensor memory with ``tcgen05.cp.cta_group::1.32x128b.warpx4`` (sm_100a).

``Tx.copy_async(sf_tmem, sf_smem, taddr=tmem_base[0])`` under ``if T.elect_one():``. Both tiles
are ``(32, 4)`` 32-bit words. The shared tile is 32 dense rows of 16 bytes (word ``(t, j)`` at
byte ``16 t + 4 j`` from its first element, no swizzle: the canonical no-swizzle K-major layout
read through a shared-memory descriptor, SBO = 128 bytes between 8-row groups); the TMEM tile
has the layout :func:`~tirxpy.layout.atoms.tmem_warpx4_layout` (word ``(t, j)`` in lanes ``t +
32 q`` for every warp quarter ``q``, column ``C + j``), which is what ``.32x128b.warpx4`` writes
(PTX ISA 9.7.16.9.1). Block scale factors of ``tcgen05.mma .block_scale`` are staged this way.

The copy is asynchronous: it runs on the tensor-core pipe in issue order with the thread's
``tcgen05.mma`` s, and a later ``tcgen05.commit`` (e.g. the ``mbar=`` of the next
``Tx.gemm_async``) tracks it; the shared tile may be overwritten only after that commit arrived.
"""
from __future__ import annotations

from tirxpy.intrinsics.descriptors import tcgen05_smem_desc
from tirxpy.ir import ops
from tirxpy.layout.atoms import tmem_warpx4_layout

from ..dispatch import fail, register_impl
from ..gemm import desc

ROWS, WORDS = 32, 4  # .32x128b: 32 rows of four 32-bit words


def _pair(ctx):
    if len(ctx.operands) != 2:
        return "copy_async takes (dst, src)"
    d, s = ctx.tensor(0), ctx.tensor(1)
    if d.storage != "tmem" or s.storage != "shared":
        return f"dst is '{d.storage}' and src is '{s.storage}'; tcgen05.cp copies 'shared' -> 'tmem'"
    return None


def _thread(ctx):
    if ctx.scope.short != "thread" or len(ctx.threads) != 1:
        return (f"tcgen05.cp is issued by one thread; write Tx.copy_async(...) under `if T.elect_one():` "
                f"(the call runs on {ctx.threads.describe()})")
    return None


def warpx4_reason(what: str, tile, ncols: int) -> str | None:
    """Why ``tile`` (a TMEM view) is not the ``(32, ncols)`` word tile of ``.32x128b.warpx4``, or None."""
    if tile.dtype.bits != 32:
        return (f"{what} ({tile.name}) is {tile.dtype}; the scale-factor tile is addressed in 32-bit TMEM words "
                "(four ue8m0 bytes each): declare it uint32")
    if tuple(tile.shape) != (ROWS, ncols):
        return (f"{what} ({tile.name}) has shape {tuple(tile.shape)}; expected ({ROWS}, {ncols}) words "
                f"(word (t, j) = matrix row 32 j + t)")
    base = tile.layout.apply(0, 0, shape=tile.shape)
    if base.get("TLane", 0) != 0:
        return f"{what} ({tile.name}) starts at TMEM lane {base.get('TLane', 0)}; .32x128b.warpx4 starts at lane 0"
    want = tmem_warpx4_layout(ncols, base.get("TCol", 0))
    for c in ((0, 0), (1, 0), (ROWS - 1, 0), (0, ncols - 1), (ROWS - 1, ncols - 1)):
        got = sorted((o.get("TLane", 0), o.get("TCol", 0)) for o in tile.layout.owners(*c, shape=tile.shape))
        exp = sorted((o["TLane"], o["TCol"]) for o in want.owners(*c, shape=want_shape(ncols)))
        if got != exp:
            return (f"{what} ({tile.name}): word {c} is at TMEM (lane, column) {got}; .32x128b.warpx4 puts it at "
                    f"{exp} (layout tmem_warpx4_layout)")
    return None


def want_shape(ncols):
    return (ROWS, ncols)


def _operands(ctx):
    d, s = ctx.tensor(0), ctx.tensor(1)
    if ctx.attr("taddr") is None:
        return "pass taddr= the TMEM base address tcgen05.alloc wrote (e.g. taddr=tmem_base[0])"
    if d.dtype != s.dtype:
        return f"tcgen05.cp does not convert: {d.name} is {d.dtype}, {s.name} is {s.dtype}"
    r = warpx4_reason("dst", d, WORDS)
    if r:
        return r
    if tuple(s.shape) != (ROWS, WORDS):
        return f"src ({s.name}) has shape {tuple(s.shape)}; .32x128b copies ({ROWS}, {WORDS}) 32-bit words"
    b0 = s.layout.apply(0, 0, shape=s.shape).get("m", 0)
    for c in ((0, 1), (1, 0), (7, 3), (8, 0), (ROWS - 1, WORDS - 1)):
        got = s.layout.apply(*c, shape=s.shape).get("m", 0) - b0
        if got != WORDS * c[0] + c[1]:
            return (f"src ({s.name}): word {c} is at word offset {got}; tcgen05.cp .32x128b reads 32 dense 16-byte "
                    f"rows (offset {WORDS * c[0] + c[1]}), unswizzled")
    return None


_DESC0 = tcgen05_smem_desc(0, lbo=128, sbo=128, swizzle=0)


@register_impl("copy_async", "sm_100a", variant="tcgen05_cp", priority=30, when=[_pair, _thread, _operands],
               doc="shared -> TMEM, tcgen05.cp.32x128b.warpx4 (scale factors), one thread, async (commit tracks it)")
def tcgen05_cp(ctx):
    d, s = ctx.tensor(0), ctx.tensor(1)
    at = d.layout.apply(0, 0, shape=d.shape)
    addr = ops.add(ops.cast(ctx.attr("taddr"), "uint32"), ops.const(at.get("TCol", 0), "uint32"))
    for ax, v in d.offset.items():
        if ax != "TCol":
            fail(f"dst ({d.name}): a symbolic offset on {ax} is not supported (only on TCol)")
        addr = ops.add(addr, ops.cast(v, "uint32"))
    return ctx.emit("tcgen05_cp_cg1_32x128b_warpx4", addr, desc.desc_at(ctx, _DESC0, s.load((0, 0))))
