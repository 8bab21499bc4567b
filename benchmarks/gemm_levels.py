"""TFLOPS of each level of the Hopper GEMM tutorial (docs/tutorial/07-gemm.md) next to cuBLAS in
the same process (GPU machine).

    python benchmarks/gemm_levels.py

Level 1 (tests/primitives/gemm/gemm_kernels.py::wgmma_gemm) stages the whole K extent of its
(64, BN) tile in shared memory, so it runs at K = 512; level 2
(tests/sim/pipeline_kernels.py::pipeline_gemm) and levels 3-4 (kernels.gemm, CM=1 / CM=2) run
at 4096^3. Each level is compared with torch.matmul at its own shape (float32 output for levels
1-2 as those kernels write, bf16 for 3-4), median of CUDA-event timings.
"""
import importlib.util
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load(rel, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median_ms(fn, reps=30, inner=10):
    from kernels.bench import median_ms as _median_ms

    return _median_ms({"fn": lambda: fn()}, [()], reps, inner=inner)["fn"]


def main():
    import tirxpy
    import kernels
    from tirxpy.lower.runtime import device_arch

    arch = device_arch()
    gk = _load("tests/primitives/gemm/gemm_kernels.py", "gemm_kernels")
    pk = _load("tests/sim/pipeline_kernels.py", "pipeline_kernels")
    rows = []
    for level, (M, N, K), build in (
            (1, (4096, 4096, 512), lambda M, N, K: gk.wgmma_gemm(M, N, K, BN=128)),
            (2, (4096, 4096, 4096), lambda M, N, K: pk.pipeline_gemm(M, N, K, BN=128))):
        a = torch.randn(M, K, device="cuda").bfloat16()
        b = torch.randn(N, K, device="cuda").bfloat16()
        c = torch.full((M, N), float("nan"), device="cuda")
        ck = tirxpy.compile(build(M, N, K), arch=arch)
        ck(a, b, c)
        ref = a.double() @ b.double().t()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        t = median_ms(lambda: ck(a, b, c))
        tc = median_ms(lambda: torch.mm(a, b.t()))
        rows.append((level, (M, N, K), 2 * M * N * K / t / 1e9, 2 * M * N * K / tc / 1e9, err))
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda").bfloat16()
    w = torch.randn(N, K, device="cuda").bfloat16()
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for level, cm in ((3, 1), (4, 2)):
        kernels.gemm(a, w.t(), out, CM=cm)
        ref = a.double() @ w.double().t()
        err = ((out.double() - ref).norm() / ref.norm()).item()
        t = median_ms(lambda: kernels.gemm(a, w.t(), out, CM=cm))
        tc = median_ms(lambda: torch.matmul(a, w.t(), out=out))
        rows.append((level, (M, N, K), 2 * M * N * K / t / 1e9, 2 * M * N * K / tc / 1e9, err))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| level | shape | tirxpy TFLOPS | cuBLAS TFLOPS | ratio | relerr |")
    print("| --- | --- | --- | --- | --- | --- |")
    for level, shp, tt, tc, err in rows:
        print(f"| {level} | {'x'.join(map(str, shp))} | {tt:.0f} | {tc:.0f} | {tt / tc:.3f} | {err:.1e} |")


if __name__ == "__main__":
    main()
