"""Laws of pack / unpack / compose (tirxpy/layout/algebra_compose.py)."""
from math import prod

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tirxpy.testing import aligned_shapes, memory_layouts, norm, shapes, tile_layouts
from tirxpy.layout import (
    ComposeLayout, Iter, LayoutError, R, S, SwizzleLayout, TileLayout, compose, laneid, m, pack, unpack, warpid, wid_in_wg,
)


# ---- pack / unpack ----
@st.composite
def packable(draw):
    """(L, f): L's innermost run is f*k stride-1 elements on m; other m strides divide by f."""
    base = draw(tile_layouts(max_size=64))
    f, k = draw(st.sampled_from([2, 4])), draw(st.sampled_from([1, 2]))

    def widen(its):
        return [Iter(it.extent, it.stride * f, "m") if it.axis.name == "m" else it for it in its]

    off = base.offset
    if "m" in off:
        off["m"] *= f
    return TileLayout.from_iters(widen(base.shard) + [Iter(f * k, 1, "m")], widen(base.replica), off), f


def check_pack(L, f, Pk):
    assert Pk.size() * f == L.size()
    for i in range(Pk.size()):
        want = L.owners(i * f)
        for d in want:
            assert d.get("m", 0) % f == 0
            if "m" in d:
                d["m"] //= f
        assert norm(Pk.owners(i)) == norm(want)


def check_unpack(L, f, U):
    assert U.size() == L.size() * f
    for i in range(L.size()):
        for r in range(f):
            want = [dict(d, m=d.get("m", 0) * f + r) for d in L.owners(i)]
            assert norm(U.owners(i * f + r)) == norm(want)


@given(packable())
def test_pack_postcondition_and_unpack_inverts(Lf):
    L, f = Lf
    Pk = pack(L, f)
    check_pack(L, f, Pk)
    assert unpack(Pk, f).equivalent(L)
    assert L.pack(f) == Pk


@given(tile_layouts(max_size=64), st.sampled_from([1, 2, 3]))
def test_unpack_postcondition(L, f):
    U = unpack(L, f)
    check_unpack(L, f, U)
    assert pack(U, f).equivalent(L)
    assert L.unpack(f) == U


