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
    """The warp waits until ``cond()`` is true; ``what`` says for what (deadlock reports).
    ``spin``: the wait of a loop whose last iteration changed nothing (see :func:`_while`)."""

    __slots__ = ("cond", "what", "span", "spin")

    def __init__(self, cond, what, span=None, spin=False):
        self.cond, self.what, self.span, self.spin = cond, what, span, spin


class BudgetExceeded(Exception):
    """Raised out of a warp when the run's step budget (``max_steps``) is spent (the scheduler
    reports it as a ``no_progress`` problem and stops the run)."""

    def __init__(self, node, w, what):
        super().__init__(what)
        self.node, self.w, self.what = node, w, what


def charge(w, node, n, what="another loop iteration"):
    """Spend ``n`` steps of the run's budget on ``node``; raises :class:`BudgetExceeded` past it."""
    m = w.cta.machine
    m.steps += n
    if m.steps > m.max_steps:
        raise BudgetExceeded(node, w, what)


def _lanes(x):
    """``x`` as 32 lane values: itself when it has that shape, else broadcast (read-only)."""
    return x if getattr(x, "shape", None) == _WARP_SHAPE else np.broadcast_to(x, _WARP_SHAPE)


_WARP_SHAPE = (32,)


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


_SLOTS: dict = {}


def _fixed_slot(s):
    """:func:`access.fixed_register_slot` of store ``s`` (cached per node)."""
    hit = _SLOTS.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    slot = access.fixed_register_slot(s.buffer, s.indices)
    _SLOTS[id(s)] = (s, slot)
    return slot


def run_calls(w, node, mask, *exprs):
    from .registry import execute_call

    for call in _calls_of(node, *exprs):
        w.where = call
        yield None
        yield from execute_call(w, call, mask)


def _while(w, s, mask):
    """A while loop. An iteration during which nothing in the machine changed (no store, no
    intrinsic with an effect, no asynchronous completion, no warp exit: ``machine.progress``
    stayed put) would repeat exactly, so the warp waits for a change instead of spinning; when
    every warp waits, the scheduler reports ``no_progress`` at the loop. A loop whose own
    iterations keep changing state (a counter) may run ``max_steps // 8`` of them."""
    machine = w.cta.machine
    limit, own = machine.max_steps // 8, 0
    while True:
        p0, m0 = machine.progress, w.moves
        if _calls_of(s, s.cond):
            yield from run_calls(w, s, mask, s.cond)
        m = mask & _lanes(compile_expr(s.cond)(w, mask))
        if not m.any():
            break
        charge(w, s, 1)
        yield None
        yield from exec_seq(w, s.body, m)
        if w.moves != m0:
            own += 1
            if own > limit:
                raise BudgetExceeded(s, w, f"iteration {own} of its while loop: each changed something yet the "
                                     f"loop never exits (a loop may run max_steps / 8 = {limit} such iterations)")
        elif machine.progress == p0:
            yield Block(lambda: machine.progress != p0, "a change to what its loop reads (the last iteration "
                        "changed nothing)", s.span, spin=True)


def exec_seq(w, seq, mask):
    for s in seq.stmts:
        yield from exec_stmt(w, s, mask)


def exec_stmt(w, s, mask):
    w.where = s
    if isinstance(s, St.BufferStore):
        if _calls_of(s, s.value, *s.indices):
            yield from run_calls(w, s, mask, s.value, *s.indices)
        if s.buffer.storage == "local":
            w.deferring = True
            val = compile_expr(s.value)(w, mask)
            w.deferring, poison, w.poison = False, w.poison, None
        else:
            val, poison = compile_expr(s.value)(w, mask), None
        slot = _fixed_slot(s)
        if slot is not None and mask.all():      # one register slot in every lane (access.fixed_register_slot)
            w.cta.machine.progress += 1
            w.moves += 1
            w.write_regs_at(slot[0], slot[1], _lanes(val), s.buffer.dtype, s, poison)
            return
        idx = [compile_expr(i)(w, mask) for i in s.indices]
        access.store(w, mask, s.buffer, idx, val, s, poison)
    elif isinstance(s, St.LetStmt):
        if _calls_of(s, s.value):
            yield from run_calls(w, s, mask, s.value)
        v = compile_expr(s.value)(w, mask)
        old = w.env.get(s.var)
        w.env[s.var] = v if old is None or mask.all() else np.where(mask, v, old)
    elif isinstance(s, St.Evaluate):
        if _calls_of(s, s.expr):
            yield from run_calls(w, s, mask, s.expr)
    elif isinstance(s, St.IfThenElse):
        if _calls_of(s, s.cond):
            yield from run_calls(w, s, mask, s.cond)
        c = _lanes(compile_expr(s.cond)(w, mask))
        tm = mask & c
        if tm.any():
            yield from exec_seq(w, s.then_body, tm)
        if s.else_body is not None:
            em = mask & ~c
            if em.any():
                yield from exec_seq(w, s.else_body, em)
    elif isinstance(s, St.For):
        if _calls_of(s, s.start, s.stop):
            yield from run_calls(w, s, mask, s.start, s.stop)
        lo = compile_expr(s.start)(w, mask)
        hi = compile_expr(s.stop)(w, mask)
        a, b = lo[mask], hi[mask]
        if a.size and (a == a[0]).all() and (b == b[0]).all():
            dt = lo.dtype
            if b[0] > a[0]:
                charge(w, s, int(b[0]) - int(a[0]), f"{int(b[0]) - int(a[0])} loop iterations")
            for i in range(int(a[0]), int(b[0])):
                w.env[s.var] = np.full(32, i, dt)
                yield from exec_seq(w, s.body, mask)
        else:
            i = lo.copy()
            while True:
                m = mask & (i < hi)
                if not m.any():
                    break
                charge(w, s, 1)
                w.env[s.var] = i.copy()
                yield from exec_seq(w, s.body, m)
                i = i + 1
    elif isinstance(s, St.While):
        yield from _while(w, s, mask)
    elif isinstance(s, St.SeqStmt):
        yield from exec_seq(w, s, mask)
    elif isinstance(s, St.Allocate):
        b = s.buffer
        if b.storage == "local":
            w.free_local(b.root)
    elif isinstance(s, St.PrimitiveCall):
        w.cta.machine.report("unsupported", f"primitive call Tx.{s.op} was not lowered to native IR "
                             "(run tirxpy.primitives.lower_calls first, or let sim.run lower it)", s.span,
                             w.describe(mask))
    else:
        raise UnsupportedError(f"statement {type(s).__name__}")
