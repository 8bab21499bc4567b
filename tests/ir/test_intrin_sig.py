import pytest

from tirxpy import T
from tirxpy.ir import IntrinsicCall, IRError, ParseError, lookup_intrinsic_signature, register_intrinsic_signature, Scope


def test_register_and_lookup():
    sig = register_intrinsic_signature("sig_test_ld", "uint32", n_args=1, scope="warp")
    assert lookup_intrinsic_signature("sig_test_ld") is sig and sig.scope is Scope.WARP and sig.ret_dtype.name == "uint32"
    call = T.ptx.sig_test_ld(T.int32(3))
    assert isinstance(call, IntrinsicCall) and call.dtype.name == "uint32" and str(call) == "T.ptx.sig_test_ld(3)"
    assert str(T.call_intrin("sig_test_ld", 1)) == "T.ptx.sig_test_ld(1)"


def test_object_with_tirx_intrinsic_attribute_is_callable_in_kernels():
    register_intrinsic_signature("sig_test_add", "int32", n_args=2)

    class Intrin:
        __tirx_intrinsic__ = "sig_test_add"

    add = Intrin()

    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        T.launch(grid=(1,), threads=32)
        A[0] = add(A[1], 2)

    assert str(k.body.stmts[0].value) == "T.ptx.sig_test_add(A[1], 2)"


def test_errors():
    with pytest.raises(ParseError, match="unknown intrinsic T.ptx.sig_test_lx; close matches: sig_test_ld") as e:
        T.ptx.sig_test_lx
    assert "register_intrinsic" in str(e.value)
    register_intrinsic_signature("sig_test_two", None, n_args=2)
    with pytest.raises(IRError, match="intrinsic sig_test_two takes 2 argument"):
        T.ptx.sig_test_two(1)
    with pytest.raises(IRError, match="argument 0 of intrinsic sig_test_two is 'x'"):
        T.ptx.sig_test_two("x", 1)
    with pytest.raises(IRError, match="n_args is a non-negative int"):
        register_intrinsic_signature("bad", None, n_args=-1)


def test_a_wrong_argument_count_names_the_arguments_and_help_prints_the_signature():
    # the count alone ("takes 2 argument(s), got 1") left a newcomer to guess what the arguments are
    import pydoc

    register_intrinsic_signature("sig_test_named", None, n_args=2, params=("bar", "count"),
                                 doc="T.ptx.sig_test_named(bar, count)")
    with pytest.raises(IRError, match=r"takes 2 argument\(s\), got 1: call it as T.ptx.sig_test_named\(bar, count\)"):
        T.ptx.sig_test_named(1)
    assert "T.ptx.sig_test_named(bar, count)" in pydoc.render_doc(T.ptx.sig_test_named, renderer=pydoc.plaintext)
    assert repr(T.ptx.sig_test_named) == "T.ptx.sig_test_named" and str(T.ptx.sig_test_named(1, 2)) == \
        "T.ptx.sig_test_named(1, 2)"
    with pytest.raises(IRError, match="params names the 2 argument"):
        register_intrinsic_signature("sig_test_bad", None, n_args=2, params=("a",))


def test_table_entries_give_their_operands_to_the_parser():
    import pydoc

    from tirxpy.ir import ParseError

    text = pydoc.render_doc(T.ptx.mbarrier_init, renderer=pydoc.plaintext)
    assert "T.ptx.mbarrier_init(bar, count)" in text and "mbarrier.init.shared::cta.b64" in text
    with pytest.raises(ParseError, match=r"call it as T.ptx.mbarrier_init\(bar, count\)"):
        T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads=32)
    bar = T.alloc_shared((1,), "uint64")
    T.ptx.mbarrier_init(bar[0])
''')
