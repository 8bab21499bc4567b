"""GPU: every sm_80 / sm_90a gemm implementation against a float64 torch reference, on fresh
random inputs each run, outputs poisoned (NaN) before launch, several shapes including several
k-steps and ragged M / N edges. Kernels: tests/primitives/gemm/gemm_kernels.py. With ``--sim``
(any machine) the same tests run the kernels in tirxpy.sim."""
import importlib.util
import pathlib

import pytest

from tests.sim_plugin import device, launch
from tirxpy.lower.runtime import device_arch

pytestmark = pytest.mark.gpu

_PATH = pathlib.Path(__file__).resolve().parents[1] / "primitives" / "gemm" / "gemm_kernels.py"
_spec = importlib.util.spec_from_file_location("tx_gemm_kernels", _PATH)
g = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(g)


def _run(kernel, arch, M, N, K, b_nk, dtype="bfloat16", sim=False):
    import torch

    dev = device(sim)
    tdt = getattr(torch, dtype)
    A = torch.randn(M, K, device=dev).to(tdt)
    B = torch.randn(*((N, K) if b_nk else (K, N)), device=dev).to(tdt)
    C = torch.full((M, N), float("nan"), device=dev, dtype=torch.float32)
    launch(kernel, A, B, C, sim=sim, arch=arch)
    Bk = B.double().T if b_nk else B.double()
    ref = A.double() @ Bk
    assert not torch.isnan(C).any(), "some outputs were never written"
    torch.testing.assert_close(C.double(), ref, rtol=1e-3, atol=1e-3 * K ** 0.5)


@pytest.mark.parametrize("M, N, K", [(32, 16, 16), (32, 16, 64), (40, 24, 32), (100, 50, 48)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mma_sync(M, N, K, dtype, sim_mode):
    _run(g.mma_sync_gemm(M, N, K, dtype=dtype), "sm_80" if sim_mode else device_arch(), M, N, K, b_nk=False,
         dtype=dtype, sim=sim_mode)


@pytest.mark.parametrize("M, N, K, BN", [(64, 64, 64, 64), (72, 80, 128, 64), (130, 256, 64, 128), (64, 256, 192, 256)])
@pytest.mark.parametrize("b_nk", [True, False])
def test_wgmma_ss(M, N, K, BN, b_nk, sim_mode):
    _run(g.wgmma_gemm(M, N, K, BN=BN, b_nk=b_nk), "sm_90a", M, N, K, b_nk=b_nk, sim=sim_mode)


@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (100, 72, 128)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_wgmma_rs(M, N, K, dtype, sim_mode):
    _run(g.wgmma_gemm(M, N, K, BN=64, a_regs=True, dtype=dtype), "sm_90a", M, N, K, b_nk=True, dtype=dtype,
         sim=sim_mode)
