"""Host time per ``kernels.attention`` call (GPU machine): the checked path (the fast-path cache
cleared before every call) against the fast path a repeated call takes.

    python benchmarks/attention_host.py

20 calls without synchronizing (the host's time per call, as long as the GPU queue does not fill),
then the time until the GPU is done; the median of 5 such loops. Used for the ``inner`` choice of
the attention benchmark; not a test.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    import torch

    import kernels
    from kernels import attention_api as api

    for S, D in ((1024, 128), (1024, 64)):
        q, k, v = (torch.randn(32768 // S, S, 16, D, device="cuda").bfloat16() for _ in range(3))
        kernels.attention(q, k, v)
        torch.cuda.synchronize()
        for clear in (True, False):
            res = []
            for _ in range(5):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(20):
                    if clear:
                        api._FAST.clear()
                    kernels.attention(q, k, v)
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                res.append(((t1 - t) / 20 * 1e6, (time.perf_counter() - t) / 20 * 1e6))
            res.sort()
            print(f"S={S} D={D} {'checked' if clear else 'fast'} path: host {res[2][0]:.0f} us/call, "
                  f"host + GPU {res[2][1]:.0f} us/call")


if __name__ == "__main__":
    main()
