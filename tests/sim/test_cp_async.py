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


def _misaligned_copy(off):
    return _k(f'''
@T.prim_func
def k(A: T.Tensor((132,), "int32"), B: T.Tensor((128,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((132,), "int32")
    l = T.lane_id()
    T.ptx.cp_async_cg_16(T.address_of(s[4 * l + {off}]), T.address_of(A[4 * l]))
    T.ptx.cp_async_commit_group()
    T.ptx.cp_async_wait_group(0)
    T.ptx.syncthreads()
    for i in T.serial(4):
        B[4 * l + i] = s[4 * l + {off} + i]
''')


def test_a_destination_off_the_copy_size_is_misaligned():
    """PTX: a cp.async's shared and global addresses are aligned to its size (16 here); the GPU faults otherwise."""
    a = np.arange(132, dtype=np.int32)
    b = np.zeros(128, np.int32)
    run(_misaligned_copy(0), a, b)
    assert (b == a[:128]).all()
    with pytest.raises(SimReportError) as ei:
        run(_misaligned_copy(1), a, b)
    assert ei.value.kinds() == {"misaligned"}
    assert "cp_async_cg_16 destination: shared address 0x4 (lane 0) is not 16-byte aligned" in str(ei.value)


def _arrive_then_store(store_after):
    before, after = ("", "        t[l] = 5\n") if store_after else ("        t[l] = 5\n", "")
    return _k(f'''
@T.prim_func
def k(A: T.Tensor((128,), "int32"), B: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((128,), "int32")
    t = T.alloc_shared((32,), "int32")
    full = T.alloc_shared((1,), "uint64")
    l = T.lane_id()
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(full[0], 32)
    T.ptx.syncthreads()
    if T.warp_id() == 0:
        T.ptx.cp_async_cg_16(T.address_of(s[4 * l]), T.address_of(A[4 * l]))
{before}        T.ptx.cp_async_mbarrier_arrive_noinc(full[0])
{after}    else:
        T.ptx.mbarrier_wait_parity(full[0], 0)
        B[l] = s[4 * l] + t[l]
''')


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cp_async_arrive_releases_what_the_warp_did_before_it_only(seed):
    """The arrive fires when the copies land, but it orders only the warp's accesses before the instruction: a store
    after it is not ordered before the waiting warp's read, whenever the copies land."""
    a = np.arange(128, dtype=np.int32)
    b = np.zeros(32, np.int32)
    run(_arrive_then_store(False), a, b, seed=seed)
    assert (b == a[::4] + 5).all()
    res = run(_arrive_then_store(True), a, b, seed=seed, check=False)
    races = [p for p in res.problems if p.kind == "race"]
    assert races and all("warp 0" in p.msg for p in races), res.problems
