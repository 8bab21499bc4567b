"""Benchmarks of the kernel library against their library peers, in one process.

    python -m tirxpy_kernels.bench gemm [--shapes MxNxK,...] [--tune "K=V,...;..."] [--reps 50] [--passes 1] [--sim]
    python -m tirxpy_kernels.bench attention [--shapes SxD,...] [--tune ...] [--reps 30] [--sim]
    python -m tirxpy_kernels.bench rmsnorm [--shapes ROWSxD,...] [--tune ...] [--reps 25] [--sim]
    python -m tirxpy_kernels.bench quantize [--shapes MxK,...] [--granularity ...] [--tune ...] [--reps 30] [--sim]
    python -m tirxpy_kernels.bench fp8 [--shapes MxNxK,...] [--scalings tensor,row,block] [--tune ...] [--reps 30] [--sim]
    torchrun --nproc_per_node=2 -m tirxpy_kernels.bench dist [--shapes ag:MxNxK,rs:MxNxK,...] [--reps 20] [--sim]
    python -m tirxpy_kernels.bench train [--batch 4 --seq 2048 --dim 2048 --mlp 8192 --tokens 32768] [--sim]
    python -m tirxpy_kernels.bench NAME -h          # that benchmark's options, shape syntax and defaults

Each timing run compares the kernel with its peer on the same random inputs: every tuning of ``--tune`` and
the peer take their samples in turn (:func:`tirxpy_kernels.bench_tools.median_ms`: 10 back-to-back calls a sample,
medians over ``--reps`` samples), so the GPU's clock drift reaches all alike, and their ratio is printed, then a
markdown table. Kernels are compiled first in parallel processes (:mod:`tirxpy_kernels.prebuild`). ``--sim`` instead runs
one small kernel through the CPU simulator and checks it against float64: it prints its seed and exits 1 past the
tolerance its help states.

``gemm``: :func:`tirxpy_kernels.gemm` against ``torch.matmul`` (cuBLAS) on bf16 ``a`` ``(M, K)`` row-major and
``b = w.t()`` for a row-major ``w`` ``(N, K)`` (the ``nn.Linear`` layout), rotating through enough input sets to
exceed L2. ``attention``: :mod:`tirxpy_kernels.bench_attention`. ``attention-bwd``: :mod:`tirxpy_kernels.bench_attention_bwd`. ``rmsnorm``: :mod:`tirxpy_kernels.bench_rmsnorm`. ``quantize``: :mod:`tirxpy_kernels.bench_quantize`. ``fp8``: :mod:`tirxpy_kernels.bench_fp8`.

Arguments are checked before any GPU work (shapes, and ``--tune`` options against the kernel's own checks); a bad
one, or a timing run on a machine without a CUDA GPU, exits with status 2 and a message on stderr, no traceback.
"""
from __future__ import annotations

import argparse
import sys
import time

from tirxpy.command_line import checked_argv
from tirxpy.errors import TirxError

from . import bench_attention, bench_attention_bwd, bench_dist, bench_fp8, bench_quantize, bench_rmsnorm, bench_train
from .bench_tools import (BenchArgumentError, add_common_arguments, check_sim_args, environment, gemm_inputs,
                          median_ms, meta_tensor, parse_shapes, positive, parse_tunings, print_table, relative_error, seed_of,
                          sim_verdict, warm_gpu)

__all__ = ["BenchArgumentError", "GEMM_SHAPES", "main", "median_ms", "parse_shapes", "parse_tunings"]

GEMM_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (4096, 7168, 7168), (4096, 2112, 7168), (4096, 24576, 1536), (4096, 7168, 2048)]
SIM_SHAPE = (200, 136, 104)
SIM_MOST = 2 ** 30        # the largest M * N * K of --sim --shapes
SIM_STEPS = 250_000
"""The most simulator steps (:func:`sim_gemm_steps`) a ``--sim`` shape may take: about a minute, and within the
400000 steps of ``tirxpy.sim.run``'s budget, so that no accepted shape runs out of it."""
SIM_GEMM = dict(BN=128, STAGES=2, CM=2, sms=4, out_dtype="float32")      # the --sim kernel's options
SIM_TOLERANCE = 1e-5        # float32 output: exact bf16 products, float32 sums
GPU_TOLERANCE = 4e-3        # bf16 output against a float32 reference: the output's rounding
EPILOGUES = ("none", "bias", "bias+relu", "bias+silu")


