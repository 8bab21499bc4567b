"""tirxpy/intrinsics/table.py: the entry table, families and the IR signature link."""
import dataclasses

import pytest

from tirxpy.intrinsics import table
from tirxpy.intrinsics.errors import IntrinsicError, RegistrationError
from tirxpy.ir.intrin_sig import lookup_intrinsic_signature


def test_get_and_lookup_static_entry():
    e = table.get("mbarrier_init")
    assert e.name == "mbarrier_init" and e.n_args == 2
    assert table.lookup("mbarrier_init") is e
    assert e in table.entries()


def test_unknown_name():
    assert table.lookup("no_such_intrinsic_xyz") is None
    with pytest.raises(IntrinsicError, match="no intrinsic named 'mbarrier_nope'.*similar"):
        table.get("mbarrier_nope")


def test_family_entry_is_generated_on_demand_and_cached():
    name = "wgmma_m64n24k16_f32_bf16_bf16_ss"
    e = table.lookup(name)
    assert e is not None and e.ptx == "wgmma.mma_async.m64n24k16.f32.bf16.bf16"
    assert table.lookup(name) is e
    assert lookup_intrinsic_signature(name) is not None
    fam = table.family("wgmma_m64")
    assert fam in table.families() and repr(fam) == "Family(wgmma_m64)"
    assert fam.from_name("wgmma_m64nXk16") is None
    with pytest.raises(IntrinsicError, match="no intrinsic family"):
        table.family("nope_")


def test_add_refuses_a_second_entry_of_one_name_unless_replace():
    base = table.get("fence_proxy_async")
    e = dataclasses.replace(base, name="test_table_demo_fence")
    try:
        assert table.add(e) is e
        assert table.add(e) is e                    # the same object again is fine
        sig = lookup_intrinsic_signature("test_table_demo_fence")
        assert sig is not None and sig.n_args == base.n_args
        other = dataclasses.replace(base, name="test_table_demo_fence")
        with pytest.raises(RegistrationError, match="already exists"):
            table.add(other)
        assert table.add(other, replace=True) is other and table.get("test_table_demo_fence") is other
        assert table.sync_ir_signatures() == len(table.entries())
    finally:
        table._TABLE.pop("test_table_demo_fence", None)
