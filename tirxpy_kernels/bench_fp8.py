"""``python -m tirxpy_kernels.bench fp8``: :func:`tirxpy_kernels.gemm_fp8` (per-tensor, row-wise and block-wise
scaling) against cuBLAS's per-tensor FP8 GEMM (``torch._scaled_mm``, e4m3 x e4m3 -> bf16), same process.

Each shape times cuBLAS and the three scalings in turn (:func:`tirxpy_kernels.bench_tools.median_ms`) on
fresh e4m3 operands (enough sets to exceed the L2), after a check of each result against the float64
product of the dequantized operands. ``--sim`` runs a small block-scaled kernel through the CPU simulator;
``--host`` times the host side of a repeated call against :func:`tirxpy_kernels.gemm` (:func:`bench_host`).
"""
from __future__ import annotations

import sys
import time

from .bench_tools import (add_common_arguments, check_sim_args, environment, median_ms, parse_shapes, parse_tunings,
                          print_table, relative_error, seed_of, sim_verdict, warm_gpu)

SHAPES = "4096x4096x4096,8192x8192x8192,4096x7168x7168,4096x2112x7168,4096x24576x1536,4096x7168x2048,4096x7168x16384"
SCALINGS = ("tensor", "row", "block")
GPU_TOLERANCE = 2e-2      # bf16 output of an FP8 product: the output rounding, far below any indexing fault
SIM_TOLERANCE = 1e-2
SIM_SHAPE = (200, 264, 272)


def add_arguments(p):
    add_common_arguments(p, None, f"MxNxK list (default {SHAPES})", GPU_TOLERANCE,
                         ("BN", "STAGES", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "PART", "PASS"), "fp8")
    p.add_argument("--scalings", default=None, help="comma list of tensor,row,block (default: all three)")
    p.add_argument("--host", action="store_true",
                   help="time the host side of a repeated call instead (bench_host: gemm_fp8 against tirxpy_kernels.gemm)")


def check(args):
    """The shapes, tunings and scalings parsed and checked (meta tensors: no device needed)."""
    import torch

    from .gemm_fp8_api import check as check_fp8

    if args.sim:        # one fixed kernel: a --shapes item, scalings or --host would be ignored, so each is refused
        check_sim_args(args, "200x264x272", 0, [("--shapes", args.shapes or None), ("--scalings", args.scalings),
                                                ("--host", args.host)],
                       f"one fixed block-scaled kernel ({'x'.join(map(str, SIM_SHAPE))})")
        return [SIM_SHAPE], [{}], ["block"]
    shapes = parse_shapes(args.shapes or SHAPES, 3, "4096x4096x4096")
    tunings = parse_tunings(args.tune or "", ("BN", "STAGES", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "PART", "PASS"))
    args.scalings = args.scalings or ",".join(SCALINGS)
    scalings = [s.strip() for s in args.scalings.split(",") if s.strip()]
    if not scalings:
        from .bench_tools import BenchArgumentError

        raise BenchArgumentError(f"--scalings: {args.scalings!r} names no scaling; pass some of {', '.join(SCALINGS)}")
    for s in scalings:
        if s not in SCALINGS:
            from .bench_tools import BenchArgumentError

            raise BenchArgumentError(f"--scalings: {s!r} is not one of {SCALINGS}")
    e4m3 = torch.float8_e4m3fn
    for M, N, K in shapes:
        a = torch.empty(M, K, dtype=e4m3, device="meta")
        b = torch.empty(N, K, dtype=e4m3, device="meta").t()
        for s in scalings:
            sa, sb = inputs_scales(s, M, N, K, "meta")
            for t in tunings:
                if applies(s, t):
                    check_fp8(a, b, sa, sb, scaling=s, **t)
    return shapes, tunings, scalings


def applies(scaling, tuning):
    """Whether ``tuning`` is timed with ``scaling``: ``PART``, ``PASS`` (the block scaling's k-loop) only with
    ``"block"``, the others with every scaling."""
    return scaling == "block" or not {"PART", "PASS"} & set(tuning)


