"""TileLayout (tirxpy/layout/tile.py) against a reference reading of DESIGN.md section 2."""
import itertools
from math import prod

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tirxpy.layout
from tirxpy.testing import BOUNDS, aligned_shapes, domain, norm, owner_set, shapes, tile_layouts
from tirxpy.testing.layouts import bad_queries, invalid_tile_inputs
from tirxpy.layout import Iter, LayoutError, R, S, TCol, TileLayout, TLane, laneid, m, warpid, wid_in_wg
from tirxpy.layout.errors import LayoutTypeError


def ref_owners(L, i):
    """DESIGN.md 2: row-major digits, base = offset + sum i_k s_k, plus every replica combination."""
    digits = []
    for it in reversed(L.shard):
        digits.append(i % it.extent)
        i //= it.extent
    base = dict(L.offset)
    for c, it in zip(reversed(digits), L.shard):
        base[it.axis.name] = base.get(it.axis.name, 0) + c * it.stride
    out = []
    for r in itertools.product(*(range(it.extent) for it in L.replica)):
        d = dict(base)
        for rj, it in zip(r, L.replica):
            d[it.axis.name] = d.get(it.axis.name, 0) + rj * it.stride
        out.append(d)
    return out


def flat(c, shape):
    return sum(x * prod(shape[k + 1:]) for k, x in enumerate(c))


@given(st.data())
def test_owners_match_reference_and_apply_is_first_owner(data):
    L = data.draw(tile_layouts())
    shape = data.draw(st.one_of(aligned_shapes(L), shapes(L.size())))
    for c in domain(shape):
        i = flat(c, shape)
        own = L.owners(c, shape=shape)
        assert norm(own) == norm(ref_owners(L, i))
        assert own == L.owners(i)
        assert own[0] == L.apply(c, shape=shape) == L.apply(*c, shape=shape)
        assert len(own) == L.replica_count


@given(tile_layouts(max_size=64))
def test_owners_and_elements_at_agree(L):
    held = {}
    for i in range(L.size()):
        for o in L.owners(i):
            assert i in L.elements_at(o)
            held.setdefault(tuple(sorted(o.items())), set()).add(i)
    for key, idx in held.items():
        assert set(L.elements_at(dict(key))) == idx
    assert L.is_injective() == all(len(v) == 1 for v in held.values())


@given(tile_layouts())
def test_repr_round_trips_through_eval(L):
    assert eval(repr(L), vars(tirxpy.layout)) == L


@settings(max_examples=25)
@given(st.data())
def test_symbolic_apply_matches_integer_apply(data):
    L = data.draw(tile_layouts(max_size=64))
    shape = data.draw(st.one_of(aligned_shapes(L), shapes(L.size())))
    syms = sympy.symbols(f"x0:{len(shape)}", integer=True, nonnegative=True)
    sym = L.apply(*syms, shape=shape)
    for c in data.draw(st.lists(st.tuples(*(st.integers(0, n - 1) for n in shape)), min_size=1, max_size=4)):
        want = L.apply(*c, shape=shape)
        got = {k: int(sympy.sympify(v).subs(dict(zip(syms, c)))) for k, v in sym.items()}
        assert got == want


@given(st.lists(st.tuples(st.sampled_from([2, 3, 4, 8]), st.sampled_from(sorted(BOUNDS)), st.integers(0, 40)),
                min_size=1, max_size=3), st.integers(0, 20))
def test_bounds_checked_exactly(its, off):
    reach = {}
    for e, a, s in its:
        reach[a] = reach.get(a, 0) + (e - 1) * s
    a0 = its[0][1]
    reach[a0] += off
    over = [a for a, hi in reach.items() if hi >= BOUNDS[a]]
    make = lambda: TileLayout.from_iters([Iter(e, s, a) for e, a, s in its], (), {a0: off})
    if over:
        with pytest.raises(LayoutError, match=f"only {BOUNDS[over[0]]} values on {over[0]}"):
            make()
    else:
        make()


@given(tile_layouts())
def test_structure_queries(L):
    names, t = L.owner_table()
    assert L.size() == prod(it.extent for it in L.shard) == t.shape[0]
    for a in L.axes():
        col = [d[a] for i in range(L.size()) for d in L.owners(i)]
        assert L.span(a) == max(col) - min(col) + 1
        assert L.size(a) == prod(it.extent for it in L.shard if it.axis.name == a)
    assert L.span("Bank" if "Bank" not in L.axes() else "wgid" if "wgid" not in L.axes() else "m") >= 1


