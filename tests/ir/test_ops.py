"""Smart constructors: folding, simplification (checked numerically) and type errors."""
import random

import pytest
from hypothesis import given, strategies as st

from tirxpy.ir import (Add, FloorDiv, FloorMod, IntImm, IRError, Mul, Sub, T, Var, simplify, structural_equal)
from tirxpy.ir import expr as E
from tirxpy.ir import ops

i, j = Var("i"), Var("j")


def ev(e, env):
    if isinstance(e, (E.IntImm, E.BoolImm, E.FloatImm)):
        return e.value
    if isinstance(e, E.Var):
        return env[e.name]
    a, b = ev(e.a, env), ev(e.b, env)
    return {E.Add: a + b, E.Sub: a - b, E.Mul: a * b, E.FloorDiv: a // b if b else None,
            E.FloorMod: a % b if b else None, E.Min: min(a, b), E.Max: max(a, b)}[type(e)]


def test_readable_index_arithmetic():
    assert str((i + 4) * 8 - 32) == "i * 8"
    assert str((i * 16 + 3) // 8) == "i * 2"
    assert str((i * 64 + 7) % 16) == "7"
    assert str(i // 4 // 8) == "i // 32" and str(i % 64 % 16) == "i % 16"
    assert str((i + 3) - (i + 1)) == "2" and str(i - i) == "0"
    assert str(i * 1 + 0) == "i" and str(i * 0) == "0" and str(i // 1) == "i" and str(i % 1) == "0"
    assert str(3 + i) == "i + 3" and str(i - 5 + 5) == "i" and str(i + -3) == "i - 3"
    assert str(7 - (j + 3)) == "4 - j" and str(-i) == "-i" and str((i + j) * 2) == "(i + j) * 2"


def test_constant_folding_wraps_to_dtype():
    assert ops.add(T.int8(100), 100).value == -56
    assert ops.shl(T.uint32(1), 31).value == 1 << 31
    assert ops.compare("<", 2, 3).value is True
    assert str(T.min(i, i)) == "i" and str(T.max(3, 9)) == "9" and str(T.select(True, i, j)) == "i"
    assert str(ops.logical_and(True, i < j)) == "i < j" and str(ops.logical_or(True, i < j)) == "True"
    assert str(T.cast(T.int32(3), "float16")) == "T.float16(3.0)"


def test_floats_are_not_reassociated():
    x = Var("x", "float32")
    assert str((x + 1.0) + 2.0) == "x + T.float32(1.0) + T.float32(2.0)"
    assert str(x / 2.0) == "x / T.float32(2.0)"


@given(st.integers(0, 10**9))
def test_simplification_preserves_value(seed):
    rnd = random.Random(seed)
    vs = [Var("a"), Var("b")]

    def gen(d):
        r = rnd.random()
        if d == 0 or r < 0.25:
            return rnd.choice(vs) if rnd.random() < 0.6 else IntImm(rnd.randint(-20, 20))
        cls = rnd.choice([Add, Sub, Mul, FloorDiv, FloorMod])
        b = gen(d - 1)
        if cls in (FloorDiv, FloorMod):
            b = IntImm(rnd.choice([1, 2, 3, 4, 8, 16, -3]))
        return cls(gen(d - 1), b)

    raw = gen(4)
    simp = simplify(raw)
    for _ in range(5):
        env = {"a": rnd.randint(-100, 100), "b": rnd.randint(-100, 100)}
        assert ev(raw, env) == ev(simp, env), (str(raw), str(simp), env)
    assert structural_equal(simplify(simp), simp)  # idempotent


def test_type_errors_are_actionable():
    x, h = Var("x", "float32"), Var("h", "float16")
    with pytest.raises(IRError, match=r"operands of `\+` have different dtypes: float32 and float16") as e:
        x + h
    assert 'T.cast(x, "float32")' in str(e.value)
    with pytest.raises(IRError, match=r"`/` divides floats; the operands are int32") as e:
        i / 2
    assert "write a // b" in str(e.value)
    with pytest.raises(IRError, match="integer division by the constant 0"):
        i // 0
    with pytest.raises(IRError, match="the float constant 0.5 meets an integer operand"):
        i + 0.5
    with pytest.raises(IRError, match="`//` works on integers, got float32"):
        x // 2.0
    with pytest.raises(IRError, match="no Python truth value"):
        bool(i < j)
    with pytest.raises(IRError, match="not a compile-time int"):
        range(i)
    # outside a kernel body Python would answer == / != by identity (always False / True): refused
    for bad in (lambda: i == 0, lambda: 1 != i, lambda: T.select(i < j, i, j) == 1, lambda: 0 in [i]):
        with pytest.raises(IRError, match="compares a device value with a Python number") as e:
            bad()
        assert "ordering comparison" in str(e.value)
    assert (i == i) and (i != j) and i in {i: 1}        # between expressions: identity, as for dict keys
    with pytest.raises(IRError, match=r"constant 4294967296 does not fit int32"):
        i + (1 << 32)
    with pytest.raises(IRError, match="`and` needs a bool condition, got int32"):
        ops.logical_and(i, True)


def test_math_calls():
    x = Var("x", "float32")
    assert str(T.exp(x)) == "T.exp(x)" and T.fma(x, x, x).dtype == x.dtype
    with pytest.raises(IRError, match="T.exp works on floats, got int32"):
        T.exp(i)
    assert T.ceildiv(10, 4) == 3 and str(T.ceildiv(i, 4)) == "(i + 3) // 4"


def test_constants_are_compile_time_ints_and_device_values_are_not():
    """An ``IntImm`` (e.g. a kernel's launch grid entry) converts with ``int()`` / ``range()``; a
    device variable still refuses, naming itself."""
    from tirxpy.ir.errors import IRError
    from tirxpy.ir.expr import IntImm, Var

    assert int(IntImm(7)) == 7 and list(range(IntImm(3))) == [0, 1, 2]
    with pytest.raises(IRError, match="the device value `n` is not a compile-time int"):
        int(Var("n", "int32"))
