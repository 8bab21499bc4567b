"""tirxpy/primitives/gemm/operands.py: literal flags and the parsed gemm call."""
from types import SimpleNamespace

import pytest

from tirxpy.ir import BoolImm, IntImm, Var
from tirxpy.primitives.gemm.operands import Gemm, static_bool, static_int


@pytest.mark.parametrize("v, want", [(True, True), (False, False), (0, False), (1, True), (2, None),
                                     (IntImm(1), True), (IntImm(0), False), (IntImm(3), None),
                                     (BoolImm(True), True), ("yes", None)])
def test_static_bool(v, want):
    assert static_bool(v) is want


def test_static_int_excludes_bools_and_reads_int_immediates():
    assert static_int(5) == 5 and static_int(IntImm(-7)) == -7
    assert static_int(True) is None and static_int(Var("n")) is None and static_int(2.0) is None


def test_k_dimension_follows_transposes():
    t = SimpleNamespace()
    g = Gemm(t, t, t, False, False, 64, 32, 16, True)
    assert (g.a_kdim, g.b_kdim) == (1, 0)
    g = Gemm(t, t, t, True, True, 64, 32, 16, True)
    assert (g.a_kdim, g.b_kdim) == (0, 1)
