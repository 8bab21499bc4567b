"""tirxpy.sim.values: storage / compute dtypes and the exact bit conversions (bf16 RNE, fp8 satfinite)."""
import numpy as np
import pytest

from tirxpy.sim.errors import UnsupportedError
from tirxpy.sim.values import compute_dtype, from_bits, name_of, nbytes, round_to, storage_dtype, to_bits


def test_storage_and_compute_dtypes():
    assert storage_dtype("bfloat16") == np.uint16 and compute_dtype("bfloat16") == np.float32
    assert storage_dtype("float8_e4m3") == np.uint8 and compute_dtype("float8_e5m2") == np.float32
    assert storage_dtype("float16") == np.float16 and compute_dtype("float16") == np.float32
    assert storage_dtype("bool") == np.uint8 and compute_dtype("bool") == np.bool_
    assert compute_dtype("int32") == np.int32
    assert [nbytes(t) for t in ("bfloat16", "float8_e4m3", "int64", "float32", "bool")] == [2, 1, 8, 4, 1]
    assert name_of("bf16") == "bfloat16"


def test_dtype_without_storage_is_unsupported():
    with pytest.raises(UnsupportedError, match="float4_e2m1"):
        storage_dtype("float4_e2m1")


def test_bfloat16_round_to_nearest_even_bits():
    # ulp at 1.0 is 2^-7: 1 + 2^-8 ties to the even 1.0 (0x3F80), 1 + 3*2^-8 ties up to 1 + 2^-6 (0x3F82)
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5], np.float32)
    assert to_bits(x, "bfloat16").tolist() == [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020]
    assert to_bits(np.array([np.nan], np.float32), "bfloat16").tolist() == [0x7FC0]
    assert from_bits(np.array([0x3F82, 0xC020], np.uint16), "bfloat16").tolist() == [1.015625, -2.5]


def test_float8_e4m3_table_and_satfinite_rounding():
    # 0x38 = exponent 7 (bias 7), mantissa 0: 1.0; 0x7E is the largest finite 448; 0x7F is NaN; 0x01 = 2^-9
    v = from_bits(np.array([0x38, 0x7E, 0x01, 0xB8], np.uint8), "float8_e4m3")
    assert v.tolist() == [1.0, 448.0, 2.0 ** -9, -1.0]
    assert np.isnan(from_bits(np.array([0x7F], np.uint8), "float8_e4m3")).all()
    # 500 and 1e6 saturate to 448, -1e6 to -448; 1.0625 (tie between 1.0 and 1.125) goes to the even 1.0
    b = to_bits(np.array([500.0, 1e6, -1e6, 1.0625, 1.1875], np.float32), "float8_e4m3")
    assert b.tolist() == [0x7E, 0x7E, 0xFE, 0x38, 0x3A]
    assert to_bits(np.array([np.nan], np.float32), "float8_e4m3").tolist() == [0x7F]


def test_float8_e5m2_table():
    v = from_bits(np.array([0x3C, 0x7B, 0x7C, 0x01], np.uint8), "float8_e5m2")
    assert v.tolist() == [1.0, 57344.0, np.inf, 2.0 ** -16]
    assert to_bits(np.array([1e9], np.float32), "float8_e5m2").tolist() == [0x7B]   # satfinite, not inf


def test_float16_bits_and_integer_conversions():
    assert from_bits(np.array([0x3C00, 0xC000], np.uint16), "float16").tolist() == [1.0, -2.0]
    assert to_bits(np.array([2.9, -2.9, np.nan]), "int32").tolist() == [2, -2, 0]   # truncation, NaN -> 0
    assert to_bits(np.array([0, 3, -1]), "bool").tolist() == [0, 1, 1]
    assert from_bits(np.array([0, 2], np.uint8), "bool").tolist() == [False, True]


def test_round_to_is_a_cast():
    assert round_to(np.array([1 + 2 ** -8, 3.0]), "bfloat16").tolist() == [1.0, 3.0]
    assert round_to(np.array([1 + 2 ** -11]), "float16").tolist() == [1.0]
    assert round_to(np.array([-2.7, 2.7]), "int8").tolist() == [-2, 2]
    assert round_to(np.array([0.0, 0.5]), "bool").tolist() == [False, True]
    assert round_to(np.array([300.0]), "float8_e4m3").tolist() == [288.0]
