"""Where does ``kernels.gemm``'s host time go? (GPU machine; a diagnostic, not a test.)

    python benchmarks/gemm_host_parts.py [N]       (square N^3 problem, default 2048)

Times each piece of the repeated-shape (fast) path on its own, with the GPU kept busy by a sleep
kernel so that no launch blocks: the output allocation, the cache key, the transposed view of
``b``, the argument check and packing (``ArgPacker.pack``, and again with its straight-line path
off), the bare ``cuLaunchKernelEx``, the bound launcher, the compiled kernel's call, the whole
``kernels.gemm`` (and again with the full checks), and cuBLAS's ``torch.matmul`` / ``a @ b`` for
comparison. Microseconds per call, mean of 300 calls.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv):
    import torch

    import kernels
    from kernels import gemm_api as ga

    M = N = K = int(argv[0]) if argv else 2048
    a = torch.randn(M, K, device="cuda").bfloat16()
    w = torch.randn(N, K, device="cuda").bfloat16()
    b = w.t()
    kernels.gemm(a, b)
    torch.cuda.synchronize()
    ck, _, _ = next(iter(ga._FAST.values()))
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    bias = ga._bias_arg(None, torch.bfloat16, a.device)
    ck(a, w, bias, out)
    torch.cuda.synchronize()
    ln = ck._launcher
    base = (a, w, bias, out)
    args = base + tuple(base[i] for i in ck._tm_index)
    params = ln.packer.pack(args)
    entry = next(iter(ln._cfgs.values()))

    def t(name, f, n=300):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000_000)
        f()
        s = time.perf_counter()
        for _ in range(n):
            f()
        us = (time.perf_counter() - s) / n * 1e6
        torch.cuda.synchronize()
        print(f"{name:30s} {us:7.2f} us", flush=True)

    t("torch.empty", lambda: torch.empty((M, N), dtype=torch.bfloat16, device=a.device))
    t("key", lambda: (a.shape, a.stride(), b.shape, b.stride(), a.dtype, b.dtype, a.device, None, None, True,
                      None, ()))
    t("b.t()", lambda: b.t())
    t("pack", lambda: ln.packer.pack(args))
    fast, ln.packer._fast = ln.packer._fast, None
    t("pack (full checks)", lambda: ln.packer.pack(args))
    ln.packer._fast = fast
    t("stream", lambda: ln.kernel._stream(ln.kernel.device_index))
    t("raw cuLaunchKernelEx", lambda: ln._fn(entry[2], ln._fh, params, None))
    t("Launcher call", lambda: ln(ck._grid, ck._block, args, smem_bytes=ck.smem_bytes, cluster=ck.cluster))
    t("ck(a, w, bias, out)", lambda: ck(a, w, bias, out))
    t("kernels.gemm(a, b)", lambda: kernels.gemm(a, b))
    ln.packer._fast = None
    t("kernels.gemm, full checks", lambda: kernels.gemm(a, b))
    ln.packer._fast = fast
    t("torch.matmul(a, b)", lambda: torch.matmul(a, b))
    t("a @ b", lambda: a @ b)


if __name__ == "__main__":
    main(sys.argv[1:])
