"""tirxpy/ir/stmt.py: statement nodes and their invariants."""
import pytest

from tirxpy.ir import Buffer, IntImm, IRError, Var
from tirxpy.ir.stmt import (Evaluate, For, IfThenElse, LetStmt, PrimitiveCall, SeqStmt, While, as_seq)
from tirxpy.scope import Scope


def _let(name):
    return LetStmt(Var(name), IntImm(1))


def test_seq_stmt_flattens_nested_sequences():
    a, b, c = _let("a"), _let("b"), _let("c")
    s = SeqStmt([a, SeqStmt([b, SeqStmt([c])])])
    assert s.stmts == (a, b, c) and len(s) == 3 and list(s) == [a, b, c]


def test_seq_stmt_refuses_non_statements():
    with pytest.raises(IRError, match="holds statements"):
        SeqStmt([IntImm(1)])


def test_as_seq():
    a = _let("a")
    s = SeqStmt([a])
    assert as_seq(s) is s
    assert as_seq(a).stmts == (a,)
    assert as_seq(None).stmts == ()
    assert as_seq([a, a]).stmts == (a, a)


def test_for_kind_and_body():
    i = Var("i")
    body = _let("x")
    f = For(i, IntImm(0), IntImm(4), "unroll", body)
    assert isinstance(f.body, SeqStmt) and f.body.stmts == (body,)
    assert [n for n, _ in f.fields()] == ["var", "start", "stop", "kind", "body"]
    with pytest.raises(IRError, match="loop kind") as e:
        For(i, IntImm(0), IntImm(4), "parallel", body)
    assert isinstance(e.value, ValueError) and "T.rolled" in e.value.hint
    assert For(i, IntImm(0), IntImm(4), "rolled", body).kind == "rolled"


def test_if_and_while_wrap_bodies():
    c = Var("c", "bool")
    s = IfThenElse(c, _let("x"))
    assert s.else_body is None and len(s.then_body) == 1
    assert len(IfThenElse(c, [], [_let("y")]).else_body) == 1
    assert len(While(c, [_let("a"), _let("b")]).body) == 2


def test_primitive_call_checks_name_and_dispatch():
    A = Buffer("A", (4,), "float32")
    p = PrimitiveCall("fill", [A], "cta", {"value": 0.0})
    assert p.scope is Scope.CTA and p.operands == (A,) and p.attrs == {"value": 0.0} and p.dispatch is None
    with pytest.raises(IRError, match="identifier"):
        PrimitiveCall("not-a-name", [A])
    with pytest.raises(IRError, match="dispatch="):
        PrimitiveCall("fill", [A], dispatch=3)
    assert Evaluate(IntImm(0)).fields()[0][0] == "expr"
