"""Which kernels cuBLAS runs for the GEMM benchmark's shapes (GPU machine; not a test).

    python benchmarks/cublas_kernels.py

``torch.matmul`` (bf16, ``a`` row-major, ``b = w.t()``) under ``torch.profiler``; the CUDA kernel
names carry cuBLAS's tile shape, cluster shape and scheduler (e.g. stream-K), which tells what the
peer does differently on a shape where tirxpy trails it.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    import torch
    from torch.profiler import ProfilerActivity, profile

    from kernels.bench import GEMM_SHAPES

    for M, N, K in GEMM_SHAPES:
        a = torch.randn(M, K, device="cuda").bfloat16()
        w = torch.randn(N, K, device="cuda").bfloat16()
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(a, w.t(), out=out)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, w.t(), out=out)
            torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        print(f"{M}x{N}x{K}: {'; '.join(names)}", flush=True)


if __name__ == "__main__":
    main()
