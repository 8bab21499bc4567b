"""Does the host's launch cost bias the benchmarks' ratios? (GPU machine; a diagnostic, not a test.)

    python benchmarks/host_bias.py [MxNxK,...]     (GEMM shapes only, when given)

``kernels.bench.median_ms`` times 10 back-to-back calls per sample; the first call's host time lies
on the GPU's critical path (the start event fires on an idle GPU), so a peer with a shorter host
path gains ``(host_tirxpy - host_peer) / (10 t)``. This prints each side's host time per call (the
GPU kept busy by ``torch.cuda._sleep`` so that nothing blocks) and the ratios timed both ways:
``plain`` (as the benchmarks do) and ``busy`` (a sleep kernel queued before the start event, so that
every call is enqueued before the GPU reaches it and only device time is measured), twice each.
Also a cProfile of the repeated-shape (fast) path of ``kernels.gemm`` / ``kernels.attention``.
"""
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def host_us(fn, n=200):
    """Host microseconds per call of ``fn``, with the GPU busy (a ~0.2 s sleep kernel) so no call blocks."""
    import torch

    torch.cuda.synchronize()
    torch.cuda._sleep(400_000_000)
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return dt


def _sleep():
    import torch

    torch.cuda._sleep(3_000_000)     # ~1.7 ms: every call of the sample is queued before the GPU gets to it


def compare(label, fns, sets, flop, reps):
    from kernels.bench import median_ms

    peer = [n for n in fns if n != "tirxpy"][0]
    for meth, before in (("plain", None), ("busy", _sleep)) * 2:
        ms = median_ms(fns, sets, reps, before=before)
        print(f"  {label} {meth}: tirxpy {flop / ms['tirxpy'] / 1e9:.0f} {peer} {flop / ms[peer] / 1e9:.0f} "
              f"TFLOPS, ratio {ms[peer] / ms['tirxpy']:.3f}", flush=True)


def profile(fn, n=300):
    import torch

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print(s.getvalue())


def main():
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import kernels
    from kernels.bench import warm_gpu

    warm_gpu()
    shapes = [tuple(int(x) for x in sh.split("x")) for sh in sys.argv[1].split(",")] if len(sys.argv) > 1 else \
        [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 2112, 7168)]
    for M, N, K in shapes:
        sets = [(torch.randn(M, K, device="cuda").bfloat16(), torch.randn(N, K, device="cuda").bfloat16().t())
                for _ in range(4)]
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns = {"tirxpy": lambda a, b: kernels.gemm(a, b, out), "cublas": lambda a, b: torch.matmul(a, b, out=out)}
        for f in fns.values():
            f(*sets[0])
        a, b = sets[0]
        print(f"gemm {M}x{N}x{K} host us/call: tirxpy {host_us(lambda: kernels.gemm(a, b, out)):.1f}, "
              f"cublas {host_us(lambda: torch.matmul(a, b, out=out)):.1f}")
        compare(f"{M}x{N}x{K}", fns, sets, 2 * M * N * K, 20)
        if M == N == K == 4096:
            profile(lambda: kernels.gemm(a, b, out))
    for S, D, causal in ((1024, 64, True), (1024, 64, False), (4096, 128, False), (1024, 256, True)) \
            if len(sys.argv) == 1 else ():
        B = 32768 // S
        sets = [tuple(torch.randn(B, S, 16, D, device="cuda").bfloat16() for _ in range(3)) for _ in range(2)]
        both = [s + tuple(x.transpose(1, 2) for x in s) for s in sets]    # ours (B, S, H, D), SDPA's (B, H, S, D)

        def cudnn(q, k, v, causal=causal):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        fns = {"tirxpy": lambda q, k, v, *_: kernels.attention(q, k, v, causal=causal),
               "cudnn": lambda _q, _k, _v, q, k, v: cudnn(q, k, v)}
        for f in fns.values():
            f(*both[0])
        q, k, v, tq, tk, tv = both[0]
        print(f"attention S={S} D={D} causal={causal} host us/call: tirxpy "
              f"{host_us(lambda: kernels.attention(q, k, v, causal=causal)):.1f}, cudnn {host_us(lambda: cudnn(tq, tk, tv)):.1f}")
        compare(f"S={S} D={D} causal={causal}", fns, both, 4 * B * 16 * S * S * D / (2 if causal else 1), 15)
        if S == 1024 and D == 64 and causal:
            profile(lambda: kernels.attention(q, k, v, causal=causal))


if __name__ == "__main__":
    main()
