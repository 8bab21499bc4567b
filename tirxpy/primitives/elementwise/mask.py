"""mask: keep the elements of a 2-D register tile inside column bounds, fill the others.

``Tx.<scope>.mask(dst, src, value, cols=None, diag=None)``::

    dst[r, c] = src[r, c]   if c < cols and c <= r + diag
                value       otherwise

``cols`` and ``diag`` are scalar expressions (device values allowed); ``None`` drops that
bound. ``dst`` and ``src`` are register tiles of one 2-D shape held slot for slot by the same
threads (``dst`` may be ``src``). Each slot's coordinate comes from the layout in closed form
(:mod:`tirxpy.primitives.fragment`), so the test is a few integer ops and one select per
register: the ragged-key and causal masks of attention on a WGMMA accumulator fragment.

    Tx.wg.mask(S, S, T.float32(float("-inf")), cols=n_keys - n0, diag=m0 - n0)
"""
from __future__ import annotations

from tirxpy.ir import ops
from tirxpy.ir.expr import Expr
from tirxpy.ir.stmt import BufferStore, IfThenElse

from ..context import Tile
from ..dispatch import fail, register_impl
from .slots import slot_map


def is_local_mask(ctx):
    """dst, src are 2-D register tiles of one shape; value is a scalar."""
    ops_ = ctx.operands
    if len(ops_) != 3 or not isinstance(ops_[0], Tile) or not isinstance(ops_[1], Tile) or isinstance(ops_[2], Tile):
        return "mask takes (dst, src, value): two register tiles and a scalar fill value"
    dst, src = ops_[0], ops_[1]
    if dst.storage != "local" or src.storage != "local":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant masks register tiles"
    if len(dst.shape) != 2 or dst.shape != src.shape:
        return f"mask needs 2-D tiles of one shape (rows, cols); got {dst.name} {dst.shape} and {src.name} {src.shape}"
    if ctx.attr("cols") is None and ctx.attr("diag") is None:
        return "mask needs cols= or diag= (with neither it is a copy)"
    return None


def _expr(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, Expr)):
        fail(f"{what}={v!r} must be an integer expression")
    e = v if isinstance(v, Expr) else ops.const(v)
    if e.dtype is None or not e.dtype.is_int:
        fail(f"{what}={v} has dtype {e.dtype}; column bounds are integers")
    return e


@register_impl("mask", "any", variant="local_mask", priority=10, when=[is_local_mask])
def local_mask(ctx):
    """Per slot: select(c < cols and c <= r + diag, src, value) with (r, c) from the layout."""
    dst, src, value = ctx.operands
    cols, diag = ctx.attr("cols"), ctx.attr("diag")
    cols = None if cols is None else _expr(cols, "cols")
    diag = None if diag is None else _expr(diag, "diag")
    frag, (mp,) = slot_map(ctx, dst, [src])
    fill = ops.cast(value if isinstance(value, Expr) else ops.const(value), dst.dtype)
    d, s = dst.slots(), src.slots()
    stmts = []
    for k, slot in enumerate(frag.slots):
        r, c = frag.coords[k]
        cond = None
        if cols is not None:
            cond = ops.lt(c, cols)
        if diag is not None:
            t = ops.le(c, ops.add(r, diag))
            cond = t if cond is None else ops.logical_and(cond, t)
        x = s[mp[k]]
        x = x if x.dtype == dst.dtype else ops.cast(x, dst.dtype)
        stmts.append(BufferStore(d, (ops.const(slot),), ops.select(cond, x, fill)))
    out = ctx.seq(stmts)
    return IfThenElse(frag.guard, out) if frag.guard is not None else out


__all__ = ["local_mask"]
