"""Iterators and the S[...] + R[...] + k@axis syntax (tirxpy/layout/iters.py)."""
from math import prod

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.layout import AxisStride, Iter, LayoutError, LayoutSpec, R, S, laneid, m, warpid


@given(st.lists(st.integers(1, 8), min_size=1, max_size=4))
def test_default_strides_are_compact_row_major(extents):
    spec = S[tuple(extents)]
    assert [it.extent for it in spec.shard] == extents
    assert [it.stride for it in spec.shard] == [prod(extents[k + 1:]) for k in range(len(extents))]
    assert all(it.axis is m for it in spec.shard)


@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 9), st.sampled_from(["m", "laneid", "warpid"])),
                min_size=1, max_size=4), st.integers(0, 5))
def test_spec_builds_the_iterators_written(its, off):
    spec = S[tuple(e for e, _, _ in its) : tuple(AxisStride(s, a) for _, s, a in its)] + R[2 : 1 @ warpid] + off @ laneid
    assert spec.shard == tuple(Iter(e, s, a) for e, s, a in its)
    assert spec.replica == (Iter(2, 1, warpid),) and spec.offset == {"laneid": off}


def test_spec_forms():
    assert S[4 : 2].shard == (Iter(4, 2),)
    assert S[(4, 2) : (laneid, 1)].shard == (Iter(4, 1, laneid), Iter(2, 1))
    spec = S[8 : 1] + {"warpid": 2, "laneid": 1} + 3 @ warpid
    assert spec.offset == {"warpid": 5, "laneid": 1}
    assert (1 @ laneid + 2 @ laneid).offset == {"laneid": 3}
    assert (R[2 : 4] + S[4 : 1]).shard == (Iter(4, 1),)
    assert LayoutSpec((), (), {}) + (2 @ m) == LayoutSpec((), (), {"m": 2})
    assert repr(Iter(8, 4, "laneid")) == "Iter(8, 4, laneid)" and Iter(8, 4).stride_text() == "4@m"
    assert repr(S) == "S" and repr(R) == "R"


@pytest.mark.parametrize("call,msg", [
    (lambda: S[(4, 2) : (1,)], "has 2 extents but 1 strides"),
    (lambda: S[4:1:2], "one colon"),
    (lambda: S[(4, "a")], r"S\[...\] extent must be an integer"),
    (lambda: R[4 : 1.5], r"R\[...\] stride must be an integer"),
    (lambda: S[4 : 1] + S[2 : 1], "a layout has one S"),
    (lambda: S[4 : 1] + "x", "cannot add 'x' to a layout spec"),
    (lambda: Iter(4, 1, 3), "named by a string or an Axis"),
    (lambda: Iter("4", 1), "iterator extent must be an integer"),
    (lambda: AxisStride(1.0, "m"), "stride or offset \\(k in k@axis\\) must be an integer"),
])
def test_bad_input(call, msg):
    with pytest.raises(LayoutError, match=msg):
        call()