def inputs_scales(scaling, M, N, K, device):
    """Scales of ``scaling`` for an ``M x N x K`` product: positive, around 1."""
    import torch

    kb, nb = -(-K // 128), -(-N // 128)
    shapes = {"tensor": ((), ()), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, nb))}[scaling]
    return tuple(torch.rand(s, device=device) * 0.5 + 0.75 if device != "meta" else torch.empty(s, device=device)
                 for s in shapes)


def reference(a, b, sa, sb, scaling):
    """The float64 product of the dequantized operands (``b``: ``(K, N)``)."""
    a, b = a.double(), b.double()
    if scaling == "tensor":
        return (a * sa.double()) @ (b * sb.double())
    if scaling == "row":
        return (a * sa.double()) @ (b * sb.double())
    K = a.shape[1]
    ea = sa.double().repeat_interleave(128, 1)[:, :K]
    eb = sb.double().repeat_interleave(128, 0)[:K].repeat_interleave(128, 1)[:, :b.shape[1]]
    return (a * ea) @ (b * eb)


def fp8_inputs(M, N, K):
    """Fresh e4m3 operand pairs ``(a, w.t())``, as many (up to 8) as hold three times the L2."""
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n = max(1, min(8, -(-3 * l2 // (M * K + N * K))))
    return [((torch.randn(M, K, device="cuda") * 2).to(torch.float8_e4m3fn),
             (torch.randn(N, K, device="cuda") * 2).to(torch.float8_e4m3fn).t()) for _ in range(n)]


def bench_fp8(args):
    """Time the scalings and cuBLAS at each shape; 1 when a result is past the tolerance."""
    import torch

    import tirxpy_kernels

    from .prebuild import prebuild

    shapes, tunings, scalings = check(args)
    if args.host:
        return bench_host(args, scalings)
    torch.manual_seed(seed_of(args))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dt = prebuild([("gemm_fp8", M, N, K, s, t, sms) for M, N, K in shapes for s in scalings for t in tunings
                   if applies(s, t)], args.jobs)
    print(environment() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else "") + f", seed {args.seed}")
    warm_gpu()
    rows = []
    one = torch.ones((), device="cuda")
    for M, N, K in shapes:
        sets = fp8_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns = {"cublas": lambda a, b: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)}
        for s in scalings:
            sa, sb = inputs_scales(s, M, N, K, "cuda")
            if s == "block":        # group-major, as quantize_fp8 writes it: the kernel reads it without a copy
                sa = sa.t().contiguous().t()
            ref = reference(sets[0][0], sets[0][1], sa, sb, s)
            for i, t in enumerate(tunings):
                if not applies(s, t):
                    continue
                t0 = time.time()
                err = relative_error(tirxpy_kernels.gemm_fp8(sets[0][0], sets[0][1], sa, sb, out, scaling=s, **t), ref)
                print(f"{M}x{N}x{K} {s} {t or 'defaults'}: relerr {err:.1e}, build {time.time() - t0:.1f} s", flush=True)
                if not err < GPU_TOLERANCE:
                    print(f"FAILED: {M}x{N}x{K} {s} {t}: relative error {err:.1e}", file=sys.stderr)
                    return 1
                fns[(s, i)] = (lambda sa, sb, s, t: lambda a, b: tirxpy_kernels.gemm_fp8(a, b, sa, sb, out, scaling=s,
                                                                                        **t))(sa, sb, s, t)
        ms = median_ms(fns, sets, args.reps)
        flop = 2 * M * N * K
        tc = flop / ms["cublas"] / 1e9
        for key, v in ms.items():
            if key == "cublas":
                continue
            tt = flop / v / 1e9
            rows.append([f"{M}x{N}x{K}", key[0], tunings[key[1]] or "defaults", f"{tt:.0f}", f"{tc:.0f}",
                         f"{tt / tc:.3f}"])
            print(f"{M}x{N}x{K} {key[0]} {tunings[key[1]] or 'defaults'}: tirxpy {tt:.0f} TFLOPS, cuBLAS {tc:.0f}, "
                  f"ratio {tt / tc:.3f}", flush=True)
    print_table(["shape (MxNxK)", "scaling", "tuning", "tirxpy TFLOPS", "cuBLAS per-tensor TFLOPS", "ratio"], rows)
    return 0


HOST_SHAPE = 256         # M = N = K of the host-time bench: a kernel shorter than the host's call
HOST_CALLS = 400         # calls per sample


def bench_host(args, scalings):
    """The host time of a repeated call with the same tensors (``out`` given; the block scaling's ``scale_a`` an
    ``(M, KB)`` view of a row-major ``(KB, M)`` tensor, as :func:`tirxpy_kernels.gemm_fp8` takes it without a copy)
    against :func:`tirxpy_kernels.gemm` on bf16 tensors of the same shape, both with ``b`` the ``.t()`` of an
    ``nn.Linear``-layout weight: made once (the libraries' own cost), and made in every call (the usual
    ``f(x, w.t())``, which adds torch's view to both). Each sample is the wall time of ``HOST_CALLS`` calls queued
    without a wait (the GPU runs each ``HOST_SHAPE``^3 product in less time than the host takes to launch it), the
    functions take their samples in turn, and the table gives each median per call."""
    import statistics

    import torch

    import tirxpy_kernels

    n = HOST_SHAPE
    a16, w16 = torch.randn(n, n, device="cuda").bfloat16(), torch.randn(n, n, device="cuda").bfloat16()
    a, w = a16.to(torch.float8_e4m3fn), w16.to(torch.float8_e4m3fn)
    wt16, wt = w16.t(), w.t()
    out16, out = (torch.empty(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns = {("gemm (bf16)", "once"): lambda: tirxpy_kernels.gemm(a16, wt16, out16),
           ("gemm (bf16)", "per call"): lambda: tirxpy_kernels.gemm(a16, w16.t(), out16)}
    for s in scalings:
        sa, sb = inputs_scales(s, n, n, n, "cuda")
        if s == "block":
            sa = sa.t().contiguous().t()        # group-major: the kernel reads it as it is
        fns[(s, "once")] = (lambda sa, sb: lambda: tirxpy_kernels.gemm_fp8(a, wt, sa, sb, out))(sa, sb)
        fns[(s, "per call")] = (lambda sa, sb: lambda: tirxpy_kernels.gemm_fp8(a, w.t(), sa, sb, out))(sa, sb)
    for fn in fns.values():
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    times = {name: [] for name in fns}
    for _ in range(max(3, args.reps // 4)):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(HOST_CALLS):
                fn()
            times[name].append((time.perf_counter() - t0) / HOST_CALLS * 1e6)
            torch.cuda.synchronize()
    print(environment() + f", seed {args.seed}")
    med = {name: statistics.median(t) for name, t in times.items()}
    rows = [[call, view, f"{us:.2f}", f"{us / med[('gemm (bf16)', view)]:.3f}"] for (call, view), us in med.items()]
    print_table([f"call ({n}^3, same tensors)", "w.t() made", "host us per call", "/ gemm"], rows)
    return 0


def sim_fp8(args):
    """A block-scaled e4m3 GEMM through tirxpy.sim against float64; returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .gemm_fp8_api import _scale_args
    from .gemm_sm90 import gemm_sm90

    M, N, K = SIM_SHAPE
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) * 2).to(torch.float8_e4m3fn)
    w = (torch.randn(N, K, generator=g) * 2).to(torch.float8_e4m3fn)
    sa = torch.rand(M, -(-K // 128), generator=g) + 0.5
    sb = torch.rand(-(-K // 128), -(-N // 128), generator=g) + 0.5
    SA, SB = _scale_args("block", sa, sb, M, N, K, M, N, K)
    c = torch.full((M, N), float("nan")).bfloat16()
    t0 = time.time()
    res = run(gemm_sm90(M, N, K, BN=128, STAGES=2, sms=2, dtype="float8_e4m3", scaling="block"), a, w, SA, SB,
              torch.zeros(1, 1).bfloat16(), c, seed=seed)
    err = relative_error(c.double(), reference(a, w.t(), sa, sb, "block"))
    return sim_verdict(f"gemm_sm90 e4m3 block-scaled {M}x{N}x{K} (BN=128, 2 stages, 2 CTAs)", err, SIM_TOLERANCE, seed,
                       time.time() - t0, res.problems)
