"""Statements of one warp as a generator: it yields at every intrinsic call (a point where the
scheduler may switch warps) and yields a :class:`Block` where the warp must wait."""
from __future__ import annotations

import numpy as np

from tirxpy.ir import stmt as St

from . import access
from .errors import UnsupportedError
from .expr import compile_expr, intrinsic_calls

_CALLS: dict = {}


class Block:
    """The warp waits until ``cond()`` is true; ``what`` says for what (deadlock reports)."""

    __slots__ = ("cond", "what", "span")

    def __init__(self, cond, what, span=None):
        self.cond, self.what, self.span = cond, what, span


def _calls_of(node, *exprs):
    hit = _CALLS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    calls = []
    for e in exprs:
        if e is not None:
            intrinsic_calls(e, calls)
    _CALLS[id(node)] = (node, calls)
    return calls


def run_calls(w, node, mask, *exprs):
    from .registry import execute_call

    for call in _calls_of(node, *exprs):
        w.where = call
        yield None
        yield from execute_call(w, call, mask)


def exec_seq(w, seq, mask):
    for s in seq.stmts:
        yield from exec_stmt(w, s, mask)


def exec_stmt(w, s, mask):
    w.where = s
    if isinstance(s, St.BufferStore):
        yield from run_calls(w, s, mask, s.value, *s.indices)
        val = compile_expr(s.value)(w, mask)
        idx = [compile_expr(i)(w, mask) for i in s.indices]
        access.store(w, mask, s.buffer, idx, val, s)
    elif isinstance(s, St.LetStmt):
        yield from run_calls(w, s, mask, s.value)
        v = compile_expr(s.value)(w, mask)
        old = w.env.get(s.var)
        w.env[s.var] = v if old is None or mask.all() else np.where(mask, v, old)
    elif isinstance(s, St.Evaluate):
        yield from run_calls(w, s, mask, s.expr)
    elif isinstance(s, St.IfThenElse):
        yield from run_calls(w, s, mask, s.cond)
        c = np.broadcast_to(compile_expr(s.cond)(w, mask), (32,))
        tm = mask & c
        if tm.any():
            yield from exec_seq(w, s.then_body, tm)
        if s.else_body is not None:
            em = mask & ~c
            if em.any():
                yield from exec_seq(w, s.else_body, em)
    elif isinstance(s, St.For):
        yield from run_calls(w, s, mask, s.start, s.stop)
        lo = compile_expr(s.start)(w, mask)
        hi = compile_expr(s.stop)(w, mask)
        a, b = lo[mask], hi[mask]
        if a.size and (a == a[0]).all() and (b == b[0]).all():
            dt = lo.dtype
            for i in range(int(a[0]), int(b[0])):
                w.env[s.var] = np.full(32, i, dt)
                yield from exec_seq(w, s.body, mask)
        else:
            i = lo.copy()
            while True:
                m = mask & (i < hi)
                if not m.any():
                    break
                w.env[s.var] = i.copy()
                yield from exec_seq(w, s.body, m)
                i = i + 1
    elif isinstance(s, St.While):
        while True:
            yield from run_calls(w, s, mask, s.cond)
            m = mask & np.broadcast_to(compile_expr(s.cond)(w, mask), (32,))
            if not m.any():
                break
            yield None
            yield from exec_seq(w, s.body, m)
    elif isinstance(s, St.SeqStmt):
        yield from exec_seq(w, s, mask)
    elif isinstance(s, St.Allocate):
        b = s.buffer
        if b.storage == "local":
            w.regs.pop(b.root, None)
    elif isinstance(s, St.PrimitiveCall):
        w.cta.machine.report("unsupported", f"primitive call Tx.{s.op} was not lowered to native IR "
                             "(run tirxpy.primitives.lower_calls first, or let sim.run lower it)", s.span,
                             w.describe(mask))
    else:
        raise UnsupportedError(f"statement {type(s).__name__}")
