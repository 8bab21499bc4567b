"""Intrinsic operands given as IR, interpreted the way codegen renders them.

- ``reg`` / ``pred`` scalars: expression values (32 lanes), reinterpreted to the operand dtype;
- ``reg`` vectors (``{r0, r1, ...}``) and written registers: a register tile element / region /
  whole buffer names consecutive 32-bit (or operand-sized) slots of the thread's storage from
  that element on (:class:`RegRef`);
- ``smem_addr``: a shared element / region / buffer is the byte address of its first element
  (layout ``m`` times element size, from the buffer's base); an expression is the address;
- ``tmem_addr``: a tensor-memory region is ``lane << 16 | column`` of its first element;
- ``gmem_ptr``: a global element / region is a (tagged) pointer to it;
- ``tensormap``: a global region is a tensor map with box = region extents and the swizzle of
  the call's shared operand's layout (:class:`TensorMap`);
- ``desc64``: a shared region is the matrix descriptor computed from its layout
  (tirxpy.intrinsics.descriptors), plus the region's start address.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tirxpy.ir import expr as E
from tirxpy.ir.buffer import Buffer, BufferRegion
from tirxpy.layout import ComposeLayout, LayoutError
from tirxpy.layout.swizzle import swizzle_for
from tirxpy.errors import shown

from . import access
from .errors import UnsupportedError
from .expr import compile_expr
from .memory import clamp, element_slots
from .values import nbytes, storage_dtype

WARP = 32


def target_of(node):
    """``(buffer, start index expressions)`` of an element / region / buffer operand."""
    if isinstance(node, Buffer):
        return node, [E.IntImm(0)] * node.ndim
    if isinstance(node, BufferRegion):
        return node.buffer, list(node.starts)
    if isinstance(node, E.BufferLoad):
        return node.buffer, list(node.indices)
    if isinstance(node, E.AddressOf):
        return target_of(node.target)
    return None, None


def start_bytes(w, mask, buf, starts, node=None):
    """Byte offset of a register operand: an element's slot, or (tiles, as codegen) the lowest
    slot of the view's layout plus its symbolic ``m`` offset."""
    if isinstance(node, (Buffer, BufferRegion)):
        from tirxpy.lower.codegen.address import slot_span

        reg = node if isinstance(node, BufferRegion) else node.full()
        lo = slot_span(reg.layout)[0]
        off = reg.offset.get("m")
        m = np.full(WARP, lo, np.int64) + (compile_expr(off)(w, mask).astype(np.int64) if off is not None else 0)
        return m * nbytes(buf.dtype)
    idx = [compile_expr(s)(w, mask) for s in starts]
    return element_slots(buf, idx) * nbytes(buf.dtype)


@dataclass
class RegRef:
    """``count`` consecutive operand-sized slots of a register tile, per lane."""

    w: object
    root: Buffer
    offsets: np.ndarray  # (32,) byte offsets of the first slot
    count: int
    dtype: str
    node: object

    @property
    def k(self):
        return nbytes(self.dtype)

    def byte_index(self):
        return self.offsets[:, None] + np.arange(self.count * self.k)

    def read(self, mask, check=True, by_wgmma=False):
        """The lanes' register values (``(32, count)``); ``check``: report in-flight and uninitialised reads
        (``by_wgmma``: the reader is a wgmma taking the registers as its A fragment, which may share them with
        another wgmma's A fragment in flight, but not with an accumulator)."""
        regs = self.w.local(self.root)
        idx = self.byte_index()
        if check and mask.any():
            self.w.check_inflight(self.root, idx[mask].ravel(), self.node, "read", by_wgmma)
            if not by_wgmma:
                self.w.note_acc_read(self.root, idx[mask].ravel())
        if (idx >= regs.shape[1]).any() or (idx < 0).any():
            self.w.cta.machine.report("oob_local", f"register vector of {self.count} x {self.dtype} runs past "
                                      f"{self.root.name} ({regs.shape[1]} bytes)", getattr(self.node, "span", None),
                                      self.w.describe(mask))
            idx = clamp(idx, 0, regs.shape[1] - 1)
        if check and self.root not in self.w.rfull:
            self.w.check_init(self.root, idx, mask, self.node)
        raw = regs[np.arange(WARP)[:, None], idx]
        from .values import from_bits

        return from_bits(np.ascontiguousarray(raw).view(storage_dtype(self.dtype)).reshape(WARP, self.count), self.dtype)

    def write(self, mask, values, ordinary=False):
        lanes = np.nonzero(mask)[0]
        if lanes.size == 0:
            return
        vals = np.asarray(values).reshape(WARP, self.count)[lanes]
        offs = self.offsets[lanes, None] + np.arange(self.count) * self.k
        self.w.write_regs(self.root, lanes, offs, vals, self.dtype, self.node, ordinary=ordinary)


