"""C++ spellings of tirxpy dtypes and exact literals.

    >>> from tirxpy.ir import DataType
    >>> ctype(DataType.get("bfloat16")), ctype(DataType.get("uint32")), ctype(DataType.get("mbarrier"))
    ('__nv_bfloat16', 'uint32_t', 'uint32_t')
    >>> float_literal(1.5, "float32"), float_literal(0.1, "float32"), float_literal(float("inf"), "float32")
    ('1.5f', '0x1.99999ap-4f', '__int_as_float(0x7f800000)')
    >>> int_literal(-2**31, "int32"), int_literal(7, "uint64"), int_literal(3, "int8")
    ('(-2147483647 - 1)', '7ull', '(int8_t)3')
"""
from __future__ import annotations

import math
import re
import struct

from tirxpy.ir.dtype import DataType

from .errors import CodegenError

#: Declarations every unit starts with: NVRTC has no <cstdint>, so the fixed-width names are
#: typedefs of the (LP64) builtin types; fp16 / bf16 / fp8 come from the CUDA header wheels.
TYPES_PRELUDE = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
"""

_SCALAR = {
    "bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float16": "__half", "bfloat16": "__nv_bfloat16", "float32": "float", "float64": "double",
    "float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2",
}
_HANDLE = {"smem_addr": "uint32_t", "descriptor": "uint64_t"}
#: 16-bit and 8-bit float types: arithmetic and math go through float.
NARROW_FLOATS = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2")


def ctype(dt, span=None) -> str:
    """The C++ type of a scalar dtype (pointers: 32-bit shared addresses or ``T*``)."""
    dt = DataType.get(dt)
    if dt.is_pointer:
        if dt.storage.startswith("shared"):
            return "uint32_t"
        return f"{ctype(dt.element, span)}*"
    if dt.is_handle:
        if dt.name in _HANDLE:
            return _HANDLE[dt.name]
        raise CodegenError(f"handle dtype {dt} has no C++ form", span)
    if dt.is_tf32:
        return "float"
    c = _SCALAR.get(dt.name)
    if c is None:
        raise CodegenError(
            f"dtype {dt} has no C++ element type in generated code", span,
            hint="sub-byte types (float6 / float4) live packed in uint8 / uint32 storage: declare the tensor as "
                 "uint8 and reinterpret it where an instruction needs the packed form")
    return c


def int_literal(value: int, dtype="int32") -> str:
    """An exact C++ literal of an integer dtype (wrapped into its range)."""
    dt = DataType.get(dtype)
    if dt.is_bool:
        return "true" if value else "false"
    v = dt.wrap(int(value)) if dt.is_int else int(value)
    name = dt.name if dt.is_int else "uint32"
    if name == "int32":
        return str(v) if v != -(1 << 31) else "(-2147483647 - 1)"
    if name == "int64":
        return f"{v}ll" if v != -(1 << 63) else "(-9223372036854775807ll - 1)"
    if name == "uint32":
        return f"{v}u"
    if name == "uint64":
        return f"{v}ull"
    return f"({ctype(dt)}){v}"


def _f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0] if math.isfinite(v) and abs(v) < 3.5e38 else v


def _hex(v: float) -> str:
    """``float.hex`` without the trailing zero digits of the mantissa."""
    h = v.hex()
    m = re.match(r"(-?0x[01])\.([0-9a-f]*?)0*p(.*)", h)
    return h if m is None else f"{m.group(1)}{'.' + m.group(2) if m.group(2) else ''}p{m.group(3)}"


def float_literal(value: float, dtype="float32") -> str:
    """An exact C++ literal of a float dtype: the value rounded to the dtype, written so that the
    compiler reads back exactly that value (hex when the short decimal would not be exact)."""
    dt = DataType.get(dtype)
    v = float(value)
    wide = dt.name == "float64"
    if math.isnan(v) or math.isinf(v):
        if wide:
            bits = "0x7ff8000000000000" if math.isnan(v) else ("0x7ff0000000000000" if v > 0 else "0xfff0000000000000")
            text = f"__longlong_as_double({bits}ll)"
        else:
            bits = "0x7fffffff" if math.isnan(v) else ("0x7f800000" if v > 0 else "0xff800000")
            text = f"__int_as_float({bits})"
    else:
        if not wide:
            if abs(v) > 3.4028234663852886e38:
                v = math.copysign(math.inf, v)
                return float_literal(v, dtype)
            v = _f32(v)
        suffix = "" if wide else "f"
        dec = repr(v)
        if "e" not in dec and "." not in dec:
            dec += ".0"
        exact = float(dec) == v and (wide or _f32(float(dec)) == v) and len(dec.lstrip("-")) <= 10
        text = (dec if exact else _hex(v)) + suffix
    if dt.name in ("float32", "float64") or dt.is_tf32:
        return text
    if dt.name in NARROW_FLOATS:
        return f"{ctype(dt)}({text})"
    raise CodegenError(f"float constant of dtype {dt} has no C++ form")
