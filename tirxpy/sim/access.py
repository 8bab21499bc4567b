"""Element loads, stores and addresses of buffers in every storage scope, per lane, with
bounds checks (global, shared, registers) and shared-memory race recording."""
from __future__ import annotations

import numpy as np

from .errors import UnsupportedError
from .memory import element_slots, in_bounds
from .races import GENERIC
from .values import nbytes

GPTR_SHIFT = 40


def _bounds(w, m, buf, idx, node, what):
    ok = in_bounds(buf, idx)
    bad = m & ~ok
    if bad.any():
        lane = int(np.argmax(bad))
        coords = tuple(int(np.asarray(i)[lane]) if np.ndim(i) else int(i) for i in idx)
        w.cta.machine.report(f"oob_{buf.storage.split(':')[0]}",
                             f"{what} of {buf.name}{list(coords)} is outside its shape {buf.shape}",
                             node.span, w.describe(bad))
    return m & ok


def byte_offsets(w, buf, idx):
    """Byte offsets (per lane) of element ``idx`` from the start of the root's storage."""
    return element_slots(buf, idx) * nbytes(buf.dtype)


def shared_base(w, buf, node=None):
    root = buf.root
    base = w.cta.plan.get(root)
    if base is None:
        raise UnsupportedError(f"shared buffer {root.name} is not allocated in this kernel (T.alloc_shared)")
    return base


def load(w, m, buf, idx, node):
    st = buf.storage
    ok = _bounds(w, m, buf, idx, node, "read")
    if st == "local":
        off = np.where(ok, byte_offsets(w, buf, idx), 0)
        regs = w.local(buf.root)
        k = nbytes(buf.dtype)
        return w.read_regs(regs, off, buf.dtype, k, ok, node)
    if st == "global":
        mem = w.cta.machine.globals[buf.root]
        off = np.where(ok, byte_offsets(w, buf, idx), 0)
        return mem.read(off, buf.dtype)
    if st.startswith("shared"):
        off = shared_base(w, buf) + np.where(ok, byte_offsets(w, buf, idx), 0)
        w.smem_access(off[ok], nbytes(buf.dtype), False, GENERIC, node, lanes=np.nonzero(ok)[0])
        return w.cta.smem.read(off, buf.dtype)
    raise UnsupportedError(f"element reads of {st} buffer {buf.name} (use tcgen05.ld for tensor memory)")


def fixed_register_slot(buf, indices):
    """``(root, byte offset)`` of element ``indices`` (IntImm) of register tile ``buf`` when they are constants
    inside its shape and the element's bytes inside its root's storage; None otherwise. Such an element is the same
    bytes in every lane, so :class:`~tirxpy.sim.machine.Warp` reads and writes it as one column slice
    (``read_regs_at`` / ``write_regs_at``) with the checks of :func:`load` / :func:`store` (which report the other
    cases)."""
    from tirxpy.ir import expr as E

    if buf.storage != "local" or not all(isinstance(i, E.IntImm) for i in indices):
        return None
    idx = [int(i.value) for i in indices]
    if len(idx) != len(buf.shape) or not all(0 <= i < n for i, n in zip(idx, buf.shape)):
        return None
    try:
        off = int(np.asarray(byte_offsets(None, buf, [np.full(1, i, np.int64) for i in idx])).ravel()[0])
        if off < 0 or off + nbytes(buf.dtype) > max(buf.root.bytes(), 1):
            return None
    except Exception:  # noqa: BLE001 - the general path raises or reports it where the element is accessed
        return None
    return buf.root, off


def store(w, m, buf, idx, value, node, poison=None):
    """Store ``value`` in the active lanes ``m``; ``poison``: lanes whose value is undefined (read
    uninitialized registers), which leave the destination registers uninitialized."""
    st = buf.storage
    ok = _bounds(w, m, buf, idx, node, "write")
    if not ok.any():
        return
    w.cta.machine.progress += 1
    w.moves += 1
    val = np.broadcast_to(value, (32,))[ok]
    if st == "local":
        off = byte_offsets(w, buf, idx)[ok]
        w.write_regs(buf.root, np.nonzero(ok)[0], off, val, buf.dtype, node,
                     poison=None if poison is None else poison[ok])
        return
    if st == "global":
        off = byte_offsets(w, buf, idx)[ok]
        w.cta.machine.globals[buf.root].write(off, val, buf.dtype)
        return
    if st.startswith("shared"):
        off = shared_base(w, buf) + byte_offsets(w, buf, idx)[ok]
        w.smem_access(off, nbytes(buf.dtype), True, GENERIC, node, lanes=np.nonzero(ok)[0])
        w.cta.smem.write(off, val, buf.dtype)
        return
    raise UnsupportedError(f"element writes of {st} buffer {buf.name} (use tcgen05.st for tensor memory)")


def address(w, m, buf, idx, node):
    st = buf.storage
    ok = _bounds(w, m, buf, idx, node, "address")
    off = np.where(ok, byte_offsets(w, buf, idx), 0)
    if st.startswith("shared"):
        return (shared_base(w, buf) + off).astype(np.uint32)
    if st == "global":
        return (np.uint64(w.cta.machine.gtag[buf.root]) + off.astype(np.uint64)).astype(np.uint64)
    raise UnsupportedError(f"T.address_of on a {st} buffer ({buf.name})")


def global_target(machine, ptrs, lanes=None):
    """``(param buffer, byte offsets)`` of tagged global pointers; the buffer is None when the
    pointers (of ``lanes``, default all) are not all inside one tensor argument."""
    p = np.asarray(ptrs).astype(np.uint64)
    tags = (p >> np.uint64(GPTR_SHIFT)).astype(np.int64)
    sel = tags.ravel() if lanes is None else tags.ravel()[lanes]
    buf = machine.gtag_buf.get(int(sel[0])) if sel.size and (sel == sel[0]).all() else None
    return buf, (p & np.uint64((1 << GPTR_SHIFT) - 1)).astype(np.int64)


def global_span(ctx, ptrs, nbytes, what):
    """``(memory, byte offset)`` of ``nbytes`` at the (one-lane) global pointer ``ptrs``, or None
    after reporting ``oob_global`` when they are not inside one tensor argument."""
    buf, off = global_target(ctx.machine, ptrs)
    o = int(np.asarray(off).ravel()[0]) if np.size(off) else -1
    mem = ctx.machine.globals.get(buf) if buf is not None else None
    if mem is None or o < 0 or o + nbytes > mem.size or nbytes < 0:
        where = f"byte {o} of {buf.name} ({mem.size} bytes)" if mem is not None else "a pointer into no tensor argument"
        ctx.report("oob_global", f"{what} of {nbytes} bytes at {where}")
        return None
    return mem, o
