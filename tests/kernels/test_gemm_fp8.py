"""The Hopper FP8 GEMM (tirxpy_kernels.gemm_sm90 with ``scaling=``, tirxpy_kernels.gemm_fp8): each scaling through
the simulator at ragged shapes against the float64 product of the dequantized operands, the argument checks
on meta tensors, and on the GPU against float64 with NaN-poisoned outputs (outliers, ragged M / N / K,
bias, every output dtype, e5m2), the block scaling's error at K = 16384 against cuBLAS's per-tensor one."""
import pytest
import torch

import tirxpy_kernels
from tirxpy.sim import run
from tirxpy_kernels.bench_fp8 import reference
from tirxpy_kernels.gemm_fp8_api import Fp8ArgumentError, _scale_args, check, scales
from tirxpy_kernels.gemm_plan import kernel_plan
from tirxpy_kernels.gemm_sm90 import gemm_sm90, scale_shapes

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _fresh():
    return torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))


def _operands(M, N, K, g, dtype=E4M3, outliers=False):
    a = torch.randn(M, K, generator=g) * 2
    w = torch.randn(N, K, generator=g) * 2
    if outliers:        # a few large entries: the scales must keep the rest representable
        a[torch.rand(M, K, generator=g) < 0.01] *= 100
    return a.to(dtype), w.to(dtype)


def _scales(scaling, M, N, K, g):
    kb, nb = -(-K // 128), -(-N // 128)
    shapes = {"tensor": ((), ()), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, nb))}[scaling]
    return tuple(torch.rand(s, generator=g) + 0.5 for s in shapes)


@pytest.mark.parametrize("M,N,K,scaling,BN,out_dtype,bias,dtype", [
    (136, 200, 144, "row", 128, "float32", True, E4M3),          # row scales with a fused bias, float32 output
    (200, 264, 272, "block", 128, "bfloat16", False, E4M3),      # three column blocks, ragged last k-block
    (130, 128, 400, "block", 128, "float16", True, E5M2),        # e5m2, four k-blocks, bias
    (200, 200, 272, "tensor", 192, "bfloat16", False, E5M2),     # a 192-wide tile, ragged M, N, K
])
def test_fp8_sim_matches_float64(M, N, K, scaling, BN, out_dtype, bias, dtype):
    g = _fresh()
    a, w = _operands(M, N, K, g, dtype, outliers=True)
    sa, sb = _scales(scaling, M, N, K, g)
    SA, SB = _scale_args(scaling, sa, sb, M, N, K, M, N, K, BN)
    P = kernel_plan(M, N, K, BN=BN, STAGES=2, dtype="float8_e4m3" if dtype == E4M3 else "float8_e5m2",
                    scaling=scaling, out_dtype=out_dtype, bias=bias)
    assert (tuple(SA.shape), tuple(SB.shape)) == scale_shapes(P)
    k = gemm_sm90(M, N, K, BN=BN, STAGES=2, sms=2, dtype=P.dtype, scaling=scaling, out_dtype=out_dtype, bias=bias)
    tdt = getattr(torch, out_dtype)
    bias_t = (torch.randn(1, N, generator=g) if bias else torch.zeros(1, 1)).to(tdt)
    c = torch.full((M, N), float("nan")).to(tdt)
    res = run(k, a, w, SA, SB, bias_t, c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    ref = reference(a, w.t(), sa, sb, scaling) + (bias_t.double() if bias else 0)
    # FP8 products are exact in float32; the sums round in float32 and the output in out_dtype
    ulp = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -24}[out_dtype]
    mag = reference(a.float().abs().to(dtype), w.float().abs().to(dtype).t(), sa, sb, scaling)
    bound = ulp * ref.abs() + K * 2.0 ** -23 * mag + 1e-30
    assert torch.all((c.double() - ref).abs() <= bound)


def _meta(*shape, dtype=E4M3):
    return torch.empty(shape, dtype=dtype, device="meta")


A, W = _meta(256, 512), _meta(384, 512)
S0 = torch.empty((), device="meta")


def test_scalings_read_from_the_scale_shapes():
    m = lambda *s: torch.empty(s, device="meta")   # noqa: E731
    assert scales(A, W.t(), S0, S0) == "tensor"
    assert scales(A, W.t(), m(1, 1), m(1)) == "tensor"
    assert scales(A, W.t(), m(256, 1), m(1, 384)) == "row"
    assert scales(A, W.t(), m(256, 4), m(4, 3)) == "block"
    assert scales(A, W.t(), m(256, 4), m(4, 3), "block") == "block"


