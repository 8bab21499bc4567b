"""@T.macro: inline expansion, parse-time specialization, hygiene, nesting, and every error."""
import pytest

from tirxpy import T, Tx
from tirxpy.ir import For, IfThenElse, LetStmt, ParseError, PrimitiveCall, structural_equal

from .helpers import raises_at, round_trip

SCALE = 3.0


@T.macro
def scaled_store(dst, src, i, scale=SCALE):
    """A module-level macro: reads the global SCALE as its default."""
    dst[i] = src[i] * T.float32(scale)


@T.macro
def unrolled_rows(dst, src, rows):
    for r in range(rows):                 # a Python loop: unrolled at every expansion
        scaled_store(dst, src, r, 1.0)     # a macro calling a macro


def test_expansion_equals_the_hand_written_body():
    @T.prim_func
    def with_macro(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        T.launch(grid=(1,), threads=8)
        scaled_store(B, A, T.thread_id())
        scaled_store(B, A, 0, 2.0)

    @T.prim_func
    def by_hand(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        T.launch(grid=(1,), threads=8)
        B[T.thread_id()] = A[T.thread_id()] * T.float32(3.0)
        B[0] = A[0] * T.float32(2.0)

    assert structural_equal(with_macro.body, by_hand.body), str(with_macro)   # kernel names differ
    round_trip(with_macro)


def test_python_arguments_specialize_each_expansion_and_macros_nest():
    @T.prim_func
    def k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        T.launch(grid=(1,), threads=1)
        unrolled_rows(B, A, 3)
        unrolled_rows(B, A, 1)

    text = str(k)
    stores = [line.strip() for line in text.splitlines() if "= A[" in line]
    assert stores == [f"B[{r}] = A[{r}] * T.float32(1.0)" for r in (0, 1, 2, 0)], text


def test_device_control_flow_and_primitives_inside_a_macro():
    @T.macro
    def clear_and_count(buf, n, count):
        Tx.cta.fill(buf, T.float32(0))
        for i in T.serial(n):
            if i % 2 == 0:
                count[0] = count[0] + 1

    @T.prim_func
    def k(A: T.Tensor((64,), "float32"), C: T.Tensor((1,), "int32")):
        T.launch(grid=(1,), threads=32)
        clear_and_count(A, 10, C)

    fill, loop = k.body.stmts     # the expansion is spliced into the caller's sequence
    assert isinstance(fill, PrimitiveCall) and fill.op == "fill"
    assert isinstance(loop, For) and str(loop.stop) == "10" and isinstance(loop.body.stmts[0], IfThenElse)
    round_trip(k)


def test_hygiene_names_do_not_leak_either_way():
    @T.macro
    def sets_x(dst):
        x = T.thread_id() + 1          # a let local to this expansion
        dst[x] = T.float32(0)

    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(1,), threads=32)
        x = T.thread_id() * 2
        sets_x(A)
        A[x] = T.float32(1)           # still the caller's x

    outer, inner, macro_store, caller_store = k.body.stmts
    assert isinstance(outer, LetStmt) and isinstance(inner, LetStmt) and outer.var is not inner.var
    assert str(outer.value) == "T.thread_id() * 2" and str(inner.value) == "T.thread_id() + 1"
    assert macro_store.indices[0] is inner.var and caller_store.indices[0] is outer.var
    round_trip(k)

    @T.macro
    def reads_caller_name(dst):
        dst[0] = caller_only  # noqa: F821  (the caller's local is not visible)

    def f():
        @T.prim_func
        def k2(A: T.Tensor((8,), "float32")):
            T.launch(grid=(1,), threads=1)
            caller_only = A[1]  # noqa: F841
            reads_caller_name(A)

    e = raises_at(ParseError, r"name 'caller_only' is not defined", f, "dst[0] = caller_only")
    assert "in macro 'reads_caller_name', expanded at" in str(e)


def test_closure_values_of_a_factory_specialize_the_macro():
    def make(width):
        @T.macro
        def fill_row(dst, row):
            for j in range(width):
                dst[row, j] = T.float32(j)

        @T.prim_func
        def k(A: T.Tensor((4, width), "float32")):
            T.launch(grid=(1,), threads=1)
            fill_row(A, 2)

        return k

    assert str(make(3)).count("A[2, ") == 3 and str(make(5)).count("A[2, ") == 5


@pytest.mark.parametrize("call,match,hint", [
    ("scaled_store(A, A)", r"macro 'scaled_store': missing a required argument: 'i'", "its parameters are scaled_store(dst, src, i"),
    ("scaled_store(A, A, 0, 1.0, 2)", r"macro 'scaled_store': too many positional arguments", None),
    ("scaled_store(A, A, 0, bogus=1)", r"unexpected keyword argument 'bogus'", None),
    ("x = scaled_store(A, A, 0)", r"macro 'scaled_store' expands to statements and has no value", "on its own line"),
])
def test_call_errors_name_the_macro_and_its_signature(call, match, hint):
    src = f'@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n    T.launch(grid=(1,), threads=1)\n    {call}\n'
    with pytest.raises(ParseError, match=match) as e:
        T.parse_script(src, env={"scaled_store": scaled_store})
    assert ":4:" in str(e.value) and call in str(e.value)
    if hint:
        assert hint in str(e.value)


def test_errors_inside_a_macro_point_at_the_macro_line_and_the_call():
    @T.macro
    def bad_store(dst):
        dst[0] = T.float16(1)

    def f():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            T.launch(grid=(1,), threads=1)
            bad_store(A)

    e = raises_at(ParseError, r"cannot store a float16 value into A", f, "dst[0] = T.float16(1)")
    assert "in macro 'bad_store', expanded at" in str(e) and __file__ in str(e)


def test_return_launch_recursion_and_calls_outside_a_kernel_are_refused():
    @T.macro
    def returns(dst):
        dst[0] = T.float32(0)
        return 1

    @T.macro
    def launches(dst):
        T.launch(grid=(1,), threads=1)

    @T.macro
    def forever(dst):
        forever(dst)

    for mac, match in ((returns, "macro 'returns' has a return statement"),
                       (launches, r"T.launch\(...\) inside macro 'launches'"),
                       (forever, "64 levels deep .*a macro calls itself without end")):
        def f(mac=mac):
            @T.prim_func
            def k(A: T.Tensor((8,), "float32")):
                T.launch(grid=(1,), threads=1)
                mac(A)

        with pytest.raises(ParseError, match=match):
            f()
    with pytest.raises(ParseError, match=r"macro 'scaled_store' only expands inside a @T.prim_func body"):
        scaled_store(1, 2, 3)
    with pytest.raises(ParseError, match="@T.macro decorates a function"):
        T.macro(5)
