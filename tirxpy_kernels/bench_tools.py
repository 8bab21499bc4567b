"""What every benchmark of the kernel library shares: argument parsing, the timing loop, the inputs, the
simulator check.

The command line is :mod:`tirxpy_kernels.bench` (``python -m tirxpy_kernels.bench gemm|attention|rmsnorm``); the scripts in
``benchmarks/`` and the GEMM ladder use the same timing (:func:`median_ms`), so their figures compare.

    >>> parse_shapes("4096x128,1024x64", 2, "4096x128")
    [(4096, 128), (1024, 64)]
    >>> parse_tunings(";BN=192,STORE=cta;BN=256,SPLIT=16/1/240;SPLIT=none")
    [{}, {'BN': 192, 'STORE': 'cta'}, {'BN': 256, 'SPLIT': (16, 1, 240)}, {'SPLIT': None}]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

from tirxpy.errors import TirxError


class BenchArgumentError(TirxError, ValueError):
    """A malformed command-line value of ``python -m tirxpy_kernels.bench`` (``--shapes``, ``--tune``)."""


def parse_tunings(text, names=None):
    """``"K=V,K=V;K=V"`` -> a list of tuning dicts (integer values as ints, ``none`` as None, ``a/b/c`` as a tuple of
    ints; an empty tuning is the defaults). ``names``: the option names the kernel takes (others are refused).
    A malformed item raises :class:`BenchArgumentError` naming it.

        >>> parse_tunings("BN", ("BN",))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.bench_tools.BenchArgumentError: --tune: 'BN' is not KEY=VALUE (for example BN=128,STAGES=3; ';' separates tunings)
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

        >>> parse_shapes("1024x64c", 2, "4096x128")
        Traceback (most recent call last):
        ...
        tirxpy_kernels.bench_tools.BenchArgumentError: --shapes: '1024x64c' is not 2 positive integers joined by 'x' (for example 4096x128)
    """
    out = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != dims or not all(p.isdigit() and p.isascii() and int(p) > 0 for p in parts):
            raise BenchArgumentError(f"--shapes: {item!r} is not {dims} positive integers joined by 'x' "
                                     f"(for example {example})")
        out.append(tuple(int(p) for p in parts))
    return out


def positive(text):
    """argparse type: a positive int."""
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def count(text):
    """argparse type: a non-negative int."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return int(text)


MAX_SEED = 2 ** 32 - 1


def seed(text):
    """argparse type: a seed, an int in ``[0, MAX_SEED]`` (torch's and numpy's generators take it)."""
    if not (text.isascii() and text.isdigit() and int(text) <= MAX_SEED):
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer in [0, {MAX_SEED}]")
    return int(text)


def add_common_arguments(p, reps, shapes_help, tolerance, names, metavar):
    """The options every benchmark takes (``reps``: its default number of timed samples; ``tolerance``: the
    relative error past which ``--sim`` fails; ``names``: the kernel's tuning options; ``metavar``: the shape
    syntax)."""
    p.add_argument("--shapes", default="", metavar=metavar, help=shapes_help)
    p.add_argument("--tune", default="", metavar="K=V,...;...", help="tunings to compare, each timed as its own row: KEY=VALUE items joined "
                   f"by ',', tunings by ';', keys from {', '.join(names)} (an empty tuning is the defaults; default: "
                   "the defaults alone)")
    p.add_argument("--reps", type=positive, default=None, help=f"timed samples of 10 calls per kernel (default {reps})")
    p.add_argument("--jobs", type=count, default=None, help="processes that compile the kernels before timing "
                   "(default: one per core, at most 16; 0 or 1: build as the benchmark goes)")
    p.add_argument("--sim", action="store_true", help="instead of timing, run one small kernel through the CPU "
                   "simulator (tirxpy.sim) and check it against float64; prints its seed, exits 1 when the relative error "
                   f"is not below {tolerance:.0e}")
    p.add_argument("--seed", type=seed, default=None, help="seed of the random inputs (and, with --sim, of the "
                   "simulator's interleaving); default: drawn from the clock and printed")


