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


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kernel kind 'conv'"):
        prebuild_one(("conv", 1))
    assert prebuild([("conv", 1)], jobs=1) == 0.0      # one job: nothing is prebuilt
