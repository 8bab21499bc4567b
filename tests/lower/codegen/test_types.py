"""tirxpy/lower/codegen/types.py: C++ spellings of dtypes and exact literals."""
import math
import struct

import pytest

from tirxpy.lower.codegen.errors import CodegenError
from tirxpy.lower.codegen.types import ctype, float_literal, int_literal


@pytest.mark.parametrize("name,c", [("int8", "int8_t"), ("uint64", "uint64_t"), ("float16", "__half"),
                                    ("float32", "float"), ("float64", "double"), ("bool", "bool"),
                                    ("float8_e4m3", "__nv_fp8_e4m3")])
def test_ctype_scalars(name, c):
    assert ctype(name) == c


def test_ctype_sub_byte_float_is_refused():
    with pytest.raises(CodegenError, match="no C\\+\\+ element type"):
        ctype("float4_e2m1")


@pytest.mark.parametrize("v,dt,text", [(5, "int32", "5"), (2**31, "int32", "(-2147483647 - 1)"),
                                       (-1, "uint32", "4294967295u"), (300, "uint8", "(uint8_t)44"),
                                       (-(1 << 63), "int64", "(-9223372036854775807ll - 1)"),
                                       (1, "bool", "true"), (0, "bool", "false"), (2**64 + 3, "uint64", "3ull")])
def test_int_literal_wraps_into_range(v, dt, text):
    assert int_literal(v, dt) == text


def _parse_c_float(text):
    t = text.rstrip("f")
    return float.fromhex(t) if "0x" in t else float(t)


@pytest.mark.parametrize("v", [0.1, 1.0 / 3, 1e-30, -2.5, 123456.789, 3.0e38])
def test_float_literal_reads_back_the_float32_rounding(v):
    text = float_literal(v, "float32")
    assert text.endswith("f")
    f32 = struct.unpack("<f", struct.pack("<f", v))[0]
    assert _parse_c_float(text) == f32


def test_float_literal_special_values():
    assert float_literal(float("-inf")) == "__int_as_float(0xff800000)"
    assert float_literal(float("nan")) == "__int_as_float(0x7fffffff)"
    assert float_literal(1e39, "float32") == "__int_as_float(0x7f800000)"     # overflows float32
    assert float_literal(float("inf"), "float64") == "__longlong_as_double(0x7ff0000000000000ll)"
    assert float_literal(0.1, "float64") == "0.1"
    assert float_literal(2.0, "bfloat16") == "__nv_bfloat16(2.0f)"
    assert math.isclose(_parse_c_float(float_literal(1e300, "float64")), 1e300)


def test_float_literal_of_int_dtype_is_refused():
    with pytest.raises(CodegenError):
        float_literal(1.0, "int32")
