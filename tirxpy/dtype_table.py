"""The raw facts of the scalar types, below every layer: each canonical name's code, size in bits
and float format, and the aliases that name them.

:mod:`tirxpy.ir.dtype` builds its ``DataType`` objects on this table; :mod:`tirxpy.layout`, which
sits below the IR, reads element sizes from it. Nothing else spells a size per dtype.

    >>> bits_of("bf16"), bits_of("float8_e4m3"), bits_of("tf32"), bits_of("float4_e2m1"), bits_of("complex64")
    (16, 8, 32, 4, None)
    >>> canonical("e4m3"), canonical("tfloat32"), canonical("float")
    ('float8_e4m3', 'float32', 'float32')

This module imports nothing, so every layer may use it.
"""
from __future__ import annotations

#: ``(canonical name, code, bits, float format)``: code is bool / int / uint / float; the float format
#: is ``{"exp_bits": e, "man_bits": m}`` (empty for the others).
SPECS = (
    ("bool", "bool", 1, {}),
    ("int8", "int", 8, {}), ("int16", "int", 16, {}), ("int32", "int", 32, {}), ("int64", "int", 64, {}),
    ("uint8", "uint", 8, {}), ("uint16", "uint", 16, {}), ("uint32", "uint", 32, {}), ("uint64", "uint", 64, {}),
    ("float16", "float", 16, dict(exp_bits=5, man_bits=10)),
    ("bfloat16", "float", 16, dict(exp_bits=8, man_bits=7)),
    ("float32", "float", 32, dict(exp_bits=8, man_bits=23)),
    ("float64", "float", 64, dict(exp_bits=11, man_bits=52)),
    ("float8_e4m3", "float", 8, dict(exp_bits=4, man_bits=3)),
    ("float8_e5m2", "float", 8, dict(exp_bits=5, man_bits=2)),
    ("float6_e2m3", "float", 6, dict(exp_bits=2, man_bits=3)),
    ("float6_e3m2", "float", 6, dict(exp_bits=3, man_bits=2)),
    ("float4_e2m1", "float", 4, dict(exp_bits=2, man_bits=1)),
)
#: Other spellings of the canonical names.
ALIASES = {
    "bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64", "half": "float16", "float": "float32",
    "e4m3": "float8_e4m3", "e5m2": "float8_e5m2", "e2m3": "float6_e2m3", "e3m2": "float6_e3m2", "e2m1": "float4_e2m1",
    "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2", "fp8_e4m3": "float8_e4m3", "fp8_e5m2": "float8_e5m2",
    "f6e2m3": "float6_e2m3", "f6e3m2": "float6_e3m2", "f4e2m1": "float4_e2m1",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "pred": "bool", "int": "int32",
}
#: Names of tf32: float32 storage (a float32 in memory) that the tensor cores read with 10 mantissa bits.
TF32 = ("tf32", "tfloat32")
TF32_FORMAT = dict(exp_bits=8, man_bits=10)

_BITS = {name: bits for name, _, bits, _ in SPECS}


def canonical(name: str) -> str | None:
    """The canonical name of a dtype name or alias (tf32 is stored as float32), or None for an unknown one
    (anything that is not a str included)."""
    if not isinstance(name, str):
        return None
    if name in _BITS:
        return name
    return "float32" if name in TF32 else ALIASES.get(name)


def bits_of(name: str) -> int | None:
    """Bits of one element of the dtype ``name`` (canonical or alias), or None for an unknown one (a non-str
    included)."""
    c = canonical(name)
    return None if c is None else _BITS[c]


__all__ = ["SPECS", "ALIASES", "TF32", "TF32_FORMAT", "canonical", "bits_of"]
