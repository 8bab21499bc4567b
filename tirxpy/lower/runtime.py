"""Load cubins with the CUDA driver and launch kernels on torch's current stream.

    mod = load_module(compile_cuda(src, "sm_90a"))
    k = mod.function("my_kernel")
    launch(k, grid=(132,), block=(128,), args=[x, y, 1.5],
           specs=[ParamSpec("x", dtype="bfloat16"), ParamSpec("y", dtype="float32"), ParamSpec("alpha", "scalar", "float32")],
           cluster=(2, 1, 1), smem_bytes=200_000)

Every argument is checked against its ParamSpec before launch (device, dtype, shape, strides,
alignment; a tensor the kernel writes shares no memory with another argument) and a LaunchError
names the parameter. The launch path is lean: each Launcher
owns one argument buffer and a fixed ``void*`` array; a launch packs values with one
``struct.pack_into`` and passes the array's address to the driver. ``Launcher.bind`` (and
``CompiledKernel.bind``) checks and packs once into a private copy (tirxpy/lower/bound_launch.py):
launching that is the driver call alone.

This module gathers the runtime's public names; each concern lives in its own file:

- ``device.py``: the CUDA driver, the device's context and stream, the arch a device runs;
- ``params.py``: :class:`ParamSpec` and the dtype tables of the launch path;
- ``packer.py``: :class:`ArgPacker`, the argument checks and packing;
- ``module.py``: :func:`load_module`, :class:`Module`, :class:`Kernel`;
- ``launcher.py``: :class:`Launcher` and :func:`launch`.

    >>> from tirxpy.lower import launcher, runtime
    >>> runtime.launch is launcher.launch
    True
"""
from .device import _check, _driver, arch_for, cubin_runs_on, device_arch, ensure_context
from .launcher import Launcher, _launch_ex_ctypes, _make_config, launch
from .module import Kernel, Module, load_module
from .packer import ArgPacker
from .params import KINDS, ParamSpec, torch_dtype_name

__all__ = ["ArgPacker", "KINDS", "Kernel", "Launcher", "Module", "ParamSpec", "arch_for", "cubin_runs_on",
           "device_arch", "ensure_context", "launch", "load_module", "torch_dtype_name",
           # private helpers other modules of tirxpy.lower and the benchmarks use
           "_check", "_driver", "_launch_ex_ctypes", "_make_config"]
