"""The simulator runs a warp-specialized TMA -> mbarrier -> wgmma pipeline correctly, and names
each synchronization step deleted from it."""
import importlib.util
import pathlib

import numpy as np
import pytest

from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits

_spec = importlib.util.spec_from_file_location("pipeline_kernels", pathlib.Path(__file__).with_name("pipeline_kernels.py"))
pk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pk)


def _inputs(N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = to_bits(rng.standard_normal((64, K)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((N, K)).astype(np.float32), "bfloat16")
    return a, b


def _ref(a, b):
    return from_bits(a, "bfloat16").astype(np.float64) @ from_bits(b, "bfloat16").astype(np.float64).T


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pipeline_matches_float64(seed):
    a, b = _inputs(64, 256, seed)
    c = np.full((64, 64), np.nan, np.float32)
    out = run(pk.pipeline_gemm(N=64, K=256), a, b, c, seed=seed)
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
    assert out.problems == []


@pytest.mark.parametrize("drop, kind", [
    ("full_wait", {"race"}),
    # without the empty wait the producer laps the ring: a second arrive on full[s] in one phase
    ("empty_wait", {"race", "mbarrier_over_arrive"}),
    ("expect_tx", {"tx_underflow"}),
    ("fence_proxy_async", {"missing_fence_proxy_async"}),
    ("wgmma_wait", {"wgmma_accumulator_before_wait"}),
    ("wgmma_fence", {"missing_wgmma_fence"}),
])
def test_mutation_is_reported(drop, kind):
    a, b = _inputs(64, 256)
    c = np.zeros((64, 64), np.float32)
    with pytest.raises(SimReportError) as ei:
        run(pk.pipeline_gemm(N=64, K=256, drop=drop), a, b, c)
    assert kind & ei.value.kinds(), str(ei.value)
    text = str(ei.value)
    assert "pipeline_kernels.py" in text and "warp" in text


def test_multi_cta_grid_matches_float64():
    rng = np.random.default_rng(5)
    from tirxpy.sim.values import to_bits

    a = to_bits(rng.standard_normal((128, 128)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((128, 128)).astype(np.float32), "bfloat16")
    c = np.zeros((128, 128), np.float32)
    run(pk.pipeline_gemm(M=128, N=128, K=128, BN=64), a, b, c, seed=3)
    np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