# ---- worked examples ----
def test_design_worked_example():
    L = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)
    assert L.apply(3, 9, shape=(8, 16)) == {"m": 1, "warpid": 6, "laneid": 12} == L.apply(57)
    assert L.owners(3, 9, shape=(8, 16)) == [{"m": 1, "warpid": 6, "laneid": 12}, {"m": 1, "warpid": 10, "laneid": 12}]


@pytest.mark.parametrize("N", [8, 16, 64, 128])
def test_wgmma_accumulator_layout(N):
    L = TileLayout(S[(4, 2, 8, N // 8, 4, 2) : (1 @ wid_in_wg, 2, 4 @ laneid, 4, 1 @ laneid, 1)])
    names, t = L.owner_table()
    seen = 0
    for w, h, lane, nb, c in itertools.product(range(4), range(2), range(32), range(N // 8), range(2)):
        row, col = 16 * w + 8 * h + lane // 4, 8 * nb + 2 * (lane % 4) + c
        got = dict(zip(names, t[row * N + col, 0].tolist()))
        assert got == {"wid_in_wg": w, "laneid": lane, "m": 4 * nb + 2 * h + c}
        seen += 1
    assert seen == 64 * N and L.is_injective()


def test_tirx_tmem_example():
    L = TileLayout(S[(2, 128, 112) : (112 @ TCol, 1 @ TLane, 1 @ TCol)])
    names, t = L.owner_table()
    a, l, c = np.meshgrid(np.arange(2), np.arange(128), np.arange(112), indexing="ij")
    assert np.array_equal(t[:, 0, names.index("TLane")], l.ravel())
    assert np.array_equal(t[:, 0, names.index("TCol")], (112 * a + c).ravel())


def test_tirx_tmem_replica_example():
    L = TileLayout(S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane])
    for r, c in domain((32, 4)):
        assert owner_set(L.owners(r, c, shape=(32, 4))) == owner_set([{"TLane": r + 32 * q, "TCol": c} for q in range(4)])


# ---- bad input ----
@given(invalid_tile_inputs())
def test_invalid_layouts_raise(case):
    make, msg = case
    with pytest.raises(LayoutError, match=msg.replace("[", r"\[").replace("(", r"\(")):
        make()


L0 = TileLayout(S[(4, 8) : (8 @ laneid, 1)])


@pytest.mark.parametrize("call,msg", [
    (lambda: L0.apply(), "give a coordinate"),
    (lambda: L0.apply(1, 2), "needs shape="),
    (lambda: L0.apply(1, 2, shape=(4, 4)), "has 16 elements but the layout has 32"),
    (lambda: L0.apply(1, 2, shape=(4, 0)), "positive ints"),
    (lambda: L0.apply(1, 2, 3, shape=(4, 8)), "rank 3 but shape"),
    (lambda: L0.apply(4, 0, shape=(4, 8)), "coordinate 4 in dimension 0 is out of range"),
    (lambda: L0.apply(32), "out of range"),
    (lambda: L0.apply(-1), "out of range"),
    (lambda: L0.owners(1.5), "must be an int or a sympy expression"),
    (lambda: L0.elements_at(nosuch=1), "unknown axis 'nosuch'"),
    (lambda: L0.elements_at(laneid="x"), "coordinate on laneid must be an integer"),
    (lambda: L0.elements_at(laneid=1, shape=(3, 3)), "has 9 elements"),
    (lambda: L0.equivalent("L"), "compares two layouts"),
    (lambda: TileLayout(S[4 : 1], shard=[Iter(4, 1)]), "pass either a spec"),
])
def test_bad_queries_raise(call, msg):
    with pytest.raises(LayoutError, match=msg):
        call()


def test_elements_at_examples():
    with pytest.raises(LayoutError, match="does not name warpid, so it is free there"):
        L0.elements_at(warpid=1)                     # an axis the layout leaves free constrains nothing
    assert L0.elements_at(laneid=8, shape=(4, 8)) == [(1, c) for c in range(8)]


@given(st.data())
def test_random_bad_queries_raise(data):
    L = data.draw(tile_layouts())
    coord, shape, msg = data.draw(bad_queries(L))
    for query in (L.apply, L.owners):
        with pytest.raises(LayoutError, match=msg):
            query(*coord, shape=shape)


# ---- limits, exact huge answers, free axes (regressions) ----
def test_huge_queries_are_closed_form_or_refused():
    big = TileLayout(S[2**40 : 1])
    assert big.elements_at(m=1) == [1]                       # no 8 TiB table
    assert big.span() == {"m": 2**40}
    with pytest.raises(LayoutError, match="owner tables hold at most 4194304 \\(the limit MAX_TABLE\\)"):
        big.owner_table()
    with pytest.raises(LayoutError, match="more than the limit of 262144 \\(MAX_ANSWER\\)"):
        TileLayout(S[(2**20, 4) : (0, 1)]).elements_at(m=1)
    with pytest.raises(LayoutError, match="each element has 1099511627776 replicas, more than the limit"):
        TileLayout(S[4 : 1] + R[2**40 : 1]).owners(0)


def test_coordinates_past_2_63_are_exact():
    L = TileLayout(S[(2, 2) : (2**62 * 3, 1)])
    assert L.apply(3) == {"m": 2**62 * 3 + 1}
    assert L.elements_at(m=2**62 * 3 + 1) == [3]             # was [] (int64 wrap)
    with pytest.raises(LayoutError, match="past 2\\*\\*63 - 1 \\(the limit of the int64 owner table\\)"):
        L.owner_table()
    with pytest.raises(LayoutError, match="reaches m = 18446744073709551616, past the limit of layout coordinates"):
        TileLayout(S[(2, 2) : (2**63, 1)] + (2**63 - 1) @ m)


@pytest.mark.parametrize("call,exc,msg", [
    (lambda: TileLayout(S[True : 1]), LayoutTypeError, "S\\[...\\] extent must be an integer, got True \\(bool\\)"),
    (lambda: Iter(4, 1, 3), LayoutTypeError, "an axis is named by a string or an Axis, got 3"),
    (lambda: TileLayout.from_iters(5), LayoutTypeError, "shard must be a list of Iter"),
    (lambda: TileLayout.from_iters([Iter(4, 1)], [], [("m", 1)]), LayoutTypeError, "offset must be a dict"),
    (lambda: TileLayout.from_iters([Iter(2, 1)] * 65), LayoutError, "at most 64 \\(the limit MAX_ITERS\\)"),
    (lambda: Iter(2**64, 1), LayoutError, "past the limit of layout coordinates \\(2\\*\\*64\\)"),
    (lambda: TileLayout(S[4 : 1]).elements_at(["m"]), LayoutTypeError, "coord must be a dict"),
    (lambda: TileLayout(S[4 : 1]).elements_at(m=-1), LayoutError, "coordinate -1 on m is negative"),
    (lambda: TileLayout(S[32 : 1 @ laneid]).elements_at(laneid=40), LayoutError,
     "coordinate 40 on laneid is out of range: the hardware has 32 values on laneid \\(laneid 0..31\\)"),
    (lambda: TileLayout(S[(32, 4) : (1 @ TLane, 1 @ TCol)]).elements_at(TLane=0, TCol=512), LayoutError,
     "coordinate 512 on TCol is out of range"),
    (lambda: TileLayout(S[4 : 1]).apply(""), LayoutError, "a symbolic coordinate is named by a Python identifier"),
    (lambda: TileLayout(S[4 : 1]).dense_box_mismatch((4.0,)), LayoutTypeError, "box \\(4.0,\\) must be a tuple"),
])
def test_argument_checks(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_numpy_ints_become_python_ints():
    import numpy as np

    L = TileLayout(S[np.int64(4) : np.uint8(2)] + np.int32(3) @ m)
    assert type(L.shard[0].extent) is int and L.apply(np.int64(3)) == {"m": 9}


def test_unnamed_axes_are_free_named_zero_offsets_kept():
    free = TileLayout(S[(4, 8) : (8, 1)])
    lane0 = TileLayout(S[(4, 8) : (8, 1)] + 0 @ laneid)
    assert free.axes() == ("m",) and lane0.axes() == ("m", "laneid")
    assert lane0.elements_at(laneid=0) == list(range(32)) and lane0.elements_at(laneid=3) == []
    with pytest.raises(LayoutError, match="does not name laneid, so it is free there: every laneid holds"):
        free.elements_at(laneid=0)
    assert not free.equivalent(lane0)                           # every lane vs lane 0 only
    assert TileLayout(S[4 : 1] + 0 @ m).identical(TileLayout(S[4 : 1]))   # a memory axis left out reads 0
