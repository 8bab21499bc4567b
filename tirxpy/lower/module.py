"""Loaded cubins: :func:`load_module` loads one into torch's context (refusing a cubin built for
another arch), :class:`Module` finds its kernels, :class:`Kernel` holds a function handle, its
shared-memory limit and its launchers (one per parameter-spec tuple).

    >>> from tirxpy.lower.module import Kernel, Module, load_module
"""
from __future__ import annotations

import ctypes
from typing import Sequence

from tirxpy.errors import shown

from .device import _check, _driver, stream_getter, arch_for, cubin_runs_on, ensure_context
from .errors import DriverError, LaunchError
from .launcher import Launcher
from .packer import ArgPacker
from .params import ParamSpec


class Module:
    """A cubin loaded on one device."""

    def __init__(self, cubin: bytes, device_index: int, compiled=None):
        drv = _driver()
        self.device_index = device_index
        self.compiled = compiled
        self._image = ctypes.create_string_buffer(cubin, len(cubin))  # keep the image alive
        err, self.handle = drv.cuModuleLoadData(ctypes.addressof(self._image))
        _check(err, "cuModuleLoadData", "the cubin (was it compiled for this GPU's arch?)")
        self._functions: dict = {}

    def function(self, name: str) -> "Kernel":
        k = self._functions.get(name)
        if k is None:
            sym = self.compiled.kernel_name(name) if self.compiled is not None else name
            err, h = _driver().cuModuleGetFunction(self.handle, sym.encode())
            if err != _driver().CUresult.CUDA_SUCCESS:
                known = sorted(self.compiled.resources) if self.compiled is not None else []
                raise DriverError(f"no kernel {shown(name)} in the module (cuModuleGetFunction: {err.name}); "
                                  f"kernels: {known} — declare it extern \"C\" or pass name_expressions")
            k = self._functions[name] = Kernel(self, name, h)
        return k


def load_module(cubin, device=None) -> Module:
    """Load a cubin (bytes or CompiledModule) into torch's context on ``device`` (default: current)."""
    compiled = None
    if hasattr(cubin, "cubin"):
        compiled, cubin = cubin, cubin.cubin
    if isinstance(device, str) or device is not None and not isinstance(device, int):
        import torch  # noqa: PLC0415

        device = torch.device(device).index
    idx = ensure_context(device)
    arch = getattr(compiled, "arch", None)
    if arch:
        import torch  # noqa: PLC0415

        cap = torch.cuda.get_device_capability(idx)
        if not cubin_runs_on(arch, cap):
            raise LaunchError("arch", f"the kernel was compiled for {arch}, but GPU {idx} "
                                      f"({torch.cuda.get_device_name(idx)}) is sm_{cap[0]}{cap[1]}; a cubin runs only "
                                      f"on its own architecture. Build with arch='{arch_for(cap)}' (instructions "
                                      f"whose lowest target is older run there too)")
    return Module(bytes(cubin), idx, compiled)


class Kernel:
    """A kernel function handle plus its launch machinery."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self.handle = module, name, handle
        self.device_index = module.device_index
        self._max_dyn_smem = 48 * 1024
        self._launchers: dict = {}
        self._configs: dict = {}
        self._stream = stream_getter()
        self._optin = None

    def attribute(self, attr: str) -> int:
        drv = _driver()
        err, v = drv.cuFuncGetAttribute(getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{attr.upper()}"),
                                        self.handle)
        _check(err, "cuFuncGetAttribute", attr)
        return v

    def _smem_optin(self) -> int:
        if self._optin is None:
            drv = _driver()
            err, dev = drv.cuDeviceGet(self.device_index)
            _check(err, "cuDeviceGet")
            err, v = drv.cuDeviceGetAttribute(
                drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)
            _check(err, "cuDeviceGetAttribute")
            self._optin = v
        return self._optin

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        """Raise the kernel's dynamic shared-memory limit (needed above 48 KiB)."""
        limit = self._smem_optin() - self.attribute("shared_size_bytes")
        if nbytes > limit:
            raise LaunchError("smem_bytes", f"{nbytes} bytes of dynamic shared memory exceed this GPU's limit of "
                                            f"{limit} (opt-in maximum minus the kernel's static shared memory)")
        drv = _driver()
        _check(drv.cuFuncSetAttribute(self.handle,
                                      drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      int(nbytes))[0], "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        self._max_dyn_smem = nbytes

    def launcher(self, specs: Sequence[ParamSpec], backend: str | None = None) -> "Launcher":
        """The Launcher for these parameter specs (made once; ``backend``: see Launcher)."""
        key = (tuple(specs), backend)
        ln = self._launchers.get(key)
        if ln is None:
            import torch  # noqa: PLC0415

            ln = self._launchers[key] = Launcher(self, ArgPacker(key[0], torch.device("cuda", self.device_index)),
                                                 backend)
        return ln

    def _config(self, grid, block, smem, cluster, pdl=False):
        """A cuda-bindings ``CUlaunchConfig`` with a cluster-dimension attribute (``cluster`` not None) and the
        programmatic-stream-serialization one (``pdl``)."""
        key = (grid, block, smem, cluster, pdl)
        cfg = self._configs.get(key)
        if cfg is None:
            drv = _driver()
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
            cfg.sharedMemBytes = smem
            attrs = []
            if cluster is not None:
                attr = drv.CUlaunchAttribute()
                attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
                attrs.append(attr)
            if pdl:
                attr = drv.CUlaunchAttribute()
                attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                attr.value.programmaticStreamSerializationAllowed = 1
                attrs.append(attr)
            cfg.attrs = attrs
            cfg.numAttrs = len(attrs)
            if cluster is not None and cluster[0] * cluster[1] * cluster[2] > 8:
                _check(drv.cuFuncSetAttribute(
                    self.handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)[0],
                    "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")
            self._configs[key] = cfg
        return cfg
