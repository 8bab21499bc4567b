import pytest

from tirxpy.scope import PrimitiveMarker, Scope, ScopeError, Tx


@pytest.mark.parametrize("ns,scope", [(Tx, Scope.THREAD), (Tx.warp, Scope.WARP), (Tx.wg, Scope.WARPGROUP),
                                      (Tx.warpgroup, Scope.WARPGROUP), (Tx.cta, Scope.CTA), (Tx.cluster, Scope.CLUSTER)])
def test_markers_carry_scope_and_op(ns, scope):
    mk = ns.gemm_async
    assert isinstance(mk, PrimitiveMarker) and mk.op == "gemm_async" and mk.scope is scope


def test_repr():
    assert repr(Tx.copy) == "Tx.copy" and repr(Tx.wg.copy) == "Tx.wg.copy" and repr(Tx.cta) == "Tx.cta"


def test_calling_outside_prim_func_is_a_clear_error():
    with pytest.raises(ScopeError, match=r"Tx.cta.copy\(\.\.\.\) is a marker .* only works inside a @T.prim_func body"):
        Tx.cta.copy(1, 2)


def test_namespace_is_read_only():
    with pytest.raises(ScopeError, match="read-only"):
        Tx.foo = 1
