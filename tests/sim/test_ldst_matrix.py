"""tirxpy.sim.ldst_matrix: ldmatrix / stmatrix 8x8 b16 fragments (PTX ISA ldmatrix fragment layout:
thread t holds row t // 4, elements 2 (t % 4) and 2 (t % 4) + 1 of each matrix; .trans transposes)."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _k(src):
    return T.parse_script(src)


def _ld(trans):
    op = "ldmatrix_x1_trans" if trans else "ldmatrix_x1"
    return _k(f'''
@T.prim_func
def k(A: T.Tensor((8, 8), "uint16"), B: T.Tensor((32, 2), "uint16")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((8, 8), "uint16")
    r = T.alloc_local((1,), "uint32")
    l = T.lane_id()
    for j in T.serial(2):
        s[l // 4, 2 * (l % 4) + j] = A[l // 4, 2 * (l % 4) + j]
    T.ptx.syncthreads()
    T.ptx.{op}(r, s[l % 8, 0])
    B[l, 0] = T.cast(r[0] & T.uint32(0xffff), "uint16")
    B[l, 1] = T.cast(r[0] >> T.uint32(16), "uint16")
''')


def test_ldmatrix_x1_fragment_layout():
    a = np.arange(64, dtype=np.uint16).reshape(8, 8) + 100
    b = np.zeros((32, 2), np.uint16)
    run(_ld(False), a, b)
    t = np.arange(32)
    assert b.tolist() == np.stack([a[t // 4, 2 * (t % 4)], a[t // 4, 2 * (t % 4) + 1]], 1).tolist()


def test_ldmatrix_x1_trans_fragment_layout():
    a = np.arange(64, dtype=np.uint16).reshape(8, 8) + 100
    b = np.zeros((32, 2), np.uint16)
    run(_ld(True), a, b)
    t = np.arange(32)
    assert b.tolist() == np.stack([a[2 * (t % 4), t // 4], a[2 * (t % 4) + 1, t // 4]], 1).tolist()


def test_stmatrix_x2_inverts_ldmatrix_x2():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((16, 8), "uint16"), B: T.Tensor((16, 8), "uint16")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((16, 8), "uint16")
    d = T.alloc_shared((16, 8), "uint16")
    r = T.alloc_local((2,), "uint32")
    l = T.lane_id()
    for j in T.serial(4):
        s[l // 2, 4 * (l % 2) + j] = A[l // 2, 4 * (l % 2) + j]
    T.ptx.syncthreads()
    T.ptx.ldmatrix_x2(r, s[l % 16, 0])
    T.ptx.stmatrix_x2(d[l % 16, 0], r)
    T.ptx.syncthreads()
    for j in T.serial(4):
        B[l // 2, 4 * (l % 2) + j] = d[l // 2, 4 * (l % 2) + j]
''')
    a = np.random.default_rng(3).integers(0, 65535, (16, 8)).astype(np.uint16)
    b = np.zeros((16, 8), np.uint16)
    run(k, a, b)
    assert (b == a).all()


def test_an_ldmatrix_row_off_16_bytes_is_misaligned():
    """PTX: each row address of ldmatrix / stmatrix is 16-byte aligned (8 b16 elements); the GPU faults otherwise."""
    k = _k('''
@T.prim_func
def k(A: T.Tensor((8, 9), "uint16"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((8, 9), "uint16")
    r = T.alloc_local((1,), "uint32")
    l = T.lane_id()
    if l < 8:
        for j in T.serial(9):
            s[l, j] = A[l, j]
    T.ptx.syncthreads()
    T.ptx.ldmatrix_x1(r, s[l % 8, 0])
    B[l] = r[0]
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.ones((8, 9), np.uint16), np.zeros(32, np.uint32))
    assert ei.value.kinds() == {"misaligned"}
    assert "ldmatrix_x1 row address (8 x b16): shared address 0x12 (lane 1) is not 16-byte aligned" in str(ei.value)
