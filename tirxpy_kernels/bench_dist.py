"""Benchmark of the distributed GEMMs against torch's two ways, on two GPUs of one host, launched with torchrun:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node=2 -m tirxpy_kernels.bench dist [--shapes ag:MxNxK,rs:MxNxK,...] [--reps 20]
    python -m tirxpy_kernels.bench dist --sim       # both kernels on two simulated ranks, against float64

Per shape (``ag:MxNxK``: ``M`` rows gathered, each rank's ``N`` columns, ``K``; ``rs:MxNxK``: the whole ``K``, each
rank holding ``K / 2``; the defaults are the issue's six shapes) every rank times, on the same inputs: the tirxpy kernel; peer (a), ``all_gather_into_tensor`` then
``torch.matmul`` (``torch.matmul`` then ``reduce_scatter_tensor``); peer (b), torch's fused symmetric-memory op
(``torch.ops.symm_mem.fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``); the GEMM alone (cuBLAS, and
tirxpy's); the transfer alone (the NCCL collective). Samples are taken in turn, each after a barrier, ``--inner``
back-to-back calls per sample (CUDA events); a figure is the larger of the two ranks' medians. The inputs are bf16,
``b`` the transpose of a row-major weight (``nn.Linear``). The tirxpy result is checked against peer (a)'s first.
Multicast stays off (the variables above are set in this process too; nothing here creates a multicast object).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

from .bench_tools import BenchArgumentError, environment, positive, print_table, seed, seed_of

ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SHAPES = [("ag", 16384, 4096, 8192), ("ag", 8192, 14336, 8192), ("ag", 8192, 4096, 28672),
          ("rs", 16384, 8192, 8192), ("rs", 8192, 28672, 8192), ("rs", 8192, 8192, 28672)]
SIM_SHAPES = {"ag": (200, 136, 104), "rs": (200, 136, 208)}
SIM_TOLERANCE = 2 ** -7     # bf16 outputs (and bf16 partial sums): the relative error of two roundings


def parse_dist_shapes(text):
    """``"ag:16384x4096x8192,rs:..."`` -> ``[("ag", M, N, K), ...]`` (default: the six shapes of the issue).

        >>> parse_dist_shapes("ag:256x128x64")
        [('ag', 256, 128, 64)]
    """
    if not text:
        return list(SHAPES)
    out = []
    for item in text.split(","):
        kind, _, dims = item.strip().partition(":")
        parts = dims.split("x")
        if kind not in ("ag", "rs") or len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise BenchArgumentError(f"--shapes: {item!r} is not ag:MxNxK or rs:MxNxK (positive integers)")
        M, N, K = map(int, parts)
        if M % 2 or (kind == "rs" and K % 2):
            raise BenchArgumentError(f"--shapes: {item!r}: M (and K for rs) must split over the 2 ranks")
        out.append((kind, M, N, K))
    return out


def add_arguments(p):
    p.add_argument("--shapes", default="", help="comma-separated ag:MxNxK / rs:MxNxK items (default: the six shapes "
                   "of docs/performance.md)")
    p.add_argument("--reps", type=positive, default=None, help="timed samples per function (default 20)")
    p.add_argument("--inner", type=positive, default=None, help="back-to-back calls per sample (default 5)")
    p.add_argument("--sim", action="store_true", help="both kernels on two simulated ranks at fixed small shapes "
                   f"({', '.join(k + ':' + 'x'.join(map(str, s)) for k, s in SIM_SHAPES.items())}), against float64 "
                   "(none of the timing options apply)")
    p.add_argument("--seed", type=seed, default=None, help="the --sim run's seed, an int in [0, 2**32 - 1] "
                   "(default: from the clock)")
    p.add_argument("--no-tirxpy-gemm", action="store_true", help="leave out tirxpy's GEMM alone (its column reads "
                   "n/a; saves its builds)")
    p.add_argument("--tune", default="", help=argparse_suppressed())
    p.add_argument("--jobs", type=positive, default=None, help=argparse_suppressed())


def argparse_suppressed():
    import argparse

    return argparse.SUPPRESS


def check(args):
    """Check the arguments before any GPU work: the shapes parsed into ``args.parsed``, ``--inner`` defaulted to 5.
    ``--sim`` runs both kernels at :data:`SIM_SHAPES` and takes none of the timing options (each is refused)."""
    if args.sim:
        from .bench_tools import check_sim_args

        runs = ("both kernels at fixed small shapes (" + ", ".join(k + ":" + "x".join(map(str, s)) for k, s in
                SIM_SHAPES.items()) + ") on two simulated ranks")
        check_sim_args(args, "", 0, [("--shapes", args.shapes or None), ("--inner", args.inner),
                                     ("--no-tirxpy-gemm", args.no_tirxpy_gemm)], runs)
        return
    args.parsed = parse_dist_shapes(args.shapes)
    args.inner = args.inner or 5
    if args.tune:
        raise BenchArgumentError("--tune: the dist kernels take no tunings here")


def _timed(fns, reps, inner):
    """``{name: ms}``: per-rank medians of ``inner``-call samples taken in turn after a barrier, max over ranks."""
    import torch
    import torch.distributed as dist

    for fn in fns.values():
        for _ in range(2):
            fn()
    torch.cuda.synchronize()
    samples = {n: [] for n in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            dist.barrier()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) / inner)
    med = torch.tensor([statistics.median(samples[n]) for n in fns], device="cuda", dtype=torch.float64)
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return dict(zip(fns, med.tolist()))


def _functions(kind, M, N, K, group, tirxpy_gemm=True):
    """``(fns, check)`` of one shape: the timed callables and a check of tirxpy's result against peer (a)'s."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    import tirxpy_kernels

    me, name = dist.get_rank(group), group.group_name
    g = torch.Generator(device="cuda").manual_seed(1234 + me)
    if kind == "ag":
        a = torch.randn(M // 2, K, generator=g, device="cuda").bfloat16()
        b = torch.randn(N, K, generator=g, device="cuda").bfloat16().t()
        full = torch.empty(M, K, dtype=torch.bfloat16, device="cuda")
        ours = lambda: tirxpy_kernels.all_gather_gemm(a, b, group)                          # noqa: E731
        seq = lambda: (dist.all_gather_into_tensor(full, a, group=group), torch.matmul(full, b))[1]   # noqa: E731
        fused = lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, name)[1][0]  # noqa: E731
        fns = {"tirxpy": ours, "tirxpy (movers)": lambda: tirxpy_kernels.all_gather_gemm(a, b, group, transfer="movers"),
               "(a) sequential": seq, "(b) torch fused": fused,
               "GEMM alone (cuBLAS)": lambda: torch.matmul(full, b),
               "GEMM alone (tirxpy)": lambda: tirxpy_kernels.gemm(full, b),
               "transfer alone": lambda: dist.all_gather_into_tensor(full, a, group=group)}
    else:
        a = torch.randn(M, K // 2, generator=g, device="cuda").bfloat16()
        b = torch.randn(N, K // 2, generator=g, device="cuda").bfloat16().t()
        part = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
        dst = torch.empty(M // 2, N, dtype=torch.bfloat16, device="cuda")
        ours = lambda: tirxpy_kernels.gemm_reduce_scatter(a, b, group)                    # noqa: E731

        def seq():
            torch.matmul(a, b, out=part)
            dist.reduce_scatter_tensor(dst, part, group=group)
            return dst
        fused = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, name)   # noqa: E731
        fns = {"tirxpy": ours,
               "tirxpy (push)": lambda: tirxpy_kernels.gemm_reduce_scatter(a, b, group, transfer="push"),
               "(a) sequential": seq, "(b) torch fused": fused,
               "GEMM alone (cuBLAS)": lambda: torch.matmul(a, b, out=part),
               "GEMM alone (tirxpy)": lambda: tirxpy_kernels.gemm(a, b),
               "transfer alone": lambda: dist.reduce_scatter_tensor(dst, part, group=group)}
    if not tirxpy_gemm:
        del fns["GEMM alone (tirxpy)"]
    try:
        symm_mem.enable_symm_mem_for_group(name)
        fused()
    except Exception as e:  # noqa: BLE001 - a peer that does not run is reported, not fatal
        print(f"rank {me}: (b) torch fused does not run here: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        del fns["(b) torch fused"]

    def check_result():
        got, want = ours().float(), seq().float()
        return ((got - want).norm() / want.norm()).item()
    return fns, check_result


def bench_dist(args):
    """The timing run (every rank of a torchrun job of 2 processes runs it)."""
    os.environ.update(ENV)
    if os.environ.get("WORLD_SIZE") != "2" or "RANK" not in os.environ:
        print("python -m tirxpy_kernels.bench dist: error: run under torchrun --nproc_per_node=2 (two GPUs of one host)",
              file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))
    dist.init_process_group("nccl")
    group = dist.group.WORLD
    me = dist.get_rank()
    reps = args.reps or 20
    if me == 0:
        print(environment())
    rows, status = [], 0
    for kind, M, N, K in args.parsed:
        t0 = time.time()
        fns, check_result = _functions(kind, M, N, K, group, not args.no_tirxpy_gemm)
        err = check_result()
        if err > 2e-2:
            status = 1
        ms = _timed(fns, reps, args.inner)
        if me == 0:
            seq = ms["(a) sequential"]
            fused = ms.get("(b) torch fused")
            ours = ms["tirxpy"]
            bound = max(ms["GEMM alone (cuBLAS)"], ms["transfer alone"])
            rows.append([f"{'all-gather + GEMM' if kind == 'ag' else 'GEMM + reduce-scatter'}", f"{M}x{N}x{K}",
                         f"{ours:.3f}", f"{seq:.3f} ({seq / ours:.2f}x)",
                         "n/a" if fused is None else f"{fused:.3f} ({fused / ours:.2f}x)",
                         f"{ms['GEMM alone (cuBLAS)']:.3f}",
                         f"{ms['GEMM alone (tirxpy)']:.3f}" if "GEMM alone (tirxpy)" in ms else "n/a",
                         f"{ms['transfer alone']:.3f}", f"{ours / bound:.2f}", f"{err:.1e}"])
            print(f"{kind} {M}x{N}x{K}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in ms.items())
                  + f"; relerr vs (a) {err:.1e}; {time.time() - t0:.1f} s", flush=True)
    if me == 0:
        print_table(["op", "M x N x K (per rank)", "tirxpy ms", "(a) sequential (speed-up)", "(b) torch fused (speed-up)",
                     "GEMM alone cuBLAS", "GEMM alone tirxpy", "transfer alone", "tirxpy / max(GEMM, transfer)",
                     "relerr vs (a)"], rows)
    dist.barrier()
    dist.destroy_process_group()
    return status


def sim_dist(args):
    """Both kernels on two simulated ranks at small shapes, against float64; exit status 1 past the tolerance."""
    from .bench_tools import sim_verdict, worst
    from .dist_ag_gemm import simulate as sim_ag
    from .dist_rs_gemm import simulate as sim_rs

    seed = seed_of(args)
    status = 0
    for kind, run in (("ag", sim_ag), ("rs", sim_rs)):
        M, N, K = SIM_SHAPES[kind]
        t0 = time.time()
        got = run(M, N, K, seed=seed, epoch=2, check=False)
        outs, a, b, probs = (got[0], got[1], got[2], got[-1])
        ref = a.double() @ b.double()
        if kind == "rs":
            ref = ref.reshape(2, M // 2, N)
            err = worst(((o.double() - ref[r]).norm() / ref[r].norm()).item() for r, o in enumerate(outs))
        else:
            err = worst(((o.double() - ref).norm() / ref.norm()).item() for o in outs)
        what = f"{'all-gather + GEMM' if kind == 'ag' else 'GEMM + reduce-scatter'} {M}x{N}x{K} on 2 ranks"
        status = max(status, sim_verdict(what, err if not probs else float("inf"), SIM_TOLERANCE, seed,
                                         time.time() - t0, [p.kind for p in probs]))
    return status
