"""tirxpy/ir/simplify.py: hand-built IR to the canonical form of the ops constructors."""
from tirxpy.ir import (Add, Buffer, BufferLoad, Cast, IntImm, Kernel, LaunchConfig, Mul, Select, Sub, Var,
                       structural_equal)
from tirxpy.ir import ops
from tirxpy.ir.simplify import simplify
from tirxpy.ir.stmt import BufferStore, For, IfThenElse, LetStmt


def test_constants_fold():
    e = simplify(Mul(Add(IntImm(2), IntImm(3)), IntImm(4)))
    assert isinstance(e, IntImm) and e.value == 20


def test_matches_ops_constructors():
    i = Var("i")
    raw = Sub(Add(Mul(i, IntImm(1)), IntImm(0)), IntImm(0))
    assert structural_equal(simplify(raw), i)
    assert structural_equal(simplify(Add(i, IntImm(1))), ops.add(i, 1))


def test_select_and_cast_are_rebuilt():
    c = Var("c", "bool")
    e = simplify(Select(c, Add(IntImm(1), IntImm(1)), IntImm(0)))
    assert structural_equal(e, ops.select(c, 2, 0))
    assert simplify(Cast("int64", Add(IntImm(1), IntImm(2)))).value == 3


def test_statements_and_kernels_are_rebuilt():
    A = Buffer("A", (8,), "int32")
    i = Var("i")
    store = BufferStore(A, [Add(i, IntImm(0))], BufferLoad(A, [Mul(IntImm(2), IntImm(3))]))
    loop = For(i, Add(IntImm(0), IntImm(0)), IntImm(8), "serial", [store])
    s = simplify(loop)
    assert s.start.value == 0
    st = s.body.stmts[0]
    assert st.indices[0] is i and st.value.indices[0].value == 6
    k = Kernel("k", [A], LaunchConfig(), [LetStmt(Var("x"), Add(IntImm(1), IntImm(1))),
                                           IfThenElse(Var("c", "bool"), [])])
    out = simplify(k)
    assert out is k and k.body.stmts[0].value.value == 2


def test_non_ir_values_pass_through():
    assert simplify(5) == 5 and simplify("x") == "x"
