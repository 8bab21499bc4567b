"""Time attention kernels built from several versions of the kernel source side by side, in one process.

    python benchmarks/attention_ab.py SxD[,SxD...] FILE[:KEY=VALUE,...] FILE[:KEY=VALUE,...] ...

(``SxDc`` / ``SxDn``: that shape causal / non-causal only.)

Each ``FILE`` is a copy of ``tirxpy_kernels/attention_sm90.py`` (e.g. ``git show REV:tirxpy_kernels/attention_sm90.py
> A.py``); ``KEY=VALUE`` items are passed to its ``attention_sm90`` (``BN``, ``STAGES``, ``NC``,
``PINGPONG=0/1``, ``PERSIST=0/1``, ...; a value that is not an integer is passed as a string). For
each shape (32k tokens, 16 heads, bf16; non-causal and causal) the variants are timed in 7
interleaved rounds of 5 back-to-back launches each and the median is printed in TFLOPS, so machine
drift between separate benchmark runs does not enter the comparison. Kernels are compiled first in
parallel processes (filling tirxpy's disk cache).
"""
from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor

TOKENS, HEADS, ROUNDS, LAUNCHES = 32768, 16, 7, 5


def _load(path):
    import tirxpy_kernels  # noqa: F401  (the package the copies' relative imports resolve in)

    spec = importlib.util.spec_from_file_location(f"tirxpy_kernels._ab_{abs(hash(os.path.abspath(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _build(job):
    import tirxpy

    variant, S, D, causal = job
    path, _, kw = variant.partition(":")
    kw = {k: int(v) if v.lstrip("-").isdigit() else v for k, v in (item.split("=") for item in kw.split(",") if item)}
    kern = _load(path).attention_sm90(max(1, TOKENS // S), HEADS, HEADS, S, S, D, causal=causal, **kw)
    return tirxpy.compile(kern, arch="sm_90a")


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    import torch

    from tirxpy_kernels.bench_tools import warm_gpu

    # SxD: both masks; SxDc: causal only; SxDn: non-causal only
    shapes = [(int(s.split("x")[0]), int(s.split("x")[1].rstrip("cn")), c) for s in argv[0].split(",")
              for c in {"c": (True,), "n": (False,)}.get(s[-1], (False, True))]
    variants = argv[1:]
    for v in variants:
        if not os.path.exists(v.partition(":")[0]):
            raise SystemExit(f"attention_ab: no kernel source file {v.partition(':')[0]!r}")
    jobs = [(v, S, D, c) for S, D, c in shapes for v in variants]
    with ProcessPoolExecutor(min(16, os.cpu_count() or 1), mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(_build, jobs))
    kernels = {j: _build(j) for j in jobs}
    warm_gpu()
    for S, D, causal in shapes:
        B = max(1, TOKENS // S)
        q, k, v = (torch.randn(B, S, HEADS, D, device="cuda").bfloat16() for _ in range(3))
        o, lse = torch.empty_like(q), torch.empty(B, HEADS, S, 1, device="cuda")
        flop = 4 * B * HEADS * S * S * D / (2 if causal else 1)
        times = {var: [] for var in variants}
        for _ in range(ROUNDS):
            for var in variants:
                kern = kernels[(var, S, D, causal)]
                kern(q, k, v, o, lse)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(LAUNCHES):
                    kern(q, k, v, o, lse)
                end.record()
                end.synchronize()
                times[var].append(start.elapsed_time(end) / LAUNCHES)
        print(f"S={S} D={D} causal={causal}: " + "  ".join(
            f"{var}: {flop / statistics.median(t) / 1e9:.0f}" for var, t in times.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
