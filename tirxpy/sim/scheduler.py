"""Warps as coroutines: a seeded scheduler picks the next runnable warp or pending asynchronous
event (TMA landing, wgmma retiring...) at every switch point, so producer / consumer pipelines
interleave as on hardware; when nothing can run and warps still wait, that is a deadlock."""
from __future__ import annotations

from .interp import BudgetExceeded, exec_seq


class Event:
    """An asynchronous completion: ``fire()`` runs when the scheduler picks it (after ``not_before``)."""

    __slots__ = ("fire", "what", "ready", "mbar")

    def __init__(self, fire, what, ready=None, mbar=None):
        self.fire, self.what, self.ready = fire, what, ready
        self.mbar = mbar        # (cta, offset) of the mbarrier it completes transactions on, if any


def run_cluster(machine, ctas):
    warps = [w for c in ctas for w in c.warps]
    gens = {}
    for w in warps:
        gens[w] = exec_seq(w, machine.kernel.body, w.alive.copy())
    rng = machine.rng
    live = list(warps)          # the warps not done, in their order
    while True:
        runnable = [w for w in live if w.block is None or w.block.cond()]
        events = [e for e in machine.events if e.ready is None or e.ready()]
        n = len(runnable) + len(events)
        if n == 0:
            if not live and not machine.events:
                break
            _deadlock(machine, list(live))
            break
        k = int(rng.integers(n))
        w = runnable[k] if k < len(runnable) else None
        try:
            machine.steps += 1
            if machine.steps > machine.max_steps:
                raise BudgetExceeded(None, w, "scheduling steps")
            if w is None:
                ev = events[k - len(runnable)]
                machine.events.remove(ev)
                machine.progress += 1
                ev.fire()
                continue
            w.block = None
            while True:
                r = next(gens[w])
                if r is not None:
                    if r.cond():
                        continue
                    w.block = r
                break
        except StopIteration:
            w.done = True
            live.remove(w)
            machine.progress += 1
            w.on_exit()
        except BudgetExceeded as e:
            _over_budget(machine, warps, e)
            machine.stopped = True
            break


def _deadlock(machine, live):
    """Nothing can run: ``no_progress`` when some warp spins in a loop that nothing can change
    (the problem points at that loop), else ``deadlock`` (at the first wait)."""
    lines = []
    span = None
    spinning = [w for w in live if w.block is not None and w.block.spin]
    for w in live:
        b = w.block
        what = b.what if b is not None else "?"
        sp = b.span if b is not None else getattr(w.where, "span", None)
        lines.append(f"{w.describe()} waits for {what} at {sp}")
    if spinning:
        span = spinning[0].block.span
        machine.report("no_progress", f"{len(spinning)} warp(s) spin in a loop that can never exit: an iteration "
                       "changed nothing and no other warp or asynchronous operation can change what the loop reads",
                       span, "; ".join(w.describe() for w in spinning), lines)
        return
    for w in live:
        span = span or (w.block.span if w.block is not None else getattr(w.where, "span", None))
    machine.report("deadlock", f"every live warp is waiting and nothing else can happen ({len(live)} warp(s) stuck)",
                   span, f"{len(live)} warp(s)", lines)


def _over_budget(machine, warps, e):
    """The run spent its ``max_steps`` budget: report where the busiest warp was."""
    node = e.node if e.node is not None else getattr(e.w, "where", None)
    span = getattr(node, "span", None)
    live = [w for w in warps if not w.done]
    where = "; ".join(f"{w.describe()} at {getattr(w.where, 'span', None)}" for w in live[:8])
    machine.report("no_progress", f"the run spent its budget of {machine.max_steps} steps (loop iterations and "
                   f"scheduling steps; max_steps=) without finishing: a loop that runs (almost) forever"
                   + (f", this one asking for {e.what}" if e.node is not None else ""), span,
                   f"{e.w.describe()}" if e.w is not None else "",
                   [f"live warps: {where}" + (" ..." if len(live) > 8 else ""),
                    "raise max_steps= if the kernel really needs more work"])
