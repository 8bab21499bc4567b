"""mask: keep the elements of a 2-D register tile inside column bounds, fill the others.

``Tx.<scope>.mask(dst, src, value, cols=None, diag=None)``::

    dst[r, c] = src[r, c]   if c < cols and c <= r + diag
                value       otherwise

``cols`` and ``diag`` are scalar expressions (device values allowed); ``None`` drops that
bound. ``dst`` and ``src`` are register tiles of one 2-D shape held slot for slot by the same
threads (``dst`` may be ``src``). Each slot's coordinate comes from the layout in closed form
(:mod:`tirxpy.primitives.fragment`), so the test is one compare with a constant and one select
per register: the ragged-key and causal masks of attention on a WGMMA accumulator fragment.

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


def _clamp(e, lo, hi):
    """``e`` clamped to ``[lo, hi]`` in its own integer type, then as int32."""
    t = e.dtype.name
    lo = max(lo, 0) if e.dtype.is_uint else lo
    return ops.cast(ops.minimum(ops.maximum(e, ops.const(lo, t)), ops.const(hi, t)), "int32")


@register_impl("mask", "any", variant="local_mask", priority=10, when=[is_local_mask])
def local_mask(ctx):
    """Per slot: select(c <= limit(r), src, value) with ``limit(r) = min(cols - 1, r + diag)``.

    Slot ``k`` sits at ``(r_k + TR, c_k + TC)``: compile-time ``r_k, c_k`` plus thread parts
    ``TR, TC`` common to all slots (:meth:`~tirxpy.primitives.fragment.Fragment.thread_part`). So
    ``c < cols and c <= r + diag`` is ``c_k <= min(cols - 1 - TC, r_k + diag + TR - TC)``: the
    bound is computed once per distinct row constant ``r_k`` and each register costs one compare
    with an immediate and one select. ``cols`` and ``diag`` are first clamped to the range where
    they decide anything (``[0, ncols]`` and ``[-nrows - ncols, ncols]``), so the bound
    arithmetic cannot overflow int32 whatever their run-time values."""
    dst, src, value = ctx.operands
    cols, diag = ctx.attr("cols"), ctx.attr("diag")
    cols = None if cols is None else _expr(cols, "cols")
    diag = None if diag is None else _expr(diag, "diag")
    frag, (mp,) = slot_map(ctx, dst, [src])
    fill = ops.cast(value if isinstance(value, Expr) else ops.const(value), dst.dtype)
    nr, nc = dst.shape
    tr, tc = frag.thread_part(0), frag.thread_part(1)
    lim_cols = lim_diag = None
    if cols is not None:        # c < cols  <=>  c_k <= cols - 1 - TC
        cols = _clamp(cols, 0, nc)
        lim_cols = ops.sub(ops.sub(cols, ops.const(1)), tc)
    if diag is not None:        # c <= r + diag  <=>  c_k <= r_k + (diag + TR - TC)
        diag = _clamp(diag, -nr - nc, nc)
        lim_diag = ops.sub(ops.add(diag, tr), tc)
    d, s = dst.slots(), src.slots()
    stmts = []
    for k, slot in enumerate(frag.slots):
        r, c = frag.const_coords[k]
        lim = None if lim_diag is None else ops.add(lim_diag, ops.const(r))
        lim = lim_cols if lim is None else lim if lim_cols is None else ops.minimum(lim_cols, lim)
        x = s[mp[k]]
        x = x if x.dtype == dst.dtype else ops.cast(x, dst.dtype)
        stmts.append(BufferStore(d, (ops.const(slot),), ops.select(ops.le(ops.const(c), lim), x, fill)))
    out = ctx.seq(stmts)
    return IfThenElse(frag.guard, out) if frag.guard is not None else out


__all__ = ["local_mask"]
