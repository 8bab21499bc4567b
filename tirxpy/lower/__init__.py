"""tirxpy.lower: codegen (lowered IR -> CUDA C++), NVRTC compile + cache, runtime launch, TMA
maps (DESIGN.md section 6). ``build(kernel, arch)`` ties them together.

    >>> from tirxpy.lower import build, CompiledKernel, CodegenError
"""
from .build import CompiledKernel, build
from .codegen import CodegenError, CudaUnit, generate

__all__ = ["build", "CompiledKernel", "CodegenError", "CudaUnit", "generate"]
