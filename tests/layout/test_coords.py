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