def test_pack_bf16_pairs_of_wgmma_accumulator():
    acc = TileLayout(S[(4, 2, 8, 2, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
    check_pack(acc, 2, pack(acc, 2))


@pytest.mark.parametrize("L,f,msg", [
    (TileLayout(S[(4, 6) : (1 @ laneid, 1)]), 4, "has 6 elements, which 4 does not divide"),
    (TileLayout(S[(4, 2) : (1, 4)]), 2, r"innermost shard iterator is Iter\(2, 4, m\)"),
    (TileLayout(S[(4, 2) : (1 @ laneid, 1 @ warpid)]), 2, "contiguous on m"),
    (TileLayout(S[(4, 2) : (3, 1)]), 2, "m stride 3 of shard iterator 0"),
    (TileLayout(S[4 : 1] + R[2 : 5]), 2, "m stride 5 of replica iterator 0"),
    (TileLayout(S[4 : 1] + 3 @ m), 2, "m offset 3 is not divisible by 2"),
    (TileLayout(S[() : ()]), 2, "innermost shard iterator is None"),
    (TileLayout(S[4 : 1]), 0, "positive int"),
    (ComposeLayout(SwizzleLayout(0, 1, 1), TileLayout(S[4 : 1])), 2, "pack takes a TileLayout, got ComposeLayout"),
])
def test_pack_bad_input(L, f, msg):
    with pytest.raises(LayoutError, match=msg):
        pack(L, f)


def test_unpack_bad_input():
    with pytest.raises(LayoutError, match="positive int"):
        unpack(TileLayout(S[4 : 1]), -2)
    with pytest.raises(LayoutError, match="unpack takes a TileLayout"):
        unpack("L", 2)


# ---- compose ----
def check_compose(outer, inner, C):
    assert C.size() == inner.size()
    for i in range(inner.size()):
        assert norm(C.owners(i)) == norm(outer.owners(inner.apply(i).get("m", 0)))


@st.composite
def index_maps(draw, size):
    """A memory layout indexing [0, size): a permuted, sub-sampled view of a reshape of it."""
    shape = draw(shapes(size))
    strides = [prod(shape[k + 1:]) for k in range(len(shape))]
    its, off = [], 0
    for n, s in zip(shape, strides):
        sub = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        step = n // sub
        start = draw(st.integers(0, step - 1))
        its.append(Iter(sub, s * step, "m"))
        off += start * s
    its = draw(st.permutations(its))
    return TileLayout.from_iters(its, (), {"m": off} if off else {})


@given(st.data())
def test_compose_postcondition(data):
    outer = data.draw(tile_layouts(max_size=64))
    inner = data.draw(st.one_of(index_maps(outer.size()), memory_layouts(max_size=32, replicas=False)))
    hi = inner.offset.get("m", 0) + sum((it.extent - 1) * it.stride for it in inner.shard)
    assume(hi < outer.size())
    C = compose(outer, inner)
    if C is None:
        with pytest.raises(LayoutError, match="not affine"):
            outer.compose(inner)
    else:
        check_compose(outer, inner, C)


@given(st.data())
def test_compose_with_aligned_permutation_always_composes(data):
    outer = data.draw(tile_layouts(max_size=64))
    shape = data.draw(aligned_shapes(outer))
    perm = data.draw(st.permutations(range(len(shape))))
    strides = [prod(shape[k + 1:]) for k in range(len(shape))]
    inner = TileLayout.from_iters([Iter(shape[p], strides[p]) for p in perm])
    C = compose(outer, inner)
    assert C is not None
    check_compose(outer, inner, C)


@given(tile_layouts(max_size=64))
def test_compose_identity(L):
    C = compose(L, TileLayout(S[L.size() : 1]))
    assert C is not None and C.equivalent(L)


@given(st.data())
def test_compose_associative(data):
    a = data.draw(tile_layouts(max_size=64))
    b = data.draw(index_maps(a.size()))
    c = data.draw(index_maps(b.size()))
    ab, bc = compose(a, b), compose(b, c)
    if ab is not None and bc is not None:
        left, right = compose(ab, c), compose(a, bc)
        if left is not None and right is not None:
            assert left.equivalent(right)


def test_compose_transposes_lane_warp_tile():
    outer = TileLayout(S[(4, 32) : (1 @ warpid, 1 @ laneid)])
    C = compose(outer, TileLayout(S[(32, 4) : (1, 32)]))
    check_compose(outer, TileLayout(S[(32, 4) : (1, 32)]), C)


@pytest.mark.parametrize("outer,inner,msg", [
    (TileLayout(S[8 : 1]), TileLayout(S[4 : 1 @ laneid]), "only on m.*uses laneid"),
    (TileLayout(S[8 : 1]), TileLayout(S[4 : 1] + R[2 : 4]), "drop its replicas"),
    (TileLayout(S[8 : 1]), TileLayout(S[4 : 3]), r"reaches m = 9 but outer has only 8"),
    (ComposeLayout(SwizzleLayout(0, 1, 1), TileLayout(S[8 : 1])), TileLayout(S[4 : 1]), "swizzle is not affine"),
    (TileLayout(S[8 : 1]), [1, 2], "inner must be a TileLayout"),
])
def test_compose_bad_input(outer, inner, msg):
    with pytest.raises(LayoutError, match=msg):
        compose(outer, inner)


def test_compose_not_affine_raises_from_method():
    outer = TileLayout(S[(4, 32) : (1 @ warpid, 1 @ laneid)])
    assert compose(outer, TileLayout(S[4 : 31])) is None       # lane 0, 31, then warp 1 lane 30
    with pytest.raises(LayoutError, match="not affine: the composite steps by {'warpid': 1, 'laneid': 30} from element 0 to 2"):
        outer.compose(TileLayout(S[4 : 31]))
    assert compose(outer, TileLayout(S[2 : 1] + 31 @ m)) is None  # lane 31, then warp 1 lane 0
    with pytest.raises(LayoutError, match="not affine: the composite steps by {'warpid': 1, 'laneid': -31}"):
        outer.compose(TileLayout(S[2 : 1] + 31 @ m))


def test_compose_affine_whenever_a_tile_layout_exists():
    from tirxpy.layout import LayoutError as LE, laneid as lane, warpid as warp
    from tirxpy.layout.algebra_compose import COMPOSE_LIMIT

    assert compose(TileLayout(S[8 : 1]), TileLayout(S[3 : 1])).identical(TileLayout(S[3 : 1]))   # truncated digit
    assert compose(TileLayout(S[8 : 1]), TileLayout(S[3 : 2])).identical(TileLayout(S[3 : 2]))   # fits one digit
    # read off the steps: 3 -> (0, 3), 4 -> (1, 0) is one step of 7 on m
    assert compose(TileLayout(S[(2, 4) : (10, 1)]), TileLayout(S[2 : 1] + 3 @ m)).identical(TileLayout(S[2 : 7] + 3 @ m))
    outer = TileLayout(S[(4, 32) : (1 @ warp, 1 @ lane)])
    assert compose(outer, TileLayout(S[4 : 3])).identical(TileLayout(S[4 : 3 @ lane] + 0 @ warp))   # stays in warp 0
    with pytest.raises(LE, match=f"past the limit of {COMPOSE_LIMIT} \\(COMPOSE_LIMIT\\)"):
        compose(TileLayout(S[(2**18, 4) : (8, 1)]), TileLayout(S[2**17 : 3]))   # 3 splits no digit of 4


def test_digits_past_an_axis_bound_are_no_composition_not_an_error():
    """Composite values stay in outer's valid image, so digits read off its steps that leave an axis's bound
    cannot reproduce it: compose answers None (the walk carries), it does not raise."""
    from tirxpy.layout import Iter

    outer = TileLayout.from_iters([Iter(2, 0, "m"), Iter(4, 1, "wgid"), Iter(2, 4, "wgid")], [], {})
    inner = TileLayout.from_iters([Iter(4, 3, "m")], [], {})
    assert compose(outer, inner) is None
    vals = [outer.apply(inner.apply(i)["m"]).get("wgid", 0) for i in range(4)]
    assert vals == [0, 5, 3, 4]      # steps 5, -2, 1: no single stride per digit
