import pytest

import tirxpy.intrinsics as I
from tirxpy.intrinsics import Intrinsic, Operand


def test_render_pred_in_and_out():
    h = I.get("mbarrier_try_wait_parity").render_helper()
    assert h.startswith("__device__ __forceinline__ bool tx_mbarrier_try_wait_parity(unsigned bar, unsigned parity) {")
    assert "selp.u32 %0, 1, 0, P_done;" in h and '"=r"(done_u32)' in h and "return done_u32 != 0;" in h
    w = I.get("wgmma_m64n16k16_f32_bf16_bf16_ss").render_helper()
    assert w.startswith("template <int scale_a, int scale_b, int trans_a, int trans_b>")
    assert "setp.ne.b32 P_scale_d, %10, 0;" in w and '"+f"(d[7])' in w and '"n"(trans_b)' in w


def test_percent_is_escaped_and_vector_braces():
    assert '"mov.u32 %0, %%clock;"' in I.get("clock").render_helper()
    ld = I.get("ldmatrix_x1").render_helper()
    assert "{%0}, [%1]" in ld and "unsigned (&d)[1]" in ld
    st = I.get("stmatrix_x4").render_helper()
    assert "const unsigned (&s)[4]" in st


def test_render_call_orders_template_args():
    e = I.get("wgmma_m64n16k16_f32_bf16_bf16_ss")
    call = e.render_call(["acc", "da", "db", "true", "1", "1", "0", "0"])
    assert call == "tx_wgmma_m64n16k16_f32_bf16_bf16_ss<1, 1, 0, 0>(acc, da, db, true)"
    with pytest.raises(I.OperandError, match="takes 8 arguments"):
        e.render_call(["acc"])


def test_check_args():
    I.get("setmaxnreg_inc").check_args([240])
    with pytest.raises(I.OperandError, match=r"nregs' = 20 is not one of"):
        I.get("setmaxnreg_inc").check_args([20])
    with pytest.raises(I.OperandError, match="must be a compile-time integer constant"):
        I.get("setmaxnreg_inc").check_args([None])
    with pytest.raises(I.OperandError, match="nthreads = 48 must be a positive multiple of 32"):
        I.get("barrier_sync").check_args([1, 48])
    with pytest.raises(I.OperandError, match="barrier_id = 16 must be in"):
        I.get("barrier_sync").check_args({"barrier_id": 16})
    I.get("barrier_sync").check_args([None, None])  # unknown at build time: nothing to check
    with pytest.raises(I.OperandError, match="ncols = 48 must be a power of two"):
        I.get("tcgen05_alloc_cg1").check_args([None, 48])
    with pytest.raises(I.OperandError, match="nbytes = 20 must be a multiple of 16"):
        I.get("bulk_copy_g2s").check_args([None, None, 20, None])
    with pytest.raises(I.OperandError, match="takes 2 arguments"):
        I.get("barrier_sync").check_args([1])


def test_metadata():
    e = I.get("mbarrier_arrive_expect_tx")
    assert (e.n_args, e.ret_dtype, e.scope, str(e.requirement)) == (2, "uint64", "thread", "sm_90")
    assert [o.kind for o in e.args] == ["smem_addr", "reg"]
    assert I.get("tma_load_3d").operand("tmap").kind == "tensormap"
    assert I.get("tcgen05_mma_cg1_f16_ss").operand("a_desc").kind == "desc64"
    assert I.get("tcgen05_mma_cg1_f16_ss").operand("d").kind == "tmem_addr"
    assert I.get("wgmma_fence").scope == "warpgroup"
    assert I.get("mbarrier_init").__tirx_intrinsic__ == "mbarrier_init"
    assert "Intrinsic(mbarrier_init" in repr(I.get("mbarrier_init"))


def test_calling_from_python_is_an_error():
    with pytest.raises(I.IntrinsicError, match="call it inside a tirxpy kernel"):
        I.get("clock")()


@pytest.mark.parametrize("kw, msg", [
    (dict(name="1bad", template="x;"), "must be a Python and C identifier"),
    (dict(name="a", template="x {y};"), r"template names \['y'\] that are not operands"),
    (dict(name="a", template="x;", operands=[Operand("y", "reg", "uint32")]), r"operands \['y'\] do not appear"),
    (dict(name="a", template="x;", scope="grid"), "scope must be one of"),
    (dict(name="a", template="x {y};", operands=[Operand("y", "reg", "uint32")], ret="y"), "must name a scalar write"),
    (dict(name="a", template="x {y} {y2};", operands=[Operand("y", "reg", "uint32"), Operand("y", "reg", "uint32")]),
     "operand names repeat"),
])
def test_bad_entries(kw, msg):
    with pytest.raises(I.IntrinsicError, match=msg):
        Intrinsic(**kw)


_ADD = dict(name="lo_add", template="add.u32 {d}, {a}, {b};", ret="d", memory=False,
            operands=[Operand("d", "reg", "uint32", "w"), Operand("a", "reg", "uint32"), Operand("b", "reg", "uint32")])


def test_cxx_body_replaces_the_asm_with_a_return():
    h = Intrinsic(**_ADD, cxx="{a} + 2u * {b}").render_helper()
    assert "asm" not in h and "return (unsigned)(a + 2u * b);" in h
    assert h.startswith("__device__ __forceinline__ unsigned tx_lo_add(unsigned a, unsigned b) {")


@pytest.mark.parametrize("kw, msg", [
    (dict(memory=True), "needs ret= .* and memory=False"),
    (dict(ret=None, operands=[Operand("d", "reg", "uint32", "rw"), Operand("a", "reg", "uint32"),
                              Operand("b", "reg", "uint32")]), "needs ret="),
    (dict(cxx="{a} + {d}"), r"may name the read operands \['a', 'b'\] only"),
    (dict(cxx="{a} + {c}"), r"may name the read operands"),
    (dict(template="add.u32 {d}, {a}, {b};", operands=[Operand("d", "reg", "uint32", "w"), Operand("a", "reg", "uint32"),
                                                        Operand("b", "imm")]), "scalar read operands only"),
])
def test_cxx_body_is_for_pure_scalar_arithmetic(kw, msg):
    args = {**_ADD, "cxx": "{a} + {b}", **kw}
    with pytest.raises(I.IntrinsicError, match=msg):
        Intrinsic(**args)


@pytest.mark.parametrize("args, msg", [
    (("x", "nope"), "unknown kind"), (("x", "reg"), "needs a dtype"), (("x", "reg", "complex64"), "no register form"),
    (("x", "reg", "uint32", "x"), "access must be one of"), (("x", "reg", "uint32", "r", 0), r"count must be an int in \[1, 128\], got 0"),
    (("x", "imm", None, "w"), "read-only"), (("x y", "reg", "uint32"), "not a C identifier"),
])
def test_bad_operands(args, msg):
    with pytest.raises(I.OperandError, match=msg):
        Operand(*args)


def test_unknown_name():
    with pytest.raises(I.IntrinsicError, match="no intrinsic named 'mbarrier_nope'.*similar"):
        I.get("mbarrier_nope")
    assert I.lookup("nothing_like_this") is None


def test_address_operands_are_inputs_even_when_memory_is_written():
    h = I.get("atom_global_add_f32").render_helper()
    assert "tx_atom_global_add_f32(void* ptr, float v)" in h and '"l"(ptr)' in h and '"=f"(old)' in h
    assert "const void* src" in I.get("bulk_copy_g2s").render_helper()
    assert I.get("red_global_add_u32").operand("ptr").is_output is False
