"""TMA (cp.async.bulk.tensor) loads, multicast loads, stores, reductions and prefetches, and the
non-tensor bulk copies with their groups (PTX ISA 9.7.9.25).

A load gathers the box (region extents of the tensor-map operand) at the coordinates
(innermost first; a box whose innermost start is not 16-byte aligned is reported, as the hardware faults on
it), fills elements outside the tensor with zero, writes it to shared memory
row-major with the tensor map's swizzle applied to the byte addresses, and completes its byte
count on the mbarrier (``complete_tx``), all at a later scheduling point than the issue.

The shared-memory operand of a tensor copy (a load's destination, a store's / reduction's source) must be
128-byte aligned (CUDA C++ Programming Guide, TMA alignment table); an address off it is reported
(``misaligned``). The swizzle itself is applied to the absolute shared-memory address bits, as the hardware does."""
from __future__ import annotations

import itertools

import numpy as np

from . import mbarrier as MB
from .asyncops import agent, issue_vc, swizzle_addr
from .interp import Block
from .memory import clamp, element_slots
from .races import ASYNC
from .registry import register_family, register_model
from .scheduler import Event
from .values import nbytes


def _box_coords(tm, coords):
    """Global element slots (rows: box elements in row-major order) and validity."""
    g = tm.buffer.shape
    box = tm.box
    outer_first = list(reversed(coords))
    grids = np.meshgrid(*[np.arange(b) for b in box], indexing="ij")
    pos = [gr.ravel() + c for gr, c in zip(grids, outer_first)]
    ok = np.ones(pos[0].shape, bool)
    for p, n in zip(pos, g):
        ok &= (p >= 0) & (p < n)
    # element slots through the tensor's layout, as the tensor map's strides give them on the GPU (an overlapping
    # view's elements share storage there too)
    return element_slots(tm.buffer, [clamp(p, 0, n - 1) for p, n in zip(pos, g)]), ok


def _coords(ctx, tm, d):
    """Coordinates (innermost first): the call's coordinate arguments plus the view's starts, as
    codegen renders them."""
    from .expr import compile_expr

    out = []
    for i in range(d):
        c = ctx.arg(f"c{i}").astype(np.int64)
        if tm.starts:
            c = c + compile_expr(tm.starts[d - 1 - i])(ctx.w, ctx.mask).astype(np.int64)
        out.append(c)
    return out


def _check_map(ctx, tm, d):
    if len(tm.box) != d or tm.buffer.ndim != d:
        ctx.report("tma_misuse", f"{ctx.call.name} takes {d} coordinates but the tensor map of {tm.buffer.name} "
                   f"has rank {tm.buffer.ndim}")
        return False
    from tirxpy.lower.errors import TmaError
    from tirxpy.lower.tma import tma_params

    strides, acc = [], 1
    for n in reversed(tm.buffer.shape):
        strides.append(acc)
        acc *= n
    try:
        tma_params(tm.buffer.shape, tuple(reversed(strides)), str(tm.buffer.dtype), tm.box, swizzle=tm.swizzle,
                   param=tm.buffer.name)
    except TmaError as e:
        ctx.report("tma_misuse", f"invalid tensor map for {tm.buffer.name}: {e}")
        return False
    return True


def _check_start(ctx, tm, c0, esz):
    """A box that starts off a 16-byte boundary in the innermost dimension (element ``c0``) is reported: the TMA unit
    faults on it (``CUDA_ERROR_ILLEGAL_INSTRUCTION`` on an H100, loads and stores alike). The copy is still simulated,
    so that the report is the first problem, not a hang that follows from it."""
    if c0 * esz % 16 == 0:
        return
    ctx.report("tma_misuse", f"{ctx.call.name}: the box of {tm.buffer.name} starts at element {c0} of its innermost "
               f"dimension ({c0 * esz} bytes), not a multiple of 16 bytes, which the TMA unit faults on (illegal "
               f"instruction): start each box at a multiple of {max(1, 16 // esz)} elements there, or lay the tensor "
               "out so that the varying start is an outer dimension")


def _check_smem_operand(ctx, addrs, operand):
    """The shared-memory operand ``operand`` of a tensor copy is 128-byte aligned (reports the first lane off it)."""
    ctx.check_aligned(addrs, 128, f"{ctx.call.name}: {operand} of a TMA tensor copy (the rule: 128-byte aligned)")


