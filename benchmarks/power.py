"""Sustained throughput, SM clock and board power of each kernel run alone, for seconds at a time.

    python benchmarks/power.py gemm MxNxK "TUNING;TUNING;..." [--secs 3] [--rounds 2]
    python benchmarks/power.py attention SxD[c] "TUNING;..." [--secs 3] [--rounds 2]

``python -m tirxpy_kernels.bench`` interleaves tirxpy and its peer sample by sample, so on a
power-limited GPU the two share one clock and the ratio mostly measures work per clock. Here each kernel
(the peer first: cuBLAS for ``gemm``, cuDNN for ``attention``, a ``c`` suffix meaning causal; then each
``TUNING``, ``KEY=VALUE,...``, empty for the defaults) runs alone for ``--secs`` seconds while
``nvidia-smi`` samples board power and SM clock every 50 ms; the first third of each window's samples is
dropped. Printed per kernel: TFLOPS, SM clock, power, energy per FLOP (W / TFLOPS = pJ / FLOP) and FLOP per
clock per SM, each the median over ``--rounds`` rounds. Needs ``nvidia-smi`` on the PATH.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _kernels(kind, shape, tunings):
    """``(peer name, {name: fn(*inputs)}, input sets, flop)``."""
    import torch

    import tirxpy_kernels
    from tirxpy_kernels.bench_tools import gemm_inputs

    fns = {}
    if kind == "gemm":
        M, N, K = (int(x) for x in shape.split("x"))
        sets = gemm_inputs(M, N, K)
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns["cublas"] = lambda a, b: torch.matmul(a, b, out=out)
        for i, t in enumerate(tunings):
            fns[f"t{i} {t or 'defaults'}"] = (lambda tt: lambda a, b: tirxpy_kernels.gemm(a, b, out, **tt))(t)
        return "cublas", fns, sets, 2 * M * N * K
    from tirxpy_kernels.bench_attention import HEADS, TOKENS, sdpa

    causal = shape.endswith("c")
    S, D = (int(x) for x in shape.rstrip("cn").split("x"))
    B = max(1, TOKENS // S)
    q, k, v = (torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16) for _ in range(3))
    cudnn = sdpa("cudnn")
    fns["cudnn"] = lambda q, k, v: cudnn(q, k, v, causal)
    for i, t in enumerate(tunings):
        fns[f"t{i} {t or 'defaults'}"] = (lambda tt: lambda q, k, v: tirxpy_kernels.attention(q, k, v, causal=causal, **tt))(t)
    return "cudnn", fns, [(q, k, v)], 4 * B * HEADS * S * S * D / (2 if causal else 1)


def _sustained(fn, sets, secs):
    """Run ``fn`` back to back for ``secs`` s (10 launches per host sync); ``(ms per call, MHz, W)``: the time
    per call from 0.8 s on, clock and power averaged over the last two thirds of the window's samples."""
    import torch

    with tempfile.NamedTemporaryFile(suffix=".csv", delete=False) as f:
        log = f.name
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=power.draw.instant,clocks.sm", "--format=csv,noheader,nounits",
                            "-lms", "50", "-f", log])
    try:
        time.sleep(0.3)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0, n, n0 = time.time(), 0, None
        while time.time() - t0 < secs:
            if n0 is None and time.time() - t0 > 0.8:
                torch.cuda.synchronize()
                s.record()
                n0 = n
            for _ in range(10):
                fn(*sets[n % len(sets)])
                n += 1
            torch.cuda.synchronize()
        e.record()
        e.synchronize()
    finally:
        smi.terminate()
        smi.wait()
    power, clock = [], []
    with open(log) as f:
        for line in f:
            try:
                p, c = (float(x) for x in line.split(","))
            except ValueError:
                continue
            power.append(p)
            clock.append(c)
    os.unlink(log)
    if n0 is None or not power:
        raise SystemExit(f"power.py: --secs {secs} left no timed window or no nvidia-smi samples")
    k0 = len(power) // 3
    return s.elapsed_time(e) / (n - n0), statistics.mean(clock[k0:]), statistics.mean(power[k0:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("gemm", "attention"))
    ap.add_argument("shape")
    ap.add_argument("tunings")
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    import torch

    from tirxpy_kernels.bench_tools import environment, parse_tunings, warm_gpu

    peer, fns, sets, flop = _kernels(args.kind, args.shape, parse_tunings(args.tunings))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for fn in fns.values():
        fn(*sets[0])
    torch.cuda.synchronize()
    print(environment())
    warm_gpu(2.0)
    res = {name: [] for name in fns}
    for r in range(args.rounds):
        for name, fn in fns.items():
            ms, mhz, watts = _sustained(fn, sets, args.secs)
            res[name].append((flop / ms / 1e9, mhz, watts))
            print(f"{args.shape} round {r} {name}: {res[name][-1][0]:.0f} TFLOPS, {mhz:.0f} MHz, {watts:.0f} W",
                  flush=True)
    ref = statistics.median(x[0] for x in res[peer])
    for name, v in res.items():
        tf, mhz, watts = (statistics.median(x[i] for x in v) for i in range(3))
        print(f"{args.shape} {name}: {tf:.0f} TFLOPS ({tf / ref:.3f} of {peer}), {mhz:.0f} MHz, {watts:.0f} W, "
              f"{watts / tf:.3f} pJ/FLOP, {tf * 1e12 / (mhz * 1e6) / sms:.0f} FLOP/clk/SM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
