"""Run the block-scaled and per-tensor FP8 kernels at one shape, twice each, for ncu (argv: MxNxK, 'build' to prebuild)."""
import sys

VARIANTS = [("block", {}), ("tensor", {"PINGPONG": False, "BN": 192}), ("tensor", {})]


def main():
    import torch
    import tirxpy_kernels
    from tirxpy_kernels.bench_fp8 import fp8_inputs, inputs_scales
    M, N, K = (int(x) for x in sys.argv[1].split("x"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if sys.argv[2:] == ["build"]:
        from tirxpy_kernels.prebuild import prebuild
        print(prebuild([("gemm_fp8", M, N, K, s, t, sms) for s, t in VARIANTS], 8))
        return
    a, b = fp8_inputs(M, N, K)[0]
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    for s, t in VARIANTS:
        sa, sb = inputs_scales(s, M, N, K, "cuda")
        if s == "block":
            sa = sa.t().contiguous().t()
        for _ in range(2):
            tirxpy_kernels.gemm_fp8(a, b, sa, sb, out, scaling=s, **t)
        torch.cuda.synchronize()
        print(s, t, "done", flush=True)


if __name__ == "__main__":
    main()
