"""Expression nodes: constants stay within their dtype, and trees have a bounded depth."""
import pytest

from tirxpy.ir import IntImm, Var
from tirxpy.ir.errors import IRError
from tirxpy.ir.expr import MAX_EXPR_DEPTH, MAX_EXPR_NODES, BitNot


def test_int_imm_holds_only_values_of_its_dtype():
    assert IntImm(-2**31, "int32").value == -2**31 and IntImm(2**32 - 1, "uint32").value == 2**32 - 1
    for v, dt in [(2**31, "int32"), (-1, "uint8"), (256, "uint8"), (-2**63 - 1, "int64")]:
        with pytest.raises(IRError, match=f"IntImm {v} does not fit {dt}"):
            IntImm(v, dt)


def test_expression_depth_is_counted_and_capped():
    i = Var("i")
    e = i
    for _ in range(MAX_EXPR_DEPTH - 1):
        e = e * i
    assert e.depth == MAX_EXPR_DEPTH and i.depth == 1
    with pytest.raises(IRError, match=f"nests more than {MAX_EXPR_DEPTH} levels deep"):
        e * i


def test_expression_tree_size_counts_shared_subexpressions_at_each_use():
    """e + e doubles the tree printing and lowering walk: 40 doublings are 2**40 nodes in 40 shallow levels,
    under the depth cap, so the size is capped too."""
    i = Var("i")
    e = i
    for _ in range(15):
        e = e + e
    assert e.nodes == 2**16 - 1 and e.depth == 16 and i.nodes == 1
    with pytest.raises(IRError, match="MAX_EXPR_NODES"):
        e + e
    assert BitNot(e).nodes == MAX_EXPR_NODES                  # at the cap
    with pytest.raises(IRError, match="MAX_EXPR_NODES"):
        e + i
