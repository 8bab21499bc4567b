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


@pytest.mark.parametrize("kw,msg", [
    (dict(n_rows=0), r"n_rows = 0 is out of range"), (dict(n_rows=True), r"n_rows must be an int, got True"),
    (dict(n_rows=2.0), r"n_rows must be an int"), (dict(n_rows=2 ** 31), r"n_rows = 2147483648 is out of range"),
    (dict(d=64.0), r"row width d must be an int"), (dict(d=2 ** 40), r"row width d = 1099511627776 is out of range"),
    (dict(eps=float("nan")), r"eps must be a finite float >= 0"), (dict(eps=-1e-6), r"eps must be a finite float"),
    (dict(eps=float("inf")), r"eps must be"), (dict(eps=1e300), r"eps must be"), (dict(eps=True), r"eps must be"),
    (dict(eps="1e-6"), r"eps must be"), (dict(eps=None), r"eps must be"),
    (dict(elems_per_thread=0), r"elems_per_thread = 0 is out of range"),
    (dict(elems_per_thread=1.5), r"elems_per_thread must be an int"),
    (dict(elems_per_thread=None), r"elems_per_thread must be an int"),
])
def test_factory_refuses_bad_arguments_by_name(kw, msg):
    """Each argument is checked before the kernel is built: a NaN, infinite, negative or (in float32) infinite eps
    would make every output NaN or 0, and a non-int size would fail deep in the parser."""
    from tirxpy_kernels.errors import KernelConfigError

    args = dict(n_rows=4, d=64)
    args.update(kw)
    with pytest.raises(KernelConfigError, match=msg):
        rmsnorm_silu(**args)


def test_factory_takes_numpy_ints_and_huge_elems_per_thread_quickly():
    """numpy ints are ints; an ``elems_per_thread`` far past the row costs no search over every count below it."""
    import time

    assert rmsnorm_silu(np.int64(4), np.int64(64)).launch.threads == 256
    t0 = time.perf_counter()
    assert plan(64, 10 ** 12) == plan(64, 64) == (2, 1, 32)
    assert time.perf_counter() - t0 < 1
