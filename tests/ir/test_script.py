"""tirxpy.ir.script: the T namespace outside a kernel body: dtype constructors, ceildiv, math helpers,
intrinsic references, parser-only requests and the did-you-mean for unknown members."""
import pytest

from tirxpy.ir import T
from tirxpy.ir.errors import IRError, ParseError
from tirxpy.ir.expr import AddressOf, Call, IntrinsicCall
from tirxpy.ir.script import IntrinsicRef, LoopRange, TensorSpec


def test_dtype_ctor_makes_constants_and_casts():
    assert repr(T.float32) == "T.float32"
    assert repr(T.float32(1)) == "T.float32(1.0)"
    assert repr(T.int64(7)) == "T.int64(7)"
    assert repr(T.cast(T.int32(3), "float16")) == "T.float16(3.0)"
    assert str(T.float32("inf").dtype) == "float32"
    with pytest.raises(IRError, match="give a number"):
        T.float32("one")


def test_ceildiv_python_ints_and_expressions():
    assert T.ceildiv(7, 2) == 4 and T.ceildiv(8, 2) == 4 and T.ceildiv(1, 32) == 1
    assert str(T.ceildiv(T.thread_id() + 1, 32)) == "(T.thread_id() + 32) // 32"


def test_serial_and_unroll_ranges():
    r = T.serial(5)
    assert isinstance(r, LoopRange) and (r.kind, r.start, r.stop) == ("serial", 0, 5)
    u = T.unroll(2, 6)
    assert (u.kind, u.start, u.stop) == ("unroll", 2, 6)
    k = T.rolled(3)
    assert (k.kind, k.start, k.stop) == ("rolled", 0, 3)
    assert (T.rolled(1, 4).start, T.rolled(1, 4).stop) == (1, 4)


def test_tensor_spec():
    spec = T.Tensor((4, 8), "bfloat16")
    assert isinstance(spec, TensorSpec) and spec.shape == (4, 8) and str(spec.dtype) == "bfloat16"
    b = spec.make("A")
    assert b.name == "A" and tuple(b.shape) == (4, 8)


def test_math_checks_dtypes():
    e = T.sqrt(T.float32(4))
    assert isinstance(e, Call) and str(e.dtype) == "float32"
    with pytest.raises(IRError, match="works on floats"):
        T.sqrt(T.int32(4))
    assert str(T.abs(T.int32(-3)).dtype) == "int32"  # abs also takes integers
    with pytest.raises(IRError, match="different dtypes"):
        T.fma(T.float32(1), T.float32(2), T.float16(3))
    with pytest.raises(IRError, match="takes 3 argument"):
        T.fma(T.float32(1), T.float32(2))


def test_parser_only_requests_fail_outside_a_kernel():
    for fn in (lambda: T.launch(grid=(1,)), lambda: T.alloc_shared((4,), "float32"),
               lambda: T.alloc_local((4,), "float32"), lambda: T.alloc_tmem((128, 32), "float32")):
        with pytest.raises(ParseError, match="only works inside a @T.prim_func"):
            fn()


def test_ptx_references_and_call_intrin():
    ref = T.ptx.syncthreads
    assert isinstance(ref, IntrinsicRef) and repr(ref) == "T.ptx.syncthreads"
    call = ref()
    assert isinstance(call, IntrinsicCall) and call.name == "syncthreads"
    with pytest.raises(ParseError):
        T.ptx.no_such_intrinsic_xyz
    with pytest.raises(IRError, match="takes 0 argument"):
        T.call_intrin("syncthreads", 1)
    with pytest.raises(IRError, match="argument 0 of intrinsic"):
        T.call_intrin("mbarrier_arrive", "bar")


def test_address_of_takes_elements_or_regions():
    A = T.Tensor((8,), "float32").make("A")
    assert isinstance(T.address_of(A[3]), AddressOf)
    assert isinstance(T.address_of(A), AddressOf)  # the whole buffer: its full region
    with pytest.raises(IRError, match="takes a buffer element or region"):
        T.address_of(T.int32(3))


def test_unknown_member_suggests_close_names():
    with pytest.raises(ParseError, match="T has no member 'thred_id'") as ei:
        T.thred_id
    assert "T.thread_id" in str(ei.value)
    with pytest.raises(AttributeError):
        T.__wrapped__
