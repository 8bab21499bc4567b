"""Host-side costs of tirxpy: launch overhead on a GPU, compile and build time on any machine.

    python benchmarks/host.py launch  [--launches 2000] [--reps 21]   # GPU: host us per launch
    python benchmarks/host.py compile [--arch sm_90a] [--reps 5]      # NVRTC: cold compile, cache hits
    python benchmarks/host.py build   [--arch sm_90a] [--reps 5]      # tirxpy.compile: cold build, rebuilds

``launch``: the median host microseconds per launch over ``--reps`` batches of ``--launches`` launches (host
time to enqueue, synchronized once per batch), every path measured in interleaved rounds after a one-second
warm-up: an empty kernel through the bound launcher and through ``launch()``, a three-argument kernel with
its arguments checked, a ``tirxpy.compile``-d kernel's call, a cluster launch, Triton's empty kernel (when
installed) and a one-element torch op. Target: tirxpy <= 5 us.

``compile``: NVRTC compile of a typical warp-specialized pipeline's intrinsics (the first NVRTC load
excluded), then cache hits from memory and from disk. ``build``: ``tirxpy.compile`` of a small IR kernel
(verify + codegen + NVRTC) with an empty disk cache, the same kernel object again (memoized), and a new but
identical kernel object (codegen + a disk-cache hit). Targets: cold < 1.5 s, cache hit < 2 ms.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def per_launch_us(fn, launches, reps):
    """Median host microseconds per launch over ``reps`` batches of ``launches`` launches."""
    import torch

    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(launches):
            fn()
        out.append((time.perf_counter() - t) / launches * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def interleaved_us(fns, launches, reps, warmup_s=1.0):
    """Per-launch medians of several launch paths, measured in interleaved rounds after a warm-up of about
    ``warmup_s`` seconds, so that no path is measured cold (clocks ramping up) or alone."""
    import torch

    t_end = time.perf_counter() + warmup_s
    while time.perf_counter() < t_end:
        for fn in fns:
            for _ in range(100):
                fn()
        torch.cuda.synchronize()
    samples = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            samples[i].append(per_launch_us(fn, launches, 1))
    return [statistics.median(s) for s in samples]


def launch_paths(arch):
    """``[(name, fn or None)]``: the launch paths ``launch`` times (None: not installed)."""
    import torch

    import tirxpy
    from tirxpy import T
    from tirxpy.lower.nvrtc import compile_cuda
    from tirxpy.lower.runtime import ParamSpec, launch, load_module

    src = 'extern "C" __global__ void empty() {}\nextern "C" __global__ void args3(float* x, float* y, int n) {}'
    mod = load_module(compile_cuda(src, arch))
    empty, args3 = mod.function("empty"), mod.function("args3")
    ln0 = empty.launcher([])
    x, y = torch.zeros(1024, device="cuda"), torch.zeros(1024, device="cuda")
    ln3 = args3.launcher([ParamSpec("x", dtype="float32"), ParamSpec("y", dtype="float32"),
                          ParamSpec("n", "scalar", "int32")])

    @T.prim_func
    def touch(X: T.Tensor((1024,), "float32")):
        T.launch(grid=(1,), threads=32)
        if T.thread_id() == 1024:
            X[0] = T.float32(1)

    ck = tirxpy.compile(touch, arch=arch)
    rows = [("tirxpy empty (Launcher)", lambda: ln0(1, 32, ())),
            ("tirxpy empty (launch())", lambda: launch(empty, 1, 32, (), specs=())),
            ("tirxpy 3 args, checked", lambda: ln3(1, 32, (x, y, 1024))),
            ("tirxpy.compile(prim_func)(x)", lambda: ck(x)),
            ("tirxpy empty, cluster (2,1,1)", lambda: ln0(2, 32, (), cluster=(2, 1, 1)))]
    try:
        import triton

        @triton.jit
        def _empty():
            pass

        rows.append(("triton empty", lambda: _empty[(1,)]()))
    except ImportError:
        rows.append(("triton empty", None))
    t = torch.zeros(1, device="cuda")
    rows.append(("torch t.add_(1) (1 element)", lambda: t.add_(1)))
    return rows


def bench_launch(a):
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("host.py launch: times launches on a CUDA GPU and this machine has none")
    major, minor = torch.cuda.get_device_capability()
    rows = launch_paths({9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}"))
    live = [(name, fn) for name, fn in rows if fn is not None]
    values = dict(zip((n for n, _ in live), interleaved_us([fn for _, fn in live], a.launches, a.reps)))
    print(f"{'launch path':34s} {'us/launch (median)':>20s}")
    for name, fn in rows:
        print(f"{name:34s} {'n/a (not installed)' if fn is None else f'{values[name]:.2f}':>20s}")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")


def bench_compile(a):
    import tirxpy.intrinsics as intrinsics
    from tirxpy.intrinsics.exercise import exercise_source
    from tirxpy.lower import cache
    from tirxpy.lower.nvrtc import compile_cuda

    names = ["mbarrier_init", "mbarrier_arrive_expect_tx", "mbarrier_wait_parity", "mbarrier_arrive", "tma_load_2d",
             "fence_proxy_async", "elect_sync", "tma_store_2d", "bulk_commit_group", "bulk_wait_group"]
    if a.arch == "sm_90a":
        names += ["wgmma_fence", "wgmma_commit_group", "wgmma_wait_group", "wgmma_m64n128k16_f32_bf16_bf16_ss",
                  "setmaxnreg_inc", "setmaxnreg_dec"]
    elif a.arch.startswith("sm_10"):
        names += ["tcgen05_alloc_cg1", "tcgen05_mma_cg1_f16_ss", "tcgen05_commit_cg1", "tcgen05_ld_32x32b_x32",
                  "tcgen05_wait_ld", "tcgen05_dealloc_cg1"]

    def src(i):
        return f"#include <cuda_bf16.h>\n// variant {i}\n" + exercise_source([intrinsics.get(n) for n in names])

    compile_cuda(src(-1), a.arch, cache=False)  # load NVRTC once (not part of a compile)
    cold = []
    for i in range(a.reps):
        t = time.perf_counter()
        compile_cuda(src(i), a.arch)
        cold.append(time.perf_counter() - t)
    mem, disk = [], []
    for _ in range(200):
        t = time.perf_counter()
        compile_cuda(src(0), a.arch)
        mem.append(time.perf_counter() - t)
    for _ in range(50):
        cache.clear_memory()
        t = time.perf_counter()
        compile_cuda(src(0), a.arch)
        disk.append(time.perf_counter() - t)
    print(f"arch {a.arch}: cold compile median {statistics.median(cold) * 1e3:.1f} ms (target < 1500 ms); cache hit "
          f"(memory) {statistics.median(mem) * 1e3:.3f} ms, (disk) {statistics.median(disk) * 1e3:.3f} ms "
          "(target < 2 ms)")


def bench_build(a):
    import tirxpy
    from tirxpy_kernels.rmsnorm_silu import rmsnorm_silu
    from tirxpy.lower import cache
    from tirxpy.lower.nvrtc import compile_cuda

    compile_cuda('extern "C" __global__ void warm() {}', a.arch, cache=False)  # load NVRTC once
    cold = []
    for r in range(a.reps):     # a new row count each time: a new source, nothing cached
        k = rmsnorm_silu(64 * (r + 2), 4096)
        t = time.perf_counter()
        tirxpy.compile(k, arch=a.arch)
        cold.append(time.perf_counter() - t)
    k = rmsnorm_silu(64, 4096)
    tirxpy.compile(k, arch=a.arch)
    memo = []
    for _ in range(1000):
        t = time.perf_counter()
        tirxpy.compile(k, arch=a.arch)
        memo.append(time.perf_counter() - t)
    fresh = []
    for _ in range(a.reps):
        rmsnorm_silu.cache_clear()       # the @tirxpy.jit factory memoizes its kernels
        k2 = rmsnorm_silu(64, 4096)      # a new, identical kernel object
        cache.clear_memory()
        t = time.perf_counter()
        tirxpy.compile(k2, arch=a.arch)
        fresh.append(time.perf_counter() - t)
    print(f"arch {a.arch}")
    print(f"cold build (verify + codegen + NVRTC, empty cache): median {statistics.median(cold) * 1e3:.1f} ms "
          "(target < 1500 ms)")
    print(f"same kernel object again (memoized):               median {statistics.median(memo) * 1e6:.1f} us "
          "(target < 2 ms)")
    print(f"new identical kernel object (codegen + disk hit):   median {statistics.median(fresh) * 1e3:.1f} ms")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python benchmarks/host.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("launch", help="GPU: host microseconds per launch, tirxpy paths vs Triton and torch")
    p.add_argument("--launches", type=int, default=2000, help="launches per batch (default 2000)")
    p.add_argument("--reps", type=int, default=21, help="batches per path; the median is printed (default 21)")
    for name, text in (("compile", "NVRTC cold compile and cache hits"), ("build", "tirxpy.compile cold and again")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--arch", default="sm_90a", help="target (default sm_90a)")
        p.add_argument("--reps", type=int, default=5, help="cold compiles timed; the median is printed (default 5)")
    a = ap.parse_args(argv)
    if a.what != "launch":
        os.environ["TIRXPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tirxpy-host-bench-")   # an empty disk cache
    {"launch": bench_launch, "compile": bench_compile, "build": bench_build}[a.what](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
