"""The strategies' argument checker (:mod:`tirxpy.testing._args`): each check returns the value in its canonical form
or raises the typed layout error naming the strategy and the argument."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.layout import Axis, S, TileLayout, laneid
from tirxpy.layout.errors import MAX_ITERS, LayoutError, LayoutTypeError
from tirxpy.testing import _args


@given(st.integers(-5, 2 ** 70), st.integers(0, 3), st.one_of(st.none(), st.integers(0, 100)))
def test_count_takes_ints_in_range_and_names_the_rest(v, lo, hi):
    inside = lo <= v < 2 ** 64 and (hi is None or v <= hi)
    if inside:
        got = _args.count(np.int64(v) if v < 2 ** 63 else v, "strat", "n", lo, hi)
        assert got == v and type(got) is int
    else:
        with pytest.raises(LayoutError, match="strat: n is"):
            _args.count(v, "strat", "n", lo, hi)


@pytest.mark.parametrize("v", [1.0, "3", None, True, [2]])
def test_count_refuses_other_kinds(v):
    with pytest.raises(LayoutTypeError, match="strat: n must be an integer"):
        _args.count(v, "strat", "n")


def test_count_names_the_iterator_limit():
    with pytest.raises(LayoutError, match="MAX_ITERS"):
        _args.count(MAX_ITERS + 1, "split_layouts", "iters", 1, MAX_ITERS)


@pytest.mark.parametrize("v,ok", [(True, True), (False, True), (1, False), (None, False), (np.bool_(True), False)])
def test_flag_takes_bools_only(v, ok):
    if ok:
        assert _args.flag(v, "strat", "f") is v
    else:
        with pytest.raises(LayoutTypeError, match="strat: f must be True or False"):
            _args.flag(v, "strat", "f")


def test_shape_tile_layout_and_axes():
    assert _args.shape((np.int64(2), 3), "strat") == (2, 3) and _args.shape(4, "strat") == (4,)
    for bad in ((), (0, 2), "4"):
        with pytest.raises(LayoutError, match="strat: shape"):
            _args.shape(bad, "strat")
    L = TileLayout(S[(4, 2) : (1 @ laneid, 1)])
    assert _args.tile_layout(L, "strat") is L
    with pytest.raises(LayoutTypeError, match="strat: L must be a TileLayout"):
        _args.tile_layout("L", "strat")
    assert _args.axes((Axis.get("laneid"), "warpid"), "strat") == ("laneid", "warpid")
    for bad, msg in (("laneid", "non-empty tuple of names"), ((), "non-empty tuple"), ((3,), "give names"),
                     (("no_such_axis",), "strat: axes")):
        with pytest.raises(LayoutError, match=msg):
            _args.axes(bad, "strat")
