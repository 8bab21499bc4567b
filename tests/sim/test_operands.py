"""tirxpy.sim.operands: how IR operands name buffers, swizzle widths and tensor maps (as codegen renders them)."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.ir import expr as E
from tirxpy.ir.buffer import Buffer
from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_64B, swizzle_128B
from tirxpy.sim import run
from tirxpy.sim.errors import UnsupportedError
from tirxpy.sim.operands import TensorMap, swizzle_bytes, target_of


def _ints(xs):
    return [int(x) if not isinstance(x, E.Expr) else int(x.value) for x in xs]


def test_target_of_buffer_region_element():
    b = Buffer("A", (64, 64), "bfloat16", "global")
    buf, st = target_of(b)
    assert buf is b and _ints(st) == [0, 0]
    buf, st = target_of(b[8:40, 16:48])
    assert buf is b and _ints(st) == [8, 16]
    buf, st = target_of(b[3, 5])
    assert buf is b and _ints(st) == [3, 5]
    assert target_of(E.IntImm(1)) == (None, None)


def test_swizzle_bytes_of_layouts():
    assert swizzle_bytes(TileLayout(S[(64, 64)]), "bfloat16") == 0
    assert swizzle_bytes(ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 64)])), "bfloat16") == 128
    assert swizzle_bytes(ComposeLayout(swizzle_64B("bf16"), TileLayout(S[(64, 32)])), "bfloat16") == 64
    # a bf16 128B swizzle is not a TMA swizzle mode for 1-byte elements
    with pytest.raises(UnsupportedError, match="not a TMA swizzle mode"):
        swizzle_bytes(ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 64)])), "float8_e4m3")


def test_tensor_map_box_bytes():
    b = Buffer("A", (64, 64), "bfloat16", "global")
    assert TensorMap(b, (32, 16), 0, None).box_bytes == 32 * 16 * 2
    assert TensorMap(Buffer("B", (8, 8, 8), "float32"), (2, 4, 8), 128, None).box_bytes == 2 * 4 * 8 * 4


def test_float_value_in_a_b32_register_operand_is_its_raw_bits():
    """scalar_value: a float expression passed to an integer (b32) register operand keeps its bits,
    as a ``mov.b32`` of a float register does; the shuffle returns them to lane 31 - l."""
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = T.ptx.shfl_sync_idx_b32(A[T.lane_id()], T.cast(31 - T.lane_id(), "uint32"), T.uint32(0xffffffff))
''')
    a = (np.arange(32, dtype=np.float32) + 0.5) * -1.25
    b = np.zeros(32, np.uint32)
    run(k, a, b)
    assert b.tolist() == a[::-1].view(np.uint32).tolist()
