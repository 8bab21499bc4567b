"""The simulator's models of the peer signal intrinsics (:mod:`tirxpy.intrinsics.peer`): flag stores, adds and
loads with release / acquire at system or GPU scope, and ``wait_geq_sys_u32``. A release carries the warp's
vector clock to the flag; an acquire that reads it joins that clock, which is how :mod:`tirxpy.sim.rank_memory`
orders a write on one rank before a read on another. Flag accesses are synchronization, not data: the race watch
does not record them."""
from __future__ import annotations

import numpy as np

from .access import global_span
from .interp import Block
from .machine import WARP
from .registry import register_model


class _Quiet:
    """Flag accesses are synchronization, not data: the watch does not record them."""

    def __init__(self, mem):
        self.w = getattr(mem.data, "_watch", None)

    def __enter__(self):
        self.was = self.w is not None and self.w.on
        if self.was:
            self.w.on = False

    def __exit__(self, *exc):
        if self.was:
            self.w.on = True


def _read_flag(mem, off):
    """The uint32 flag at byte ``off`` (inside ``mem``: :func:`global_span` checked it), read past the watch."""
    return np.asarray(mem.data)[off:off + 4].view(np.uint32)[0]


def _write_flag(mem, off, v):
    with _Quiet(mem):
        mem.write(np.array([off]), np.array([v], np.uint32), "uint32")


def _flag_at(ctx, name="ptr"):
    ptr = ctx.arg(name)
    lane = int(ctx.lanes[0]) if ctx.lanes.size else 0
    return global_span(ctx, ptr[lane:lane + 1], 4, ctx.call.name), lane


def _flag_clock(mem, off):
    return getattr(mem, "flag_clocks", {}).get(off)


def _release(ctx, mem, off, accumulate):
    """A release on the flag: the warp's clock (multi-rank runs) travels with the value."""
    w = ctx.w
    if getattr(w, "_gvc", None) is None:
        return
    clocks = mem.__dict__.setdefault("flag_clocks", {})
    old = clocks.get(off)
    lvc = {k: v.copy() for k, v in w._lvc.items()}
    lvc[id(w.cta.machine)] = w.vc.copy()
    new = (w._gvc.copy(), lvc)
    clocks[off] = _join(old, new) if (accumulate and old is not None) else new
    w._gvc[w._gagent] += 1
    w.tick()


def _join(a, b):
    from .races import join

    lvc = {k: v.copy() for k, v in a[1].items()}
    for k, v in b[1].items():
        lvc[k] = join(lvc[k], v) if k in lvc else v.copy()
    return np.maximum(a[0], b[0]), lvc


def _acquire(ctx, mem, off):
    w = ctx.w
    got = _flag_clock(mem, off)
    if getattr(w, "_gvc", None) is None or got is None:
        return
    from .races import join

    gvc, lvc = got
    np.maximum(w._gvc, gvc, out=w._gvc)
    for k, v in lvc.items():
        if k == id(w.cta.machine):
            w.vc = join(w.vc, v)
        else:
            w._lvc[k] = join(w._lvc[k], v) if k in w._lvc else v.copy()


def _st_release(ctx):
    got, lane = _flag_at(ctx)
    if got is not None:
        mem, off = got
        _release(ctx, mem, off, False)
        _write_flag(mem, off, np.uint32(ctx.arg("v")[lane]))


def _add(ret, acquire):
    def model(ctx):
        got, lane = _flag_at(ctx)
        out = np.zeros(WARP, np.uint32)
        if got is None:
            return out if ret else None
        mem, off = got
        total = np.uint32(0)
        for l in ctx.lanes:          # every active lane adds (a counter several threads signal)
            total = np.uint32(total + np.uint32(ctx.arg("v")[l]))
        old = _read_flag(mem, off)
        if acquire:
            _acquire(ctx, mem, off)
        _release(ctx, mem, off, True)
        _write_flag(mem, off, np.uint32(old + total))
        out[ctx.lanes] = old
        return out if ret else None
    return model


def _ld_acquire(ctx):
    got, lane = _flag_at(ctx)
    out = np.zeros(WARP, np.uint32)
    if got is not None:
        mem, off = got
        out[:] = _read_flag(mem, off)
        _acquire(ctx, mem, off)
    return out


def _wait_geq(ctx):
    got, lane = _flag_at(ctx)
    if got is None:
        return None
    mem, off = got
    want = np.uint32(ctx.arg("v")[lane])

    def ready():
        return _read_flag(mem, off) >= want
    if not ready():
        yield Block(ready, f"the flag at byte {off} of {mem.name} to reach {int(want)} (wait_geq_sys_u32)", ctx.span)
    _acquire(ctx, mem, off)
    return None


for _s in ("gpu", "sys"):
    register_model(f"st_release_{_s}_u32", _st_release)
    register_model(f"red_release_{_s}_add_u32", _add(False, False))
    register_model(f"atom_acq_rel_{_s}_add_u32", _add(True, True))
register_model("ld_acquire_sys_u32", _ld_acquire)
register_model("wait_geq_sys_u32", _wait_geq)
register_model("fence_acq_rel_sys", lambda ctx: None)
