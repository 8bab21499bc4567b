"""tirxpy.ir.visitor: the one walk over statements and expressions, and the rebuild of bodies."""
import pytest

from tirxpy.ir import T, stmt as St
from tirxpy.ir import expr as E
from tirxpy.ir.visitor import (
    first, map_bodies, shared_plan, sub_exprs, sub_stmts, walk_exprs, walk_stmts, walk_values,
)

SRC = '''
@T.prim_func
def k(A: T.Tensor((256,), "float32")):
    T.launch(grid=(1,), threads=128)
    s = T.alloc_shared((100,), "float32")
    for i in T.serial(2):
        if T.thread_id() < 64:
            A[i * 128 + T.thread_id()] = T.float32(1.0)
        else:
            t = T.alloc_shared((3,), "float32")
            A[0] = T.float32(2.0)
    while T.thread_id() < 0:
        A[1] = T.float32(3.0)
'''


@pytest.fixture(scope="module")
def k():
    return T.parse_script(SRC)


def test_walk_stmts_is_preorder_in_source_order(k):
    names = [type(s).__name__ for s in walk_stmts(k.body)]
    assert names == ["SeqStmt", "Allocate", "For", "SeqStmt", "IfThenElse", "SeqStmt", "BufferStore", "SeqStmt",
                     "Allocate", "BufferStore", "While", "SeqStmt", "BufferStore"]
    stores = [s.value.value for s in walk_stmts(k.body) if isinstance(s, St.BufferStore)]
    assert stores == [1.0, 2.0, 3.0]


def test_sub_stmts_lists_then_before_else(k):
    branch = first(k.body, St.IfThenElse)
    assert sub_stmts(branch) == [branch.then_body, branch.else_body]


def test_walk_survives_nesting_deeper_than_the_recursion_limit():
    s = St.SeqStmt([St.Evaluate(E.IntImm(0, "int32"))])
    for _ in range(5000):
        s = St.SeqStmt([St.While(E.BoolImm(False), s)])
    assert sum(isinstance(x, St.Evaluate) for x in walk_stmts(s)) == 1


def test_walk_exprs_reaches_conditions_indices_and_values(k):
    kinds = {type(e).__name__ for e in walk_exprs(k.body)}
    assert {"LT", "ScopeId", "Mul", "Add", "FloatImm", "Var"} <= kinds
    assert [type(x).__name__ for x in sub_exprs(first(k.body, St.IfThenElse))] == ["LT"]


def test_map_bodies_rebuilds_each_compound_statement(k):
    seen = []
    out = map_bodies(first(k.body, St.For), lambda b: seen.append(b) or St.SeqStmt([]))
    assert isinstance(out, St.For) and len(out.body) == 0 and len(seen) == 1
    store = first(k.body, St.BufferStore)
    assert map_bodies(store, lambda b: 1 / 0) is store          # no body: unchanged, fn never called


def test_shared_plan_places_allocations_in_source_order(k):
    offs, total = shared_plan(k.body)
    assert sorted(offs.values()) == [0, 512] and total == 512 + 12      # 400 B rounded up to 128-byte alignment


def test_walk_values_visits_each_node_once_and_reaches_layouts(k):
    from tirxpy.layout import Layout

    vals = list(walk_values(k.body))
    nodes = [v for v in vals if hasattr(v, "fields")]
    assert len({id(v) for v in nodes}) == len(nodes)
    assert any(isinstance(v, Layout) for v in vals)
