"""Tensor-core shared-memory operands read through matrix descriptors, the way the hardware
addresses them (PTX ISA 9.7.15.5.1.2 canonical layouts; 9.7.16.4.1 for tcgen05): start
address, LBO, SBO and the swizzle mode decoded from the 64-bit descriptor, then the element
``(row, k)`` of the ``(rows, K)`` operand (K-major or MN-major) at its canonical byte offset,
swizzled on the absolute shared address."""
from __future__ import annotations

import numpy as np

from tirxpy.intrinsics.descriptors import smem_desc_fields

from .asyncops import swizzle_addr
from .memory import clamp
from .values import from_bits, nbytes, storage_dtype

def decode(desc: int, flavor: str = "wgmma"):
    """``(start, lbo, sbo, swizzle bytes)`` of a descriptor (:func:`tirxpy.intrinsics.descriptors.smem_desc_fields`);
    UnsupportedError for a swizzle the simulator has no model of (128B with 32-byte atoms, reserved codes)."""
    start, lbo, sbo, sw = smem_desc_fields(desc, flavor)
    if not isinstance(sw, int):
        from .errors import UnsupportedError

        what = "128B with 32B atoms" if sw is not None else "a reserved code"
        raise UnsupportedError(f"{flavor} descriptor swizzle {what} (descriptor 0x{int(desc):x})")
    return start, lbo, sbo, sw


def operand_addresses(desc, rows, K, dtype, major, flavor="wgmma"):
    """Byte addresses ``(rows, K)`` of the operand's elements."""
    start, lbo, sbo, sw = decode(desc, flavor)
    nb = nbytes(dtype)
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(K, dtype=np.int64)[None, :]
    if major == "K":
        if sw:
            off = (r // 8) * sbo + (r % 8) * sw + c * nb
        else:
            off = (r // 8) * sbo + (r % 8) * 16 + (c * nb // 16) * lbo + (c * nb) % 16
    else:
        if sw:
            off = (r * nb // sw) * lbo + (r * nb) % sw + (c // 8) * sbo + (c % 8) * sw
        else:
            off = (r * nb // 16) * sbo + (r * nb) % 16 + (c // 8) * lbo + (c % 8) * 16
    return swizzle_addr(start + off, sw)


def read_operand(smem, addrs, dtype):
    nb = nbytes(dtype)
    idx = clamp(addrs[..., None] + np.arange(nb), 0, smem.size - 1)
    raw = np.ascontiguousarray(smem.data[idx]).view(storage_dtype(dtype)).reshape(addrs.shape)
    return from_bits(raw, dtype)


def tf32(x):
    """Round float32 to tf32 (10 mantissa bits), nearest-even on the dropped bits."""
    u = np.ascontiguousarray(np.asarray(x, np.float32)).view(np.uint32).astype(np.uint64)
    u = ((u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return u.view(np.float32)
