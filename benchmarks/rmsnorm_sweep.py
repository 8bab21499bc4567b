"""Sweep the RMSNorm+SiLU kernel's elements per thread against a D2D copy (GPU machine).

    python benchmarks/rmsnorm_sweep.py

Same timing as benchmarks/rmsnorm_silu.py (CUDA events, median); one line per configuration.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tirxpy  # noqa: E402
from kernels.rmsnorm_silu import plan, rmsnorm_silu  # noqa: E402
from rmsnorm_silu import timed_ms  # noqa: E402


def main():
    rows = 16384
    for d in (4096, 8192):
        x = torch.randn(rows, d, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(d, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        c = torch.empty_like(x)
        t_copy = timed_ms(lambda: c.copy_(x), 200, 25)
        for e in (8, 16, 32, 64):
            k = tirxpy.compile(rmsnorm_silu(rows, d, elems_per_thread=e), arch="sm_90a")
            t = timed_ms(lambda: k(x, w, y), 200, 25)
            print(f"d={d} elems/thread={e:3d} plan={plan(d, e)} regs={k.resources.registers:3d} "
                  f"{t * 1e3:7.1f} us  ratio vs copy {t_copy / t:.3f}")


if __name__ == "__main__":
    main()