@dataclass
class TensorMap:
    """A tensor map as codegen derives it: the global tensor, the box (outermost first) and the
    shared-side swizzle width in bytes."""

    buffer: Buffer
    box: tuple
    swizzle: int
    node: object
    starts: tuple = ()

    @property
    def box_bytes(self):
        n = nbytes(self.buffer.dtype)
        for b in self.box:
            n *= b
        return n


def swizzle_bytes(layout, dtype) -> int:
    if not isinstance(layout, ComposeLayout) or layout.swizzle.swizzle_len == 0:
        return 0
    for b in (32, 64, 128):
        if swizzle_for(b, dtype) == layout.swizzle:
            return b
    raise UnsupportedError(f"swizzle {shown(layout.swizzle)} is not a TMA swizzle mode for {dtype}")


def tensor_map(call, entry, node):
    buf, _ = target_of(node)
    if buf is None or buf.storage != "global":
        raise UnsupportedError(f"{call.name}: the tensormap operand must be a global tensor region, got {shown(node)}")
    reg = node if isinstance(node, BufferRegion) else buf.full()
    box = tuple(reg.extents)
    sw = 0
    for o, a in zip(entry.args, call.args):
        if o.kind == "smem_addr" and o.name != "bar" and isinstance(a, (Buffer, BufferRegion)):
            from tirxpy.lower.errors import TmaError
            from tirxpy.lower.tma import swizzle_of_layout

            sreg = a if isinstance(a, BufferRegion) else a.full()
            try:
                sw = swizzle_of_layout(sreg.layout, str(buf.dtype), box)
            except TmaError as e:
                raise UnsupportedError(f"{call.name}: the shared tile {sreg.name} cannot be a TMA box: {e}") from None
            break
    return TensorMap(buf, box, sw, node, tuple(reg.starts))


def descriptor(w, mask, call, name, node, flavor, major):
    """The 64-bit descriptor (per lane) of a shared region operand, from its layout."""
    from tirxpy.intrinsics import descriptors as D

    if not isinstance(node, (BufferRegion, Buffer)):
        raise UnsupportedError(f"{call.name}: descriptor operand {name} must be a shared region or a 64-bit value")
    from tirxpy.intrinsics import IntrinsicError

    region = node if isinstance(node, BufferRegion) else node.full()
    buf = region.buffer
    if len(region.shape) != 2:
        raise UnsupportedError(f"{call.name}: operand {name} tile {buf.name} {region.shape} must be 2-D (mn, k)")
    try:
        d0 = D.region_desc(flavor, region, major)   # the layout -> descriptor path codegen uses
    except (LayoutError, IntrinsicError) as err:
        raise UnsupportedError(f"{call.name}: {buf.name} has no matrix descriptor: {err}") from None
    tile = buf.layout.tile_layout if isinstance(buf.layout, ComposeLayout) else buf.layout
    idx = [compile_expr(x)(w, mask) for x in region.starts]
    from .memory import slot_table, flat_index

    flat = flat_index(buf.shape, idx)
    tab = slot_table(tile, int(np.prod(buf.shape)))
    addr = access.shared_base(w, buf) + tab[clamp(flat, 0, len(tab) - 1)] * nbytes(buf.dtype)
    return (np.uint64(d0) + D.start_field(addr.astype(np.uint64))).astype(np.uint64)


def _strides(layout, dtype, major, shape):
    from tirxpy.layout.atoms import smem_descriptor_strides

    return smem_descriptor_strides(layout, dtype, major, shape=shape)


def scalar_value(w, mask, node, dtype):
    v = compile_expr(node)(w, mask) if isinstance(node, E.Expr) else None
    if v is None:
        buf, starts = target_of(node)
        raise UnsupportedError(f"operand `{node}` is not a value")
    st = storage_dtype(dtype)
    if v.dtype == np.bool_:
        return v.astype(st)
    if v.dtype.kind in "iu" and st.kind in "iu":
        return v.astype(st)
    if v.dtype.kind == "f" and st.kind == "f":
        return v.astype(st)
    if v.dtype.kind in "iu" and st.kind == "f":
        return v.astype(st)
    if v.dtype.kind == "f" and st.kind in "iu":  # raw bits of a float in an integer register
        return np.ascontiguousarray(v.astype(np.float32)).view(np.uint32).astype(st)
    return v.astype(st)
