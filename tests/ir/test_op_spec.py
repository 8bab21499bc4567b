import pytest

from tirxpy.ir import IRError, Scope, lookup_op_spec, register_op_spec


def test_preregistered_ops():
    for op in ("copy", "copy_async", "gemm", "gemm_async", "fill", "cast", "map", "binary", "unary", "reduce"):
        assert lookup_op_spec(op) is not None, op
    assert lookup_op_spec("gemm_async").operand_storage[2] == ("shared",)


def test_register_rules():
    spec = register_op_spec("spec_test", min_scope="wg", n_operands=1, operand_storage={0: "smem"})
    assert spec.min_scope is Scope.WARPGROUP and spec.n_operands == (1, 1) and spec.operand_storage == {0: ("shared",)}
    with pytest.raises(IRError, match="min_scope cta is wider than max_scope warp"):
        register_op_spec("spec_bad", min_scope="cta", max_scope="warp")
    with pytest.raises(IRError, match="unknown storage scope 'l2'"):
        register_op_spec("spec_bad2", operand_storage={0: "l2"})