@pytest.mark.parametrize("args,kw,msg", [
    ((A, W, S0, S0), {}, "shapes do not chain"),
    ((A, W.t().contiguous(), S0, S0), {}, "b must be (K, N) column-major, the .t() of a row-major (N, K) weight"),
    ((A.t().contiguous().t(), W.t(), S0, S0), {}, "a must be row-major (M, K)"),
    ((_meta(256, 512, dtype=torch.bfloat16), W.t(), S0, S0), {}, "a has dtype torch.bfloat16; it takes torch.float8_e4m3fn"),
    ((A, _meta(384, 512, dtype=E5M2).t(), S0, S0), {}, "one FP8 format for both"),
    ((A, W.t(), torch.empty(256, 2, device="meta"), S0), {}, "name no scaling"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(3, 4, device="meta")), {},
     "'block': scale_a (256, 4), scale_b (4, 3)"),
    ((A, W.t(), S0, S0), dict(scaling="row"), "scaling='row' for a (256, 512) @ (512, 384) product takes scale_a of "
                                              "shape (256, 1) and scale_b (1, 384)"),
    ((A, W.t(), S0, S0), dict(scaling="blockwise"), "scaling must be one of ('tensor', 'row', 'block')"),
    ((A, W.t(), torch.empty((), device="meta", dtype=torch.float16), S0), {}, "scale_a has dtype torch.float16"),
    ((A, W.t(), [1.0], S0), {}, "scale_a must be a dense float32 torch.Tensor, got list"),
    ((A, W.t(), S0, S0), dict(BN=100), "gemm_fp8: BN = 100 must be a multiple of 16"),
    ((A, W.t(), S0, S0), dict(BN="x"), "gemm_fp8: BN must be an int"),
    ((A, W.t(), S0, S0), dict(CM=2), "unknown tuning argument(s) ['CM']"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(BN=256),
     "scaling='block' takes BN = 128"),
    ((A, W.t(), S0, S0), dict(out_dtype=torch.int8), "out_dtype torch.int8 must be torch.bfloat16"),
    ((A, W.t(), S0, S0), dict(bias=torch.empty(5, device="meta")), "bias must be a floating-point tensor of shape (384,)"),
    ((A, W.t(), S0, S0, torch.empty(256, 383, device="meta")), {}, "out must be a contiguous (256, 384) tensor"),
])
def test_bad_arguments_are_refused_with_the_fix(args, kw, msg):
    with pytest.raises(Fp8ArgumentError) as e:
        check(*args, **kw)
    assert msg in str(e.value)


def test_the_api_needs_a_cuda_device():
    a, w = torch.zeros(256, 512).to(E4M3), torch.zeros(384, 512).to(E4M3)
    with pytest.raises(Fp8ArgumentError, match="runs on a CUDA GPU"):
        tirxpy_kernels.gemm_fp8(a, w.t(), torch.ones(()), torch.ones(()))


# ---- GPU -----------------------------------------------------------------------------------------------------

def _gpu_case(M, N, K, scaling, out_dtype=torch.bfloat16, bias=False, dtype=E4M3, **tuning):
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = torch.randn(M, K, device="cuda", generator=g) * 2
    a[torch.rand(M, K, device="cuda", generator=g) < 0.001] *= 50
    a = a.to(dtype)
    w = (torch.randn(N, K, device="cuda", generator=g) * 2).to(dtype)
    kb, nb = -(-K // 128), -(-N // 128)
    shp = {"tensor": ((), ()), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, nb))}[scaling]
    sa, sb = (torch.rand(s, device="cuda", generator=g) + 0.5 for s in shp)
    bias_t = torch.randn(N, device="cuda", generator=g).to(torch.bfloat16) if bias else None
    out = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    res = tirxpy_kernels.gemm_fp8(a, w.t(), sa, sb, out, bias=bias_t, scaling=scaling, **tuning)
    torch.cuda.synchronize()
    ref = reference(a, w.t(), sa, sb, scaling) + (bias_t.double().to(out_dtype).double() if bias else 0)
    return res, ref, a, w, sa, sb


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1000, 2112, 7168), (777, 1000, 1000), (64, 72, 48),
                                   (4096, 7168, 2048), (129, 257, 129)])
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_gpu_matches_float64(M, N, K, scaling):
    res, ref, *_ = _gpu_case(M, N, K, scaling)
    assert not torch.isnan(res).any()
    err = (res.double() - ref).abs()
    assert torch.all(err <= 2.0 ** -8 * ref.abs() + 1e-3 * ref.abs().max())


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype,bias,dtype", [(torch.float32, True, E4M3), (torch.float16, False, E5M2),
                                                  (torch.bfloat16, True, E5M2)])
def test_gpu_epilogues_and_formats(scaling, out_dtype, bias, dtype):
    res, ref, *_ = _gpu_case(520, 1032, 1040, scaling, out_dtype, bias, dtype)
    ulp = {torch.float32: 2.0 ** -20, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[out_dtype]
    assert res.dtype == out_dtype and not torch.isnan(res).any()
    assert torch.all((res.double() - ref).abs() <= ulp * ref.abs() + 1e-4 * ref.abs().max())


@pytest.mark.gpu
def test_gpu_block_scaling_error_at_16k_is_no_larger_than_cublas_per_tensor():
    """At K = 16384 the block-scaled product (promoted to float32 every 128 of K) is at least as accurate as
    cuBLAS's per-tensor FP8 GEMM on the same operands (unit block scales: the same product)."""
    M, N, K = 1024, 1024, 16384
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = (torch.randn(M, K, device="cuda", generator=g) * 3).to(E4M3)
    w = (torch.randn(N, K, device="cuda", generator=g) * 3).to(E4M3)
    ref = a.double() @ w.double().t()
    one = torch.ones((), device="cuda")
    ours = tirxpy_kernels.gemm_fp8(a, w.t(), torch.ones(M, K // 128, device="cuda"),
                                   torch.ones(K // 128, N // 128, device="cuda"), out_dtype=torch.float32)
    cublas = torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.float32)
    e_ours = (ours.double() - ref).norm() / ref.norm()
    e_cublas = (cublas.double() - ref).norm() / ref.norm()
    assert e_ours <= e_cublas * 1.0001, (e_ours.item(), e_cublas.item())


@pytest.mark.gpu
def test_gpu_repeated_calls_reuse_the_launch_and_follow_new_scales():
    M, N, K = 512, 512, 512
    res, ref, a, w, sa, sb = _gpu_case(M, N, K, "row")
    sa2 = sa * 2
    res2 = tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb)
    assert torch.allclose(res2.double(), 2 * res.double(), rtol=2 ** -7)
