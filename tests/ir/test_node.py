"""tirxpy/ir/node.py: the base node (fields, span, identity comparison, printed form)."""
from tirxpy.ir import IntImm, Var
from tirxpy.ir.node import Node
from tirxpy.ir.stmt import LetStmt


class _Pair(Node):
    _fields = ("a", "b")

    def __init__(self, a, b, span=None):
        super().__init__(span)
        self.a, self.b = a, b


def test_fields_in_declaration_order():
    p = _Pair(1, "x")
    assert p.fields() == [("a", 1), ("b", "x")]
    assert Node().fields() == []


def test_span_is_kept_when_given():
    marker = object()
    assert _Pair(1, 2, span=marker).span is marker


def test_nodes_compare_by_identity_and_print_as_script():
    x = Var("x")
    s1, s2 = LetStmt(x, IntImm(3)), LetStmt(x, IntImm(3))
    assert s1 != s2 and s1 == s1
    assert str(s1) == repr(s1) == str(s2)
    assert "x" in str(s1) and "3" in str(s1)
