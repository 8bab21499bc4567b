"""Simulator speed: a 256x256x128 Hopper GEMM (TMA -> mbarrier ring -> wgmma m64n128k16, TMA store
epilogue; 8 CTAs of 256 threads) on the CPU, checked against float64.

    python benchmarks/sim_speed.py            # prints seconds per run (median of 3)
"""
import importlib.util
import pathlib
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(M=256, N=256, K=128, BN=128, runs=3):
    from tirxpy.sim import run
    from tirxpy.sim.values import from_bits, to_bits

    spec = importlib.util.spec_from_file_location("pk", ROOT / "tests" / "sim" / "pipeline_kernels.py")
    pk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pk)
    k = pk.pipeline_gemm(M=M, N=N, K=K, BN=BN)
    rng = np.random.default_rng(0)
    a = to_bits(rng.standard_normal((M, K)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((N, K)).astype(np.float32), "bfloat16")
    ref = from_bits(a, "bfloat16").astype(np.float64) @ from_bits(b, "bfloat16").astype(np.float64).T
    times = []
    for i in range(runs):
        c = np.zeros((M, N), np.float32)
        t0 = time.perf_counter()
        run(k, a, b, c, seed=i)
        times.append(time.perf_counter() - t0)
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)
    med = statistics.median(times)
    print(f"sim {M}x{N}x{K} Hopper GEMM (BN={BN}): median {med:.2f} s over {runs} runs ({', '.join(f'{t:.2f}' for t in times)})")
    return med


if __name__ == "__main__":
    main()
