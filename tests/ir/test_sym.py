import sympy

from tirxpy.ir import Var
from tirxpy.ir.sym import from_sympy, to_sympy
from tirxpy.layout import bitxor


def test_round_trip_through_sympy():
    i, j = Var("i"), Var("j")
    e, t = to_sympy(i * 64 + j // 8 + j % 8)
    assert str(from_sympy(e, t)) in ("i * 64 + j // 8 + j % 8", "i * 64 + j % 8 + j // 8")


def test_floor_mod_xor_from_layout_expressions():
    s = sympy.Symbol("m", integer=True, nonnegative=True)
    e = bitxor(s, sympy.Mod(sympy.floor(s / 8), 8) * 16)
    out = from_sympy(e, to_sympy(Var("m"))[1])
    assert str(out) == "m ^ m // 8 % 8 * 16"
