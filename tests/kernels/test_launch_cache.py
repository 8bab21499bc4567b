"""tirxpy_kernels.launch_cache: the one launch cache of tirxpy_kernels.gemm and tirxpy_kernels.attention (exact keys, a bound,
oldest-first eviction, no entry for an uncacheable call) and the compile cache both APIs share."""
import pytest
import torch

from tirxpy_kernels import attention_api, gemm_api
from tirxpy_kernels.errors import KernelConfigError
from tirxpy_kernels.launch_cache import LaunchCache, compiled, options_key, tensor_key


def test_get_returns_what_put_stored_under_an_equal_key():
    c = LaunchCache("t")
    c.put((1, "a"), "x")
    assert c.get((1, "a")) == "x" and c.get((1, "b")) is None and c[(1, "a")] == "x"
    assert (1, "a") in c and list(c) == [(1, "a")] and list(c.values()) == ["x"]


def test_the_bound_evicts_the_oldest_entry_first():
    c = LaunchCache("t", max_entries=3)
    for k in range(5):
        c.put(k, str(k))
    assert len(c) == 3 and list(c) == [2, 3, 4] and c.get(0) is None
    c.put(2, "again")           # a key stored again becomes the newest
    c.put(5, "5")
    assert list(c) == [4, 2, 5] and next(reversed(c)) == 5
    c.clear()
    assert len(c) == 0


def test_the_key_none_is_never_stored():
    c = LaunchCache("t")
    c.put(None, "x")
    assert len(c) == 0 and c.get(None) is None


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "8"])
def test_the_bound_is_checked(bad):
    with pytest.raises(KernelConfigError, match="max_entries must be an int >= 1"):
        LaunchCache("t", bad)


def test_tensor_key_fixes_shape_strides_dtype_and_device():
    a = torch.zeros(4, 6)
    assert tensor_key(a) == ((4, 6), (6, 1), torch.float32, torch.device("cpu"))
    assert tensor_key(a.t()) != tensor_key(torch.zeros(6, 4))          # same shape, other strides
    assert tensor_key(a.half()) != tensor_key(a)
    assert tensor_key(a.to_sparse()) is None and tensor_key([1]) is None
    assert tensor_key(torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])) is None


def test_options_key_is_order_free_and_plain_only():
    assert options_key({"a": 1, "b": (1, 2)}) == options_key({"b": (1, 2), "a": 1})
    assert options_key({"a": [1]}) is None and options_key({"a": (1, "x")}) is None and options_key({}) == ()
    assert options_key({"a": 1}) != options_key({"a": True})       # equal in Python, not the same option
    assert options_key({"a": 0}) != options_key({"a": 0.0}) != options_key({"a": None})


def test_the_apis_use_one_cache_class_with_a_bound():
    from tirxpy_kernels import attention_bwd_api
    from tirxpy_kernels.launch_cache import CACHES, clear_all

    caches = (gemm_api._FAST, gemm_api._BOUND, attention_api._FAST, attention_api._BOUND, attention_bwd_api._FAST,
              attention_bwd_api._BOUND)
    for cache in caches:
        assert isinstance(cache, LaunchCache) and cache.max_entries >= 1 and cache in CACHES
    attention_bwd_api._BOUND.put(("probe",), 1)
    clear_all()
    assert all(len(c) == 0 for c in caches)


def test_compiled_builds_once_per_kernel_and_arch(monkeypatch):
    import tirxpy

    calls = []
    monkeypatch.setattr(tirxpy, "compile", lambda k, arch: calls.append((k, arch)) or (k, arch))
    k1, k2 = object(), object()
    assert compiled(k1, "sm_90a") == (k1, "sm_90a") and compiled(k1, "sm_90a") == (k1, "sm_90a")
    compiled(k2, "sm_90a")
    compiled(k1, "sm_100a")
    assert calls == [(k1, "sm_90a"), (k2, "sm_90a"), (k1, "sm_100a")]


def test_launch_bound_binds_and_checks_once_per_addresses():
    from tirxpy_kernels.launch_cache import launch_bound

    binds, checks, runs = [], [], []

    class Kernel:
        def bind(self, *ts):
            binds.append(tuple(t.data_ptr() for t in ts))
            return lambda: runs.append(1)

    cache, x, y = LaunchCache("probe"), torch.zeros(4), torch.zeros(4)
    for t in (x, x, y):
        launch_bound(cache, ("k",), Kernel(), t, check=lambda: checks.append(1))
    assert binds == [(x.data_ptr(),), (y.data_ptr(),)] and len(checks) == 2 and len(runs) == 3
    with pytest.raises(ValueError):
        launch_bound(cache, ("k",), Kernel(), torch.zeros(8), check=lambda: (_ for _ in ()).throw(ValueError()))
    assert len(binds) == 2 and len(runs) == 3          # a failed check binds and launches nothing