def add_gemm_arguments(p):
    from .gemm_api import TUNING

    add_common_arguments(p, 50, "comma-separated MxNxK items (default: " + ", ".join("x".join(map(str, s))
                         for s in GEMM_SHAPES) + f"; with --sim one item, default {'x'.join(map(str, SIM_SHAPE))})",
                         SIM_TOLERANCE, TUNING, "MxNxK,...")
    p.add_argument("--passes", type=positive, default=None, help="times the whole comparison is repeated per shape, "
                   "to show the noise (default 1)")
    p.add_argument("--epilogue", choices=EPILOGUES, default=None, help="fuse a bf16 bias row and an activation "
                   "into every tuning; cuBLAS then runs torch.addmm and the activation in place (default none)")


def sim_gemm_steps(M, N, K):
    """An upper bound of the simulator steps the ``--sim`` kernel takes on ``M x N x K``: its 2-CTA clusters take
    the output's 256 x 128 tiles in turn, each about 1200 steps plus 410 per 64 columns of ``K`` (measured:
    1529 steps at 128x128x64, 10946 at 2048x128x64, 13971 at 128x128x2048, 33326 at 512x512x512).

        >>> sim_gemm_steps(200, 136, 104), sim_gemm_steps(128, 65536, 64), sim_gemm_steps(128, 128, 65536)
        (4040, 824320, 421040)
    """
    return -(-M // 256) * -(-N // 128) * (1200 + 410 * -(-K // 64))


def check_gemm(args):
    """Check ``gemm``'s arguments before any GPU work; returns ``(shapes, tunings)``. With ``--sim``, the shape
    must fit the simulator: ``M N K`` at most :data:`SIM_MOST` and :func:`sim_gemm_steps` at most
    :data:`SIM_STEPS` (so a long thin problem, ``128x65536x64``, is refused up front)."""
    if args.sim:
        shape = check_sim_args(args, "200x136x104", SIM_MOST, [("--passes", args.passes),
                                                               ("--epilogue", args.epilogue)])
        if shape is not None:
            steps, tiles = sim_gemm_steps(*shape), -(-shape[0] // 256) * -(-shape[1] // 128)
            if steps > SIM_STEPS:
                raise BenchArgumentError(
                    f"--sim --shapes {'x'.join(map(str, shape))}: the simulated kernel would take about {steps} steps "
                    f"({tiles} output tile{'s' if tiles > 1 else ''} of 256 x 128 in turn, each about 1200 "
                    f"+ 410 per 64 of K), past the {SIM_STEPS} a --sim run takes; pass a smaller shape (for example "
                    "200x136x104) or time the kernel on a GPU without --sim")
            from .errors import KernelConfigError
            from .gemm_sm90 import check_config

            try:
                check_config(*shape, **SIM_GEMM)
            except KernelConfigError as e:
                raise BenchArgumentError(f"--sim --shapes {'x'.join(map(str, shape))}: {e}") from None
        return [shape or SIM_SHAPE], [{}]
    from .gemm_api import TUNING, check, check_tuning

    args.passes, args.epilogue = args.passes or 1, args.epilogue or "none"
    shapes = parse_shapes(args.shapes, 3, "4096x4096x4096") if args.shapes else GEMM_SHAPES
    tunings = parse_tunings(args.tune, TUNING)
    for t in tunings:
        check_tuning(t)
    bias = meta_tensor(1) if args.epilogue != "none" else None
    for t in tunings:       # every (shape, tuning) the run times, as the kernel's entry point checks it
        for M, N, K in shapes:
            check(meta_tensor(M, K), meta_tensor(N, K).t(), meta_tensor(M, N),
                  bias=None if bias is None else meta_tensor(N), **t)
    return shapes, tunings


def bench_gemm(args):
    """Time ``tirxpy_kernels.gemm`` (each tuning) and cuBLAS at each shape; returns the exit status (1 when a result is
    past ``GPU_TOLERANCE``)."""
    import torch

    import tirxpy_kernels

    from .prebuild import prebuild

    shapes, tunings = check_gemm(args)
    torch.manual_seed(seed_of(args))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dt = prebuild([("gemm", M, N, K, t, sms) for M, N, K in shapes for t in tunings
                   if args.epilogue == "none" and M >= 128 and N >= 256 and K >= 64 and N % 8 == 0 and K % 8 == 0],
                  args.jobs)
    print(environment() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else "") + f", seed {args.seed}")
    warm_gpu()
    rows = []
    for M, N, K in shapes:
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = sets[0][0].float() @ sets[0][1].float()
        epi, peer = {}, (lambda a, b: torch.matmul(a, b, out=out))
        if args.epilogue != "none":
            act = args.epilogue.partition("+")[2] or None
            epi = dict(bias=torch.randn(N, device="cuda").to(torch.bfloat16), activation=act)
            ref = ref + epi["bias"].float()
            torch_act = getattr(torch.nn.functional, act) if act else None
            ref = torch_act(ref) if act else ref
            peer = (lambda a, b: (torch.addmm(epi["bias"], a, b, out=out), torch_act and torch_act(out, inplace=True)))
        fns, errs = {"cublas": peer}, {}
        for i, t in enumerate(tunings):
            t0 = time.time()
            errs[i] = relative_error(tirxpy_kernels.gemm(sets[0][0], sets[0][1], out, **epi, **t), ref)
            print(f"{M}x{N}x{K} {t or 'defaults'}: relerr {errs[i]:.1e}, build {time.time() - t0:.1f} s", flush=True)
            if not errs[i] < GPU_TOLERANCE:
                print(f"FAILED: {M}x{N}x{K} {t or 'defaults'}: relative error {errs[i]:.1e} is past "
                      f"{GPU_TOLERANCE:.0e}", file=sys.stderr)
                return 1
            fns[i] = (lambda tt: lambda a, b: tirxpy_kernels.gemm(a, b, out, **epi, **tt))(t)
        flop = 2 * M * N * K
        for p in range(args.passes):
            ms = median_ms(fns, sets, args.reps)
            tc = flop / ms["cublas"] / 1e9
            for i, t in enumerate(tunings):
                tt = flop / ms[i] / 1e9
                rows.append([f"{M}x{N}x{K}", t or "defaults", f"{tt:.0f}", f"{tc:.0f}", f"{tt / tc:.3f}"])
                print(f"{M}x{N}x{K} {t or 'defaults'}{f' pass {p}' if args.passes > 1 else ''}: tirxpy {tt:.0f} "
                      f"TFLOPS, cuBLAS {tc:.0f} TFLOPS, ratio {tt / tc:.3f}", flush=True)
    print_table(["shape (MxNxK)", "tuning", "tirxpy TFLOPS", "cuBLAS TFLOPS", "ratio"], rows)
    return 0


def sim_gemm(args):
    """The library GEMM through tirxpy.sim at a small shape (a 2-CTA cluster, 4 persistent CTAs, ragged edges)
    against float64; returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .gemm_sm90 import gemm_sm90

    (M, N, K), = check_gemm(args)[0]
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).bfloat16()
    w = torch.randn(N, K, generator=g).bfloat16()
    c = torch.full((M, N), float("nan"))
    t0 = time.time()
    res = run(gemm_sm90(M, N, K, **SIM_GEMM), a, w, torch.zeros(1, 1), c, seed=seed)
    err = relative_error(c.double(), a.double() @ w.double().T)
    return sim_verdict(f"gemm_sm90 {M}x{N}x{K} (BN=128, 2 stages, cluster 2, 4 CTAs)", err, SIM_TOLERANCE, seed,
                       time.time() - t0, res.problems)


def _benches():
    """``name -> (help, add_arguments, check, time, sim)``; the runs are looked up when called."""
    return {
        "gemm": ("tirxpy_kernels.gemm vs cuBLAS (torch.matmul)", add_gemm_arguments, check_gemm,
                 lambda a: bench_gemm(a), lambda a: sim_gemm(a)),
        "attention": ("tirxpy_kernels.attention vs SDPA (cuDNN, flash)", bench_attention.add_arguments,
                      bench_attention.check, lambda a: bench_attention.bench_attention(a),
                      lambda a: bench_attention.sim_attention(a)),
        "attention-bwd": ("tirxpy_kernels.attention_backward vs SDPA's cuDNN backward", bench_attention_bwd.add_arguments,
                          bench_attention_bwd.check, lambda a: bench_attention_bwd.bench_attention_bwd(a),
                          lambda a: bench_attention_bwd.sim_attention_bwd(a)),
        "rmsnorm": ("tirxpy_kernels.rmsnorm_silu vs a device-to-device copy", bench_rmsnorm.add_arguments,
                    bench_rmsnorm.check, lambda a: bench_rmsnorm.bench_rmsnorm(a),
                    lambda a: bench_rmsnorm.sim_rmsnorm(a)),
        "quantize": ("tirxpy_kernels.quantize_fp8 vs a device-to-device copy", bench_quantize.add_arguments,
                     bench_quantize.check, lambda a: bench_quantize.bench_quantize(a),
                     lambda a: bench_quantize.sim_quantize(a)),
        "fp8": ("tirxpy_kernels.gemm_fp8 vs cuBLAS per-tensor FP8 (torch._scaled_mm)", bench_fp8.add_arguments,
                bench_fp8.check, lambda a: bench_fp8.bench_fp8(a), lambda a: bench_fp8.sim_fp8(a)),
        "dist": ("tirxpy_kernels.all_gather_gemm / gemm_reduce_scatter vs all-gather + matmul and torch's fused "
                 "symmetric-memory ops (torchrun, 2 GPUs)", bench_dist.add_arguments, bench_dist.check,
                 lambda a: bench_dist.bench_dist(a), lambda a: bench_dist.sim_dist(a)),
        "train": ("a transformer block's training step (tirxpy gemm + attention, torch.compile) vs torch's defaults, "
                  "and varlen attention vs padded", bench_train.add_arguments, bench_train.check,
                  lambda a: bench_train.bench_train(a), lambda a: bench_train.sim_train(a)),
    }


def parser(prog="python -m tirxpy_kernels.bench"):
    benches = _benches()
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0] + " Run '%(prog)s NAME -h' for "
                                 "a benchmark's shapes, options and defaults.")
    sub = ap.add_subparsers(dest="name", required=True, metavar="name", help=", ".join(benches))
    for name, (text, add, *_) in benches.items():
        add(sub.add_parser(name, help=text, description=f"{text}. " + ("--sim: one small kernel through the CPU "
                                                                       "simulator, against float64.")))
    return ap


def main(argv=None, prog="python -m tirxpy_kernels.bench"):
    """``python -m tirxpy_kernels.bench NAME [options]``; returns the exit status: 0, 1 for a result past its
    tolerance, or 2 for a bad argument or a machine without a CUDA GPU (for a run without ``--sim``), with the
    message on stderr and no traceback."""
    argv = checked_argv(argv, prog)
    if argv is None:
        return 2
    try:
        args = parser(prog).parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    _, _, check, timed, sim = _benches()[args.name]
    try:
        check(args)
    except TirxError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if args.sim:
        return sim(args)
    import torch

    if not torch.cuda.is_available():
        print(f"{prog}: error: {args.name} times kernels on a CUDA GPU and this machine has none "
              f"(torch.cuda.is_available() is False); --sim runs the kernel through the CPU simulator",
              file=sys.stderr)
        return 2
    if args.reps is None:
        args.reps = {"gemm": 50, "attention": 30, "attention-bwd": 20, "rmsnorm": 25, "quantize": 30, "fp8": 30, "dist": 20}[args.name]
    return timed(args)


if __name__ == "__main__":
    sys.exit(main())
