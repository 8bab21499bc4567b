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


@pytest.mark.parametrize("expr,match", [
    (lambda: Tx.wrap.copy, r"Tx.wrap.copy: 'wrap' is not an execution scope .*; did you mean Tx.warp.copy\?"),
    (lambda: Tx.ctaa.fill, r"did you mean Tx.cta.fill\?"),
    (lambda: Tx.warp.copy.x, r"Tx.warp.copy.x: a primitive has no attributes"),
])
def test_an_attribute_of_a_marker_names_the_scopes(expr, match):
    # Tx.wrap is the marker of a (would-be) primitive 'wrap'; '.copy' on it meant a misspelt scope
    with pytest.raises(ScopeError, match=match):
        expr()
    assert not hasattr(Tx.copy, "anything")      # still an AttributeError for hasattr / getattr(default)


def test_a_misspelt_scope_in_a_kernel_is_a_parse_error_naming_the_scopes():
    from tirxpy import T
    from tirxpy.ir import ParseError

    with pytest.raises(ParseError, match=r"'wrap' is not an execution scope .*did you mean Tx.warp.fill"):
        T.parse_script('''
@T.prim_func
def k(X: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    Tx.wrap.fill(X, T.float32(0))
''')
