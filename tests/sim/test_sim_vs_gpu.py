"""GPU tests (marker gpu): the simulator's output equals the GPU's for the same inputs, bit for
bit for integer / exact kernels, within accumulation-order tolerance for float GEMMs.

Run on the H100 / H200 machine with:  python -m pytest -q -m gpu tests/sim/test_sim_vs_gpu.py
Fresh random inputs every run; GPU outputs poisoned before launch.
"""
import importlib.util
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

_spec = importlib.util.spec_from_file_location("pipeline_kernels", pathlib.Path(__file__).with_name("pipeline_kernels.py"))
pk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pk)


def _arch():
    from tirxpy.lower.runtime import device_arch

    return device_arch()


def _gpu(kernel, *args):
    import tirxpy

    k = tirxpy.compile(kernel, arch=_arch())
    k(*args)
    torch.cuda.synchronize()


def test_shuffle_and_smem_kernel_bit_exact():
    from tirxpy import T
    from tirxpy.sim import run

    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((256,), "uint32"), B: T.Tensor((256,), "uint32")):
    T.launch(grid=(2,), threads=128)
    s = T.alloc_shared((128,), "uint32")
    t = T.thread_id()
    g = T.cta_id(0) * 128 + t
    v = A[g] * T.uint32(2654435761) + T.ptx.shfl_sync_bfly_b32(A[g], T.uint32(5), T.uint32(0xffffffff))
    s[t] = v ^ (v >> T.uint32(7))
    T.ptx.syncthreads()
    B[g] = s[127 - t] + T.ptx.shfl_sync_down_b32(s[t], T.uint32(3), T.uint32(0xffffffff))
''')
    a_np = np.random.default_rng(int(torch.randint(0, 2**31, (1,)))).integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    b_sim = np.zeros(256, np.uint32)
    run(k, a_np, b_sim)
    a_gpu = torch.from_numpy(a_np.view(np.int32)).cuda().view(torch.uint32)  # the kernel takes uint32
    b_gpu = torch.full((256,), -1, dtype=torch.int32, device="cuda").view(torch.uint32)  # poisoned
    _gpu(k, a_gpu, b_gpu)
    assert np.array_equal(b_gpu.view(torch.int32).cpu().numpy().view(np.uint32), b_sim)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                    reason="wgmma needs sm_90a (Hopper)")
@pytest.mark.parametrize("M, N, K, BN", [(64, 64, 256, 64), (128, 256, 128, 128)])
def test_pipeline_gemm_sim_equals_gpu(M, N, K, BN):
    from tirxpy.sim import run
    from tirxpy.sim.values import from_bits

    a = torch.randn(M, K).to(torch.bfloat16)
    b = torch.randn(N, K).to(torch.bfloat16)
    a_bits = a.view(torch.int16).numpy().view(np.uint16)
    b_bits = b.view(torch.int16).numpy().view(np.uint16)
    kernel = pk.pipeline_gemm(M=M, N=N, K=K, BN=BN)
    c_sim = np.full((M, N), np.nan, np.float32)
    run(kernel, a_bits, b_bits, c_sim)
    c_gpu = torch.full((M, N), float("nan"), device="cuda")
    _gpu(kernel, a.cuda(), b.cuda(), c_gpu)
    ref = from_bits(a_bits, "bfloat16").astype(np.float64) @ from_bits(b_bits, "bfloat16").astype(np.float64).T
    got = c_gpu.cpu().numpy()
    # same inputs: equal up to the order the tensor cores accumulate in (fp32 sums of K products)
    tol = 4 * K * np.finfo(np.float32).eps * np.abs(from_bits(a_bits, "bfloat16")).max() * \
        np.abs(from_bits(b_bits, "bfloat16")).max()
    np.testing.assert_allclose(got, c_sim, rtol=0, atol=tol)
    np.testing.assert_allclose(c_sim, ref, rtol=1e-5, atol=tol)
