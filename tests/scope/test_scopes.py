import pytest

from tirxpy.scope import Scope, ScopeError, TirxError


def test_order_and_names():
    assert Scope.THREAD < Scope.WARP < Scope.WARPGROUP < Scope.CTA < Scope.CLUSTER < Scope.KERNEL
    assert [s.short for s in Scope] == ["thread", "warp", "wg", "cta", "cluster", "kernel"]
    for name, s in [("wg", Scope.WARPGROUP), ("warpgroup", Scope.WARPGROUP), ("CTA", Scope.CTA), ("block", Scope.CTA)]:
        assert Scope.get(name) is s
    assert Scope.get(Scope.WARP) is Scope.WARP


def test_threads_per_unit():
    assert Scope.THREAD.threads() == 1 and Scope.WARP.threads() == 32 and Scope.WARPGROUP.threads() == 128
    assert Scope.CTA.threads(threads_per_cta=384) == 384 and Scope.CLUSTER.threads() is None


def test_unknown_scope_message():
    with pytest.raises(ScopeError, match="unknown execution scope 'quad'; use one of thread, warp, warpgroup") as e:
        Scope.get("quad")
    assert isinstance(e.value, TirxError) and isinstance(e.value, ValueError)
