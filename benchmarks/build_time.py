"""Build time of a typical IR kernel: cold (empty disk cache, fresh kernel object: verify +
codegen + NVRTC) and cache hits (same kernel object: memoized; new but identical kernel object:
codegen + NVRTC cache hit), plus the host wrapper's own per-call cost with the launch stubbed.

    python benchmarks/build_time.py [--arch sm_90a] [--reps 5]

CPU only. Targets: cold build < 1.5 s, cache hit < 2 ms.
"""
import argparse
import importlib.util
import os
import pathlib
import statistics
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    os.environ["TIRXPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tirxpy-build-bench-")
    path = pathlib.Path(__file__).resolve().parents[1] / "tests" / "lower" / "test_kernels_gpu.py"
    spec = importlib.util.spec_from_file_location("gpu_kernels", path)
    G = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(G)
    import tirxpy
    from tirxpy.lower import cache
    from tirxpy.lower.nvrtc import compile_cuda

    compile_cuda('extern "C" __global__ void warm() {}', a.arch, cache=False)  # load NVRTC once
    cold = []
    for r in range(a.reps):  # a new shape each time: new source, empty cache
        k = G.tma_ldmatrix_kernel(128, 64 * (r + 2))  # distinct row strides: distinct sources
        t = time.perf_counter()
        tirxpy.compile(k, arch=a.arch)
        cold.append(time.perf_counter() - t)
    k = G.tma_ldmatrix_kernel(64, 128)
    memo = []
    for _ in range(1000):
        t = time.perf_counter()
        tirxpy.compile(k, arch=a.arch)
        memo.append(time.perf_counter() - t)
    fresh = []
    for _ in range(a.reps):
        G.tma_ldmatrix_kernel.cache_clear()
        k2 = G.tma_ldmatrix_kernel(64, 128)  # a new, identical kernel object
        cache.clear_memory()
        t = time.perf_counter()
        tirxpy.compile(k2, arch=a.arch)
        fresh.append(time.perf_counter() - t)
    ck = tirxpy.compile(k, arch=a.arch)
    ck._launcher = lambda grid, block, args, **kw: None
    x, y = object(), object()
    t = time.perf_counter()
    for _ in range(100_000):
        ck(x, y)
    wrapper = (time.perf_counter() - t) / 100_000
    print(f"arch {a.arch}")
    print(f"cold build (verify + codegen + NVRTC, empty cache): median {statistics.median(cold) * 1e3:.1f} ms "
          f"(target < 1500 ms)")
    print(f"cache hit, same kernel object (memoized):          median {statistics.median(memo) * 1e6:.1f} us "
          f"(target < 2 ms)")
    print(f"new identical kernel object (codegen + disk hit):   median {statistics.median(fresh) * 1e3:.1f} ms")
    print(f"host wrapper per call (launch stubbed, TMA map appended): {wrapper * 1e6:.2f} us")


if __name__ == "__main__":
    main()
