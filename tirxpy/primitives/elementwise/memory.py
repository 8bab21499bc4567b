"""``Tx.<scope>.fill(tile, value)`` for a shared or global tile: the active threads store the
value over the tile together (consecutive threads take consecutive elements; global views with
symbolic starts skip elements past the tensor edge)."""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.expr import Cast, Expr

from ..context import Tile
from ..copy.common import edge_guard
from ..copy.mem_mem import _chunks, regular_threads
from ..dispatch import register_impl


def is_memory_fill(ctx):
    if len(ctx.operands) != 2 or not isinstance(ctx.operands[0], Tile) or isinstance(ctx.operands[1], Tile):
        return "fill(dst, value) takes a tensor and a scalar value"
    st = ctx.operands[0].storage
    if st not in ("shared", "global"):
        return f"dst is in '{st}'; this variant fills shared / global tiles"
    return None


@register_impl("fill", "any", variant="memory_fill", priority=5, when=[is_memory_fill, regular_threads])
def memory_fill(ctx):
    """Shared/global tile fill by all active threads, one element per thread per step."""
    dst, val = ctx.operands
    val = val if isinstance(val, Expr) else ops.const(val)
    if val.dtype != dst.dtype:
        val = Cast(dst.dtype, val)

    def body(v, sc, dc):
        st = dst.store(dc, val)
        g = edge_guard(dst, dc) if ctx.attr("guard", True) else None
        from tirxpy.ir.stmt import IfThenElse

        return IfThenElse(g, [st]) if g is not None else st

    return _chunks(ctx, dst, dst, body, max_bytes=max(1, dst.dtype.bits // 8))
