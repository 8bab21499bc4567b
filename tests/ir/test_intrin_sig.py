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
