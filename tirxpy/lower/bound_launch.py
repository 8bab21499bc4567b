"""Launches whose arguments were checked and packed once (:meth:`tirxpy.lower.build.CompiledKernel.bind`).

A :class:`~tirxpy.lower.launcher.Launcher` checks every argument on every call (device, dtype, shape,
strides, alignment) and packs it into its one buffer, host time of the same order as the driver
call itself. A :class:`BoundLaunch` keeps a private copy of the packed buffer instead, so calling it
is the driver call alone. It holds the tensors' device *addresses*, not the tensors (holding them
would keep every bound tensor's memory alive): like a CUDA graph, it is valid only while tensors
with those addresses, shapes, strides and dtypes are alive. :func:`tirxpy_kernels.gemm` keeps bound
launches keyed by exactly that (its shape / stride / dtype key and the data pointers), so a repeated
call with the same tensors, or with new ones at the same addresses, skips the checks.
"""
from __future__ import annotations

import ctypes


class PackedArgs:
    """A private copy of an :class:`~tirxpy.lower.packer.ArgPacker`'s buffer after a checked ``pack``,
    with its own ``void*`` array at the same offsets (``params_address`` is what the driver takes)."""

    __slots__ = ("_raw", "_ptrs", "params_address", "nbytes")

    def __init__(self, packer):
        n = packer.nbytes
        src = ctypes.addressof(packer._raw) + packer._shift
        self._raw = (ctypes.c_char * (n + 64))()
        dst = ctypes.addressof(self._raw)
        dst += (-dst) % 64                  # the same 64-byte alignment as the packer's (tensor maps need it)
        ctypes.memmove(dst, src, n)
        offsets = [(p or 0) - src for p in packer._ptrs]
        self._ptrs = (ctypes.c_void_p * len(offsets))(*[dst + o for o in offsets])
        self.params_address = ctypes.addressof(self._ptrs)
        self.nbytes = n

    def packed_bytes(self) -> bytes:
        """The packed argument bytes (scalars, pointers, 128-byte tensor maps)."""
        start = ctypes.addressof(self._raw)
        return ctypes.string_at(start + (-start) % 64, self.nbytes)


class BoundLaunch:
    """One kernel launch with fixed arguments (``CompiledKernel.bind``): ``bl()`` launches it on torch's
    current stream, ``bl(stream=s)`` on ``s``; no argument checks, one driver call."""

    __slots__ = ("_launcher", "_packed", "_grid", "_block", "_smem", "_cluster", "_pdl")

    def __init__(self, launcher, packed: PackedArgs, grid, block, smem_bytes, cluster, pdl):
        self._launcher, self._packed = launcher, packed
        self._grid, self._block, self._smem, self._cluster, self._pdl = grid, block, smem_bytes, cluster, pdl

    def __call__(self, stream=None) -> None:
        self._launcher._launch(self._packed.params_address, self._grid, self._block, self._smem, self._cluster,
                               stream, self._pdl)

    def packed_bytes(self) -> bytes:
        return self._packed.packed_bytes()

    def __repr__(self) -> str:
        return (f"<BoundLaunch {self._launcher.kernel.name} grid {self._grid} block {self._block}, "
                f"{self._packed.nbytes} bytes of arguments>")
