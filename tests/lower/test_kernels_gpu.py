"""GPU tests (marker gpu) of kernels built by tirxpy.lower.build from intrinsics only.

Run on the GPU machine (H100 / H200) with:

    python -m pytest -q -m gpu tests/lower/test_kernels_gpu.py

(a) TMA 2-D load of a (64 x 64) bf16 tile into 128B-swizzled shared memory completing on an
mbarrier (expect_tx), ldmatrix.x4 to registers, x * 2 + 1 in f32, st.global; random shapes.
(b) one-warpgroup wgmma m64nNk16 (bf16 in, f32 accumulate, A and B from 128B-swizzled shared
memory through descriptors) for several N against a float64 reference.
Fresh random inputs every run; outputs poisoned (NaN) before launch. The factories are also
compiled on CPU by tests/lower/test_codegen_kernels.py.
"""
import pytest
import torch

import tirxpy
import tirxpy.intrinsics  # noqa: F401  (T.ptx.* names)
from tirxpy.intrinsics import wgmma
from tirxpy import T
from tirxpy.layout.atoms import mma_smem_layout, wgmma_accumulator


@tirxpy.jit
def tma_ldmatrix_kernel(rows, cols):
    sl = mma_smem_layout(64, 64, "bfloat16", "K", 128)

    @T.prim_func
    def tma_ldmatrix(A: T.Tensor((rows, cols), "bfloat16"), Out: T.Tensor((rows, cols), "float32")):
        T.launch(grid=(cols // 64, rows // 64), threads=128)
        sA = T.alloc_shared((64, 64), "bfloat16", layout=sl)
        bar = T.alloc_shared((1,), "uint64")
        frag = T.alloc_local((8,), "bfloat16")
        r0 = T.cta_id(1) * 64
        c0 = T.cta_id(0) * 64
        if T.warp_id() == 0:
            if T.elect_one():
                T.ptx.mbarrier_init(bar[0], 1)
                T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.warp_id() == 0:
            if T.elect_one():
                T.ptx.mbarrier_arrive_expect_tx(bar[0], 64 * 64 * 2)
                T.ptx.tma_load_2d(sA, A[r0:r0 + 64, c0:c0 + 64], 0, 0, bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        w = T.warp_id()
        lane = T.lane_id()
        q = lane // 8
        for kk in T.unroll(4):
            T.ptx.ldmatrix_x4(frag, sA[w * 16 + q % 2 * 8 + lane % 8, kk * 16 + q // 2 * 8])
            for s in T.unroll(8):
                row = r0 + w * 16 + s // 2 % 2 * 8 + lane // 4
                col = c0 + kk * 16 + s // 4 * 8 + lane % 4 * 2 + s % 2
                Out[row, col] = T.cast(frag[s], "float32") * T.float32(2) + T.float32(1)

    return tma_ldmatrix


@tirxpy.jit
def wgmma_kernel(n):
    sl_a = mma_smem_layout(64, 64, "bfloat16", "K", 128)
    sl_b = mma_smem_layout(n, 64, "bfloat16", "K", 128)
    acc_l = wgmma_accumulator(n)
    mma = wgmma.get(n=n, d="float32", a="bfloat16", b="bfloat16", a_from="smem")

    @T.prim_func
    def wgmma_64xnx16(A: T.Tensor((64, 16), "bfloat16"), B: T.Tensor((n, 16), "bfloat16"),
                      D: T.Tensor((64, n), "float32")):
        T.launch(grid=(1,), threads=128)
        sA = T.alloc_shared((64, 64), "bfloat16", layout=sl_a)
        sB = T.alloc_shared((n, 64), "bfloat16", layout=sl_b)
        acc = T.alloc_local((64, n), "float32", layout=acc_l)
        tid = T.thread_id()
        for it in T.serial(64 * 16 // 128):
            idx = it * 128 + tid
            sA[idx // 16, idx % 16] = A[idx // 16, idx % 16]
        for it in T.serial(n * 16 // 128):
            idx = it * 128 + tid
            sB[idx // 16, idx % 16] = B[idx // 16, idx % 16]
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        T.ptx.wgmma_fence()
        mma(acc, sA[0:64, 0:16], sB[0:n, 0:16], False, 1, 1, 0, 0)
        T.ptx.wgmma_commit_group()
        T.ptx.wgmma_wait_group(0)
        w = T.warp_id()
        lane = T.lane_id()
        for nb in T.unroll(n // 8):
            for h in T.unroll(2):
                for c in T.unroll(2):
                    row = w * 16 + h * 8 + lane // 4
                    col = nb * 8 + lane % 4 * 2 + c
                    D[row, col] = acc[row, col]

    return wgmma_64xnx16


def _arch():
    major, minor = torch.cuda.get_device_capability()
    return {9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}")


@pytest.mark.gpu
@pytest.mark.parametrize("trial", range(4))
def test_tma_ldmatrix_scale(trial):
    rows, cols = 64 * int(torch.randint(1, 5, (1,))), 64 * int(torch.randint(1, 9, (1,)))  # fresh shapes each run
    k = tirxpy.compile(tma_ldmatrix_kernel(rows, cols), arch=_arch())
    assert k.resources.spills == 0 and k.resources.stack_bytes == 0
    if k.arch == "sm_90a":
        sass = _sass_or_none(k)
        if sass is not None:
            assert "LDSM" in sass and "UTMALDG" in sass
    a = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
    out = torch.full((rows, cols), float("nan"), device="cuda")
    k(a, out)
    torch.cuda.synchronize()
    # x * 2 is exact, so x * 2 + 1 has one rounding in f32 whether or not it is fused: bitwise equal
    assert torch.equal(out, a.float() * 2 + 1), (rows, cols)


@pytest.mark.gpu
def test_bound_launch_reads_the_tensors_current_contents_and_its_own_arguments():
    """CompiledKernel.bind: checked once (a bad argument raises there), then each call launches with the
    packed arguments -- the pointers and the tensor map of the tensors bound, whatever was launched in
    between -- and reads what those tensors hold at launch time."""
    from tirxpy.lower.errors import LaunchError

    rows, cols = 128, 64 * int(torch.randint(1, 5, (1,)))
    k = tirxpy.compile(tma_ldmatrix_kernel(rows, cols), arch=_arch())
    a1, a2 = (torch.randn(rows, cols, device="cuda").to(torch.bfloat16) for _ in range(2))
    out1, out2 = (torch.full((rows, cols), float("nan"), device="cuda") for _ in range(2))
    with pytest.raises(LaunchError, match="parameter 'A': dtype is float32"):
        k.bind(a1.float(), out1)
    bl = k.bind(a1, out1)
    k(a2, out2)                                  # a checked launch in between: the packer's buffer moves on
    bl()
    torch.cuda.synchronize()
    assert torch.equal(out1, a1.float() * 2 + 1) and torch.equal(out2, a2.float() * 2 + 1)
    a1.copy_(torch.randn(rows, cols, device="cuda").to(torch.bfloat16))
    out1.fill_(float("nan"))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    bl(stream=s)
    s.synchronize()
    assert torch.equal(out1, a1.float() * 2 + 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="wgmma exists only on Hopper (sm_90a)")
@pytest.mark.parametrize("n", [8, 32, 64, 128, 256])
def test_wgmma_64xnx16_matches_float64(n):
    k = tirxpy.compile(wgmma_kernel(n), arch="sm_90a")
    assert k.resources.spills == 0
    a = torch.randn(64, 16, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, 16, device="cuda").to(torch.bfloat16)
    d = torch.full((64, n), float("nan"), device="cuda")
    k(a, b, d)
    torch.cuda.synchronize()
    # bf16 x bf16 products are exact in f32 (8 + 8 significant bits); the only error is the f32
    # accumulation of 16 terms: |err| <= 16 * 2**-24 * sum |a_k b_k| (recursive-summation bound).
    ref = a.double() @ b.double().T
    bound = 16 * 2.0 ** -24 * (a.double().abs() @ b.double().abs().T) + 1e-30
    assert torch.all((d.double() - ref).abs() <= bound), (d.double() - ref).abs().max()
    torch_f32 = a.float() @ b.float().T
    assert torch.all((torch_f32.double() - ref).abs() <= bound)


def _sass_or_none(k):
    from tirxpy.lower.errors import ToolchainError

    try:
        return k.sass
    except ToolchainError:
        return None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="built for sm_90a (Hopper)")
@pytest.mark.parametrize("n", [0, 1, 3, 7])
def test_loop_bounds_run_their_trip_counts(n):
    """A ternary loop bound runs its count on the GPU (unparenthesized, `i < c ? a : b` never ended)."""
    from tests.lower.test_codegen import loop_bounds

    ck = tirxpy.compile(loop_bounds, arch="sm_90a")
    out = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    ck(torch.tensor([n, 0, 0, 0], dtype=torch.int32, device="cuda"), out)
    torch.cuda.synchronize()
    assert out.tolist() == [(n if n > 2 else 1) + 100 * (n >> 1)] * 4
