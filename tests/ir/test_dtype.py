import pytest

from tirxpy.ir import DTYPES, DataType, IRError, ptr


def test_canonical_names_and_bits():
    want = {"bool": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16, "uint32": 32,
            "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64, "float8_e4m3": 8,
            "float8_e5m2": 8, "float6_e2m3": 6, "float6_e3m2": 6, "float4_e2m1": 4}
    assert set(DTYPES) == set(want)
    for n, b in want.items():
        dt = DataType.get(n)
        assert dt.name == n and dt.bits == b and str(dt) == n


@pytest.mark.parametrize("alias,name", [("bf16", "bfloat16"), ("f16", "float16"), ("f32", "float32"), ("f64", "float64"),
                                        ("e4m3", "float8_e4m3"), ("e5m2", "float8_e5m2"), ("i8", "int8"), ("i64", "int64"),
                                        ("u8", "uint8"), ("u64", "uint64"), ("pred", "bool")])
def test_aliases(alias, name):
    assert DataType.get(alias) is DataType.get(name)


def test_tf32_keeps_float32_storage_with_a_flag():
    t = DataType.get("tf32")
    assert t.is_tf32 and t.name == "float32" and t.bits == 32 and t != DataType.get("float32") and repr(t) == "tfloat32"


def test_classification():
    assert DataType.get("e4m3").is_float and DataType.get("e4m3").exp_bits == 4
    assert DataType.get("u32").is_int and DataType.get("u32").is_uint and not DataType.get("u32").is_signed
    assert DataType.get("bool").is_bool and not DataType.get("bool").is_int
    assert DataType.get("float4_e2m1").bytes == 0.5
    assert DataType.get("int8").wrap(200) == -56 and DataType.get("uint8").wrap(-1) == 255


def test_pointer_and_handle_types():
    p = ptr("uint64", "shared")
    assert p.is_pointer and p.is_handle and p.bits == 32 and p.element == DataType.get("uint64") and p.storage == "shared"
    assert DataType.get("mbarrier") == p and DataType.get("ptr[uint64, shared]") == p
    assert ptr("float32").bits == 64
    assert DataType.get("descriptor").bits == 64 and DataType.get("smem_addr").bits == 32


def test_unknown_dtype_suggests():
    with pytest.raises(IRError, match=r"unknown dtype 'bfloat61'; did you mean 'bfloat16'"):
        DataType.get("bfloat61")
    with pytest.raises(IRError, match="unknown storage scope 'sharedd'"):
        ptr("uint64", "sharedd")


# ---------------------------------------------------------------- the one table of sizes and torch names
def test_itemsize_is_the_memory_size():
    from tirxpy.ir.dtype import DataType

    assert [DataType.get(n).itemsize for n in ("int8", "uint8", "bool", "bf16", "float8_e4m3", "f32", "u64")] == \
        [1, 1, 1, 2, 1, 4, 8]
    with pytest.raises(IRError, match="float4_e2m1 is 4 bits: packed several per byte"):
        DataType.get("float4_e2m1").itemsize


def test_torch_names_round_trip():
    import torch

    from tirxpy.ir.dtype import TORCH_NAMES, from_torch, to_torch

    for tname, name in TORCH_NAMES.items():
        assert from_torch(getattr(torch, tname)).name == name and to_torch(name) is getattr(torch, tname)
    assert from_torch(torch.complex64) is None
    with pytest.raises(IRError, match="float6_e2m3 has no torch dtype"):
        to_torch("float6_e2m3")
    with pytest.raises(IRError, match="float32 has no torch dtype"):
        to_torch("tf32")


def test_tma_sizes_come_from_the_dtype_table():
    from tirxpy.ir.dtype import DataType
    from tirxpy.lower.tma import DTYPE_BYTES

    assert DTYPE_BYTES["int8"] == 1 and all(DataType.get(n).itemsize == b for n, b in DTYPE_BYTES.items())
