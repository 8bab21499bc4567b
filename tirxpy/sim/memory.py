"""Memories with bounds: global tensors, one CTA's shared memory, tensor memory, and a warp's
registers, all as raw bytes (numpy ``uint8``) viewed through element types.

Element addresses come from layouts, exactly as codegen computes them: element ``(i, j)`` of a
buffer sits at the ``m`` coordinate its layout gives (swizzle included), times the element
size, from the start of the root buffer's storage (:func:`slot_table`).
"""
from __future__ import annotations

from math import prod

import numpy as np

from tirxpy.layout import TileLayout
from tirxpy.layout.coords import unflatten

from .values import from_bits, nbytes, storage_dtype, to_bits

_TABLES: dict = {}
_ROWMAJOR: dict = {}


def clamp(a, lo, hi):
    """``np.clip`` for index arrays (the same values), at a third of its cost on small arrays: the
    simulator clamps the indices of every access it has already bounds-checked or masked."""
    return np.minimum(np.maximum(a, lo), hi)


def _default_rowmajor(buf) -> bool:
    hit = _ROWMAJOR.get(id(buf))
    if hit is not None and hit[0] is buf and hit[1] is buf.layout:
        return hit[2]
    from tirxpy.ir.buffer import default_layout

    r = buf.storage == "global" and buf.layout == default_layout(buf.shape, buf.dtype, "global")
    if len(_ROWMAJOR) > 4096:
        _ROWMAJOR.clear()
    _ROWMAJOR[id(buf)] = (buf, buf.layout, r)     # (keeps buf alive: its id is not reused while cached)
    return r


def slot_table(layout, size: int, axis: str = "m"):
    """``int64[size]``: the ``axis`` coordinate of each logical element (first owner)."""
    key = (id(layout), axis)
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is layout:
        return hit[1]
    names, t = layout.owner_table()
    col = t[:, 0, names.index(axis)].astype(np.int64) if axis in names else np.zeros(size, np.int64)
    _TABLES[key] = (layout, col)
    return col


def flat_index(shape, indices):
    """Row-major flat index of per-lane index arrays."""
    flat = 0
    for n, i in zip(shape, indices):
        flat = flat * n + np.asarray(i, np.int64)
    return flat


def _strided_slots(layout, flat):
    """``m`` slots of the flat element indices ``flat`` of a plain :class:`~tirxpy.layout.TileLayout` (no swizzle),
    in closed form: the sum over its shard iterators on ``m`` of component times stride (replicas at 0), as
    ``apply`` gives; ``None`` for any other kind of layout."""
    if type(layout) is not TileLayout:
        return None
    comps = unflatten(np.asarray(flat, np.int64), [it.extent for it in layout.shard])
    out = np.zeros(np.shape(flat), np.int64) + layout.offset.get("m", 0)
    for c, it in zip(comps, layout.shard):
        if it.axis.name == "m":
            out = out + c * it.stride
    return out


def element_slots(buf, indices):
    """``m`` slot of element ``indices`` (arrays) of ``buf`` (no bounds check: see callers): row-major, a global
    tensor's strided layout in closed form (any size; overlapping views too), or the layout's owner table (cached:
    registers and shared memory)."""
    flat = flat_index(buf.shape, indices)
    if _default_rowmajor(buf):
        return flat
    size = prod(buf.shape)
    if buf.storage == "global":
        strided = _strided_slots(buf.layout, clamp(flat, 0, size - 1))
        if strided is not None:
            return strided
    tab = slot_table(buf.layout, size)
    return tab[clamp(flat, 0, len(tab) - 1)]


def in_bounds(buf, indices):
    ok = True
    for n, i in zip(buf.shape, indices):
        i = np.asarray(i)
        ok = ok & (i >= 0) & (i < n)
    return np.asarray(ok)


def storage_bytes(buf) -> int:
    return buf.root.bytes()


class Bytes:
    """A flat byte memory with typed gathers / scatters by byte offset."""

    def __init__(self, size: int, name: str):
        self.data = np.zeros(max(int(size), 1), np.uint8)
        self.name = name

    @property
    def size(self) -> int:
        return self.data.size

    def read(self, offsets, dt):
        """Values (compute dtype) at byte ``offsets`` (int array) of element type ``dt``."""
        k = nbytes(dt)
        off = np.asarray(offsets, np.int64)
        idx = off[..., None] + np.arange(k)
        raw = self.data[idx].view(storage_dtype(dt)).reshape(off.shape)
        return from_bits(raw, dt)

    def write(self, offsets, values, dt):
        k = nbytes(dt)
        off = np.asarray(offsets, np.int64).ravel()
        raw = np.ascontiguousarray(to_bits(np.broadcast_to(values, np.asarray(offsets).shape), dt)).ravel()
        b = raw.view(np.uint8).reshape(-1, k)
        self.data[off[:, None] + np.arange(k)] = b

    def read_raw(self, offsets, dt):
        k = nbytes(dt)
        off = np.asarray(offsets, np.int64)
        return self.data[off[..., None] + np.arange(k)].view(storage_dtype(dt)).reshape(off.shape)


class TensorMemory:
    """Blackwell TMEM of one CTA: 128 lanes x 512 columns of 32-bit cells, with the column
    allocator (power-of-two blocks)."""

    LANES, COLS = 128, 512

    def __init__(self):
        self.cells = np.zeros((self.LANES, self.COLS), np.uint32)
        self.init = np.zeros((self.LANES, self.COLS), bool)  # written since the column's allocation
        self.allocs: dict = {}  # first column -> ncols

    def alloc(self, ncols: int):
        used = np.zeros(self.COLS, bool)
        for c, n in self.allocs.items():
            used[c:c + n] = True
        for start in range(0, self.COLS - ncols + 1, ncols):
            if not used[start:start + ncols].any():
                self.allocs[start] = ncols
                self.init[:, start:start + ncols] = False
                return start
        return None

    def allocated(self, lane_cols):
        cols = np.asarray(lane_cols)
        ok = np.zeros(cols.shape, bool)
        for c, n in self.allocs.items():
            ok |= (cols >= c) & (cols < c + n)
        return ok


def element_slots_axis(buf, indices, axis):
    """The ``axis`` coordinate (TLane / TCol ...) of element ``indices`` of ``buf``."""
    flat = flat_index(buf.shape, indices)
    tab = slot_table(buf.layout, prod(buf.shape), axis)
    return tab[clamp(flat, 0, len(tab) - 1)]
