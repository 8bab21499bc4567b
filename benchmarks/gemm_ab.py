"""Time several tunings of ``kernels.gemm`` and cuBLAS side by side, interleaved, in one process.

    python benchmarks/gemm_ab.py MxNxK[,MxNxK...] "TUNING;TUNING;..." [--reps 40] [--passes 2]

A ``TUNING`` is ``KEY=VALUE,...`` for :func:`kernels.gemm_sm90.gemm_sm90` (``BN``, ``STAGES``, ``CM``,
``PINGPONG``, ``group``, ``SPLIT=16/1/240`` or ``SPLIT=none``, ...; an empty one is the defaults). For each
shape every tuning and ``torch.matmul`` (cuBLAS) take their samples in turn (``kernels.bench.median_ms``: 10
back-to-back launches per sample, cycling through input sets larger than L2), so the GPU's clock drift reaches
all alike; ``kernels.bench gemm --tune`` instead times each tuning against cuBLAS in a separate loop, and
on this power-limited GPU cuBLAS alone then reads 660-770 TFLOPS at one shape. Each pass prints the
median TFLOPS and the ratio to cuBLAS of every tuning; several passes show the noise.

``--epilogue bias+silu`` (or ``bias``, ``bias+relu``) fuses a bf16 bias row and the activation into every tuning
(``kernels.gemm(..., bias=, activation=)``) and times cuBLAS as ``torch.addmm(bias, a, b)`` followed by the
activation in place (what an unfused model runs).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes")
    ap.add_argument("tunings")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--epilogue", choices=["none", "bias", "bias+relu", "bias+silu"], default="none")
    args = ap.parse_args(argv)

    import torch

    import kernels
    from kernels.bench import _env, gemm_inputs, median_ms, parse_tunings, warm_gpu

    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    tunings = parse_tunings(args.tunings)
    print(_env())
    warm_gpu()
    for M, N, K in shapes:
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = sets[0][0].float() @ sets[0][1].float()
        epi = {}
        fns = {"cublas": lambda a, b: torch.matmul(a, b, out=out)}
        if args.epilogue != "none":
            act = args.epilogue.partition("+")[2] or None
            epi = dict(bias=torch.randn(N, device="cuda").to(torch.bfloat16), activation=act)
            ref = ref + epi["bias"].float()
            ref = getattr(torch.nn.functional, act)(ref) if act else ref
            torch_act = getattr(torch.nn.functional, act) if act else None
            fns["cublas"] = lambda a, b: (torch.addmm(epi["bias"], a, b, out=out),
                                          torch_act and torch_act(out, inplace=True))
        for i, t in enumerate(tunings):
            c = kernels.gemm(sets[0][0], sets[0][1], out, **epi, **t)
            err = ((c.float() - ref).norm() / ref.norm()).item()
            if not err < 4e-3:
                raise SystemExit(f"{M}x{N}x{K} {t}: relative error {err:.1e}")
            fns[f"t{i}"] = (lambda tt: lambda a, b: kernels.gemm(a, b, out, **epi, **tt))(t)
        flop = 2 * M * N * K
        for p in range(args.passes):
            ms = median_ms(fns, sets, args.reps)
            tc = flop / ms["cublas"] / 1e9
            cells = [f"{t or 'defaults'} {flop / ms[f't{i}'] / 1e9:.0f} ({flop / ms[f't{i}'] / 1e9 / tc:.3f})"
                     for i, t in enumerate(tunings)]
            print(f"{M}x{N}x{K} pass {p}: cuBLAS {tc:.0f} TFLOPS; " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
