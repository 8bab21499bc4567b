"""tirxpy.sim.cp_async: cp.async copies, zero fill, commit / wait groups (PTX ISA 9.7.9.25.3)."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _k(src):
    return T.parse_script(src)


def test_cp_async_16_then_wait_group_copies_bytes():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((128,), "int32")
    l = T.lane_id()
    T.ptx.cp_async_cg_16(T.address_of(s[4 * l]), T.address_of(A[4 * l]))
    T.ptx.cp_async_commit_group()
    T.ptx.cp_async_wait_group(0)
    T.ptx.syncthreads()
    for i in T.serial(4):
        B[4 * l + i] = s[4 * l + i]
''')
    a = np.arange(128, dtype=np.int32) * 7 - 3
    b = np.zeros(128, np.int32)
    run(k, a, b)
    assert (b == a).all()


def test_zfill_copies_src_bytes_and_zeroes_the_rest():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((128,), "int32")
    l = T.lane_id()
    T.ptx.cp_async_ca_16_zfill(T.address_of(s[4 * l]), T.address_of(A[4 * l]), T.uint32(4 * (l % 5)))
    T.ptx.cp_async_wait_all()
    T.ptx.syncthreads()
    for i in T.serial(4):
        B[4 * l + i] = s[4 * l + i]
''')
    a = np.arange(1, 129, dtype=np.int32)
    b = np.full(128, -1, np.int32)
    run(k, a, b)
    keep = (np.arange(128) % 4) < np.repeat(np.arange(32) % 5, 4)
    assert b.tolist() == np.where(keep, a, 0).tolist()


def test_reading_smem_without_waiting_is_a_race():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((128,), "int32")
    l = T.lane_id()
    T.ptx.cp_async_cg_16(T.address_of(s[4 * l]), T.address_of(A[4 * l]))
    T.ptx.cp_async_commit_group()
    B[l] = s[4 * l]
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.ones(128, np.int32), np.zeros(128, np.int32))
    assert "race" in ei.value.kinds()


def test_source_outside_the_tensor_is_oob_global():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((128,), "int32")
    l = T.lane_id()
    T.ptx.cp_async_cg_16(T.address_of(s[4 * l]), T.address_of(A[4 * l]) + 16)
    T.ptx.cp_async_wait_all()
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.ones(128, np.int32))
    assert "oob_global" in ei.value.kinds()
