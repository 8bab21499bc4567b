"""The scalar types' raw table (tirxpy/dtype_table.py): the one source of element sizes for the IR
dtypes and the layout swizzles."""
import pytest

from tirxpy.dtype_table import ALIASES, SPECS, TF32, bits_of, canonical
from tirxpy.ir.dtype import CANONICAL, DataType
from tirxpy.layout import LayoutError, dtype_bits


def test_every_name_has_the_bits_the_ir_dtype_has():
    names = [n for n, *_ in SPECS] + list(ALIASES) + list(TF32)
    for n in names:
        assert bits_of(n) == DataType.get(n).bits, n
    assert CANONICAL == tuple(n for n, *_ in SPECS)


def test_aliases_name_canonical_types():
    assert canonical("bf16") == "bfloat16" and canonical("tf32") == "float32" and canonical("pred") == "bool"
    assert all(v in CANONICAL for v in ALIASES.values())


def test_unknown_names_have_no_size():
    assert bits_of("complex64") is None and canonical("float7") is None and bits_of("") is None


def test_layout_reads_its_sizes_from_the_table():
    assert [dtype_bits(n) for n in ("bf16", "tfloat32", "e5m2", "uint64", "float6_e2m3")] == [16, 32, 8, 64, 6]
    with pytest.raises(LayoutError, match="unknown dtype 'float7'.*one of bool, int8"):
        dtype_bits("float7")
    with pytest.raises(LayoutError, match="element size 1 bits is not supported"):
        dtype_bits("bool")


def test_the_simulators_storage_has_the_tables_sizes():
    from tirxpy.sim.values import _STORAGE_NP

    for name, st in _STORAGE_NP.items():
        assert st.itemsize == DataType.get(name).itemsize, name


@pytest.mark.parametrize("name", [["float32"], {}, {"float32"}, None, 32, b"float32", 1.5])
def test_names_that_are_no_str_are_unknown(name):
    assert canonical(name) is None and bits_of(name) is None
