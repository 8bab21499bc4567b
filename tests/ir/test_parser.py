"""@T.prim_func: what becomes IR, what runs at parse time, and every parse error."""
import inspect

import pytest

from tirxpy import T, Tx
from tirxpy.ir import (Allocate, BufferStore, Evaluate, For, IfThenElse, IntrinsicCall, LetStmt, ParseError,
                       PrimitiveCall, Scope, While, register_intrinsic_signature)
from tirxpy.layout import S, TileLayout, laneid

from .helpers import raises_at, round_trip

N = 1024
TILE = 4
register_intrinsic_signature("test_fence", None, 0, scope="thread")
register_intrinsic_signature("test_shfl", "float32", 2, scope="warp")


def my_intrin_factory():
    class Handle:
        __tirx_intrinsic__ = "test_shfl"

    return Handle()


shfl = my_intrin_factory()


def test_add_one_from_the_issue():
    @T.prim_func
    def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        T.launch(grid=(8,), threads=128)
        bx = T.cta_id(0)
        tx = T.thread_id()
        B[bx * 128 + tx] = A[bx * 128 + tx] + T.float32(1)

    assert add_one.name == "add_one" and [p.name for p in add_one.params] == ["A", "B"]
    assert add_one.launch.threads == 128 and str(add_one.launch.grid[0]) == "8"
    let_bx, let_tx, store = add_one.body.stmts
    assert isinstance(let_bx, LetStmt) and isinstance(store, BufferStore)
    assert str(store.value) == "A[bx * 128 + tx] + T.float32(1.0)"
    # spans point into this file
    assert store.span.file == __file__ and "B[bx * 128 + tx]" in store.span.source_line()
    round_trip(add_one)


