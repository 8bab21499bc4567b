import pytest

import tirxpy.intrinsics as I


def test_wgmma_generated_on_demand_and_by_name():
    e = I.wgmma.get(n=232, d="float32", a="float16", b="float16", a_from="reg")
    assert e.name == "wgmma_m64n232k16_f32_f16_f16_rs"
    assert I.lookup("wgmma_m64n232k16_f32_f16_f16_rs") is e
    assert e.operand("d").count == 116 and e.operand("a").count == 4
    assert [o.name for o in e.args][-2:] == ["scale_b", "trans_b"]
    f8 = I.get("wgmma_m64n128k32_f16_e4m3_e4m3_ss")
    assert f8.operand("d").count == 32 and f8.operand("d").dtype == "uint32"
    assert "trans_a" not in [o.name for o in f8.args]
    assert I.get("wgmma_m64n64k8_f32_tf32_tf32_ss").ptx == "wgmma.mma_async.m64n64k8.f32.tf32.tf32"


@pytest.mark.parametrize("kw, msg", [
    (dict(n=12), "multiple of 8 in"), (dict(n=264), "multiple of 8 in"),
    (dict(n=64, a="float16", b="bfloat16"), "same dtype"), (dict(n=64, d="float16", a="bfloat16"), "float16 accumulator"),
    (dict(n=64, a="int8"), "input dtypes"), (dict(n=64, d="int32"), "accumulator dtype"),
    (dict(n=64, a_from="tmem"), "a_from"),
])
def test_wgmma_bad_params(kw, msg):
    with pytest.raises(I.OperandError, match=msg):
        I.wgmma.get(**kw)


def test_wgmma_name_with_wrong_k():
    with pytest.raises(I.OperandError, match="K = 32 does not match"):
        I.lookup("wgmma_m64n64k32_f32_bf16_bf16_ss")


def test_tcgen05_ld_st_shapes():
    assert I.get("tcgen05_ld_16x128b_x64").operand("d").count == 128
    assert I.get("tcgen05_ld_32x32b_x1").operand("d").vector
    st = I.tcgen05_st.get(shape="16x64b", rep=4, pack=True)
    assert st.name == "tcgen05_st_16x64b_x4_unpack16" and ".unpack::16b" in st.template
    half = I.get("tcgen05_ld_16x32bx2_x2")
    assert [o.name for o in half.args] == ["taddr", "d", "half_offset"]
    with pytest.raises(I.OperandError, match=r"repeat 128 must be a power of two in \[1, 64\]"):
        I.tcgen05_ld.get(shape="16x128b", rep=128)
    with pytest.raises(I.OperandError, match="repeat 3"):
        I.tcgen05_ld.get(shape="32x32b", rep=3)
    with pytest.raises(I.OperandError, match="shape '8x8b'"):
        I.tcgen05_ld.get(shape="8x8b")


def test_family_lookup_errors():
    with pytest.raises(I.IntrinsicError, match="no intrinsic family"):
        I.family("nope")
    assert repr(I.family("wgmma_m64")) == "Family(wgmma_m64)"


@pytest.mark.parametrize("name", ["tcgen05_ld_16x128b_x16_pack16", "wgmma_m64n40k16_f32_bf16_bf16_ss"])
def test_family_member_parses_as_t_ptx_before_anything_generated_it(name):
    """A kernel may call a family member no primitive has generated yet: T.ptx resolves it on demand."""
    from tirxpy import T
    from tirxpy.intrinsics import table
    from tirxpy.ir import intrin_sig

    table._TABLE.pop(name, None)
    intrin_sig._REGISTRY.pop(name, None)
    assert repr(getattr(T.ptx, name)) == f"T.ptx.{name}"
    assert intrin_sig.lookup_intrinsic_signature(name).n_args == I.get(name).n_args


def test_invalid_family_member_says_which_rule_it_breaks():
    from tirxpy import T
    from tirxpy.ir.errors import ParseError

    with pytest.raises(ParseError, match=r"repeat 128 must be a power of two in \[1, 64\]"):
        T.ptx.tcgen05_ld_16x128b_x128
