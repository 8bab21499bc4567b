"""``kernels.gemm`` with ``ArgPacker``'s straight-line pack on and off, against cuBLAS, in one process.

    python benchmarks/pack_ab.py MxNxK[,MxNxK...] [--passes 3] [--reps 30]

Small problems are bound by the host's cost per call, not by the kernel: this times, interleaved sample
by sample (``kernels.bench.median_ms``), ``torch.matmul`` and ``kernels.gemm`` with a fresh output and
with ``out=``, each ``kernels.gemm`` once with the straight-line pack (``ArgPacker._fast``, the default)
and once with only the full checks, and prints microseconds per call and the ratios to cuBLAS.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)

    import torch

    import kernels
    from kernels import gemm_api
    from kernels.bench import _env, gemm_inputs, median_ms, warm_gpu

    print(_env())
    warm_gpu()
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        kernels.gemm(sets[0][0], sets[0][1], out)
        kernels.gemm(sets[0][0], sets[0][1])
        packers = [ck._launcher.packer for ck, _, _ in gemm_api._FAST.values()]
        fast = [p._fast for p in packers]

        def straight(on):
            for p, f in zip(packers, fast):
                p._fast = f if on else None

        fns = {"cublas": lambda a, b: torch.matmul(a, b),
               "cublas out": lambda a, b: torch.matmul(a, b, out=out),
               "fast": lambda a, b: (straight(True), kernels.gemm(a, b)),
               "full": lambda a, b: (straight(False), kernels.gemm(a, b)),
               "fast out": lambda a, b: (straight(True), kernels.gemm(a, b, out)),
               "full out": lambda a, b: (straight(False), kernels.gemm(a, b, out))}
        for _ in range(args.passes):
            ms = median_ms(fns, sets, args.reps)
            times = " ".join(f"{k} {v * 1e3:.1f}" for k, v in ms.items())
            ratios = " ".join(f"{k} {ms['cublas' + k[4:]] / ms[k]:.3f}" for k in fns if not k.startswith("cublas"))
            print(f"{shape} us per call: {times} | ratio to cuBLAS: {ratios}", flush=True)
        straight(True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