def check_sim_args(args, example, most, unused=(), runs=None):
    """``--sim`` runs one small kernel through the simulator: at most one shape, whose sizes multiply to at most
    ``most`` (the benchmark's bound, which keeps the run within about a minute, the simulator's step budget and the
    host's memory: a larger one is refused before anything is allocated), none of ``--tune``, ``--reps``,
    ``--jobs``, nor any of ``unused``, the benchmark's own ``(flag, value)`` options that ``--sim`` does not take (a
    value other than None and False was given: such options default to None). ``runs`` says what ``--sim`` runs
    instead (default: one small kernel of the benchmark). Returns the parsed shape or None (the default).

        >>> import argparse
        >>> check_sim_args(argparse.Namespace(name="train", batch=8), "", 0, [("--batch", 8)], "a fixed batch")
        Traceback (most recent call last):
        ...
        tirxpy_kernels.bench_tools.BenchArgumentError: --sim runs a fixed batch; --batch does not apply to it ...
    """
    runs = runs or f"one small {args.name} kernel through the CPU simulator"
    common = (("--tune", getattr(args, "tune", None) or None), ("--reps", getattr(args, "reps", None)),
              ("--jobs", getattr(args, "jobs", None)))
    given = [f for f, v in (*common, *unused) if v is not None and v is not False]
    if given:
        raise BenchArgumentError(f"--sim runs {runs}; {', '.join(given)} {'does' if len(given) == 1 else 'do'} not "
                                 f"apply to it (leave {'it' if len(given) == 1 else 'them'} out)")
    if not getattr(args, "shapes", None):
        return None
    shapes = parse_shapes(args.shapes, example.count("x") + 1, example)
    if len(shapes) > 1:
        raise BenchArgumentError(f"--sim takes one shape (for example --shapes {example}), got {len(shapes)}")
    size = 1
    for d in shapes[0]:
        size *= d
    if size > most:
        raise BenchArgumentError(f"--sim --shapes {args.shapes.strip()}: the simulator runs small kernels on the CPU, "
                                 f"sizes whose product is at most {most} (this one's is {size}); pass a smaller shape "
                                 f"(for example {example}) or time the kernel on a GPU without --sim")
    return shapes[0]


def check_sim_grid(what, ctas, warps, example):
    """Refuse a ``--sim`` kernel whose grid the simulator does not run whole: more than ``tirxpy.sim``'s
    ``MAX_CTAS`` CTAs or ``MAX_WARPS`` warps in all (``what`` names the shape and kernel, ``example`` a shape that
    fits)."""
    from tirxpy.sim.args import MAX_CTAS, MAX_WARPS

    if ctas > MAX_CTAS or warps > MAX_WARPS:
        raise BenchArgumentError(f"--sim --shapes {what}: the kernel's grid has {ctas} CTAs ({warps} warps in "
                                 f"all), past the {MAX_CTAS} CTAs and {MAX_WARPS} warps the simulator runs at once; "
                                 f"pass a smaller shape (for example {example}) or time the kernel on a GPU "
                                 "without --sim")


def seed_of(args):
    """``--seed``, or one drawn from the clock (stored back on ``args``, so that every part of the run and its
    report use the same)."""
    if args.seed is None:
        args.seed = int(time.time() * 1000) % 1000000
    return args.seed


def sim_verdict(what, err, tolerance, seed, seconds, problems):
    """Print the simulator run's line; return the exit status: 0, or 1 (with ``FAILED`` on stderr) when ``err``
    is not below ``tolerance``."""
    print(f"tirxpy.sim {what}: {seconds:.1f} s, relerr vs float64 {err:.2e} (tolerance {tolerance:.0e}), "
          f"seed {seed}, problems: {problems or 'none'}")
    if not err < tolerance:
        print(f"FAILED: relative error {err:.2e} is past the tolerance {tolerance:.0e}; rerun with --seed {seed}",
              file=sys.stderr)
        return 1
    return 0