def _load(ctx, d, multicast=False):
    tm = ctx.arg("tmap")
    if not _check_map(ctx, tm, d):
        return
    dst, bar = ctx.arg("dst"), ctx.arg("bar")
    cs = _coords(ctx, tm, d)
    mask = ctx.arg("cta_mask").astype(np.int64) if multicast else None
    m = ctx.machine
    esz = nbytes(tm.buffer.dtype)
    _check_smem_operand(ctx, dst, "destination (dstMem)")
    for l in ctx.lanes:
        _check_start(ctx, tm, int(cs[0][l]), esz)
        flat, ok = _box_coords(tm, [int(c[l]) for c in cs])
        gm = m.globals[tm.buffer]
        raw = gm.data[(flat * esz)[:, None] + np.arange(esz)]
        raw[~ok] = 0
        lin = np.arange(flat.size, dtype=np.int64) * esz
        targets = [ctx.cta.rank] if mask is None else [r for r in range(len(m.cluster)) if (int(mask[l]) >> r) & 1]
        b_addr = int(bar[l])
        bcta, b_off = MB._cta_and_addr(ctx, b_addr)
        for r in targets:
            cta = m.cluster[r] if mask is not None else ctx.cta
            bc = cta if mask is not None else bcta
            a = agent(m, ("tma", cta.rank, b_off), f"TMA unit of cta {cta.cta_id} completing on mbarrier {b_off:#x}")
            MB.check_issue(ctx, bc, b_off, ctx.call.name)
            vc = issue_vc(ctx.w, a)
            addrs = swizzle_addr(int(dst[l]) + lin, tm.swizzle)
            nb = flat.size * esz
            w = ctx.w
            call = ctx.call
            ph = MB.phase_of(bc, b_off)

            def fire(cta=cta, bc=bc, addrs=addrs, raw=raw.copy(), a=a, vc=vc, nb=nb, ph=ph):
                idx = addrs[:, None] + np.arange(esz)
                bad = (idx < 0) | (idx >= cta.smem.size)
                if bad.any():
                    m.report("oob_shared", f"TMA load writes {nb} bytes at smem {int(addrs.min()):#x}, past the "
                             f"{cta.smem.size}-byte shared memory", call.span, w.describe())
                    return
                m.check_access(cta, idx.ravel(), a, vc, True, ASYNC, call, w)
                cta.smem.data[idx] = raw
                MB.complete_tx(m, bc, b_off, nb, vc, call.span, w.describe(), ph, a)
            m.events.append(Event(fire, f"TMA load into cta {cta.cta_id}", mbar=(bc, b_off)))


def _store(ctx, d, reduce=False):
    tm = ctx.arg("tmap")
    if not _check_map(ctx, tm, d):
        return
    src = ctx.arg("src")
    cs = _coords(ctx, tm, d)
    m = ctx.machine
    esz = nbytes(tm.buffer.dtype)
    w = ctx.w
    a = agent(m, ("bulk", ctx.cta.rank, w.wid), f"bulk-copy unit of {w.describe()}")
    _check_smem_operand(ctx, src, "source (srcMem)")
    for l in ctx.lanes:
        _check_start(ctx, tm, int(cs[0][l]), esz)
        flat, ok = _box_coords(tm, [int(c[l]) for c in cs])
        lin = np.arange(flat.size, dtype=np.int64) * esz
        addrs = swizzle_addr(int(src[l]) + lin, tm.swizzle)
        vc = issue_vc(w, a)
        op = {"done": False, "vc": vc}
        call = ctx.call

        def fire(addrs=addrs, flat=flat, ok=ok, op=op, vc=vc):
            idx = addrs[:, None] + np.arange(esz)
            w.smem_access(idx.ravel(), 1, False, ASYNC, call, agent=a, vc=vc)
            raw = w.cta.smem.data[clamp(idx, 0, w.cta.smem.size - 1)]
            gm = m.globals[tm.buffer]
            dst = (flat[ok] * esz)[:, None] + np.arange(esz)
            if reduce:
                dt = tm.buffer.dtype
                vals = gm.read(flat[ok] * esz, dt) + w.cta.smem.read(addrs[ok], dt)
                gm.write(flat[ok] * esz, vals, dt)
            else:
                gm.data[dst] = raw[ok]
            op["done"] = True
        m.events.append(Event(fire, "TMA store"))
        w.bulk_open.append(op)


def _tma_family(ctx):
    import re

    name = ctx.call.name
    d = int(re.search(r"_(\d)d", name).group(1))
    if name.startswith("tma_load"):
        return _load(ctx, d, multicast=name.endswith("multicast"))
    if name.startswith("tma_store"):
        return _store(ctx, d)
    if name.startswith("tma_reduce_add"):
        return _store(ctx, d, reduce=True)
    return None  # prefetch


for _d in range(1, 6):
    for _n in (f"tma_load_{_d}d", f"tma_load_{_d}d_multicast", f"tma_load_{_d}d_cta_group2", f"tma_store_{_d}d",
               f"tma_reduce_add_{_d}d", f"tma_prefetch_{_d}d"):
        register_model(_n, _tma_family)


