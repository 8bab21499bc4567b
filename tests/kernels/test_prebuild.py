"""tirxpy_kernels.prebuild compiles in worker processes exactly the kernels the benchmarks then build:
the in-process build afterwards is a disk-cache hit (same CUDA source, options and key)."""
import pytest

import tirxpy
from tirxpy_kernels.attention_sm90 import attention_sm90
from tirxpy_kernels.gemm_sm90 import gemm_sm90
from tirxpy_kernels.prebuild import prebuild, prebuild_one
from tirxpy.lower import cache


def test_prebuilt_kernels_are_disk_cache_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRXPY_CACHE_DIR", str(tmp_path))
    specs = [("gemm", 256, 256, 128, {"BN": 128, "STAGES": 2}, 4),
             ("attention", 1, 2, 1, 200, 80, 64, True, {"BN": 32, "STAGES": 2})]
    assert prebuild(specs, jobs=2) > 0
    cache.clear_memory()
    g = tirxpy.compile(gemm_sm90(256, 256, 128, a_major="K", b_major="K", dtype="bfloat16", out_dtype="bfloat16",
                                 bias=False, activation=None, sms=4, BN=128, STAGES=2), arch="sm_90a")
    a = tirxpy.compile(attention_sm90(1, 2, 1, 200, 80, 64, causal=True, scale=None, dtype="bfloat16", SQT=200,
                                      SKT=80, BN=32, STAGES=2), arch="sm_90a")
    assert g.module.cached == "disk" and a.module.cached == "disk"


def test_a_factory_spec_builds_that_factory_call(tmp_path, monkeypatch):
    from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90

    monkeypatch.setenv("TIRXPY_CACHE_DIR", str(tmp_path))
    args, kw = (1, 2, 1, 100, 150, 64), dict(causal=True, SQT=100, SKT=150)
    assert prebuild([("factory", "tirxpy_kernels.attention_bwd_sm90", "attention_bwd_sm90", args, kw)], jobs=2) > 0
    cache.clear_memory()
    assert tirxpy.compile(attention_bwd_sm90(*args, **kw), arch="sm_90a").module.cached == "disk"


@pytest.mark.parametrize("mod", ["os", "tirxpy_kernelsX.attention_bwd_sm90", None])
def test_a_factory_spec_outside_the_kernels_package_is_refused(mod):
    with pytest.raises(ValueError, match="a factory spec names a kernel factory of tirxpy_kernels"):
        prebuild_one(("factory", mod, "system", ("true",), {}))


def test_a_factory_spec_names_a_kernel_factory():
    with pytest.raises(ValueError, match="tirxpy_kernels.prebuild.os is not a kernel factory"):
        prebuild_one(("factory", "tirxpy_kernels.prebuild", "os", (), {}))
    with pytest.raises(ValueError, match="arguments are a tuple and a dict of keywords, got str and int"):
        prebuild_one(("factory", "tirxpy_kernels.attention_bwd_sm90", "attention_bwd_sm90", "1, 2", 5))


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kernel kind 'conv'"):
        prebuild_one(("conv", 1))
    assert prebuild([("conv", 1)], jobs=1) == 0.0      # one job: nothing is prebuilt
