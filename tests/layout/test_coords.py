"""Logical coordinates (tirxpy/layout/coords.py)."""
from math import prod

import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from tirxpy.testing import shapes
from tirxpy.layout import LayoutError
from tirxpy.layout.coords import flatten, is_int, normalize, split, to_coord, unflatten


@st.composite
def shape_and_extents(draw):
    """A size, a shape of it and an independent factorization of it into extents."""
    size = draw(st.sampled_from([1, 2, 6, 8, 12, 16, 24, 32, 48, 64]))
    return draw(shapes(size)), draw(shapes(size, max_rank=5))


@given(shape_and_extents(), st.data())
def test_split_is_row_major_digits(se, data):
    shape, extents = se
    c = data.draw(st.tuples(*(st.integers(0, n - 1) for n in shape)))
    i = sum(x * prod(shape[k + 1:]) for k, x in enumerate(c))
    assert flatten(c, shape) == i
    digits = split(c, shape, list(extents))
    assert all(0 <= d < e for d, e in zip(digits, extents))
    assert sum(d * prod(extents[k + 1:]) for k, d in enumerate(digits)) == i
    assert tuple(digits) == unflatten(i, extents)


@given(shape_and_extents(), st.data())
def test_symbolic_split_substitutes_to_integer_split(se, data):
    shape, extents = se
    syms = sympy.symbols(f"c0:{len(shape)}", integer=True, nonnegative=True)
    sym = split(syms, shape, list(extents))
    c = data.draw(st.tuples(*(st.integers(0, n - 1) for n in shape)))
    got = [int(sympy.sympify(d).subs(dict(zip(syms, c)))) for d in sym]
    assert got == list(split(c, shape, list(extents)))


def test_helpers():
    assert is_int(3) and not is_int(True) and not is_int(2.0)
    assert to_coord("i") == sympy.Symbol("i", integer=True, nonnegative=True)
    assert normalize(((1, 2),), (4, 8), 32) == ((1, 2), (4, 8))
    assert normalize((5,), 32, 32) == ((5,), (32,))


@pytest.mark.parametrize("args,msg", [
    (((), None, 8), "give a coordinate"),
    (((1, 2), None, 8), "needs shape="),
    (((1, 2), (2, 2), 8), "has 4 elements but the layout has 8"),
    (((1, 2), (2, -4), 8), "positive ints"),
    (((1,), (2, 4), 8), "rank 1 but shape"),
    (((1, 4), (2, 4), 8), "coordinate 4 in dimension 1 is out of range"),
    (((1.5,), None, 8), "must be an int or a sympy expression"),
])
def test_bad_input(args, msg):
    with pytest.raises(LayoutError, match=msg):
        normalize(*args)


@given(st.fractions().filter(lambda q: q.denominator != 1 and not float(q).is_integer()), st.booleans())
def test_non_integer_sympy_coordinates_are_refused(q, as_float):
    """A coordinate is an int or an integer-valued expression: sympy.Float(1.5) gave owners at m = 1.5."""
    from tirxpy.layout import S, SwizzleLayout, TileLayout, laneid
    from tirxpy.layout.errors import LayoutTypeError

    v = sympy.Float(float(q)) if as_float else sympy.Rational(q.numerator, q.denominator)
    L = TileLayout(S[(4, 2) : (1@laneid, 1)])
    for call in (lambda: to_coord(v), lambda: L.owners(v), lambda: L.apply(v), lambda: SwizzleLayout(0, 3, 3).apply(v),
                 lambda: L.apply(v, 0, shape=(8, 1))):
        with pytest.raises(LayoutTypeError, match="integer-valued sympy expression"):
            call()


@given(st.integers(0, 7))
def test_integer_sympy_coordinates_are_ints(k):
    from tirxpy.layout import S, TileLayout, laneid

    L = TileLayout(S[(4, 2) : (1@laneid, 1)])
    assert L.owners(sympy.Integer(k)) == L.owners(k) and type(to_coord(sympy.Integer(k))) is int
    i = sympy.Symbol("i", integer=True, nonnegative=True)     # integer-valued expressions stay symbolic
    assert {a: int(sympy.sympify(e).subs(i, k // 2)) for a, e in L.apply(2 * i).items()} == L.apply(k // 2 * 2)


def test_symbolic_coordinates_that_are_not_integers_or_in_range_are_refused():
    """Known non-integers (and NaN) are refused; an expression over symbols of unknown kind, as the kernels' index
    expressions are, is taken."""
    from tirxpy.layout import S, TileLayout
    from tirxpy.layout.errors import LayoutTypeError

    L = TileLayout(S[8 : 1])
    for bad in (sympy.pi, sympy.nan, sympy.oo, sympy.zoo, sympy.true):
        with pytest.raises(LayoutTypeError, match="integer-valued"):
            L.apply(bad)
    x = sympy.Symbol("x")
    e = 2 * x + sympy.floor(x / 3)
    got = L.apply(e)
    assert {a: sympy.sympify(v).subs(x, 3) for a, v in got.items()} == L.apply(7)
    i = sympy.Symbol("i", integer=True, nonnegative=True)
    for bad in (-i - 1, i + 8):
        with pytest.raises(LayoutError, match="out of range"):
            L.apply(bad)


class _RaisingIndex:
    """An object whose own ``__index__`` raises (a hostile int stand-in)."""

    def __index__(self):
        raise RuntimeError("no index")


def test_an_index_that_raises_is_no_int():
    from tirxpy.layout import S, TileLayout

    assert not is_int(_RaisingIndex())
    with pytest.raises(LayoutError, match=r"extent must be an integer, got .*_RaisingIndex"):
        TileLayout(S[_RaisingIndex() : 1])
    with pytest.raises(LayoutError, match="coordinate"):
        TileLayout(S[4 : 1]).apply(_RaisingIndex())
