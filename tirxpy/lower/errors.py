"""Errors raised while compiling, caching, loading and launching kernels.

    >>> raise LaunchError("x", "dtype is float32, the kernel expects bfloat16 — convert with x.to(torch.bfloat16)")
    Traceback (most recent call last):
    ...
    tirxpy.lower.errors.LaunchError: parameter 'x': dtype is float32, the kernel expects bfloat16 — convert with x.to(torch.bfloat16)
"""
from tirxpy.errors import TirxError


class LowerError(TirxError, RuntimeError):
    """Base class for compile / load / launch failures."""


class ToolchainError(LowerError):
    """NVRTC or the CUDA header wheels are missing or unusable."""


class CompileError(LowerError):
    """NVRTC rejected the source; the message carries the compiler log."""

    def __init__(self, message: str, log: str = "", source: str = ""):
        super().__init__(message)
        self.log, self.source = log, source


class CacheError(LowerError, ValueError):
    """The compile cache is misconfigured (a blank or unexpandable ``TIRXPY_CACHE_DIR``) or was
    handed a malformed key."""


class CompileOptionError(LowerError, ValueError, TypeError):
    """An argument to a compile call is malformed: an unknown NVRTC option, options that are not a
    list of strings, a source that is not text."""


class DriverError(LowerError):
    """A CUDA driver call failed (no GPU, bad cubin, launch failure, ...)."""


class LaunchError(LowerError, ValueError, TypeError):
    """A kernel argument does not match the kernel's parameter spec (checked before launch)."""

    def __init__(self, param: str, message: str):
        super().__init__(f"parameter {param!r}: {message}")
        self.param = param


class PerformanceWarning(UserWarning):
    """ptxas compiled the kernel but reported a "Potential Performance Loss" (for example C7515:
    every ``wgmma.mma_async`` of the function serialized, several times slower) or a ``warpgroup.wait`` it
    injected (C7517: one read waits for the wgmmas in flight). The message names the kernel and ptxas's
    reason; ``CompiledKernel.resources.perf_warnings`` holds the remarks."""


class TmaError(LowerError, ValueError):
    """A TMA tensor map cannot describe the tensor / tile pair (alignment, box, swizzle, rank)."""
