"""The runner every level of the GEMM ladder shares: ``C = A @ B^T`` (``A`` ``(M, K)``, ``B`` ``(N, K)``,
bf16 in, float32 accumulate) on a GPU next to cuBLAS, or under the CPU simulator against float64.

    python examples/gemm/level_2.py                  # GPU: TFLOPS, cuBLAS TFLOPS, relative error vs float64
    python examples/gemm/level_2.py --sim            # CPU simulator at a small shape, checked against float64
    python examples/gemm/level_2.py --sim --seed 7 --shape 128x256x256

A level module defines ``build(M, N, K)`` (the kernel, a ``@T.prim_func``, called as ``k(A, B, C)``),
``GPU_SHAPE`` and ``SIM_SHAPE`` (``(M, N, K)``), ``SHAPE_RULE`` (what its shapes must satisfy, checked by
``check_shape(M, N, K)`` returning a reason or None), and ends with ``sys.exit(ladder.main(sys.modules[__name__]))``.
A level whose kernel has another calling form (the library kernel) defines ``gpu_run(a, w, c)`` /
``sim_run(a, w, c, seed)`` instead.

Pass or fail: the relative Frobenius error ``|C - A B^T| / |A B^T|`` against the float64 product of the same
bf16 inputs must stay under ``TOLERANCE`` (1e-5: every bf16 product is exact in float32, so what remains
is the float32 rounding of the sums); past it the run prints the error and exits 1. The inputs are drawn
from ``--seed`` (printed on every run; the simulator's interleaving uses the same seed), so a failure is
reproduced by passing the seed it printed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

TOLERANCE = 1e-5


def shape_arg(text):
    """``"MxNxK"`` -> ``(M, N, K)`` of positive ints (argparse type)."""
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not MxNxK: three positive integers joined by 'x' "
                                         "(for example 256x256x128)")
    return tuple(int(p) for p in parts)


def inputs(M, N, K, seed, device="cpu"):
    """``(a, w)``: bf16 ``(M, K)`` and ``(N, K)`` standard normal values drawn from ``seed``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).bfloat16()
    w = torch.randn(N, K, generator=g).bfloat16()
    return a.to(device), w.to(device)


def relative_error(c, a, w):
    """``|c - a w^T| / |a w^T|`` with the reference in float64."""
    ref = a.double().cpu() @ w.double().cpu().t()
    return ((c.double().cpu() - ref).norm() / ref.norm()).item()


def median_ms(fn, reps=30, inner=10):
    """Median milliseconds per call of ``fn`` over ``reps`` CUDA-event samples of ``inner`` back-to-back
    calls, after a second of warm-up."""
    import torch

    t_end = time.time() + 1.0
    while time.time() < t_end:
        fn()
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(inner):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / inner)
    return statistics.median(times)


def _kernel_runner(level, M, N, K):
    """``run(a, w, c)`` for a level that defines ``build``: the kernel compiled for this GPU."""
    import tirxpy

    ck = tirxpy.compile(level.build(M, N, K), arch="sm_90a")
    return lambda a, w, c: ck(a, w, c)


def run_gpu(level, shape, seed, reps):
    import torch

    M, N, K = shape
    a, w = inputs(M, N, K, seed, "cuda")
    c = torch.full((M, N), float("nan"), device="cuda")
    t0 = time.time()
    run = level.gpu_run if hasattr(level, "gpu_run") else _kernel_runner(level, M, N, K)
    run(a, w, c)
    torch.cuda.synchronize()
    build = time.time() - t0
    err = relative_error(c, a, w)
    flop = 2 * M * N * K
    ours = flop / median_ms(lambda: run(a, w, c), reps) / 1e9
    ref = torch.empty((M, N), dtype=a.dtype, device="cuda")       # cuBLAS writes a's dtype (c may be float32)
    cublas = flop / median_ms(lambda: torch.matmul(a, w.t(), out=ref), reps) / 1e9
    print(f"{level.NAME} {M}x{N}x{K} on {torch.cuda.get_device_name()}: {ours:.0f} TFLOPS, cuBLAS {cublas:.0f} "
          f"TFLOPS (ratio {ours / cublas:.3f}); relerr vs float64 {err:.1e} (tolerance {TOLERANCE:.0e}); "
          f"seed {seed}; first call {build:.1f} s")
    return err


def run_sim(level, shape, seed):
    import torch

    from tirxpy import sim

    M, N, K = shape
    a, w = inputs(M, N, K, seed)
    c = torch.full((M, N), float("nan"))
    t0 = time.time()
    if hasattr(level, "sim_run"):
        level.sim_run(a, w, c, seed)
    else:
        sim.run(level.build(M, N, K), a, w, c, seed=seed)
    err = relative_error(c, a, w)
    print(f"{level.NAME} {M}x{N}x{K} in tirxpy.sim: {time.time() - t0:.1f} s; relerr vs float64 {err:.1e} "
          f"(tolerance {TOLERANCE:.0e}); seed {seed}")
    return err


def main(level, argv=None):
    """Run ``level`` (a module, see the module docstring) from the command line; returns the exit status:
    0, 1 when the result is past ``TOLERANCE``, 2 for a bad argument."""
    ap = argparse.ArgumentParser(prog=f"python examples/gemm/{os.path.basename(level.__file__)}",
                                 description=f"{level.NAME}: C = A @ B^T (bf16 in, float32 out). "
                                 f"Shapes: {level.SHAPE_RULE}.")
    ap.add_argument("--sim", action="store_true", help="run under the CPU simulator instead of on the GPU "
                    f"(default shape {'x'.join(map(str, level.SIM_SHAPE))})")
    ap.add_argument("--shape", type=shape_arg, default=None, help="MxNxK (default: "
                    f"{'x'.join(map(str, level.GPU_SHAPE))} on the GPU, {'x'.join(map(str, level.SIM_SHAPE))} "
                    "with --sim)")
    ap.add_argument("--seed", type=int, default=None, help="seed of the inputs (and of the simulator's "
                    "interleaving); default: drawn from the clock, printed")
    ap.add_argument("--reps", type=int, default=30, help="timed samples of 10 calls each on the GPU (default 30)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    shape = args.shape or (level.SIM_SHAPE if args.sim else level.GPU_SHAPE)
    why = level.check_shape(*shape)
    if why:
        print(f"{ap.prog}: error: --shape {'x'.join(map(str, shape))}: {why} ({level.SHAPE_RULE})", file=sys.stderr)
        return 2
    seed = int(time.time()) % 100000 if args.seed is None else args.seed
    if not args.sim:
        import torch

        if not torch.cuda.is_available():
            print(f"{ap.prog}: error: no CUDA GPU here (torch.cuda.is_available() is False); --sim runs the level "
                  "under the CPU simulator", file=sys.stderr)
            return 2
    err = run_sim(level, shape, seed) if args.sim else run_gpu(level, shape, seed, args.reps)
    if not err < TOLERANCE:
        print(f"FAILED: relative error {err:.1e} is past the tolerance {TOLERANCE:.0e} (seed {seed})", file=sys.stderr)
        return 1
    return 0
