"""Launch dimensions, launch configs and backends (tirxpy/lower/launcher.py); no GPU needed."""
import pytest

from tirxpy.lower.errors import LaunchError
from tirxpy.lower.launcher import Launcher, _dim3


def test_dims_are_padded_to_three_and_checked():
    assert _dim3(4, "grid") == (4, 1, 1) and _dim3((2, 3), "grid") == (2, 3, 1)
    with pytest.raises(LaunchError, match="parameter 'grid': must be 1-3 positive ints"):
        _dim3((0,), "grid")
    with pytest.raises(LaunchError, match="parameter 'block': must be an int or a tuple"):
        _dim3("x", "block")


def test_launcher_dim_checks_without_gpu():
    ln = Launcher.__new__(Launcher)
    ln._dims = {}
    with pytest.raises(LaunchError, match="parameter 'block': .* has 2048 threads"):
        ln._checked_dims((1,), (1024, 2), None)
    with pytest.raises(LaunchError, match=r"parameter 'cluster': cluster dims \(2, 1, 1\) must divide the grid \(3, 1, 1\)"):
        ln._checked_dims((3,), (128,), (2,))
    with pytest.raises(LaunchError, match="a cluster has at most 16"):
        ln._checked_dims((32,), (128,), (32,))
    assert ln._checked_dims((4, 2), (128,), (2,)) == ((4, 2, 1), (128, 1, 1), (2, 1, 1))
    with pytest.raises(LaunchError, match=r"parameter 'grid': \(2147483648, 1, 1\) has 2147483648 in dimension x; "
                                          r"at most 2147483647"):
        ln._checked_dims((2**31,), (128,), None)
    with pytest.raises(LaunchError, match=r"has 65536 in dimension y; at most 65535"):
        ln._checked_dims((1, 65536), (128,), None)
    with pytest.raises(LaunchError, match=r"parameter 'block': \(1, 1, 65\) has 65 in dimension z; at most 64"):
        ln._checked_dims((1,), (1, 1, 65), None)
    assert ln._checked_dims((2**31 - 1, 65535, 65535), (1, 1, 64), None)[0] == (2**31 - 1, 65535, 65535)


def test_launch_config_struct_matches_cuda_bindings_layout():
    """The ctypes CUlaunchConfig / CUlaunchAttribute the fast launcher passes to cuLaunchKernelEx
    lay out their fields exactly as cuda-bindings' own structs (read from their C memory)."""
    import ctypes

    from cuda.bindings import driver as drv

    from tirxpy.lower.launcher import _LaunchAttr, _LaunchConfig, _make_config

    ref = drv.CUlaunchConfig()
    ref.gridDimX, ref.gridDimY, ref.gridDimZ = 3, 5, 7
    ref.blockDimX, ref.blockDimY, ref.blockDimZ = 32, 2, 1
    ref.sharedMemBytes = 1234
    ref.numAttrs = 1
    raw = ctypes.string_at(ref.getPtr(), ctypes.sizeof(_LaunchConfig))
    ours, attr, addr = _make_config((3, 5, 7), (32, 2, 1), 1234, 0, (2, 1, 1))
    assert addr == ctypes.addressof(ours) and ours.attrs == ctypes.addressof(attr)
    mine = ctypes.string_at(addr, ctypes.sizeof(_LaunchConfig))
    assert mine[:28] == raw[:28]                                        # grid, block, smem
    off = _LaunchConfig.numAttrs.offset
    assert mine[off:off + 4] == raw[off:off + 4]
    a = drv.CUlaunchAttribute()
    a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = 2, 1, 1
    raw_a = ctypes.string_at(a.getPtr(), ctypes.sizeof(_LaunchAttr))
    mine_a = ctypes.string_at(ctypes.addressof(attr), ctypes.sizeof(_LaunchAttr))
    assert mine_a[:4] == raw_a[:4] and mine_a[8:20] == raw_a[8:20]      # id; clusterDim x, y, z


def test_launch_config_carries_the_pdl_attribute_after_the_cluster_one():
    """``pdl=True`` adds CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (value 1) to the ctypes
    config, laid out as cuda-bindings lays out its own attribute; with a cluster it comes second."""
    import ctypes

    from cuda.bindings import driver as drv

    from tirxpy.lower.launcher import _LaunchAttr, _make_config

    a = drv.CUlaunchAttribute()
    a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    a.value.programmaticStreamSerializationAllowed = 1
    raw_a = ctypes.string_at(a.getPtr(), ctypes.sizeof(_LaunchAttr))
    for cluster, n in ((None, 1), ((2, 1, 1), 2)):
        cfg, attrs, _ = _make_config((4, 1, 1), (128, 1, 1), 0, 0, cluster, pdl=True)
        assert cfg.numAttrs == n and cfg.attrs == ctypes.addressof(attrs)
        mine = ctypes.string_at(ctypes.addressof(attrs[n - 1]), ctypes.sizeof(_LaunchAttr))
        assert mine[:4] == raw_a[:4] and mine[8:12] == raw_a[8:12]       # id; allowed = 1
    cfg, _, _ = _make_config((4, 1, 1), (128, 1, 1), 0, 0, None)
    assert cfg.numAttrs == 0 and not cfg.attrs


def test_launcher_backend_is_checked():
    with pytest.raises(LaunchError, match="parameter 'backend': must be 'ctypes' or 'bindings'"):
        Launcher(None, None, backend="cffi")


def test_ctypes_backend_without_libcuda_says_what_to_use(monkeypatch):
    from tirxpy.lower import launcher

    monkeypatch.setattr(launcher, "_LAUNCH_EX", [None])      # as where libcuda.so.1 cannot be opened
    with pytest.raises(LaunchError, match="libcuda.so.1 could not be opened with ctypes; use backend='bindings'"):
        Launcher(None, None, backend="ctypes")


@pytest.mark.parametrize("bad", [2.7, (2.7, 1), "12", True, (True,), (float("inf"),), float("nan"), None, (4, "2")])
def test_dims_refuse_floats_strings_and_bools(bad):
    with pytest.raises(LaunchError, match="parameter 'grid': must be an int or a tuple of up to 3 ints"):
        _dim3(bad, "grid")


def test_dims_take_numpy_ints_and_lists():
    import numpy as np

    assert _dim3(np.int64(3), "grid") == (3, 1, 1) and _dim3([np.int32(2), 4], "block") == (2, 4, 1)
    ln = Launcher.__new__(Launcher)
    ln._dims = {}
    assert ln._checked_dims([4], [128], [2]) == ((4, 1, 1), (128, 1, 1), (2, 1, 1))


@pytest.mark.parametrize("bad", [-1, 1.5, 2**32, True, "0"])
def test_smem_bytes_is_an_int_in_range(bad):
    from tirxpy.lower.launcher import _smem

    with pytest.raises(LaunchError, match="parameter 'smem_bytes': must be an int of bytes in"):
        _smem(bad)
