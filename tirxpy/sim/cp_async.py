"""cp.async (4 / 8 / 16 bytes per thread, optional zero fill) with commit / wait groups and the
mbarrier arrive that fires when a thread's copies land (PTX ISA 9.7.9.25.3)."""
from __future__ import annotations

import re

import numpy as np

from . import mbarrier as MB
from .access import global_target
from .asyncops import agent, issue_vc
from .interp import Block
from .memory import clamp
from .races import GENERIC, join
from .registry import register_model
from .scheduler import Event


def _copy(ctx):
    size = int(re.search(r"_(4|8|16)", ctx.call.name[9:]).group(1))
    dst, src = ctx.arg("dst"), ctx.arg("src")
    zf = ctx.arg("src_bytes") if ctx.has("src_bytes") else None
    m, w = ctx.machine, ctx.w
    ctx.check_aligned(dst, size, f"{ctx.call.name} destination")     # PTX: both addresses aligned to cp-size
    ctx.check_aligned(src, size, f"{ctx.call.name} source", space="global")
    a = agent(m, ("cp.async", w.cta.rank, w.wid), f"cp.async unit of {w.describe()}")
    vc = issue_vc(w, a)
    buf, off = global_target(m, src, ctx.lanes)
    if buf is None:
        ctx.report("oob_global", f"{ctx.call.name}: the source pointers are not all inside one tensor argument")
        return
    mem = m.globals[buf]
    data = np.zeros((32, size), np.uint8)
    for l in ctx.lanes:
        n = size if zf is None else min(int(zf[l]), size)
        o = int(off[l])
        if o < 0 or o + n > mem.size:
            ctx.report("oob_global", f"cp.async reads {n} bytes at byte {o} of {buf.name} ({mem.size} bytes)")
            continue
        data[l, :n] = mem.data[o:o + n]
    lanes = ctx.lanes.copy()
    op = {"done": False, "vc": vc}

    def fire():
        idx = dst[lanes].astype(np.int64)[:, None] + np.arange(size)
        w.smem_access(idx.ravel(), 1, True, GENERIC, ctx.call, agent=a, vc=vc)   # (reports bytes out of range)
        inside = (idx >= 0) & (idx < w.cta.smem.size)
        w.cta.smem.data[idx[inside]] = data[lanes][inside]
        op["done"] = True
    m.events.append(Event(fire, "cp.async"))
    w.cp_async_open.append(op)


for _s in (4, 8, 16):
    register_model(f"cp_async_ca_{_s}", _copy)
    register_model(f"cp_async_ca_{_s}_zfill", _copy)
register_model("cp_async_cg_16", _copy)
register_model("cp_async_cg_16_zfill", _copy)


@register_model("cp_async_commit_group")
def _commit(ctx):
    ctx.w.cp_async_groups.append(ctx.w.cp_async_open)
    ctx.w.cp_async_open = []


def _wait_n(ctx, n):
    w = ctx.w
    old = w.cp_async_groups[:max(len(w.cp_async_groups) - n, 0)]
    if n == 0 and w.cp_async_open and ctx.call.name == "cp_async_wait_all":
        old = old + [w.cp_async_open]
        w.cp_async_open = []
    ops = [op for g in old for op in g]
    if not all(op["done"] for op in ops):
        yield Block(lambda: all(op["done"] for op in ops), f"{len(ops)} cp.async copies to land", ctx.span)
    for op in ops:
        w.acquire(op["vc"])
    w.cp_async_groups = w.cp_async_groups[len(old):] if ctx.call.name != "cp_async_wait_all" else []


@register_model("cp_async_wait_group")
def _wait(ctx):
    yield from _wait_n(ctx, ctx.imm("n"))


@register_model("cp_async_wait_all")
def _wait_all(ctx):
    yield from _wait_n(ctx, 0)


@register_model("cp_async_mbarrier_arrive_noinc")
def _arrive_noinc(ctx):
    """One arrival per issuing lane on its mbarrier once all of the warp's earlier cp.async copies have landed; it
    releases what the warp did before this instruction (its clock now) and the copies, not what the warp does after
    it, whenever the copies land."""
    w = ctx.w
    ops = [op for g in w.cp_async_groups for op in g] + list(w.cp_async_open)
    addr = ctx.arg("bar")
    lanes = list(ctx.lanes)
    v = w.release()
    for op in ops:
        v = join(v, op["vc"])

    def fire():
        for l in lanes:
            b = MB.lookup(ctx, int(addr[l]), "cp.async.mbarrier.arrive")
            if b is not None:
                MB.use(ctx.machine, b, w.agent, v, ctx.call.name, ctx.span, ctx.threads(), w.mbar_known)
                MB.arrive(ctx, b, 1, v)
    ctx.machine.events.append(Event(fire, "cp.async arrive", ready=lambda: all(op["done"] for op in ops)))
