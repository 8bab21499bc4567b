"""tirxpy/lower/codegen/address.py: interval bounds, tightening and element addresses from layouts."""
import itertools

import pytest
import sympy

from tirxpy.ir import IntImm, Var
from tirxpy.layout import S, TileLayout
from tirxpy.lower.codegen.address import bound, element_m, slot_span, tighten
from tirxpy.lower.codegen.errors import CodegenError

x, y = sympy.symbols("x y", integer=True)


def test_bound_of_polynomials_mod_and_floor():
    b = {x: (0, 7), y: (-2, 3)}
    assert bound(3 * x + y, b) == (-2, 24)
    assert bound(x * y, b) == (-14, 21)
    assert bound(sympy.Mod(x, 4), b) == (0, 3)
    assert bound(sympy.Mod(x, 16), b) == (0, 7)
    assert bound(sympy.floor(x / 2), b) == (0, 3)
    assert bound(x + sympy.Symbol("z"), b) is None


def test_tighten_drops_mod_and_floor_that_cannot_change_the_value():
    b = {x: (0, 7)}
    assert tighten(sympy.Mod(x, 8), b) == x
    assert tighten(sympy.floor(x / 8), b) == 0
    assert tighten(sympy.Mod(x, 4), b) == sympy.Mod(x, 4)
    a = sympy.Symbol("a", integer=True, nonnegative=True)
    fused = tighten(8 * sympy.floor(a / 4) + 2 * sympy.Mod(a, 4), {a: (0, 100)})
    for v in range(101):   # still the same value everywhere
        assert fused.subs(a, v) == 8 * (v // 4) + 2 * (v % 4)


def test_element_m_of_a_column_major_tile_matches_the_layout():
    L = TileLayout(S[(4, 8) : (1, 4)])
    i, j = Var("i"), Var("j")
    m = element_m(L, (4, 8), [i, j])
    from tirxpy.ir import expr as E
    ops = {E.Add: lambda a, b: a + b, E.Mul: lambda a, b: a * b}

    def ev(e, env):
        if isinstance(e, IntImm):
            return e.value
        if isinstance(e, Var):
            return env[e.name]
        return ops[type(e)](ev(e.a, env), ev(e.b, env))
    for a, c in itertools.product(range(4), range(8)):
        assert ev(m, {"i": a, "j": c}) == a + 4 * c


def test_element_m_refuses_rank_and_size_mismatch():
    L = TileLayout(S[(4, 8) : (8, 1)])
    with pytest.raises(CodegenError, match="1 indices for a tile of rank 2"):
        element_m(L, (4, 8), [Var("i")])
    with pytest.raises(CodegenError, match="has 32 elements"):
        element_m(L, (4, 4), [Var("i"), Var("j")])


def test_slot_span():
    assert slot_span(TileLayout(S[(4, 8) : (8, 1)])) == (0, 32, True)
    assert slot_span(TileLayout(S[(4,) : (2,)])) == (0, 7, False)


def test_an_index_holding_a_mod_keeps_its_value_inside_the_layouts_mod():
    """Column ``2 * (l % 4)`` of a tile whose columns come in blocks of 32 (the layout takes ``c % 32``): sympy 1.14
    rewrites ``Mod(2*Mod(l, 4), 32)`` to ``2*Mod(Mod(l, 4)**2, 16)`` (8 at l = 2), so index terms enter the
    layout's arithmetic as atoms; the address is 2 * (l % 4) for every l."""
    from tirxpy.ir import Var, ops
    from tirxpy.layout import S, TileLayout, m

    lane = Var("l")
    L = TileLayout(S[(64, 2, 32) : (32 @ m, 2048 @ m, 1 @ m)])
    e = element_m(L, (64, 64), [ops.const(0), ops.mul(ops.const(2), ops.floormod(lane, ops.const(4)))],
                  ranges=lambda x: (0, 127) if x is lane else None)
    for v in range(16):
        assert eval(str(e).replace("l", str(v))) == 2 * (v % 4), (str(e), v)


def test_layout_m_is_memoized_by_layout_value_and_keeps_each_variant_apart():
    """layout_m (the index-free part of element_m) is computed once per (layout value, shape, swizzle, axis):
    an equal layout built anew hits the entry; swizzle on / off and another shape are entries of their own,
    each equal to the expression computed without the memo."""
    from tirxpy.layout.atoms import mma_smem_layout
    from tirxpy.lower.codegen import address as A

    A._LAYOUT_M.clear()
    L = mma_smem_layout(64, 64, "bfloat16", "K", 128)
    on, off = A.layout_m(L, (64, 64)), A.layout_m(L, (64, 64), swizzle=False)
    assert on != off and on.has(A.bitxor) and not off.has(A.bitxor)
    assert A.layout_m(mma_smem_layout(64, 64, "bfloat16", "K", 128), (64, 64)) is on     # equal value: one entry
    assert len(A._LAYOUT_M) == 2
    A._LAYOUT_M.clear()
    assert A.layout_m(L, (64, 64)) == on and A.layout_m(L, (64, 64), swizzle=False) == off
    i, j = Var("i"), Var("j")
    assert str(element_m(L, (64, 64), [i, j])) == "i * 64 + j ^ i % 8 * 8"      # through the memo, twice
    assert str(element_m(L, (64, 64), [j, i])) == "j * 64 + i ^ j % 8 * 8"
    T = TileLayout(S[(4, 8) : (8, 1)])
    assert str(A.layout_m(T, (4, 8))) == "8*_c0 + _c1" and str(A.layout_m(T, (32,))) != str(A.layout_m(T, (4, 8)))