def worst(errors):
    """The largest of ``errors``, or NaN when any is NaN (``max`` keeps whichever came first of a number and a NaN,
    so a NaN output would pass a tolerance check).

        >>> worst([1e-3, float("nan"), 2e-3]), worst([1e-3, 2e-3])
        (nan, 0.002)
    """
    errors = [float(e) for e in errors]
    return float("nan") if any(e != e for e in errors) else max(errors)


def relative_error(x, ref):
    """``|x - ref| / |ref|`` (Frobenius), in the dtype of ``ref``."""
    return ((x.to(ref.dtype) - ref).norm() / ref.norm()).item()


def median_ms(fns, sets, reps, inner=10, warmup=3, before=None, settle=1.5):
    """``{name: median ms}`` for the functions ``fns`` (``name -> fn(*inputs)``): each sample is the
    mean time of ``inner`` back-to-back calls (CUDA events), cycling through the input ``sets``, and
    the functions take their samples in turn (sample ``i`` of each, then sample ``i + 1``), so a
    drift of the GPU's clock or temperature during the run reaches all of them alike and their
    ratio stays fair. Back-to-back launches keep the host's launch cost off the GPU's critical
    path, as in a real model, but for the first call's. ``before()`` runs ahead of each start
    event (queue a sleep kernel there, and only device time is timed).

    ``settle``: seconds of the functions run in turn before the first sample, so that sampling starts at
    the clocks this work sustains, not in the transient after a change of shape."""
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


def queue_sleep(ms=50.0):
    """A ``before`` for :func:`median_ms` that times the GPU alone: it queues a sleep kernel of about ``ms``
    milliseconds (``torch.cuda._sleep``, counted at 2 GHz, so at least that long on a Hopper GPU), under which
    the host issues the sample's launches; the start event then fires when the queue is full, and the time is
    the kernels' and the gaps between them, without the host's. ``ms`` must exceed the host time of a sample."""
    import torch

    cycles = int(ms * 2e6)
    return lambda: torch.cuda._sleep(cycles)


def warm_gpu(seconds=1.0):
    """Keep the GPU busy for ``seconds`` (bf16 matmuls) so the first timing does not see idle clocks."""
    import torch

    x = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    t_end = time.time() + seconds
    while time.time() < t_end:
        for _ in range(10):
            x @ x
        torch.cuda.synchronize()


def environment():
    """One line naming the GPU, its driver, torch and CUDA (the header of every benchmark's output)."""
    import subprocess

    import torch

    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        drv = "?"
    return f"{torch.cuda.get_device_name()} / driver {drv} / torch {torch.__version__} / CUDA {torch.version.cuda}"


def gemm_inputs(M, N, K):
    """Fresh bf16 input pairs ``(a, w.t())`` for an ``M x N x K`` GEMM, as many (up to 8) as it takes to
    hold three times the L2 in all, so that cycling through them times operands from memory."""
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    nsets = max(1, min(8, -(-3 * l2 // ((M * K + N * K) * 2))))
    return [(torch.randn(M, K, device="cuda").to(torch.bfloat16),
             torch.randn(N, K, device="cuda").to(torch.bfloat16).t()) for _ in range(nsets)]


def meta_tensor(*shape):
    """A bf16 tensor of ``shape`` on the meta device (argument checks without memory); a size no device holds is
    a :class:`BenchArgumentError`."""
    import torch

    n = 1
    for d in shape:
        n *= d
    if n >= 1 << 62:       # bf16 bytes past int64: no tensor of that size exists
        raise BenchArgumentError(f"--shapes: a {'x'.join(map(str, shape))} tensor ({n} elements) is too large "
                                 "for any device")
    return torch.empty(shape, dtype=torch.bfloat16, device="meta")


def print_table(header, rows):
    """A markdown table (``header``: column names; ``rows``: lists of cells)."""
    print("\n| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
