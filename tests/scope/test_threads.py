import pytest

from tirxpy.layout import TileLayout, S, laneid, warpid
from tirxpy.scope import Scope, ScopeError, ThreadSet, full_cta_layout


def test_full_cta_layout_is_warps_by_lanes():
    assert full_cta_layout(256).identical(TileLayout(S[(8, 32) : (1@warpid, 1@laneid)]))
    assert full_cta_layout(48).axes() == ("tx",)  # not whole warps: falls back to tx


def test_warpgroup_role_and_elect():
    cta = ThreadSet.full(384)
    assert cta.scope() is Scope.CTA and cta.covers(Scope.CLUSTER)
    wg1 = cta.filter(lambda t: t // 128 == 1)
    assert wg1.layout().identical(TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 4@warpid))
    assert wg1.scope() is Scope.WARPGROUP and not wg1.covers(Scope.CTA)
    one = wg1.elect_one()
    assert one.tids == {128} and one.scope() is Scope.THREAD and one.describe() == "1 thread (warp 4, lane 0)"


def test_strided_and_irregular_sets():
    even_warps = ThreadSet.full(256).filter(lambda t: (t // 32) % 2 == 0)
    assert even_warps.layout().identical(TileLayout(S[(4, 32) : (2@warpid, 1@laneid)]))
    assert even_warps.scope() is Scope.WARP and even_warps.describe() == "warps 0, 2, 4, 6"
    odd = ThreadSet.full(64).filter(lambda t: t in (0, 1, 5))
    assert odd.layout() is None and odd.scope() is Scope.THREAD
    assert "3 threads" in odd.describe()


def test_inexact_and_cta_narrowed():
    s = ThreadSet.full(128).inexact()
    assert s.describe().startswith("at most") and not s.exact
    assert not ThreadSet.full(128).narrow_ctas().covers(Scope.CLUSTER)


def test_inexact_grain():
    # an upper bound made of whole warpgroups stays whole warpgroups; a finer grain wins when combined
    s = ThreadSet(384, range(128, 384)).inexact("warpgroup")
    assert s.whole("warpgroup") and s.whole("warp") and not s.whole("cta")
    assert s.inexact("warp").grain is Scope.WARP and not s.inexact("warp").whole("warpgroup")
    assert not ThreadSet(384, range(128, 384)).inexact().whole("warp")
    half = ThreadSet(384, range(128, 192)).inexact("warpgroup")      # not a whole warpgroup at all
    assert not half.whole("warpgroup") and half.whole("warp")
    assert s.intersect(ThreadSet(384, range(384)).inexact("warp")).grain is Scope.WARP
    assert ThreadSet(384, range(384)).whole("cta") and s != ThreadSet(384, range(128, 384)).inexact("warp")


def test_bad_thread_count():
    with pytest.raises(ScopeError, match=r"threads per CTA must be an int in \[1, 1024\], got 2048"):
        ThreadSet.full(2048)
