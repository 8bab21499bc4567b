"""Descriptor bit layouts vs the PTX ISA tables (wgmma "Matrix Descriptor Format"; tcgen05
"Shared memory descriptor" and "Instruction descriptor" Tables 42-44)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.intrinsics import DescriptorError
from tirxpy.intrinsics import descriptors as D


def bits(x, lo, hi):  # inclusive bit range, as the PTX tables write them
    return (x >> lo) & ((1 << (hi - lo + 1)) - 1)


addr16 = st.integers(0, (1 << 18) // 16 - 1).map(lambda v: v * 16)
off16 = st.integers(0, (1 << 14) - 1).map(lambda v: v * 16)


@given(addr16, off16, off16, st.sampled_from([0, 32, 64, 128]), st.integers(0, 7))
def test_wgmma_desc_fields(a, lbo, sbo, sw, base):
    d = D.wgmma_smem_desc(a, lbo, sbo, sw, base)
    assert bits(d, 0, 13) == a >> 4
    assert bits(d, 16, 29) == lbo >> 4
    assert bits(d, 32, 45) == sbo >> 4
    assert bits(d, 49, 51) == base
    assert bits(d, 62, 63) == {0: 0, 128: 1, 64: 2, 32: 3}[sw]
    assert bits(d, 14, 15) == bits(d, 30, 31) == bits(d, 46, 48) == bits(d, 52, 61) == 0


@given(addr16, off16, off16, st.sampled_from([0, 32, 64, 128, "128B_base32B"]), st.integers(0, 7), st.booleans())
def test_tcgen05_smem_desc_fields(a, lbo, sbo, sw, base, absolute):
    d = D.tcgen05_smem_desc(a, lbo, sbo, sw, base, absolute)
    assert bits(d, 0, 13) == a >> 4 and bits(d, 16, 29) == lbo >> 4 and bits(d, 32, 45) == sbo >> 4
    assert bits(d, 46, 48) == 0b001
    assert bits(d, 49, 51) == base and bits(d, 52, 52) == int(absolute)
    assert bits(d, 53, 60) == 0
    assert bits(d, 61, 63) == {0: 0, "128B_base32B": 1, 128: 2, 64: 4, 32: 6}[sw]


def test_known_values():
    # 128B-swizzled K-major bf16 tile at 0x400: LBO field 1, SBO 1024 bytes (64), mode 1 at bit 62.
    assert D.wgmma_smem_desc(0x400, 16, 1024, 128) == 0x4000004000010040
    assert D.tcgen05_smem_desc(0x400, 16, 1024, 128) == (2 << 61) | (1 << 46) | (64 << 32) | (1 << 16) | 0x40
    # the start address keeps bits 4..17 only (shared::cta window is 256 KiB)
    assert D.wgmma_smem_desc(0x40400, 16, 16, 0) & 0x3FFF == 0x40
    assert D.desc_start_field(0x1230) == 0x123


@pytest.mark.parametrize("call, msg", [
    (lambda: D.wgmma_smem_desc(8, 16, 16), "multiple of 16"),
    (lambda: D.wgmma_smem_desc(0, 16 << 14, 16), "does not fit its 14-bit field"),
    (lambda: D.wgmma_smem_desc(0, 16, 16, swizzle=16), "WGMMA swizzle must be one of"),
    (lambda: D.wgmma_smem_desc(0, 16, 16, base_offset=8), "matrix base offset"),
    (lambda: D.tcgen05_smem_desc(0, 16, 16, swizzle="32B"), "tcgen05 swizzle must be one of"),
    (lambda: D.tcgen05_smem_desc(0, -16, 16), "non-negative multiple of 16"),
])
def test_smem_desc_errors(call, msg):
    with pytest.raises(DescriptorError, match=msg):
        call()


@pytest.mark.parametrize("d, a, b, at, bt, dt", [
    ("float32", "float16", "float16", 0, 0, 1), ("float16", "float16", "float16", 0, 0, 0),
    ("float32", "bfloat16", "bfloat16", 1, 1, 1), ("float32", "float32", "float32", 2, 2, 1),
    ("float32", "float8_e4m3", "float8_e5m2", 0, 1, 1), ("float16", "float6_e2m3", "float4_e2m1", 3, 5, 0),
    ("float32", "float6_e3m2", "float6_e3m2", 4, 4, 1), ("int32", "int8", "uint8", 1, 0, 2),
])
@pytest.mark.parametrize("m, n, cg", [(64, 8, 1), (128, 256, 1), (128, 16, 2), (256, 240, 2)])
def test_instr_desc_table42(d, a, b, at, bt, dt, m, n, cg):
    x = D.tcgen05_instr_desc(d, a, b, m, n, a_major="MN", b_major="K", negate_b=(d != "int32"), cta_group=cg)
    assert bits(x, 0, 2) == 0 and bits(x, 3, 3) == 0
    assert bits(x, 4, 5) == dt and bits(x, 6, 6) == 0
    assert bits(x, 7, 9) == at and bits(x, 10, 12) == bt
    assert bits(x, 13, 13) == 0 and bits(x, 14, 14) == int(d != "int32")
    assert bits(x, 15, 15) == 1 and bits(x, 16, 16) == 0
    assert bits(x, 17, 22) == n >> 3 and bits(x, 23, 23) == 0
    assert bits(x, 24, 28) == m >> 4 and bits(x, 29, 31) == 0


def test_instr_desc_known_value():
    assert D.tcgen05_instr_desc("float32", "bfloat16", "bfloat16", 128, 256) == 0x08400490
    assert D.mma_kind("float8_e4m3", "float4_e2m1") == "f8f6f4"


@pytest.mark.parametrize("kw, msg", [
    (dict(d="float32", a="float16", b="bfloat16", m=128, n=128), "no tcgen05.mma kind"),
    (dict(d="float16", a="float32", b="float32", m=128, n=128), "does not go with kind::tf32"),
    (dict(d="float32", a="int8", b="int8", m=128, n=128), "does not go with kind::i8"),
    (dict(d="float32", a="float16", b="float16", m=96, n=128), "M = 96 is not a tcgen05.mma shape"),
    (dict(d="float32", a="float16", b="float16", m=64, n=128, cta_group=2), "M = 64"),
    (dict(d="float32", a="float16", b="float16", m=128, n=24), "multiple of 16"),
    (dict(d="float32", a="float16", b="float16", m=128, n=128, cta_group=3), "cta_group must be 1 or 2"),
    (dict(d="float32", a="float16", b="float16", m=128, n=128, a_major="M"), "a_major must be"),
    (dict(d="int32", a="int8", b="int8", m=128, n=128, negate_a=True), "cannot negate"),
    (dict(d="float32", a="float16", b="float16", m=128, n=128, max_shift=4), "max shift"),
])
def test_instr_desc_errors(kw, msg):
    with pytest.raises(DescriptorError, match=msg):
        D.tcgen05_instr_desc(**kw)


@pytest.mark.parametrize("kind, a, at, scale, st_, m, n", [
    ("mxf8f6f4", "float8_e4m3", 0, "ue8m0", 1, 128, 256), ("mxf8f6f4", "float6_e3m2", 4, "ue8m0", 1, 256, 128),
    ("mxf4", "float4_e2m1", 1, "ue8m0", 1, 128, 64), ("mxf4nvf4", "float4_e2m1", 1, "ue4m3", 0, 128, 128),
])
def test_block_scaled_table43_44(kind, a, at, scale, st_, m, n):
    cg = 2 if m == 256 else 1
    x = D.tcgen05_block_scaled_instr_desc(kind, a, a, m, n, scale_dtype=scale, a_scale_id=2, b_scale_id=2,
                                          b_major="MN", cta_group=cg, k96=(kind != "mxf8f6f4"))
    assert bits(x, 0, 3) == 0 and bits(x, 4, 5) == 2 and bits(x, 6, 6) == 0
    assert bits(x, 7, 9) == at and bits(x, 10, 12) == at
    assert bits(x, 15, 15) == 0 and bits(x, 16, 16) == 1
    assert bits(x, 17, 22) == n >> 3 and bits(x, 23, 23) == st_
    assert bits(x, 24, 26) == 0 and bits(x, 27, 28) == m >> 7
    assert bits(x, 29, 30) == 2 and bits(x, 31, 31) == int(kind != "mxf8f6f4")


@pytest.mark.parametrize("args, kw, msg", [
    (("mxf6", "float8_e4m3", "float8_e4m3", 128, 128), {}, "block-scaled kind must be"),
    (("mxf4", "float8_e4m3", "float4_e2m1", 128, 128), {}, "takes A of dtype"),
    (("mxf8f6f4", "float8_e4m3", "float8_e4m3", 128, 128), dict(scale_dtype="ue4m3"), "UE8M0 scale factors only"),
    (("mxf4", "float4_e2m1", "float4_e2m1", 128, 128), dict(scale_dtype="ue4m3"), "use kind::mxf4nvf4"),
    (("mxf4", "float4_e2m1", "float4_e2m1", 128, 128), dict(scale_dtype="e8"), "scale dtype must be"),
    (("mxf4", "float4_e2m1", "float4_e2m1", 128, 128), dict(a_scale_id=1), "a_scale_id = 1"),
    (("mxf8f6f4", "float8_e4m3", "float8_e4m3", 128, 128), dict(k96=True), "K = 96"),
    (("mxf8f6f4", "float8_e4m3", "float8_e4m3", 64, 128), {}, "M = 64"),
])
def test_block_scaled_errors(args, kw, msg):
    with pytest.raises(DescriptorError, match=msg):
        D.tcgen05_block_scaled_instr_desc(*args, **kw)


@pytest.mark.parametrize("major, sw", [("K", 128), ("K", 64), ("K", 32), ("K", 0), ("MN", 128), ("MN", 0)])
def test_from_layout_reads_the_layout(major, sw):
    from tirxpy.layout.atoms import mma_smem_layout, smem_descriptor_strides

    L = mma_smem_layout(128, 64, "bfloat16", major, sw)
    s = smem_descriptor_strides(L, "bfloat16", major)
    lbo = 16 if s.lbo is None else s.lbo
    assert D.wgmma_smem_desc_from_layout(L, "bfloat16", 0x800, major=major) == D.wgmma_smem_desc(0x800, lbo, s.sbo, sw)
    assert D.tcgen05_smem_desc_from_layout(L, "bfloat16", major=major) == D.tcgen05_smem_desc(0, lbo, s.sbo, sw)
    if major == "K" and sw == 128:
        assert (s.sbo, bits(D.wgmma_smem_desc_from_layout(L, "bfloat16"), 62, 63)) == (1024, 1)


# ---------------------------------------------------------------- the start-address field, one home
@given(st.integers(0, (1 << 32) - 1))
def test_start_field_renderings_agree(addr):
    assert D.start_field(addr) == (addr & 0x3FFFF) >> 4 < (1 << 14)
    if addr % 16 == 0:
        assert D.desc_start_field(addr) == D.start_field(addr)
        assert D.wgmma_smem_desc(addr, 16, 1024) == D.wgmma_smem_desc(0, 16, 1024) + D.start_field(addr)
    assert eval(D.start_field_cxx(str(addr)).replace("u)", ")")) == D.start_field(addr)


def test_start_field_text():
    assert D.start_field_cxx("x + 4") == "(((x + 4) & 0x3FFFFu) >> 4)"
    assert D.start_field_ptx("r") == "and.b64 r, r, 0x3FFFF;\n        shr.b64 r, r, 4;"


# ---------------------------------------------------------------- layout -> descriptor, one path
def test_region_desc_widens_a_k_slice_narrower_than_the_swizzle_atom():
    from tirxpy.ir import Buffer
    from tirxpy.layout.atoms import mma_smem_layout

    buf = Buffer("sA", (64, 64), "bfloat16", "shared", layout=mma_smem_layout(64, 64, "bfloat16", "K", 128))
    whole = D.smem_desc("wgmma", buf.layout, "bfloat16", major="K", shape=(64, 64))
    assert D.region_desc("wgmma", buf.full()) == whole
    assert D.region_desc("wgmma", buf[0:64, 16:32]) == whole      # k16 step: the whole-K descriptor
    with pytest.raises(DescriptorError, match="family must be 'wgmma' or 'tcgen05'"):
        D.smem_desc("mma", buf.layout, "bfloat16")


@given(addr16, off16, off16, st.sampled_from([0, 32, 64, 128]))
def test_smem_desc_fields_reads_back_what_the_encoders_pack(a, lbo, sbo, sw):
    assert D.smem_desc_fields(D.wgmma_smem_desc(a, lbo, sbo, sw), "wgmma") == (a, lbo, sbo, sw)
    assert D.smem_desc_fields(D.tcgen05_smem_desc(a, lbo, sbo, sw), "tcgen05") == (a, lbo, sbo, sw)


def test_smem_desc_fields_names_the_unmodelled_and_reserved_swizzles():
    assert D.smem_desc_fields(D.tcgen05_smem_desc(0, 16, 16, "128B_base32B"), "tcgen05")[3] == "128B_base32B"
    assert D.smem_desc_fields(3 << 61, "tcgen05")[3] is None


def test_desc_major_reads_constant_immediates_only():
    from tirxpy.ir import IntImm, Var

    idesc = D.tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=256, b_major="MN")
    named = {"idesc": IntImm(idesc)}
    assert D.desc_major("tcgen05", "a_desc", named) == "K" and D.desc_major("tcgen05", "b_desc", named) == "MN"
    assert D.desc_major("tcgen05", "b_desc", {"idesc": Var("d", "uint32")}) == "K"     # not a constant
    assert D.desc_major("tcgen05", "src_desc", named) == "K"                            # tcgen05.cp: no transpose bit
    assert D.desc_major("wgmma", "a_desc", {"trans_a": IntImm(1)}) == "MN"
    assert D.desc_major("wgmma", "a_desc", {"trans_a": IntImm(0)}) == D.desc_major("wgmma", "a_desc", {}) == "K"
