"""Kernel time and the idle gap between back-to-back launches, tirxpy GEMM vs cuBLAS (GPU machine).

    python benchmarks/launch_gaps.py [--shapes 4096x2112x7168,4096x4096x4096] [--launches 30] [--tuning "PDL=0"]

For each shape, ``torch.matmul`` (cuBLAS) and ``kernels.gemm`` (defaults, then each ``--tuning``) run
``--launches`` times back to back on cycling input sets under ``torch.profiler`` (CUPTI); printed: the median
duration of the large kernels, the median and smallest gap from one's end to the next one's start (negative:
they overlap, as a PDL launch's CTAs wait for the previous kernel), their sum per launch, the kernel names,
and how many small kernels (under 20 us) ran besides. Host-bound runs (gaps of tens of microseconds at small
shapes) measure the host, which the profiler slows too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def profile_launches(fn, sets, n):
    """``(median kernel us, median gap us, min gap us, kernel names, small kernels)`` of ``n`` launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for i in range(10):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(n):
            fn(*sets[i % len(sets)])
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                key=lambda e: e.time_range.start)
    big = [e for e in ev if e.time_range.elapsed_us() > 20]
    gaps = [b.time_range.start - a.time_range.end for a, b in zip(big, big[1:])]
    return (statistics.median(e.time_range.elapsed_us() for e in big), statistics.median(gaps), min(gaps),
            sorted({e.name[:60] for e in big}), len(ev) - len(big))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x2112x7168,4096x4096x4096,2048x2048x2048")
    ap.add_argument("--launches", type=int, default=30)
    ap.add_argument("--tuning", action="append", default=[], help="KEY=VALUE,... for kernels.gemm (repeatable)")
    a = ap.parse_args(argv)
    import torch

    import kernels
    from kernels.bench import gemm_inputs, parse_tunings, warm_gpu

    warm_gpu()
    for shape in a.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        runs = [("cuBLAS", lambda x, w: torch.matmul(x, w, out=out)),
                ("tirxpy defaults", lambda x, w: kernels.gemm(x, w, out))]
        for t in parse_tunings(";".join(a.tuning)) if a.tuning else []:
            runs.append((f"tirxpy {t}", (lambda tt: lambda x, w: kernels.gemm(x, w, out, **tt))(t)))
        for name, fn in runs:
            d, g, gmin, names, small = profile_launches(fn, sets, a.launches)
            print(f"{shape} {name}: kernel {d:.1f} us, gap {g:.2f} us (min {gmin:.2f}), per launch {d + g:.1f} us; "
                  f"{', '.join(names)}; {small} small kernels besides")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
