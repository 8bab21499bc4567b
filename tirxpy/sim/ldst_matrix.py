"""ldmatrix / stmatrix (warp-collective 8x8 b16 matrices), with the register layout of
``tirxpy.layout.atoms.ldmatrix_layout``: lane ``8q + r`` gives the address of row ``r`` of
matrix ``q``; the tile is the matrices stacked vertically."""
from __future__ import annotations

import re

import numpy as np

from tirxpy.layout.atoms import ldmatrix_layout

from .memory import clamp
from .races import GENERIC
from .registry import register_model

WARP = 32


def _place(num, trans):
    L = ldmatrix_layout(num, trans)
    names, t = L.owner_table()
    lane = t[:, 0, names.index("laneid")].reshape(8 * num, 8)
    m = t[:, 0, names.index("m")].reshape(8 * num, 8)
    return lane, m


def _rows(ctx, num):
    addr = ctx.arg("addr")
    ctx.check_aligned(addr, 16, f"{ctx.call.name} row address (8 x b16)", lanes=np.arange(8 * num))
    rows = addr[: 8 * num].astype(np.int64)
    idx = rows[:, None] + np.arange(16)
    return idx


def _ld(ctx):
    num, trans = int(re.search(r"_x(\d)", ctx.call.name).group(1)), ctx.call.name.endswith("trans")
    idx = _rows(ctx, num)
    ctx.w.smem_access(idx.ravel(), 1, False, GENERIC, ctx.call)
    tile = np.ascontiguousarray(ctx.cta.smem.data[clamp(idx, 0, ctx.cta.smem.size - 1)]).view(np.uint16)
    lane, m = _place(num, trans)
    out = np.zeros((WARP, 2 * num), np.uint16)
    out[lane.ravel(), m.ravel()] = tile.ravel()
    ctx.arg("d").write(ctx.mask, np.ascontiguousarray(out).view(np.uint32), ordinary=True)


def _st(ctx):
    num, trans = int(re.search(r"_x(\d)", ctx.call.name).group(1)), ctx.call.name.endswith("trans")
    idx = _rows(ctx, num)
    regs = ctx.arg("s").read(ctx.mask).astype(np.uint32)
    halves = np.ascontiguousarray(regs).view(np.uint16)
    lane, m = _place(num, trans)
    tile = halves[lane, m].astype(np.uint16)
    ctx.w.smem_access(idx.ravel(), 1, True, GENERIC, ctx.call)   # (reports bytes out of range)
    inside = (idx >= 0) & (idx < ctx.cta.smem.size)
    ctx.cta.smem.data[idx[inside]] = np.ascontiguousarray(tile).view(np.uint8).reshape(idx.shape)[inside]


for _n in (1, 2, 4):
    for _t in ("", "_trans"):
        register_model(f"ldmatrix_x{_n}{_t}", _ld)
        register_model(f"stmatrix_x{_n}{_t}", _st)
