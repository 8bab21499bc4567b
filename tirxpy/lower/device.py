"""The CUDA driver, the device's context and stream, and the arch a device runs.

``ensure_context`` makes torch's CUDA context (the device's primary context) current on this
thread; ``device_arch`` names the target to build for a device; ``cubin_runs_on`` says whether
a cubin built for one arch loads on a GPU of a given compute capability:

    >>> arch_for((9, 0)), cubin_runs_on("sm_90a", (9, 0)), cubin_runs_on("sm_90a", (10, 0))
    ('sm_90a', True, False)
"""
from __future__ import annotations

from tirxpy.target import as_target, for_capability

from .errors import DriverError

_DRV = None


def _driver():
    global _DRV
    if _DRV is None:
        try:
            from cuda.bindings import driver  # noqa: PLC0415
        except ImportError as e:  # pragma: no cover
            raise DriverError("cuda-bindings is not installed: pip install 'cuda-bindings>=13.0,<14'") from e
        _DRV = driver
    return _DRV


def _check(err, call: str, what: str = ""):
    drv = _driver()
    if err != drv.CUresult.CUDA_SUCCESS:
        try:
            _, name = drv.cuGetErrorName(err)
            _, text = drv.cuGetErrorString(err)
            desc = f"{name.decode()}: {text.decode()}"
        except Exception:  # noqa: BLE001 - the error name is best effort
            desc = str(err)
        raise DriverError(f"{call} failed ({desc})" + (f" for {what}" if what else ""))


_CTX: dict = {}


def ensure_context(device_index: int | None = None) -> int:
    """Make torch's CUDA context (the device's primary context) current on this thread."""
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise DriverError("no CUDA GPU is available (torch.cuda.is_available() is False); "
                          "tirxpy kernels need an NVIDIA GPU to run")
    torch.cuda.init()
    idx = torch.cuda.current_device() if device_index is None else int(device_index)
    drv = _driver()
    ctx = _CTX.get(idx)
    if ctx is None:
        _check(drv.cuInit(0)[0], "cuInit")
        err, dev = drv.cuDeviceGet(idx)
        _check(err, "cuDeviceGet")
        err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
        _check(err, "cuDevicePrimaryCtxRetain")
        _CTX[idx] = ctx
    _check(drv.cuCtxSetCurrent(ctx)[0], "cuCtxSetCurrent")
    return idx


_LIBCUDA: list = []


def libcuda():
    """libcuda opened once with ctypes as a ``PyDLL`` (a call of a few microseconds keeps the GIL: no release /
    re-acquire around it), or None where it cannot be opened this way; every ctypes call of the driver (the
    launcher's ``cuLaunchKernelEx`` among them) goes through this one handle."""
    if not _LIBCUDA:
        import ctypes  # noqa: PLC0415

        try:
            _LIBCUDA.append(ctypes.PyDLL("libcuda.so.1"))
        except OSError:
            _LIBCUDA.append(None)
    return _LIBCUDA[0]


def stream_getter():
    """``f(device_index) -> int``: the raw handle of torch's current stream on that device (torch's own
    accessor where it has one: a call of well under a microsecond)."""
    import torch  # noqa: PLC0415

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda idx: torch.cuda.current_stream(idx).cuda_stream


# ---------------------------------------------------------------- arch
def cubin_runs_on(arch, capability: tuple) -> bool:
    """Whether a cubin compiled for ``arch`` ("sm_80", "sm_90a" or a :class:`tirxpy.target.Target`) runs
    on a GPU of compute ``capability`` ((9, 0) for an H100): :meth:`tirxpy.target.Target.runs_on`.

        >>> cubin_runs_on("sm_80", (8, 6)), cubin_runs_on("sm_80", (9, 0)), cubin_runs_on("sm_90a", (9, 0))
        (True, False, True)
    """
    return as_target(arch).runs_on(capability)


def arch_for(capability: tuple) -> str:
    """The target name to build for a GPU of this compute capability: (9, 0) -> "sm_90a",
    (10, 0) -> "sm_100a" (:func:`tirxpy.target.for_capability`)."""
    return str(for_capability(capability))


def device_arch(device=None) -> str:
    """The arch to build for torch's current (or the given) CUDA device."""
    import torch  # noqa: PLC0415

    return arch_for(torch.cuda.get_device_capability(device))
