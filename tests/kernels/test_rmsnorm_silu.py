"""tirxpy_kernels/rmsnorm_silu.py: plan, CPU interpretation of the lowered kernel, NVRTC compile, GPU check.

GPU (marker gpu): python -m pytest -q -m gpu tests/kernels/test_rmsnorm_silu.py
(``--sim``: the GPU test's small shapes in the simulator, on any machine)
"""
import re

import numpy as np
import pytest

from tirxpy_kernels.rmsnorm_silu import plan, rmsnorm_silu
from tests.primitives.helpers import compile_ok, has_build
from tests.primitives.interp import bf16_array, run_lowered
from tests.sim_plugin import device, launch, skip_large


def reference(x, w, eps=1e-6):
    x = np.asarray(x, np.float64)
    z = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * np.asarray(w, np.float64)
    return z / (1 + np.exp(-z))


def test_plan_deals_every_width_it_takes_within_the_limits():
    """Every multiple of 32 up to 16384 is dealt to 32..1024 threads within the register limit or refused by name
    (``32 p`` for a prime ``p > 84``, as 2848 = 32 x 89); every multiple of 1024 up to MAX_WIDTH is taken."""
    from tirxpy_kernels.errors import KernelConfigError
    from tirxpy_kernels.rmsnorm_silu import MAX_WIDTH, registers

    refused = []
    for d in list(range(32, 16384 + 1, 32)) + list(range(1024, MAX_WIDTH + 1, 1024)):
        try:
            v, vecs, threads = plan(d)
        except KernelConfigError as e:
            assert "does not take this width" in str(e)
            refused.append(d)
            continue
        assert v * vecs * threads == d and threads % 32 == 0 and 32 <= threads <= 1024 and v in (1, 2, 4, 8)
        assert registers(v * vecs, v) <= 255
    assert 2848 in refused and not [d for d in refused if d % 1024 == 0]
    assert plan(4096)[0] == 8 and plan(160) == (1, 5, 32)
    with pytest.raises(ValueError, match="multiple of 32"):
        plan(100)


def _verifies(d):
    """Whether the lowered kernel for one row of ``d`` passes the IR verifier's limits (sm_90a)."""
    from tirxpy.ir.errors import VerifyError
    from tirxpy.ir.verify import verify
    from tirxpy.lower.build import lower_primitives
    from tirxpy.target import supported_target

    target = supported_target("sm_90a")
    try:
        verify(lower_primitives(rmsnorm_silu(1, d), target), target)
    except VerifyError as e:
        assert "32-bit registers per thread" in str(e)
        return False
    return True


def test_register_count_is_the_verifiers(monkeypatch):
    """rmsnorm_silu.registers(elems, v) is what the lowered kernel's local tiles take: with the plan's check turned
    off (every share fits), a thread's share verifies exactly where the count is within 255, for vectors and
    scalars on both sides of the limit."""
    import tirxpy_kernels.rmsnorm_silu as rs

    count, cases = rs.registers, {}
    for d in range(32, 1024 * 90, 32):      # a width for each (elements a thread, v) of the widest v's plan
        v = 8 if (d // 32) % 8 == 0 else 4 if (d // 32) % 4 == 0 else 2 if (d // 32) % 2 == 0 else 1
        elems = v * rs._vecs(d, v, rs.ELEMS_PER_THREAD)
        cases.setdefault((elems, v), d)
    monkeypatch.setattr(rs, "registers", lambda elems, v=1: 0)
    for elems, v in [(72, 8), (80, 8), (68, 4), (76, 4), (70, 2), (74, 2), (83, 1), (85, 1)]:
        assert _verifies(cases[elems, v]) == (count(elems, v) <= 255), (cases[elems, v], elems, v)


def test_plan_refuses_a_row_the_kernel_cannot_hold_by_name():
    """A row past MAX_WIDTH, one no thread count deals within the register limit, and an elems_per_thread that
    gives a thread too much are each a KernelConfigError naming the limit and the fix, at plan time (the factory's
    first step), not the verifier's error at build time; a huge width is refused at once."""
    import time

    from tirxpy_kernels.errors import KernelConfigError
    from tirxpy_kernels.rmsnorm_silu import MAX_WIDTH

    assert MAX_WIDTH == 86016 and plan(MAX_WIDTH) == (1, 84, 1024)
    for args, msg in [((MAX_WIDTH + 32,), "the row width 86048 is past the widest row the kernel takes, 86016 = "
                                          "1024 x 84: a thread holds its share of the row in registers"),
                      ((4064,), "4064 = 32 x 127 with elems_per_thread 16 gives a thread 127 elements of the row"),
                      ((4064,), "it takes every multiple of 1024 up to 86016"),
                      ((4096, 200), "pass a smaller elems_per_thread (the default, 16, takes this row)")]:
        with pytest.raises(KernelConfigError, match=re.escape(msg)):
            plan(*args)
        with pytest.raises(KernelConfigError, match=re.escape(msg)):
            rmsnorm_silu(2, args[0], elems_per_thread=args[-1] if len(args) > 1 else 16)
    t0 = time.perf_counter()
    with pytest.raises(KernelConfigError, match="past the widest row"):
        plan(2 ** 31 - 32)
    assert time.perf_counter() - t0 < 0.5


def test_the_widest_row_builds_and_matches_float64():
    """One row of MAX_WIDTH (1024 threads of 84 elements) builds through NVRTC and, in the simulator, matches
    float64; a vector plan at its own limit (72 elements in vectors of 8) verifies too."""
    import torch

    from tirxpy.lower.build import build
    from tirxpy.sim import run
    from tirxpy_kernels.rmsnorm_silu import MAX_WIDTH

    assert plan(73728) == (8, 9, 1024) and _verifies(73728)
    k = rmsnorm_silu(1, MAX_WIDTH)
    if has_build():
        assert build(k, "sm_90a").summary()["threads"] == 1024
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, MAX_WIDTH, generator=g).bfloat16()
    w = torch.randn(MAX_WIDTH, generator=g).bfloat16()
    y = torch.full_like(x, float("nan"))
    assert not run(k, x, w, y, seed=0).problems
    torch.testing.assert_close(y.double(), torch.from_numpy(reference(x.float().numpy(), w.float().numpy())),
                               rtol=2 ** -7, atol=2 ** -7)


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
