"""One small Hopper GEMM launch for compute-sanitizer (GPU machine).

    compute-sanitizer --tool memcheck --report-api-errors no python benchmarks/sanitize_gemm.py --CM 2
    compute-sanitizer --tool racecheck python benchmarks/sanitize_gemm.py --pingpong
    compute-sanitizer --tool synccheck python benchmarks/sanitize_gemm.py --coop
    compute-sanitizer --tool racecheck python benchmarks/sanitize_gemm.py --split 2,1,240

Runs tirxpy_kernels.gemm once at a small ragged shape (more tiles than CTAs, so the persistent loop and
the pipeline's ring wrap) and checks it against float64; exits non-zero if the result is wrong.
"""
import argparse
import sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--CM", type=int, default=1)
    ap.add_argument("--shape", default="384x640x200")
    ap.add_argument("--pingpong", action="store_true", help="the ping-pong consumer schedule (PINGPONG=True)")
    ap.add_argument("--coop", action="store_true", help="the cooperative schedule (PINGPONG=False; without either "
                    "flag, the one tirxpy_kernels.gemm picks for the shape)")
    ap.add_argument("--split", default=None, help="rows,wide,bn2: the cooperative schedule at BN = 256 with that SPLIT "
                    "(tirxpy_kernels.gemm_sm90.gemm_sm90), e.g. 2,1,240 at the default shape: 256 + 240 + 240 columns "
                    "(the last past N) in two tile rows of three")
    a = ap.parse_args()
    import tirxpy_kernels

    M, N, K = (int(x) for x in a.shape.split("x"))
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, K, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda", generator=g).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    schedule = {"PINGPONG": True} if a.pingpong else {"PINGPONG": False} if a.coop else {}
    if a.split:
        schedule = {"PINGPONG": False, "BN": 256, "SPLIT": tuple(int(v) for v in a.split.split(","))}
    tirxpy_kernels.gemm(x, w.t(), out, CM=a.CM, STAGES=3, sms=4, **schedule)
    torch.cuda.synchronize()
    ref = x.double() @ w.double().t()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    print(f"gemm {M}x{N}x{K} CM={a.CM} {schedule or 'default'} on 4 CTAs: relerr {err:.2e}")
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
