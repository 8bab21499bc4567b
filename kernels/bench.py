"""Benchmarks of the kernel library against their library peers, in one process.

    python -m kernels.bench gemm [--shapes 4096x4096x4096,...] [--reps 50] [--sim]

``gemm``: TFLOPS of :func:`kernels.gemm` and of ``torch.matmul`` (cuBLAS) on the same random
inputs (``a`` row-major ``(M, K)``, ``b = w.t()`` for a row-major ``w`` ``(N, K)``: the ``nn.Linear``
layout), each the median of ``--reps`` CUDA-event timings after warm-up, rotating through enough
input sets to exceed L2, the two sampled in turn (:func:`median_ms`), and their ratio. ``--sim``
instead runs the kernel through the CPU simulator (:mod:`tirxpy.sim`) at a small shape (or the one
``--shapes`` item given) and checks it against float64; ``--tune``, ``--reps`` and ``--jobs`` do not apply to
it and are refused.

Arguments are checked before any GPU work (:func:`check_args`: shapes, and ``--tune`` options against the
kernel's own checks); a bad one, or a timing run on a machine without a CUDA GPU, exits with status 2 and a
message on stderr, no traceback.

New benchmarks register a function in ``BENCHES`` (name -> fn(args)).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tirxpy.errors import TirxError

GEMM_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (4096, 7168, 7168), (4096, 2112, 7168), (4096, 24576, 1536), (4096, 7168, 2048)]


def median_ms(fns, sets, reps, inner=10, warmup=3, before=None, settle=1.5):
    """``{name: median ms}`` for the functions ``fns`` (``name -> fn(*inputs)``): each sample is the
    mean time of ``inner`` back-to-back calls (CUDA events), cycling through the input ``sets``, and
    the functions take their samples in turn (sample ``i`` of each, then sample ``i + 1``), so a
    drift of the GPU's clock or temperature during the run reaches all of them alike and their
    ratio stays fair. Back-to-back launches keep the host's launch cost off the GPU's critical
    path, as in a real model, but for the first call's. ``before()`` runs ahead of each start
    event (``benchmarks/host_bias.py`` queues a sleep kernel there, so that only device time is
    timed).

    ``settle``: seconds of the functions run in turn before the first sample, so that sampling starts
    at the clocks this work sustains. Without it the first measurement after a change of shape ran
    in a clock transient that favoured cuBLAS: one GEMM timed five times in a row on the H100 read
    0.977, then 0.982-0.993 of cuBLAS (4096 x 2112 x 7168), and 1.001, then 1.034-1.051
    (4096 x 7168 x 2048; docs/performance.md, 2026-11-24)."""
    import torch

    for fn in fns.values():
        for i in range(warmup):
            fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    t_end, n = time.time() + settle, 0
    while time.time() < t_end:
        for fn in fns.values():
            for _ in range(inner):
                fn(*sets[n % len(sets)])
                n += 1
        torch.cuda.synchronize()
    times = {name: [] for name in fns}
    n = 0
    for _ in range(reps):
        for name, fn in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if before is not None:
                before()
            s.record()
            for _ in range(inner):
                fn(*sets[n % len(sets)])
                n += 1
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) / inner)
    return {name: statistics.median(t) for name, t in times.items()}


def warm_gpu(seconds=1.0):
    """Keep the GPU busy for ``seconds`` (bf16 matmuls) so the first timing does not see idle clocks
    (after the prebuild, the first attention row once measured 116 instead of 388 TFLOPS)."""
    import torch

    x = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    t_end = time.time() + seconds
    while time.time() < t_end:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize()


def _env():
    import torch

    drv = "?"
    try:
        import subprocess

        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip() or "?"
    except Exception:  # noqa: BLE001
        pass
    return f"{torch.cuda.get_device_name()} / driver {drv} / torch {torch.__version__} / CUDA {torch.version.cuda}"


class BenchArgumentError(TirxError, ValueError):
    """A malformed command-line value of ``python -m kernels.bench`` (``--shapes``, ``--tune``)."""


def parse_tunings(text, names=None):
    """``"K=V,K=V;K=V"`` -> a list of tuning dicts (integer values as ints, ``none`` as None, ``a/b/c`` as a tuple of
    ints; an empty tuning is the defaults). ``names``: the option names the kernel takes (others are refused).
    A malformed item raises :class:`BenchArgumentError` naming it.

        >>> parse_tunings(";BN=192,STORE=cta;BN=256,SPLIT=16/1/240;SPLIT=none")
        [{}, {'BN': 192, 'STORE': 'cta'}, {'BN': 256, 'SPLIT': (16, 1, 240)}, {'SPLIT': None}]
        >>> parse_tunings("BN", ("BN",))
        Traceback (most recent call last):
        ...
        kernels.bench.BenchArgumentError: --tune: 'BN' is not KEY=VALUE (for example BN=128,STAGES=3; ';' separates tunings)
    """
    def value(v):
        if v.lstrip("-").isdigit():
            return int(v)
        if v == "none":
            return None
        if "/" in v and all(p.lstrip("-").isdigit() for p in v.split("/")):
            return tuple(int(p) for p in v.split("/"))
        return v

    out = []
    for t in text.split(";"):
        tuning = {}
        for kv in t.split(","):
            if not kv.strip():
                continue
            key, eq, v = kv.strip().partition("=")
            if not eq or not key.strip():
                raise BenchArgumentError(f"--tune: {kv!r} is not KEY=VALUE (for example BN=128,STAGES=3; ';' "
                                         "separates tunings)")
            key = key.strip()
            if names is not None and key not in names:
                raise BenchArgumentError(f"--tune: unknown option {key!r}; the kernel takes {', '.join(names)}")
            if key in tuning:
                raise BenchArgumentError(f"--tune: {key} is given twice in {t!r}; give each option once per tuning")
            tuning[key] = value(v.strip())
        out.append(tuning)
    return out


def parse_shapes(text, dims, example):
    """``"4096x4096x4096,..."`` -> a list of ``dims``-tuples of positive ints; anything else raises
    :class:`BenchArgumentError` naming the item and showing ``example``.

        >>> parse_shapes("4096x128,1024x64", 2, "4096x128")
        [(4096, 128), (1024, 64)]
        >>> parse_shapes("1024x64c", 2, "4096x128")
        Traceback (most recent call last):
        ...
        kernels.bench.BenchArgumentError: --shapes: '1024x64c' is not 2 positive integers joined by 'x' (for example 4096x128)
    """
    out = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != dims or not all(p.isdigit() and p.isascii() and int(p) > 0 for p in parts):
            raise BenchArgumentError(f"--shapes: {item!r} is not {dims} positive integers joined by 'x' "
                                     f"(for example {example})")
        out.append(tuple(int(p) for p in parts))
    return out


def gemm_inputs(M, N, K):
    """Fresh bf16 input pairs ``(a, w.t())`` for an ``M x N x K`` GEMM, as many (up to 8) as it takes to
    hold three times the L2 in all, so that cycling through them times operands from memory."""
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    nsets = max(1, min(8, -(-3 * l2 // ((M * K + N * K) * 2))))
    return [(torch.randn(M, K, device="cuda").to(torch.bfloat16),
             torch.randn(N, K, device="cuda").to(torch.bfloat16).t()) for _ in range(nsets)]


def bench_gemm(args):
    if args.sim:
        return sim_gemm(args)
    import torch

    import kernels

    shapes = parse_shapes(args.shapes, 3, "4096x4096x4096") if args.shapes else GEMM_SHAPES
    tunings = parse_tunings(args.tune)
    from .prebuild import prebuild

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dt = prebuild([("gemm", M, N, K, t, sms) for M, N, K in shapes for t in tunings
                   if M >= 128 and N >= 256 and K >= 64 and N % 8 == 0 and K % 8 == 0], args.jobs)
    print(_env() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else ""))
    warm_gpu()
    rows = []
    for M, N, K in shapes:
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flop = 2 * M * N * K
        for tuning in tunings:
            t0 = time.time()
            c = kernels.gemm(sets[0][0], sets[0][1], out, **tuning)
            build = time.time() - t0
            ref = sets[0][0].float() @ sets[0][1].float()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            ms = median_ms({"tirxpy": lambda a, b: kernels.gemm(a, b, out, **tuning),
                            "cublas": lambda a, b: torch.matmul(a, b, out=out)}, sets, args.reps)
            tt, tc = flop / ms["tirxpy"] / 1e9, flop / ms["cublas"] / 1e9
            rows.append((M, N, K, tuning, tt, tc, tt / tc, err))
            print(f"{M}x{N}x{K} {tuning or 'defaults'}: tirxpy {tt:.0f} TFLOPS, cuBLAS {tc:.0f} TFLOPS, "
                  f"ratio {tt / tc:.3f} (relerr {err:.1e}, build {build:.1f} s)", flush=True)
    print("\n| shape (MxNxK) | tuning | tirxpy TFLOPS | cuBLAS TFLOPS | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for M, N, K, tuning, tt, tc, r, _ in rows:
        print(f"| {M}x{N}x{K} | {tuning or 'defaults'} | {tt:.0f} | {tc:.0f} | {r:.3f} |")
    return rows


def sim_gemm(args):
    """The kernel through tirxpy.sim at a small shape (2-CTA cluster, ragged edges) vs float64."""
    import torch

    from tirxpy.sim import run

    from .gemm_sm90 import gemm_sm90

    M, N, K = (200, 136, 104) if not args.shapes else parse_shapes(args.shapes, 3, "200x136x104")[0]
    k = gemm_sm90(M, N, K, **SIM_GEMM)
    g = torch.Generator().manual_seed(int(time.time()))
    a = torch.randn(M, K, generator=g).bfloat16()
    w = torch.randn(N, K, generator=g).bfloat16()
    c = torch.full((M, N), float("nan"))
    t0 = time.time()
    res = run(k, a, w, torch.zeros(1, 1), c)
    dt = time.time() - t0
    ref = a.double() @ w.double().T
    err = ((c.double() - ref).norm() / ref.norm()).item()
    print(f"tirxpy.sim gemm_sm90 {M}x{N}x{K} (BN=128, 2 stages, cluster 2): {dt:.1f} s, relerr vs float64 "
          f"{err:.2e}, problems: {res.problems or 'none'}")
    return err


BENCHES = {"gemm": bench_gemm}
BENCHES["attention"] = lambda args: __import__("kernels.bench_attention", fromlist=["_"]).bench_attention(args)


SIM_SHAPE = {"gemm": (3, "200x136x104"), "attention": (2, "150x64")}
SIM_GEMM = dict(BN=128, STAGES=2, CM=2, sms=4, out_dtype="float32")      # the --sim kernels' options
SIM_ATTENTION = dict(BN=64, STAGES=2, NC=2)


def _positive(text):
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def _count(text):
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return int(text)


def sim_kernel_check(name, shape):
    """Check the kernel ``--sim`` builds at ``shape`` (``(M, N, K)`` for gemm, ``(S, D)`` for attention) before it
    runs: :class:`BenchArgumentError` with the kernel's reason (a GEMM smaller than one tile, a head dim the kernel
    does not take)."""
    from .errors import KernelConfigError

    try:
        if name == "gemm":
            from .gemm_sm90 import check_config

            check_config(*shape, **SIM_GEMM)
        else:
            from .attention_plan import plan

            plan(1, 4, 2, shape[0], shape[0], shape[1], causal=True, **SIM_ATTENTION)
    except KernelConfigError as e:
        raise BenchArgumentError(f"--sim --shapes {'x'.join(map(str, shape))}: {e}") from None


def check_args(args):
    """Check the arguments of ``name`` before any GPU work (:class:`BenchArgumentError`, or the kernel's argument
    error for a bad ``--tune`` value): ``--shapes`` items, ``--tune`` options (names and values the kernel takes);
    with ``--sim``, which runs one small kernel through the CPU simulator, at most one shape and none of
    ``--tune``, ``--reps``, ``--jobs``. Returns ``(shapes, tunings)`` (``shapes`` None: the default list)."""
    dims, example = SIM_SHAPE[args.name][0], ("4096x4096x4096" if args.name == "gemm" else "4096x128")
    shapes = parse_shapes(args.shapes, dims, example) if args.shapes else None
    if args.sim:
        given = [f for f, v in (("--tune", args.tune or None), ("--reps", args.reps), ("--jobs", args.jobs))
                 if v is not None]
        if given:
            raise BenchArgumentError(f"--sim runs one small {args.name} kernel through the CPU simulator; "
                                     f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to it "
                                     f"(leave {'it' if len(given) == 1 else 'them'} out)")
        if shapes is not None and len(shapes) > 1:
            raise BenchArgumentError(f"--sim takes one shape (for example --shapes {SIM_SHAPE[args.name][1]}), "
                                     f"got {len(shapes)}")
        if shapes is not None:
            sim_kernel_check(args.name, shapes[0])
        return shapes, [{}]
    import torch

    if args.name == "gemm":
        from .gemm_api import TUNING, check, check_tuning
    else:
        from .attention_api import TUNING, check, check_tuning
    tunings = parse_tunings(args.tune, TUNING)
    for t in tunings:
        check_tuning(t)

    def meta(*shape):
        n = 1
        for d in shape:
            n *= d
        if n >= 1 << 62:       # bf16 bytes past int64: no tensor of that size exists
            raise BenchArgumentError(f"--shapes: a {'x'.join(map(str, shape))} tensor ({n} elements) is too large "
                                     "for any device")
        return torch.empty(shape, dtype=torch.bfloat16, device="meta")

    for t in tunings:       # every (shape, tuning) the run times, as the kernel's entry point checks it
        if args.name == "gemm":
            for M, N, K in shapes or GEMM_SHAPES:
                check(meta(M, K), meta(N, K).t(), meta(M, N), **t)
        else:
            from .bench_attention import HEAD_DIMS, HEADS, SEQLENS, TOKENS

            for S, D in shapes or [(s, d) for d in HEAD_DIMS for s in SEQLENS]:
                q = meta(max(1, TOKENS // S), S, HEADS, D)
                for causal in (False, True):
                    check(q, q, q, causal=causal, **t)
    return shapes, tunings


def main(argv=None):
    """``python -m kernels.bench NAME [options]``; returns the exit status: 0, or 2 for a bad argument or a
    machine without a CUDA GPU (for a run without ``--sim``), with the message on stderr and no traceback."""
    prog = "python -m kernels.bench"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=sorted(BENCHES))
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK list (gemm) or SxD list (attention)")
    ap.add_argument("--reps", type=_positive, default=None, help="timed samples per kernel (default 50)")
    ap.add_argument("--tune", default="", help="kernel parameters, e.g. BN=256,STAGES=4,CM=2,group=8; ';' separates tunings to compare")
    ap.add_argument("--sim", action="store_true", help="run through the CPU simulator at a small shape")
    ap.add_argument("--jobs", type=_count, default=None, help="processes that compile the kernels before timing "
                    "(default: one per core, at most 16; 0 or 1: build as the benchmark goes)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    try:
        check_args(args)
    except TirxError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if not args.sim:
        import torch

        if not torch.cuda.is_available():
            print(f"{prog}: error: {args.name} times kernels on a CUDA GPU and this machine has none "
                  f"(torch.cuda.is_available() is False); --sim runs the kernel through the CPU simulator",
                  file=sys.stderr)
            return 2
    if args.reps is None:
        args.reps = 50
    BENCHES[args.name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