def _bulk_operands(ctx, l, smem, gmem, n, what):
    """PTX (cp.async.bulk): both addresses 16-byte aligned and the size a multiple of 16 bytes; reports the first
    rule lane ``l`` breaks (the copy is still simulated, so that this is the first problem reported)."""
    lane = np.array([l])
    if n % 16:
        ctx.report("tma_misuse", f"{what} of {n} bytes: the size of a bulk copy is a multiple of 16 bytes",
                   ["round the size up to a multiple of 16 (pad the tile) or copy the tail another way"])
    ctx.check_aligned(smem, 16, f"{what} (shared side)", lanes=lane)
    ctx.check_aligned(gmem, 16, f"{what} (global side)", lanes=lane, space="global")


def _smem_span(ctx, start, n, what):
    """True when bytes [start, start + n) are inside the CTA's shared memory, else reports."""
    if start < 0 or n < 0 or start + n > ctx.cta.smem.size:
        ctx.report("oob_shared", f"{what} of {n} bytes at smem {start:#x} is outside the {ctx.cta.smem.size}-byte "
                   "shared memory")
        return False
    return True


@register_model("bulk_copy_g2s")
def _g2s(ctx):
    from .access import global_span

    dst, src, nb, bar = ctx.arg("dst"), ctx.arg("src"), ctx.arg("nbytes"), ctx.arg("bar")
    m = ctx.machine
    w = ctx.w
    for l in ctx.lanes:
        n = int(nb[l])
        _bulk_operands(ctx, l, dst, src, n, "bulk copy (global -> shared)")
        got = global_span(ctx, src[l:l + 1], n, "bulk copy (global -> shared) read")
        d0 = int(dst[l])
        if got is None or not _smem_span(ctx, d0, n, "bulk copy (global -> shared) write"):
            continue
        b_off = int(bar[l])
        a = agent(m, ("tma", ctx.cta.rank, b_off), f"TMA unit completing on mbarrier {b_off:#x}")
        MB.check_issue(ctx, w.cta, b_off, ctx.call.name)
        vc = issue_vc(w, a)
        raw = got[0].data[got[1]:got[1] + n].copy()
        ph = MB.phase_of(w.cta, b_off)

        def fire(raw=raw, d0=d0, n=n, b_off=b_off, vc=vc, a=a, ph=ph):
            w.smem_access(np.arange(d0, d0 + n), 1, True, ASYNC, ctx.call, agent=a, vc=vc)
            w.cta.smem.data[d0:d0 + n] = raw
            MB.complete_tx(m, w.cta, b_off, n, vc, ctx.call.span, w.describe(), ph, a)
        m.events.append(Event(fire, "bulk copy", mbar=(w.cta, b_off)))


@register_model("bulk_copy_s2g")
def _s2g(ctx):
    from .access import global_span

    dst, src, nb = ctx.arg("dst"), ctx.arg("src"), ctx.arg("nbytes")
    m, w = ctx.machine, ctx.w
    a = agent(m, ("bulk", ctx.cta.rank, w.wid), f"bulk-copy unit of {w.describe()}")
    for l in ctx.lanes:
        n, s0 = int(nb[l]), int(src[l])
        _bulk_operands(ctx, l, src, dst, n, "bulk copy (shared -> global)")
        got = global_span(ctx, dst[l:l + 1], n, "bulk copy (shared -> global) write")
        if got is None or not _smem_span(ctx, s0, n, "bulk copy (shared -> global) read"):
            continue
        vc = issue_vc(w, a)
        op = {"done": False, "vc": vc}

        def fire(mem=got[0], o=got[1], n=n, s0=s0, op=op, vc=vc):
            w.smem_access(np.arange(s0, s0 + n), 1, False, ASYNC, ctx.call, agent=a, vc=vc)
            mem.data[o:o + n] = w.cta.smem.data[s0:s0 + n]
            op["done"] = True
        m.events.append(Event(fire, "bulk store"))
        w.bulk_open.append(op)


@register_model("bulk_commit_group")
def _commit(ctx):
    ctx.w.bulk_groups.append(ctx.w.bulk_open)
    ctx.w.bulk_open = []


def _bulk_wait(ctx):
    n = ctx.imm("n")
    w = ctx.w
    old = w.bulk_groups[:max(len(w.bulk_groups) - n, 0)]
    ops = [op for g in old for op in g]
    if not all(op["done"] for op in ops):
        yield Block(lambda: all(op["done"] for op in ops), f"bulk async-group completion ({len(ops)} copies)", ctx.span)
    for op in ops:
        w.acquire(op["vc"])
    w.bulk_groups = w.bulk_groups[len(old):]


register_model("bulk_wait_group", _bulk_wait)
register_model("bulk_wait_group_read", _bulk_wait)
