"""Fused RMSNorm + SiLU (kernels/rmsnorm_silu.py) vs a device-to-device copy of the same bytes.

    python benchmarks/rmsnorm_silu.py [--rows 16384] [--d 4096 8192] [--iters 200] [--reps 25]

Both are timed in the same process with CUDA events, median of ``reps`` batches of ``iters``
back-to-back launches. Bytes moved by the kernel: read x and write y (w is 0.01 % and counted).
The peer is ``torch.Tensor.copy_`` of a tensor as large as x into another (read + write the same
bytes). Prints GB/s of each and the ratio kernel / copy (target >= 0.85 on H100), and the row to
append to docs/performance.md.
"""
import argparse
import datetime
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.rmsnorm_silu import rmsnorm_silu  # noqa: E402


def timed_ms(fn, iters, reps):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / iters)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--d", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--reps", type=int, default=25)
    a = ap.parse_args()
    from tirxpy.lower.build import build

    major, minor = torch.cuda.get_device_capability()
    arch = {9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}")
    name = torch.cuda.get_device_name()
    for d in a.d:
        x = torch.randn(a.rows, d, device="cuda").to(torch.bfloat16)
        w = torch.randn(d, device="cuda").to(torch.bfloat16)
        y = torch.empty_like(x)
        k = build(rmsnorm_silu(a.rows, d), arch)
        src, dst = torch.empty_like(x), torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size() + w.numel() * w.element_size()
        t_k = timed_ms(lambda: k(x, w, y), a.iters, a.reps)
        t_c = timed_ms(lambda: dst.copy_(src), a.iters, a.reps)
        gbs_k = nbytes / t_k / 1e6
        gbs_c = 2 * src.numel() * src.element_size() / t_c / 1e6
        ratio = gbs_k / gbs_c
        print(f"{name} rows={a.rows} d={d}: rmsnorm_silu {t_k * 1e3:.1f} us {gbs_k:.0f} GB/s | "
              f"D2D copy {t_c * 1e3:.1f} us {gbs_c:.0f} GB/s | ratio {ratio:.3f}")
        drv = torch.cuda.get_device_properties(0)
        print(f"| {datetime.date.today()} | {name} | torch {torch.__version__}, CUDA {torch.version.cuda}, "
              f"cc {drv.major}.{drv.minor} | benchmarks/rmsnorm_silu.py rows={a.rows} d={d} | {gbs_k:.0f} GB/s | "
              f"D2D copy {gbs_c:.0f} GB/s | {ratio:.3f} |")


if __name__ == "__main__":
    main()
