"""tirxpy.sim.access: element loads / stores / addresses per lane, bounds checks, tagged global pointers."""
from types import SimpleNamespace

import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run
from tirxpy.sim.access import GPTR_SHIFT, global_span, global_target
from tirxpy.sim.memory import Bytes


def _k(src):
    return T.parse_script(src)


def test_global_target_decodes_tag_and_offset():
    buf = SimpleNamespace(name="A")
    m = SimpleNamespace(gtag_buf={3: buf})
    p = (np.uint64(3) << np.uint64(GPTR_SHIFT)) + np.arange(0, 64, 16).astype(np.uint64)
    b, off = global_target(m, p)
    assert b is buf and off.tolist() == [0, 16, 32, 48]
    mixed = p.copy()
    mixed[2] = (np.uint64(4) << np.uint64(GPTR_SHIFT))
    assert global_target(m, mixed)[0] is None
    assert global_target(m, mixed, lanes=[0, 1])[0] is buf


class _Buf:
    name = "A"


def test_global_span_checks_the_extent():
    buf = _Buf()
    mem = Bytes(64, "A")
    reps = []
    ctx = SimpleNamespace(machine=SimpleNamespace(gtag_buf={1: buf}, globals={buf: mem}),
                          report=lambda kind, msg: reps.append((kind, msg)))
    p = np.array([(1 << GPTR_SHIFT) + 48], np.uint64)
    assert global_span(ctx, p, 16, "copy") == (mem, 48)
    assert global_span(ctx, p, 17, "copy") is None
    assert reps[0][0] == "oob_global" and "byte 48 of A (64 bytes)" in reps[0][1]


def test_shared_and_local_stores_and_loads_with_2d_indices():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((8, 4), "float32")
    r = T.alloc_local((2,), "float32")
    l = T.lane_id()
    r[1] = A[l // 8, l % 8] * 2
    s[l % 8, l // 8] = r[1]
    T.ptx.syncthreads()
    B[l // 8, l % 8] = s[l % 8, l // 8] + 1
''')
    a = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    b = np.zeros((4, 8), np.float32)
    run(k, a, b)
    assert (b == a * 2 + 1).all()


def test_address_of_shared_elements_is_base_plus_byte_offset():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((4, 8), "float16")
    A[T.lane_id()] = T.cast(T.address_of(s[T.lane_id() // 8, T.lane_id() % 8]), "uint32") - T.cast(
        T.address_of(s[0, 0]), "uint32")
''')
    a = np.zeros(32, np.uint32)
    run(k, a)
    assert a.tolist() == [2 * i for i in range(32)]


def test_out_of_bounds_shared_read_names_the_element():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((16,), "float32")
    if T.lane_id() < 16:
        s[T.lane_id()] = T.float32(0)
    T.ptx.syncthreads()
    A[T.lane_id()] = s[T.lane_id()]
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(32, np.float32))
    assert "oob_shared" in ei.value.kinds() and "s[16]" in str(ei.value)
