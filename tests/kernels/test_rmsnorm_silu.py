"""tirxpy_kernels/rmsnorm_silu.py: plan, CPU interpretation of the lowered kernel, NVRTC compile, GPU check.

GPU (marker gpu): python -m pytest -q -m gpu tests/kernels/test_rmsnorm_silu.py
(``--sim``: the GPU test's small shapes in the simulator, on any machine)
"""
import numpy as np
import pytest

from tirxpy_kernels.rmsnorm_silu import plan, rmsnorm_silu
from tests.primitives.helpers import compile_ok
from tests.primitives.interp import bf16_array, run_lowered
from tests.sim_plugin import device, launch, skip_large


def reference(x, w, eps=1e-6):
    x = np.asarray(x, np.float64)
    z = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * np.asarray(w, np.float64)
    return z / (1 + np.exp(-z))


def test_plan_covers_every_multiple_of_32():
    for d in range(32, 16384 + 1, 32):
        v, vecs, threads = plan(d)
        assert v * vecs * threads == d and threads % 32 == 0 and 32 <= threads <= 1024 and v in (1, 2, 4, 8)
    assert plan(4096)[0] == 8 and plan(160) == (1, 5, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        plan(100)


@pytest.mark.parametrize("rows,d", [(3, 96), (11, 256), (2, 512), (2, 2048)])
def test_interpreted_matches_float64(rows, d):
    rng = np.random.default_rng(d)
    x = bf16_array(rng.standard_normal((rows, d)) * 3)
    w = bf16_array(rng.standard_normal(d))
    y = run_lowered(rmsnorm_silu(rows, d), X=x, W=w, Y=np.full((rows, d), np.nan, np.float32)).result("Y")
    ref = reference(x, w)
    np.testing.assert_allclose(y, ref, rtol=2 ** -7, atol=2 ** -7)


@pytest.mark.parametrize("d", [96, 1024, 4096, 8192])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_compiles_without_spills(d, arch):
    ck = compile_ok(rmsnorm_silu(256, d), arch)
    assert ck.resources.registers <= 64


@pytest.mark.gpu
@pytest.mark.parametrize("rows,d", [(1, 32), (7, 96), (3, 256), (333, 1024), (1000, 4096), (129, 8192), (64, 12288)])
def test_gpu_matches_float64_torch(rows, d, sim_mode):
    import torch

    skip_large(sim_mode, rows * d, 1 << 10)
    dev = device(sim_mode)
    g = torch.Generator(device=dev).manual_seed(torch.seed() % 2 ** 31)
    x = (torch.randn(rows, d, device=dev, generator=g) * 2).to(torch.bfloat16)
    w = torch.randn(d, device=dev, generator=g).to(torch.bfloat16)
    y = torch.full_like(x, float("nan"))  # poisoned: every element must be written
    launch(rmsnorm_silu(rows, d), x, w, y, sim=sim_mode)
    xd, wd = x.double(), w.double()
    z = xd * torch.rsqrt((xd * xd).mean(-1, keepdim=True) + 1e-6) * wd
    ref = z * torch.sigmoid(z)
    assert not torch.isnan(y).any()
    torch.testing.assert_close(y.double(), ref, rtol=2 ** -7, atol=2 ** -7)
