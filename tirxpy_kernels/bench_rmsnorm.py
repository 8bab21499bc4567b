"""``python -m tirxpy_kernels.bench rmsnorm [--shapes ROWSxD,...] [--tune "elems_per_thread=16;elems_per_thread=32"] [--sim]``

Bandwidth of the fused RMSNorm + SiLU kernel (:func:`tirxpy_kernels.rmsnorm_silu.rmsnorm_silu`) against a
device-to-device copy of the same bytes (``torch.Tensor.copy_``, the peer: what a memory-bound kernel can
reach), bf16 rows: the kernel reads ``x`` and ``w`` and writes ``y``; the copy reads and writes as many bytes
as ``x``. Every tuning (``elems_per_thread``: how much of a row each thread holds, the bytes in flight) and the
copy take their samples in turn (:func:`tirxpy_kernels.bench_tools.median_ms`); printed: GB/s of each and the ratio
kernel / copy. ``--sim`` runs a small kernel through the CPU simulator against float64.
"""
from __future__ import annotations

import sys
import time

from .bench_tools import (BenchArgumentError, add_common_arguments, check_sim_args, environment, median_ms,
                          parse_shapes, parse_tunings, print_table, relative_error, seed_of, sim_verdict, warm_gpu)

SHAPES = [(16384, 4096), (16384, 8192)]
SIM_SHAPE = (16, 256)
SIM_MOST = 2 ** 20        # the largest ROWS * D of --sim --shapes: about 10 s
TUNING = ("elems_per_thread",)
SIM_TOLERANCE = 1e-2        # bf16 output (relative rounding 2^-9) of a float32 computation
GPU_TOLERANCE = 1e-2


def add_arguments(p):
    add_common_arguments(p, 25, "comma-separated ROWSxD items: rows x row width, D a multiple of 32 (default: "
                         + ", ".join("x".join(map(str, s)) for s in SHAPES) + "; with --sim one item, default "
                         + "x".join(map(str, SIM_SHAPE)) + ")", SIM_TOLERANCE, TUNING, "ROWSxD,...")


def _config(shape, tuning):
    from .errors import KernelConfigError
    from .rmsnorm_silu import plan

    try:
        plan(shape[1], tuning.get("elems_per_thread", 16))
    except KernelConfigError as e:
        tuned = f" {tuning}" if tuning else ""
        raise BenchArgumentError(f"--shapes {'x'.join(map(str, shape))}{tuned}: {e}") from None


def check(args):
    """Check ``rmsnorm``'s arguments before any GPU work; returns ``(shapes, tunings)``."""
    if args.sim:
        shape = check_sim_args(args, "16x256", SIM_MOST) or SIM_SHAPE
        _config(shape, {})
        return [shape], [{}]
    shapes = parse_shapes(args.shapes, 2, "16384x4096") if args.shapes else SHAPES
    tunings = parse_tunings(args.tune, TUNING)
    for t in tunings:
        e = t.get("elems_per_thread", 16)
        if isinstance(e, bool) or not isinstance(e, int) or e <= 0:
            raise BenchArgumentError(f"--tune: elems_per_thread must be a positive int, got {e!r}")
        for s in shapes:
            if s[0] * s[1] >= 1 << 40:
                raise BenchArgumentError(f"--shapes: {s[0]}x{s[1]} is too large for any device")
            _config(s, t)
    return shapes, tunings


def reference(x, w, eps=1e-6):
    """``silu(x / sqrt(mean(x^2) + eps) * w)`` per row, in float64."""
    import torch

    x, w = x.double(), w.double()
    y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w
    return y * torch.sigmoid(y)


def bench_rmsnorm(args):
    """Time the kernel (each tuning) and the copy at each shape; returns the exit status."""
    import torch

    import tirxpy

    from .rmsnorm_silu import rmsnorm_silu

    shapes, tunings = check(args)
    torch.manual_seed(seed_of(args))
    print(environment() + f", seed {args.seed}")
    warm_gpu()
    rows = []
    for R, D in shapes:
        x = torch.randn(R, D, device="cuda").to(torch.bfloat16)
        w = torch.randn(D, device="cuda").to(torch.bfloat16)
        y, dst = torch.empty_like(x), torch.empty_like(x)
        fns = {"copy": lambda: dst.copy_(x)}
        for i, t in enumerate(tunings):
            ck = tirxpy.compile(rmsnorm_silu(R, D, **t), arch="sm_90a")
            ck(x, w, y)
            err = relative_error(y.double(), reference(x, w))
            if not err < GPU_TOLERANCE:
                print(f"FAILED: {R}x{D} {t or 'defaults'}: relative error {err:.1e} is past {GPU_TOLERANCE:.0e}",
                      file=sys.stderr)
                return 1
            fns[i] = (lambda c: lambda: c(x, w, y))(ck)
        ms = median_ms(fns, [()], args.reps)
        nbytes = 2 * x.numel() * 2 + D * 2
        copy = 2 * x.numel() * 2 / ms["copy"] / 1e6
        for i, t in enumerate(tunings):
            gbs = nbytes / ms[i] / 1e6
            rows.append([f"{R}x{D}", t or "defaults", f"{ms[i] * 1e3:.1f}", f"{gbs:.0f}", f"{copy:.0f}",
                         f"{gbs / copy:.3f}"])
            print(f"{R}x{D} {t or 'defaults'}: rmsnorm_silu {ms[i] * 1e3:.1f} us {gbs:.0f} GB/s | D2D copy "
                  f"{ms['copy'] * 1e3:.1f} us {copy:.0f} GB/s | ratio {gbs / copy:.3f}", flush=True)
    print_table(["rows x d", "tuning", "us", "rmsnorm_silu GB/s", "copy GB/s", "ratio"], rows)
    return 0


def sim_rmsnorm(args):
    """The kernel through tirxpy.sim at a small shape against float64; returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .rmsnorm_silu import rmsnorm_silu

    (R, D), = check(args)[0]
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(R, D, generator=g).bfloat16()
    w = torch.randn(D, generator=g).bfloat16()
    y = torch.full_like(x, float("nan"))
    t0 = time.time()
    res = run(rmsnorm_silu(R, D), x, w, y, seed=seed)
    err = relative_error(y.double(), reference(x, w))
    return sim_verdict(f"rmsnorm_silu {R}x{D}", err, SIM_TOLERANCE, seed, time.time() - t0, res.problems)