def test_meta_programming_unrolls_and_folds():
    @T.prim_func
    def k(A: T.Tensor((N,), "float32")):
        T.launch(grid=(N // 128 // TILE,), threads=128)
        base = (T.cta_id(0) * 128 + T.thread_id()) * TILE
        for t in range(TILE):                 # unrolled at parse time
            if t % 2 == 0:                    # decided at parse time
                A[base + t] = T.float32(0)
        for i in T.serial(2):                 # a device loop
            A[base + i] = A[base + i] * 2.0
        for i in T.unroll(1, 3):
            A[base + i] += 1.0

    body = k.body.stmts
    stores = [s for s in body if isinstance(s, BufferStore)]
    assert [str(s.indices[0]) for s in stores] == ["base", "base + 2"]
    loops = [s for s in body if isinstance(s, For)]
    assert [(lp.kind, str(lp.start), str(lp.stop)) for lp in loops] == [("serial", "0", "2"), ("unroll", "1", "3")]
    assert str(loops[1].body.stmts[0].value) == "A[base + i] + T.float32(1.0)"
    assert k.launch.grid[0].value == 2
    round_trip(k)


ROLLED = """
@T.prim_func
def k(A: T.Tensor((64,), "float32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    for i in T.rolled(n):
        for j in T.rolled(1, 3):
            A[i * 2 + j] = A[i * 2 + j] + 1.0
"""


def test_rolled_loop_parses_prints_and_round_trips():
    from tirxpy.ir import structural_equal

    k = T.parse_script(ROLLED)
    outer = next(s for s in k.body.stmts if isinstance(s, For))
    inner = outer.body.stmts[0]
    assert (outer.kind, str(outer.stop)) == ("rolled", "n")
    assert (inner.kind, str(inner.start), str(inner.stop)) == ("rolled", "1", "3")
    assert "for i in T.rolled(n):" in str(k) and "for j in T.rolled(1, 3):" in str(k)
    round_trip(k)
    # the kind is part of the structure: the same loops as T.serial are a different kernel
    assert not structural_equal(k, T.parse_script(ROLLED.replace("T.rolled", "T.serial")))


@pytest.mark.parametrize("loop, match", [("T.rolled(2.5)", "loop bounds must be integers"),
                                         ("T.rolled(1, 2, 3)", "calling `T.rolled` failed"),
                                         ("T.rolled()", "calling `T.rolled` failed")])
def test_rolled_loop_bad_arguments_are_parse_errors(loop, match):
    src = ROLLED.replace("T.rolled(n)", loop)
    with pytest.raises(ParseError, match=match) as e:
        T.parse_script(src)
    assert loop in str(e.value) and isinstance(e.value, ValueError)


def test_device_if_while_select_and_logic():
    @T.prim_func
    def k(A: T.Tensor((64,), "int32"), n: T.int32):
        T.launch(grid=(1,), threads=64)
        tx = T.thread_id()
        if tx < n and not tx == 3:
            A[tx] = T.select(tx % 2 == 0, tx, -tx)
        elif 0 <= tx < 32 or n > 5:
            A[tx] = tx if n > 0 else 0
        else:
            A[tx] = T.min(tx, n) << 1
        while A[0] > 0:
            A[0] = A[0] - 1

    top = k.body.stmts[1]
    assert isinstance(top, IfThenElse) and str(top.cond) == "tx < n and not tx == 3"
    assert isinstance(top.else_body.stmts[0], IfThenElse)
    assert str(top.else_body.stmts[0].cond) == "0 <= tx and tx < 32 or n > 5"
    assert isinstance(k.body.stmts[2], While)
    round_trip(k)


def test_pdl_launch_prints_and_parses_back():
    register_intrinsic_signature("griddepcontrol_wait", None, 0)     # as tirxpy.intrinsics registers it

    @T.prim_func
    def k(A: T.Tensor((32,), "float32")):
        T.launch(grid=(1,), threads=32, pdl=True)
        T.ptx.griddepcontrol_wait()
        A[T.thread_id()] = T.float32(0)

    assert k.launch.pdl is True
    assert "T.launch(grid=(1,), threads=32, pdl=True)" in str(k)
    round_trip(k)


def test_may_alias_launch_prints_and_parses_back():
    @T.prim_func
    def k(A: T.Tensor((32,), "float32"), L: T.Tensor((32,), "float32")):
        T.launch(grid=(1,), threads=32, may_alias=[("L", "A")])
        L[T.thread_id()] = A[31 - T.thread_id()]

    assert k.launch.may_alias == (("A", "L"),)
    assert "T.launch(grid=(1,), threads=32, may_alias=(('A', 'L'),))" in str(k)
    round_trip(k)


def test_allocations_primitives_and_intrinsics():
    frag_layout = TileLayout(S[(32, 4) : (1@laneid, 1)])

    @T.prim_func(verify=False)  # parses keyword arguments of every kind; copy / gemm do not take these (verify refuses)
    def k(A: T.Tensor((128, 64), "float16"), out: T.Tensor((32, 4), "float32")):
        T.launch(grid=(2,), threads=128, cluster=(2,), smem=65536)
        sm = T.alloc_shared((2, 128, 64), "float16")
        bar = T.alloc_shared((2,), "uint64")
        frag = T.alloc_local((32, 4), "float32", layout=frag_layout)
        acc = T.alloc_tmem((128, 32), "float32")
        Tx.cta.copy(sm[0], A, dispatch="tma", mbar=bar[0], multicast=(1, 2))
        Tx.warp.fill(frag, 0.0)
        Tx.wg.gemm(acc, sm[1], sm[0], accum=False, dtype=T.float32, layout=frag_layout)
        T.ptx.test_fence()
        v = shfl(frag[T.lane_id(), 0], T.address_of(bar[1]))
        out[T.lane_id(), 0] = v

    allocs = [s for s in k.body.stmts if isinstance(s, Allocate)]
    assert [a.buffer.storage for a in allocs] == ["shared", "shared", "local", "tmem"]
    assert allocs[2].buffer.layout.identical(frag_layout)
    copy, fill, gemm, fence, let_v, _ = k.body.stmts[4:]
    assert isinstance(copy, PrimitiveCall) and copy.scope is Scope.CTA and copy.dispatch == "tma"
    assert copy.attrs["multicast"] == (1, 2) and str(copy.attrs["mbar"]) == "bar[0]"
    assert fill.scope is Scope.WARP and gemm.scope is Scope.WARPGROUP and gemm.attrs["dtype"] == "float32"
    assert isinstance(fence, Evaluate) and isinstance(fence.expr, IntrinsicCall) and fence.expr.dtype is None
    assert isinstance(let_v.value, IntrinsicCall) and let_v.value.name == "test_shfl"
    assert k.launch.cluster == (2,) and k.launch.smem == 65536
    round_trip(k)


def test_scalar_params_annotated_lets_and_rebinding():
    @T.prim_func
    def k(A: T.Tensor((16,), "int64"), n: T.int64):
        T.launch(grid=(1,), threads=32)
        c: T.int64 = 5
        x = n + c
        x = x * 2                            # rebinding in the same block: a new variable
        A[0] = x
        acc = 0
        for i in range(4):                   # Python accumulation of device expressions
            acc = acc + A[i]
        A[1] = acc

    lets = [s for s in k.body.stmts if isinstance(s, LetStmt)]
    assert [s.var.name for s in lets] == ["c", "x", "x", "acc", "acc", "acc", "acc"]
    assert lets[1].var is not lets[2].var and lets[0].var.dtype.name == "int64"
    text = str(k)
    assert "c: T.int64 = T.int64(5)" in text and "x_1 = x * T.int64(2)" in text
    round_trip(k)


def test_printed_names_avoid_layout_axes():
    L = TileLayout(S[(32, 1) : (1@laneid, 1)])

    @T.prim_func
    def k(A: T.Tensor((32, 1), "float32", layout=L)):
        T.launch(grid=(1,), threads=32)
        laneid = T.lane_id()
        A[laneid, 0] = T.float32(1)

    assert "laneid_1 = T.lane_id()" in str(k)
    round_trip(k)


# ---------------------------------------------------------------- errors
def _line(fn, needle):
    return next(l.strip() for l in inspect.getsource(fn).splitlines() if needle in l)


def test_undefined_name_suggests_close_match():
    def f():
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            T.launch(grid=(1,), threads=32)
            A[0] = B_buf[0]  # noqa: F821

    e = raises_at(ParseError, r"name 'B_buf' is not defined", f, "A[0] = B_buf[0]")
    assert __file__ in str(e) and "define it before use" in str(e)


def test_integer_true_division():
    def f():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            T.launch(grid=(1,), threads=32)
            A[0] = T.thread_id() / 2

    e = raises_at(ParseError, r"`/` divides floats; the operands are int32", f, "A[0] = T.thread_id() / 2")
    assert "hint: write a // b" in str(e)


def test_range_over_device_value():
    def f():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32"), n: T.int32):
            T.launch(grid=(1,), threads=32)
            for i in range(n):
                A[i] = 0

    raises_at(ParseError, r"the device value `n` is not a compile-time int", f, "for i in range(n):")


def test_reassign_across_device_loop():
    def f():
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            T.launch(grid=(1,), threads=32)
            s = A[0]
            for i in T.serial(8):
                s = s + A[i]

    e = raises_at(ParseError, r"'s' is bound outside this device loop / branch", f, "s = s + A[i]")
    assert 'T.alloc_local((1,), "int32")' in str(e)


@pytest.mark.parametrize("body,match,hint", [
    ("return 1", "`Return` statements are not supported", "kernels return nothing"),
    ("A[0] = T.float16(1)", r"cannot store a float16 value into A \(float32\)", 'T.cast(value, "float32")'),
    ("T.alloc_shared((4,), 'float32')", "an allocation must be assigned to a name", "buf = T.alloc_shared"),
    ("x = Tx.copy(A, A)", r"Tx.copy\(...\) is a statement and has no value", "own line"),
    ("T.ptx.test_fense()", "unknown intrinsic T.ptx.test_fense; close matches: test_fence", "register_intrinsic"),
    ("T.foo(1)", "T has no member 'foo'", "did you mean"),
    ("A[0:4] = T.float32(0)", r"A store writes one element of A", "Tx.fill"),
    ("if T.thread_id():\n        pass", "has dtype int32, not bool", "!= 0"),
    ("x = T.ptx.test_fence()", "this intrinsic returns nothing", "statement on its own line"),
    ("T.launch(grid=(1,), threads=32)", r"T.launch\(...\) appears twice", "keep one"),
    ("Tx.copy(A, 'x')", "operand 1 of Tx.copy is 'x'", "options go in keywords"),
    ("assert 1 == 2, 'tile must divide'", "tile must divide", None),
    ("A[0] = T.exp(T.thread_id())", "T.exp works on floats, got int32", "T.exp(T.float32(x))"),
])
def test_parse_errors_from_text(body, match, hint):
    src = f'@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n    T.launch(grid=(1,), threads=32)\n    {body}\n'
    with pytest.raises(ParseError, match=match) as e:
        T.parse_script(src)
    text = str(e.value)
    assert text.startswith("<tirxpy-script-") and ":4:" in text and body.splitlines()[0] in text
    if hint:
        assert hint in text


@pytest.mark.parametrize("src,match", [
    ('@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n    A[0] = T.float32(0)\n', "has no launch configuration"),
    ('@T.prim_func\ndef k(A):\n    T.launch()\n', "parameter 'A' needs a type annotation"),
    ('@T.prim_func\ndef k(A: T.Tensor((8,), "float32")):\n    x = T.thread_id()\n    T.launch()\n',
     "must be the first statement"),
    ('@T.prim_func\ndef k(n: 5):\n    T.launch()\n', "parameter 'n' has annotation 5"),
    ('def k(:\n', "syntax error"),
    ('x = 1\n', "exactly one @T.prim_func def, found 0"),
])
def test_kernel_level_parse_errors(src, match):
    with pytest.raises(ParseError, match=match):
        T.parse_script(src)


def test_launch_outside_kernel():
    with pytest.raises(ParseError, match=r"T.launch\(...\) only works inside a @T.prim_func body"):
        T.launch(grid=(1,))


def test_parameter_annotated_none_is_dropped_and_dead_branches_may_use_it():
    # a jit factory specializes its signature: SF exists only when scaled
    for scaled in (False, True):
        SPEC = T.Tensor((8,), "float32") if scaled else None

        @T.prim_func
        def k(A: T.Tensor((8,), "float32"), SF: SPEC):
            T.launch(grid=(1,), threads=8)
            if scaled:
                A[T.thread_id()] = SF[T.thread_id()]
            else:
                A[T.thread_id()] = T.float32(0)

        assert [p.name for p in k.params] == (["A", "SF"] if scaled else ["A"])


_BAD_HEAD = '''
@T.prim_func
def k(A: T.Tensor((8,), "float32"), Y: T.Tensor((8,), "int32")):
    T.launch(grid=(1,), threads=8)
'''


@pytest.mark.parametrize("line, match", [
    ("Y[0] = 1 // 0", "`1 // 0` has no value at parse time: integer division or modulo by zero"),
    ("Y[0] = " + " + ".join(["Y[1]"] * 3000), "nests too deeply"),
    ("B = -A", "unary `-` does not apply to the tensor A"),
    ("B = ~A[0:4]", "unary `~` does not apply to the tensor A"),
    ("x, y = 3", "cannot unpack a builtins.int value into 2 names"),
    ("Y[0] = T.int32(1 << 40)", "does not fit int32"),
])
def test_parser_failures_are_parse_errors_with_the_source_line(line, match):
    raises_at(ParseError, match, lambda: T.parse_script(_BAD_HEAD + "    " + line + "\n"),
              line if "3000" not in match and len(line) < 80 else line[:20])


def test_parse_script_arguments_are_checked():
    with pytest.raises(ParseError, match="T.parse_script takes the script text \\(a str\\), got NoneType"):
        T.parse_script(None)
    with pytest.raises(ParseError, match="env must be a dict of name -> constant, got str"):
        T.parse_script(_BAD_HEAD + "    pass\n", env="N=1")
    with pytest.raises(ParseError, match="env\\['f'\\] is `builtins.print`"):
        T.parse_script(_BAD_HEAD + "    pass\n", env={"f": print})
