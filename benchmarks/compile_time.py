"""Cold compile time of a typical kernel (disk cache empty) and cache-hit time (memory and disk).

    python benchmarks/compile_time.py [--arch sm_90a]

Runs on CPU or GPU (NVRTC only). Targets: cold < 1.5 s, cache hit < 2 ms.
"""
import argparse
import os
import statistics
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    os.environ["TIRXPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tirxpy-bench-")
    import tirxpy.intrinsics as I
    from tirxpy.lower import cache
    from tirxpy.lower.nvrtc import compile_cuda

    arch = a.arch
    # a typical warp-specialized TMA + mbarrier pipeline skeleton with the arch's MMA helpers
    names = ["mbarrier_init", "mbarrier_arrive_expect_tx", "mbarrier_wait_parity", "mbarrier_arrive", "tma_load_2d",
             "fence_proxy_async", "elect_sync", "tma_store_2d", "bulk_commit_group", "bulk_wait_group"]
    if arch == "sm_90a":
        names += ["wgmma_fence", "wgmma_commit_group", "wgmma_wait_group", "wgmma_m64n128k16_f32_bf16_bf16_ss",
                  "setmaxnreg_inc", "setmaxnreg_dec"]
    elif arch.startswith("sm_10"):
        names += ["tcgen05_alloc_cg1", "tcgen05_mma_cg1_f16_ss", "tcgen05_commit_cg1", "tcgen05_ld_32x32b_x32",
                  "tcgen05_wait_ld", "tcgen05_dealloc_cg1"]
    from tirxpy.intrinsics.exercise import exercise_source

    def src(i):
        return f"#include <cuda_bf16.h>\n// variant {i}\n" + exercise_source([I.get(n) for n in names])

    compile_cuda(src(-1), arch, cache=False)  # load NVRTC once (not part of a compile)
    cold = []
    for i in range(a.reps):
        t = time.perf_counter()
        compile_cuda(src(i), arch)
        cold.append(time.perf_counter() - t)
    mem = []
    for _ in range(200):
        t = time.perf_counter()
        compile_cuda(src(0), arch)
        mem.append(time.perf_counter() - t)
    disk = []
    for _ in range(50):
        cache.clear_memory()
        t = time.perf_counter()
        m = compile_cuda(src(0), arch)
        disk.append(time.perf_counter() - t)
        assert m.cached == "disk"
    print(f"arch {arch}: cold compile median {statistics.median(cold) * 1e3:.1f} ms; "
          f"cache hit (memory) {statistics.median(mem) * 1e3:.3f} ms; cache hit (disk) {statistics.median(disk) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
