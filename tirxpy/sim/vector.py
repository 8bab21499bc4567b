"""Models of the helper instructions tile primitives emit (``tirxpy.primitives``): 4 / 8 /
16-byte vector loads and stores of b32 words in global and shared memory
(``vld_{global,shared}_v{1,2,4}_b32`` / ``vst_...``), ``gemm_smem_desc`` (a matrix
descriptor whose start-address field is set at run time: ``desc0 | (addr & 0x3FFFF) >> 4``;
``gemm_smem_desc_folded``: the 16-byte address added to ``desc0``'s low word, as its C++ does) and
the SFU approximations ``ex2_approx_f32`` / ``rcp_approx_f32`` (modelled as the correctly
rounded float32 result with flush-to-zero; the hardware is within 2 ulp of it).
Shared-memory accesses go through the race / proxy checks like element stores do."""
from __future__ import annotations

import re

import numpy as np

from tirxpy.intrinsics.descriptors import start_field

from .access import global_target
from .races import GENERIC
from .registry import register_family, register_model

WARP = 32


@register_model("gemm_smem_desc")
def _desc(ctx):
    addr = ctx.arg("addr").astype(np.uint64)
    d0 = ctx.arg("desc0").astype(np.uint64)
    return d0 | start_field(addr)


@register_model("gemm_smem_desc_folded")
def _desc_folded(ctx):
    addr16 = ctx.arg("addr").astype(np.uint64)
    d0 = ctx.arg("desc0").astype(np.uint64)
    lo = ((d0 & np.uint64(0xFFFFFFFF)) + addr16) & np.uint64(0xFFFFFFFF)
    return (d0 & ~np.uint64(0xFFFFFFFF)) | lo


def _ftz(x):
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(np.float32)


@register_model("ex2_approx_f32")
def _ex2(ctx):
    with np.errstate(over="ignore", under="ignore"):
        return _ftz(np.exp2(_ftz(ctx.arg("x"))))


@register_model("rcp_approx_f32")
def _rcp(ctx):
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        return _ftz(np.float32(1) / _ftz(ctx.arg("x")))


def _vec(ctx):
    op, space, n = ctx.match.group(1), ctx.match.group(2), int(ctx.match.group(3))
    names = "abcd"[:n]
    lanes = ctx.lanes
    if lanes.size == 0:
        return
    addr = ctx.arg("addr")
    w, m = ctx.w, ctx.machine
    if space == "shared":
        off = addr[lanes].astype(np.int64)
        ctx.check_aligned(addr, 4 * n, ctx.call.name)
        idx = off[:, None] + 4 * np.arange(n)
        w.smem_access(off, 4 * n, op == "st", GENERIC, ctx.call, lanes=lanes)
        m.banks.note(getattr(ctx.call, "span", None), lanes, off, 4 * n)
        if op == "st":
            vals = np.stack([ctx.arg(c)[lanes].astype(np.uint32) for c in names], 1)
            w.cta.smem.write(idx.ravel(), vals.ravel(), "uint32")
            return
        got = w.cta.smem.read(idx.ravel(), "uint32").reshape(lanes.size, n)
    else:
        ctx.check_aligned(addr, 4 * n, ctx.call.name, space="global")
        buf, off = global_target(m, addr[lanes])
        if buf is None:
            ctx.report("oob_global", f"{ctx.call.name}: address is not inside a kernel parameter tensor")
            return
        gm = m.globals[buf]
        idx = off[:, None] + 4 * np.arange(n)
        bad = (idx < 0) | (idx + 4 > gm.data.size)
        if bad.any():
            ctx.report("oob_global", f"{ctx.call.name} touches byte {int(idx[bad][0])} of {buf.name}, outside its "
                       f"{gm.data.size} bytes")
            return
        if op == "st":
            vals = np.stack([ctx.arg(c)[lanes].astype(np.uint32) for c in names], 1)
            gm.write(idx.ravel(), vals.ravel(), "uint32")
            return
        got = gm.read(idx.ravel(), "uint32").reshape(lanes.size, n)
    for j, c in enumerate(names):
        full = np.zeros(WARP, np.uint32)
        full[lanes] = got[:, j]
        ctx.arg(c).write(ctx.mask, full[:, None], ordinary=True) if hasattr(ctx.arg(c), "write") else None
    return None


register_family(r"v(ld|st)_(global|shared)_v([124])_b32", _vec)
