"""Bound launches (tirxpy/lower/bound_launch.py): arguments checked and packed once, launched later without
checks. CPU: the packer runs against device='cpu' and the driver call is a stand-in that records its
arguments."""
import ctypes
import struct

import pytest
import torch

from tirxpy.lower.bound_launch import BoundLaunch, PackedArgs
from tirxpy.lower.errors import LaunchError
from tirxpy.lower.runtime import ArgPacker, Launcher, ParamSpec

SPECS = (ParamSpec("x", dtype="bfloat16", shape=(64,)), ParamSpec("tm", "tensormap", box=(8, 8)),
         ParamSpec("n", "scalar", "int32"))


def _words(addr, n):
    return list((ctypes.c_void_p * n).from_address(addr))


def test_packed_args_are_a_private_copy_at_the_same_offsets():
    p = ArgPacker(SPECS, device="cpu")
    x, blob = torch.zeros(64, dtype=torch.bfloat16), bytes(range(128))
    p.pack([x, blob, 7])
    frozen = PackedArgs(p)
    assert frozen.packed_bytes() == p.packed_bytes()
    mine, theirs = _words(frozen.params_address, 3), _words(p.params_address, 3)
    base_mine, base_theirs = min(mine), min(theirs)
    assert [a - base_mine for a in mine] == [a - base_theirs for a in theirs]     # same slot offsets
    assert not set(mine) & set(theirs)                                          # a different buffer
    assert mine[1] % 64 == 0 and ctypes.string_at(mine[1], 128) == blob          # tensor map, aligned
    assert ctypes.c_uint64.from_address(mine[0]).value == x.data_ptr()
    assert ctypes.c_int32.from_address(mine[2]).value == 7
    # later packs of other arguments write the packer's buffer only
    y = torch.ones(64, dtype=torch.bfloat16)
    p.pack([y, bytes(128), -1])
    assert ctypes.c_uint64.from_address(mine[0]).value == x.data_ptr()
    assert ctypes.c_int32.from_address(mine[2]).value == 7
    assert struct.unpack_from("<Q", frozen.packed_bytes(), 0)[0] == x.data_ptr()


class _FakeKernel:
    name, device_index, handle, _max_dyn_smem = "k", 0, 0, 48 * 1024

    def _stream(self, index):
        return 1234


def _launcher(calls):
    ln = Launcher.__new__(Launcher)
    ln.kernel, ln.packer = _FakeKernel(), ArgPacker(SPECS, device="cpu")
    ln._dims, ln._cfgs, ln._fh = {}, {}, 99
    ln._fn = lambda cfg, fh, params, extra: calls.append((fh, params, ctypes.string_at(
        _words(params, 3)[2], 4))) or 0
    ln._prepare = lambda key, *a: (None, None, 5678)
    return ln


def test_bind_checks_once_and_launches_its_own_arguments():
    calls = []
    ln = _launcher(calls)
    x = torch.zeros(64, dtype=torch.bfloat16)
    with pytest.raises(LaunchError, match=r"parameter 'x': shape is \(32,\)"):
        ln.bind((1,), (128,), [x[:32], bytes(128), 1])
    bl = ln.bind((1,), (128,), [x, bytes(128), 41])
    assert isinstance(bl, BoundLaunch) and "41" not in repr(bl) and "grid (1, 1, 1)" in repr(bl)
    ln((1,), (128,), [x, bytes(128), 5])        # a checked launch in between packs into the shared buffer
    bl()
    bl(stream=7)
    assert [c[2] for c in calls] == [struct.pack("<i", 5), struct.pack("<i", 41), struct.pack("<i", 41)]
    assert calls[1][1] == calls[2][1] != calls[0][1]     # the bound copy's void* array, every time
    assert bl.packed_bytes()[8:12] == struct.pack("<i", 41)      # the scalar slot after the 8-byte pointer
