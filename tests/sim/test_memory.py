"""tirxpy.sim.memory: byte memories with typed access, index helpers, the TMEM column allocator."""
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings

from tirxpy.sim.memory import Bytes, TensorMemory, _strided_slots, clamp, flat_index, in_bounds, slot_table
from tirxpy.testing import tile_layouts


def test_clamp_matches_np_clip():
    a = np.array([-5, 0, 3, 9, 12])
    assert clamp(a, 0, 9).tolist() == np.clip(a, 0, 9).tolist() == [0, 0, 3, 9, 9]


def test_flat_index_is_row_major():
    i, j, k = np.array([0, 1, 2]), np.array([3, 0, 1]), np.array([1, 4, 0])
    assert flat_index((3, 4, 5), (i, j, k)).tolist() == np.ravel_multi_index((i, j, k), (3, 4, 5)).tolist()


def test_in_bounds_per_lane():
    buf = SimpleNamespace(shape=(4, 8))
    ok = in_bounds(buf, (np.array([0, 3, 4, -1, 2]), np.array([7, 0, 0, 0, 8])))
    assert ok.tolist() == [True, True, False, False, False]


def test_bytes_typed_write_read_roundtrip_and_little_endian_layout():
    m = Bytes(64, "smem")
    assert m.size == 64 and not m.data.any()
    m.write(np.array([0, 8]), np.array([1.5, -2.25]), "float32")
    assert m.read(np.array([0, 8]), "float32").tolist() == [1.5, -2.25]
    assert m.data[:4].tobytes() == np.float32(1.5).tobytes()
    m.write(np.array([16]), np.array([0x01020304]), "uint32")
    assert m.data[16:20].tolist() == [4, 3, 2, 1]
    assert m.read_raw(np.array([16]), "uint16").tolist() == [0x0304]
    m.write(np.array([32, 34]), np.array([0.5, 3.0]), "float16")
    assert m.read(np.array([32, 34]), "float16").tolist() == [0.5, 3.0]
    assert m.data[32:34].tobytes() == np.float16(0.5).tobytes()


def test_bytes_of_size_zero_still_has_one_byte():
    assert Bytes(0, "x").size == 1


def test_tensor_memory_allocates_aligned_power_of_two_blocks():
    t = TensorMemory()
    assert t.cells.shape == (128, 512)
    assert t.alloc(32) == 0
    assert t.alloc(64) == 64          # aligned to its own size: 32..63 is free but misaligned
    assert t.alloc(32) == 32
    assert t.alloc(512) is None
    assert t.allocs == {0: 32, 64: 64, 32: 32}
    assert t.allocated(np.array([0, 31, 63, 127, 128, 511])).tolist() == [True, True, True, True, False, False]


def test_tensor_memory_alloc_clears_init_of_its_columns():
    t = TensorMemory()
    t.init[:, :] = True
    start = t.alloc(128)
    assert start == 0 and not t.init[:, :128].any() and t.init[:, 128:].all()


@settings(max_examples=200, deadline=None)
@given(tile_layouts(max_size=128))
def test_strided_slots_are_the_owner_tables_m_column(L):
    """The closed form the simulator uses for global tensors gives each element the ``m`` slot of its first owner, as
    the layout's owner table does (other axes and replicas ignored, an ``m`` offset included)."""
    flat = np.arange(L.size())
    assert _strided_slots(L, flat).tolist() == slot_table(L, L.size()).tolist()
