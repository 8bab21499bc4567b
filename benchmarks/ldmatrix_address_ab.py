"""Same-process A/B of the ldmatrix / stmatrix row address in ``kernels.gemm``'s kernels: lane
arithmetic (tirxpy.primitives.copy.ldmatrix's constant bit steps, the default) against the per-lane
select over the matrices (forced by making ``_bit_steps`` decline), which ptxas compiles to divergent
branches.

    python benchmarks/ldmatrix_address_ab.py MxNxK[,MxNxK...] [--passes 3] [--reps 40]

Both kernels are built from one ``gemm_sm90`` specialization (kernels.gemm's tile), checked against a
float32 reference, then timed interleaved with ``torch.matmul`` (``kernels.bench.median_ms``); each
pass prints TFLOPS and the ratio to cuBLAS.
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
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args(argv)

    import torch

    import kernels
    import tirxpy
    import tirxpy.primitives.copy.ldmatrix as ldm
    from kernels import gemm_api
    from kernels.bench import _env, gemm_inputs, median_ms, parse_shapes, warm_gpu
    from kernels.gemm_sm90 import gemm_sm90

    steps = ldm._bit_steps
    print(_env())
    warm_gpu()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for M, N, K in parse_shapes(args.shapes, 3, "4096x4096x4096"):
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        kernels.gemm(sets[0][0], sets[0][1], out)          # records how kernels.gemm maps the operands
        _, fa, fb, *_ = gemm_api._FAST[next(reversed(gemm_api._FAST))]
        k = gemm_sm90(M, N, K, sms=sms, **gemm_api._tile({}, M, N, K, sms))
        built = {}
        for name, fn in (("select", lambda coords: None), ("arithmetic", steps)):
            ldm._bit_steps = fn
            k.__dict__.pop("_tirxpy_builds", None)          # build() memoizes on the kernel object
            built[name] = tirxpy.compile(k, arch="sm_90a")
        ldm._bit_steps = steps
        if built["select"].cuda_source == built["arithmetic"].cuda_source:
            raise SystemExit(f"{M}x{N}x{K}: both builds have the same source (no ldmatrix / stmatrix?)")
        bias = gemm_api._bias_arg(None, torch.bfloat16, out.device)
        ref = sets[0][0].float() @ sets[0][1].float()
        for name, ck in built.items():
            out.fill_(float("nan"))
            ck(fa(sets[0][0]), fb(sets[0][1]), bias, out)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            if not err < 4e-3:
                raise SystemExit(f"{M}x{N}x{K} {name}: relative error {err:.1e}")
        fns = {"cublas": lambda a, b: torch.matmul(a, b, out=out)}
        for name, ck in built.items():
            fns[name] = (lambda c: lambda a, b: c(fa(a), fb(b), bias, out))(ck)
        flop = 2 * M * N * K
        for p in range(args.passes):
            ms = median_ms(fns, sets, args.reps)
            tc = flop / ms["cublas"] / 1e9
            cells = [f"{n} {flop / ms[n] / 1e9:.0f} ({flop / ms[n] / 1e9 / tc:.3f})" for n in built]
            print(f"{M}x{N}x{K} pass {p}: cuBLAS {tc:.0f} TFLOPS; " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
