"""tirxpy.ir.parse_expr: how kernel-body expressions evaluate: Python values fold at parse time
(arithmetic, comparisons, short-circuit and/or, conditional expressions, containers), device values
build IR, and unsupported constructs are refused with the source line."""
import pytest

from tirxpy import T
from tirxpy.ir import BufferStore, ParseError


def _stored(kernel):
    """The value expressions of the kernel's top-level stores, printed."""
    return [str(s.value) for s in kernel.body.stmts if isinstance(s, BufferStore)]


def test_python_values_fold_at_parse_time():
    @T.prim_func
    def k(B: T.Tensor((8,), "int32")):
        T.launch(grid=(1,), threads=32)
        B[0] = (3 + 4) * 2 - 10 // 3          # 11
        B[1] = 7 % 4 << 2                      # 12
        B[2] = 5 if 1 < 2 < 3 else 6           # chained compare holds
        B[3] = 5 if 1 < 3 < 2 else 6           # second link fails
        B[4] = 0 or 9                          # short-circuit or returns the operand
        B[5] = (1, 2, *[3, 4])[3]              # starred unpack, indexing
        B[6] = {"a": 1, **{"b": 2}}["b"]       # ** unpack in a dict
        B[7] = -(~2)                           # 3

    assert _stored(k) == ["11", "12", "5", "6", "9", "4", "2", "3"]


def test_device_values_build_ir():
    @T.prim_func
    def k(B: T.Tensor((2,), "int32")):
        T.launch(grid=(1,), threads=32)
        B[0] = T.thread_id() * 2 + 1 if T.thread_id() < 4 else 0
        B[1] = T.cast(T.thread_id() < 4 and T.lane_id() > 1, "int32")

    a, b = _stored(k)
    assert "T.select" in a and "T.thread_id() * 2 + 1" in a and "T.thread_id() < 4" in a
    assert "T.thread_id() < 4" in b and "T.lane_id() > 1" in b and "and" in b


def test_unary_on_a_tensor_is_refused():
    with pytest.raises(ParseError, match="unary `-` does not apply to the tensor A"):
        @T.prim_func
        def k(A: T.Tensor((4,), "int32"), B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[0] = -A


def test_bad_subscript_and_unpack_are_reported():
    with pytest.raises(ParseError, match="cannot index"):
        @T.prim_func
        def k(B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[0] = (1, 2)[5]
    with pytest.raises(ParseError, match=r"cannot unpack .* with \*"):
        @T.prim_func
        def k2(B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[0] = (*5,)[0]


def test_parse_time_division_by_zero_has_no_value():
    with pytest.raises(ParseError, match="has no value at parse time"):
        @T.prim_func
        def k(B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[0] = 1 // 0


def test_device_compare_with_in_is_refused():
    with pytest.raises(ParseError, match="does not apply to device values"):
        @T.prim_func
        def k(B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[0] = T.thread_id() in (1, 2)


@T.macro
def _fill(B):
    B[0] = 1


def test_macro_in_value_position_is_refused():
    with pytest.raises(ParseError, match="expands to statements and has no value"):
        @T.prim_func
        def k(B: T.Tensor((4,), "int32")):
            T.launch(grid=(1,), threads=32)
            B[1] = _fill(B)
