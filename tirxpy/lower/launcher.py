"""Launching: a :class:`Launcher` is a kernel bound to parameter specs; calling it packs the
arguments (checked), looks up a prepared ``CUlaunchConfig`` and makes one driver call.
:func:`launch` is the one-shot form (specs inferred from ctypes scalars when not given).

    >>> _dim3(4, "grid"), _dim3((2, 3), "block")
    ((4, 1, 1), (2, 3, 1))
"""
from __future__ import annotations

import ctypes
import operator
from typing import TYPE_CHECKING, Sequence

from tirxpy.errors import shown

from .device import _check, _driver, ensure_context, libcuda
from .errors import LaunchError
from .packer import ArgPacker
from .params import ParamSpec, _infer_specs, is_int

if TYPE_CHECKING:
    from .module import Kernel


_GRID_MAX = ((1 << 31) - 1, 65535, 65535)
_BLOCK_MAX = (1024, 1024, 64)


def _dim3(v, what) -> tuple:
    """``v`` (an int or a tuple / list of 1-3 ints, numpy ints included) as a positive ``(x, y, z)``; LaunchError
    naming ``what`` for anything else (a float, bool or string is refused, never truncated or split)."""
    if is_int(v):
        v = (v,)
    if not isinstance(v, (tuple, list)) or not all(map(is_int, v)):
        raise LaunchError(what, f"must be an int or a tuple of up to 3 ints, got {type(v).__name__} {shown(v, 80)}; "
                                f"write e.g. (128,) or (4, 2, 1)")
    v = tuple(operator.index(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise LaunchError(what, f"must be 1-3 positive ints, got {shown(v, 80)}")
    return v + (1,) * (3 - len(v))


def _smem(v) -> int:
    """Dynamic shared-memory bytes: an int in ``[0, 2**32)`` (LaunchError naming ``smem_bytes`` otherwise)."""
    if not is_int(v) or not 0 <= operator.index(v) < 1 << 32:
        raise LaunchError("smem_bytes", f"must be an int of bytes in [0, 2**32), got {type(v).__name__} {shown(v, 80)}")
    return operator.index(v)


class _LaunchAttr(ctypes.Structure):
    """``CUlaunchAttribute`` (cuda.h): an id, padding to 8 bytes, a 64-byte value union."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


class _LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (cuda.h), passed by address to ``cuLaunchKernelEx``."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def _make_config(grid, block, smem, stream, cluster, pdl=False):
    """A ``CUlaunchConfig`` for ``cuLaunchKernelEx`` with optional cluster-dimension and programmatic-stream-
    serialization (``pdl``) attributes; returns ``(struct, attrs, address)`` (keep the first two alive while
    the address is used)."""
    cfg = _LaunchConfig(*grid, *block, smem, stream or None, None, 0)
    attrs = (_LaunchAttr * 2)()
    n = 0
    drv = _driver()
    if cluster is not None:
        attrs[n].id = int(drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attrs[n].value[0], attrs[n].value[1], attrs[n].value[2] = cluster
        n += 1
    if pdl:
        attrs[n].id = int(drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        attrs[n].value[0] = 1
        n += 1
    if n:
        cfg.attrs, cfg.numAttrs = ctypes.addressof(attrs), n
    return cfg, attrs, ctypes.addressof(cfg)


_LAUNCH_EX = []


def _launch_ex_ctypes():
    """libcuda's ``cuLaunchKernelEx`` as a ctypes function of :func:`~tirxpy.lower.device.libcuda` (it keeps the
    GIL), or None where libcuda cannot be opened this way."""
    if not _LAUNCH_EX:
        lib, fn = libcuda(), None
        if lib is not None:
            try:
                fn = lib.cuLaunchKernelEx
                fn.argtypes = [ctypes.c_void_p] * 4
                fn.restype = ctypes.c_int
            except AttributeError:
                fn = None
        _LAUNCH_EX.append(fn)
    return _LAUNCH_EX[0]


class Launcher:
    """A kernel bound to parameter specs; call it to launch.

    The launch path: pack the arguments (checked) into the bound buffer, look up a prepared
    ``CUlaunchConfig`` by ``(grid, block, cluster, smem, stream)`` and make one ctypes call to
    libcuda's ``cuLaunchKernelEx`` with four pointer arguments (``backend="ctypes"``, the
    default: the shorter path). ``backend="bindings"`` goes through cuda-bindings'
    ``cuLaunchKernel`` instead; it is also the fallback where libcuda cannot be opened with ctypes.
    """

    def __init__(self, kernel: Kernel, packer: ArgPacker, backend: str | None = None):
        if backend not in (None, "ctypes", "bindings"):
            raise LaunchError("backend", f"must be 'ctypes' or 'bindings', got {shown(backend)}")
        self.kernel, self.packer = kernel, packer
        self._dims: dict = {}
        self._cfgs: dict = {}
        drv = _driver()
        fn = _launch_ex_ctypes() if backend != "bindings" else None
        if backend == "ctypes" and fn is None:
            raise LaunchError("backend", "libcuda.so.1 could not be opened with ctypes; use backend='bindings'")
        self.backend = "ctypes" if fn is not None else "bindings"
        self._fn = fn
        self._fh = int(kernel.handle) if fn is not None else None
        self._launch_plain = drv.cuLaunchKernel
        self._success = drv.CUresult.CUDA_SUCCESS
        self._streams: dict = {}

    def _hashable(self, grid, block, cluster, smem_bytes, stream) -> tuple:
        """``(grid, block, cluster, smem_bytes, stream)`` with the dims as checked tuples (a list is no
        dictionary key)."""
        g, b, c = _dim3(grid, "grid"), _dim3(block, "block"), None if cluster is None else _dim3(cluster, "cluster")
        return g, b, c, smem_bytes, stream

    def _checked_dims(self, grid, block, cluster):
        key = (grid, block, cluster)
        try:
            d = self._dims.get(key)
        except TypeError:       # lists: checked as tuples (not cached under an unhashable key)
            grid, block = _dim3(grid, "grid"), _dim3(block, "block")
            cluster = None if cluster is None else _dim3(cluster, "cluster")
            key = (grid, block, cluster)
            d = self._dims.get(key)
        if d is None:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
            for what, dims, his in (("grid", g, _GRID_MAX), ("block", b, _BLOCK_MAX)):
                for d, (n, hi) in enumerate(zip(dims, his)):
                    if n > hi:
                        raise LaunchError(what, f"{dims} has {n} in dimension {'xyz'[d]}; at most {hi}")
            if b[0] * b[1] * b[2] > 1024:
                raise LaunchError("block", f"{b} has {b[0] * b[1] * b[2]} threads; a CTA has at most 1024")
            c = None
            if cluster is not None:
                c = _dim3(cluster, "cluster")
                if any(gi % ci for gi, ci in zip(g, c)):
                    raise LaunchError("cluster", f"cluster dims {c} must divide the grid {g} in every dimension")
                if c[0] * c[1] * c[2] > 16:
                    raise LaunchError("cluster", f"{c} has {c[0] * c[1] * c[2]} CTAs; a cluster has at most 16")
            d = self._dims[key] = (g, b, c)
        return d

    def _prepare(self, key, grid, block, cluster, smem_bytes, stream, pdl=False):
        """Checked dims, the dynamic shared-memory limit raised, a CUlaunchConfig for the key."""
        g, b, c = self._checked_dims(grid, block, cluster)
        smem_bytes = _smem(smem_bytes)
        k = self.kernel
        if smem_bytes > k._max_dyn_smem:
            k.set_max_dynamic_smem(smem_bytes)
        if c is not None:
            k._config(g, b, smem_bytes, c)   # sets the non-portable cluster function attribute when needed
        if len(self._cfgs) > 64:
            self._cfgs.clear()
        entry = self._cfgs[key] = _make_config(g, b, smem_bytes, stream, c, pdl)
        return entry

    def __call__(self, grid, block, args, *, smem_bytes: int = 0, cluster=None, stream=None, pdl=False) -> None:
        self._launch(self.packer.pack(args), grid, block, smem_bytes, cluster, stream, pdl)

    def bind(self, grid, block, args, *, smem_bytes: int = 0, cluster=None, pdl=False):
        """Check and pack ``args`` now; the returned :class:`~tirxpy.lower.bound_launch.BoundLaunch` launches
        with them later, without checks (it keeps their addresses, not the tensors)."""
        from .bound_launch import BoundLaunch, PackedArgs  # noqa: PLC0415

        self.packer.pack(args)
        g, b, c = self._checked_dims(grid, block, cluster)
        return BoundLaunch(self, PackedArgs(self.packer), g, b, _smem(smem_bytes), c, pdl)

    def _launch(self, params, grid, block, smem_bytes, cluster, stream, pdl) -> None:
        """One launch with packed ``params`` (a ``void**`` address) on ``stream`` (None: torch's current one)."""
        k = self.kernel
        if stream is None:
            stream = k._stream(k.device_index)
        elif not isinstance(stream, int):
            stream = getattr(stream, "cuda_stream", stream)
            if not is_int(stream):
                raise LaunchError("stream", f"must be a torch.cuda.Stream or a CUstream handle (int), got "
                                            f"{type(stream).__name__} {shown(stream, 60)}")
            stream = operator.index(stream)
        fn = self._fn
        if fn is not None:
            key = (grid, block, cluster, smem_bytes, stream, pdl)
            try:
                entry = self._cfgs.get(key)
            except TypeError:       # a list for grid / block / cluster: launch with the checked tuples
                return self._launch(params, *self._hashable(grid, block, cluster, smem_bytes, stream), pdl)
            if entry is None:
                entry = self._prepare(key, grid, block, cluster, smem_bytes, stream, pdl)
            err = fn(entry[2], self._fh, params, None)
            if err == 0:
                return
            self._error(err, params, grid, block, smem_bytes, cluster, stream, pdl)
            return
        try:
            d = self._dims.get((grid, block, cluster))
        except TypeError:
            return self._launch(params, *self._hashable(grid, block, cluster, smem_bytes, stream), pdl)
        g, b, c = d if d is not None else self._checked_dims(grid, block, cluster)
        smem_bytes = _smem(smem_bytes)
        if smem_bytes > k._max_dyn_smem:
            k.set_max_dynamic_smem(smem_bytes)
        drv = _driver()
        if c is None and not pdl:
            st = self._streams.get(stream)  # a CUstream object per handle: the binding converts ints each call
            if st is None:
                st = self._streams[stream] = drv.CUstream(stream)
            (err,) = self._launch_plain(k.handle, g[0], g[1], g[2], b[0], b[1], b[2], smem_bytes, st, params, 0)
        else:
            cfg = k._config(g, b, smem_bytes, c, pdl)
            cfg.hStream = drv.CUstream(stream)
            (err,) = drv.cuLaunchKernelEx(cfg, k.handle, params, 0)
        if err != self._success:
            self._error(int(err), params, grid, block, smem_bytes, cluster, stream, pdl)

    def _error(self, err, params, grid, block, smem_bytes, cluster, stream, pdl=False):
        drv = _driver()
        k = self.kernel
        code = drv.CUresult(err)
        if code == drv.CUresult.CUDA_ERROR_INVALID_CONTEXT and not getattr(self, "_retrying", False):
            ensure_context(k.device_index)     # e.g. a new thread: make torch's context current, retry once
            self._retrying = True
            try:
                return self._launch(params, grid, block, smem_bytes, cluster, stream, pdl)
            finally:
                self._retrying = False
        g, b, _ = self._checked_dims(grid, block, cluster)
        _check(code, "cuLaunchKernelEx" if (cluster is not None or pdl or self._fn is not None) else "cuLaunchKernel",
               f"kernel {k.name} grid {g} block {b}")


def launch(kernel: Kernel, grid, block, args=(), *, specs: Sequence[ParamSpec] | None = None, cluster=None,
           smem_bytes: int = 0, stream=None, pdl: bool = False) -> None:
    """Check ``args`` against ``specs`` and launch ``kernel`` on torch's current stream (``pdl``: with
    programmatic stream serialization; the kernel must then execute ``griddepcontrol.wait`` before it
    touches global memory, see :func:`tirxpy.T.launch`)."""
    args = list(args)
    if specs is None:
        specs = _infer_specs(args)
        args = [a.value if isinstance(a, ctypes._SimpleCData) else a for a in args]
    kernel.launcher(specs)(grid, block, args, smem_bytes=smem_bytes, cluster=cluster, stream=stream, pdl=pdl)
