"""Warps as coroutines: a seeded scheduler picks the next runnable warp or pending asynchronous
event (TMA landing, wgmma retiring...) at every switch point, so producer / consumer pipelines
interleave as on hardware; when nothing can run and warps still wait, that is a deadlock."""
from __future__ import annotations

from .interp import Block, exec_seq


class Event:
    """An asynchronous completion: ``fire()`` runs when the scheduler picks it (after ``not_before``)."""

    __slots__ = ("fire", "what", "ready")

    def __init__(self, fire, what, ready=None):
        self.fire, self.what, self.ready = fire, what, ready


def run_cluster(machine, ctas):
    warps = [w for c in ctas for w in c.warps]
    gens = {}
    for w in warps:
        gens[w] = exec_seq(w, machine.kernel.body, w.alive.copy())
    rng = machine.rng
    steps = 0
    while True:
        runnable = [w for w in warps if not w.done and (w.block is None or w.block.cond())]
        events = [e for e in machine.events if e.ready is None or e.ready()]
        n = len(runnable) + len(events)
        if n == 0:
            live = [w for w in warps if not w.done]
            if not live and not machine.events:
                break
            _deadlock(machine, live)
            break
        steps += 1
        if steps > machine.max_steps:
            machine.report("no_progress", f"the simulation ran {machine.max_steps} scheduling steps without finishing "
                           "(a spin loop that never exits?)", None,
                           "; ".join(f"{w.describe()} at {getattr(w.where, 'span', None)}" for w in warps if not w.done))
            break
        k = int(rng.integers(n))
        if k >= len(runnable):
            ev = events[k - len(runnable)]
            machine.events.remove(ev)
            ev.fire()
            continue
        w = runnable[k]
        w.block = None
        try:
            while True:
                r = next(gens[w])
                if isinstance(r, Block):
                    if r.cond():
                        continue
                    w.block = r
                break
        except StopIteration:
            w.done = True
            w.on_exit()


def _deadlock(machine, live):
    lines = []
    span = None
    for w in live:
        b = w.block
        what = b.what if b is not None else "?"
        sp = b.span if b is not None else getattr(w.where, "span", None)
        span = span or sp
        lines.append(f"{w.describe()} waits for {what} at {sp}")
    machine.report("deadlock", f"every live warp is waiting and nothing else can happen ({len(live)} warp(s) stuck)",
                   span, f"{len(live)} warp(s)", lines)
