"""A producer kernel for programmatic-dependent-launch tests (GPU): it lets dependent launches start at once
(``griddepcontrol.launch_dependents``), spins ~200 us, then copies ``src`` into ``dst``. One CTA, so kernels
that take whole SMs can start beside it; a dependent that reads ``dst`` before its ``griddepcontrol.wait``
sees what ``dst`` held before (poison it)."""
import torch

_SRC = r"""
extern "C" __global__ void late_copy(const unsigned* src, unsigned* dst, int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 200000);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
"""
_LAUNCHER = []


def late_copy(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Queue the copy of ``src`` into ``dst`` (same size, contiguous, a multiple of 4 bytes) on the current stream."""
    if not _LAUNCHER:
        from tirxpy.lower.nvrtc import compile_cuda
        from tirxpy.lower.runtime import ParamSpec, load_module

        major, minor = torch.cuda.get_device_capability()
        fn = load_module(compile_cuda(_SRC, f"sm_{major}{minor}a")).function("late_copy")
        _LAUNCHER.append(fn.launcher([ParamSpec("src", dtype="int32"), ParamSpec("dst", dtype="int32"),
                                      ParamSpec("n", "scalar", "int32")]))
    assert src.is_contiguous() and dst.is_contiguous() and src.nbytes == dst.nbytes and src.nbytes % 4 == 0
    _LAUNCHER[0](1, 256, (src.view(-1).view(torch.int32), dst.view(-1).view(torch.int32), src.nbytes // 4))
