"""Smart constructors: type checking, Python-constant conversion, folding and simplification.

Every arithmetic operator on expressions comes here. Rules (always exact over the integers):
constant folding (wrapped to the dtype), ``x + 0``, ``x * 1``, ``x * 0``, ``x // 1``,
``x % 1``, constants gathered to the right (``(x + 2) + 3 -> x + 5``, ``(x + 4) * 8 -> x * 8 + 32``,
``(x + 5) - x -> 5``), ``(x * c1 + c) // c2 -> x * (c1 // c2) + c // c2`` and
``(x * c1 + c) % c2 -> c % c2`` when ``c2`` divides ``c1``, ``x // a // b -> x // (a * b)``
and ``x % a % b -> x % b`` when ``b`` divides ``a``. Float arithmetic is never re-associated.

    >>> from tirxpy.ir import Var
    >>> i, j = Var("i"), Var("j")
    >>> (i * 64 + j) % 64
    (i * 64 + j) % 64
    >>> (i * 64 + 7) % 16
    7
    >>> i // 4 // 8, (i + 3) - (i + 1)
    (i // 32, 2)
"""
from __future__ import annotations

import operator

from tirxpy.errors import shown

from .dtype import DataType, bool_, int32, int64, float32, py_int_fits
from .errors import IRError
from .expr import (
    Add, And, BitAnd, BitNot, BitOr, BitXor, BoolImm, Cast, EQ, Expr, FloatImm, FloorDiv, FloorMod, GE, GT,
    IntImm, LE, LT, Max, Min, Mul, NE, Not, Or, Select, Shl, Shr, Sub, Div,
)


def _is_pyint(v) -> bool:
    """An int other than a bool (``__index__`` types included); False for an object whose ``__index__`` raises."""
    try:
        operator.index(v)
        return not isinstance(v, bool)
    except Exception:   # noqa: BLE001  (no __index__, or one of its own that raises)
        return False


def const(v, dtype=None) -> Expr:
    """An IR constant from a Python bool / int / float (``dtype`` picks the type)."""
    if isinstance(v, Expr):
        return v
    if dtype is not None:
        dtype = DataType.get(dtype)
    if isinstance(v, bool) or (dtype is not None and dtype.is_bool):
        if dtype is not None and not dtype.is_bool:
            if dtype.is_float:
                return FloatImm(float(v), dtype)
            return IntImm(int(v), dtype)
        return BoolImm(bool(v))
    if _is_pyint(v):
        v = operator.index(v)
        if dtype is None:
            dtype = int32 if py_int_fits(v, int32) else int64
        if dtype.is_float:
            try:
                fv = float(v)
            except OverflowError:                   # past every float's range
                raise IRError(f"constant {shown(v, 60)} is past the range of {dtype}") from None
            return FloatImm(fv, dtype)
        if not (dtype.is_int or dtype.is_handle):
            raise IRError(f"cannot make a {dtype} constant from {shown(v)}")
        if dtype.is_int and not py_int_fits(v, dtype):
            raise IRError(f"constant {shown(v, 60)} does not fit {dtype}",
                          hint=f"cast to a wider type, e.g. T.int64({shown(v, 60)})")
        return IntImm(v, dtype)
    if isinstance(v, float):
        dtype = dtype or float32
        if not dtype.is_float:
            raise IRError(f"the float constant {shown(v)} meets an integer operand of type {dtype}",
                          hint=f"write an int, or cast the other operand: T.cast(x, \"float32\")")
        return FloatImm(v, dtype)
    raise IRError(f"expected an expression or a Python number, got {shown(v)} ({type(v).__name__})",
                  hint="buffers are indexed (A[i]) to read one element; regions are only operands of primitives and intrinsics")


def _pair(a, b, what):
    """Convert Python constants against the other operand's dtype and check dtypes match."""
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = const(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = const(a, b.dtype)
    else:
        a, b = const(a), const(b)
    if a.dtype is None or b.dtype is None:
        raise IRError(f"`{what}` needs value operands; an instruction that returns nothing was used as a value")
    if a.dtype != b.dtype:
        raise IRError(
            f"operands of `{what}` have different dtypes: {a.dtype} and {b.dtype}",
            hint=f"cast one side explicitly, e.g. T.cast(x, \"{a.dtype}\")",
        )
    return a, b


def _ival(e):
    return e.value if isinstance(e, IntImm) else None


def _split(e):
    """``(base, c)`` with ``e == base + c`` for an integer expression (base None for constants)."""
    if isinstance(e, IntImm):
        return None, e.value
    if isinstance(e, Add) and isinstance(e.b, IntImm):
        return e.a, e.b.value
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        return e.a, -e.b.value
    return e, 0


def _rebuild(base, c, dt):
    """``base + c`` with ``c`` a constant of ``dt``: wrapped into the type when it overflows (the device
    wraps too); ``base - |c|`` for a negative ``c``, but ``base + c`` for the type's minimum (whose
    negation does not fit)."""
    if base is None:
        return IntImm(dt.wrap(c), dt)
    if not py_int_fits(c, dt) and not (c < 0 and py_int_fits(-c, dt)):
        c = dt.wrap(c)
    if c == 0:
        return base
    if c > 0:
        return Add(base, IntImm(c, dt))
    if py_int_fits(-c, dt):
        return Sub(base, IntImm(-c, dt))
    return Add(base, IntImm(c, dt))


def _same(a, b) -> bool:
    from .structural import structural_equal

    return structural_equal(a, b, map_free_vars=False)


def _int_only(a, what):
    if not (a.dtype.is_int or a.dtype.is_handle):
        raise IRError(f"`{what}` works on integers, got {a.dtype}",
                      hint="for floats use / and T.floor(...)" if what in ("//", "%") else None)


def add(a, b):
    a, b = _pair(a, b, "+")
    dt = a.dtype
    if not dt.is_int:
        return Add(a, b)
    ba, ca = _split(a)
    bb, cb = _split(b)
    if ba is None and bb is None:
        return IntImm(dt.wrap(ca + cb), dt)
    if bb is None:
        return _rebuild(ba, ca + cb, dt)
    if ba is None:
        return _rebuild(bb, ca + cb, dt)
    return _rebuild(Add(ba, bb), ca + cb, dt)


def sub(a, b):
    a, b = _pair(a, b, "-")
    dt = a.dtype
    if not dt.is_int:
        return Sub(a, b)
    ba, ca = _split(a)
    bb, cb = _split(b)
    if ba is None and bb is None:
        return IntImm(dt.wrap(ca - cb), dt)
    if bb is None:
        return _rebuild(ba, ca - cb, dt)
    if ba is not None and _same(ba, bb):
        return IntImm(dt.wrap(ca - cb), dt)
    if ba is None:
        return Sub(IntImm(dt.wrap(ca - cb), dt), bb)
    return _rebuild(Sub(ba, bb), ca - cb, dt)


def neg(a):
    a = const(a)
    if isinstance(a, IntImm):
        return IntImm(a.dtype.wrap(-a.value), a.dtype)
    if isinstance(a, FloatImm):
        return FloatImm(-a.value, a.dtype)
    return sub(const(0, a.dtype), a)


def mul(a, b):
    a, b = _pair(a, b, "*")
    dt = a.dtype
    if not dt.is_int:
        return Mul(a, b)
    if isinstance(a, IntImm) and not isinstance(b, IntImm):
        a, b = b, a
    cb = _ival(b)
    if cb is None:
        return Mul(a, b)
    if isinstance(a, IntImm):
        return IntImm(dt.wrap(a.value * cb), dt)
    if cb == 0:
        return IntImm(0, dt)
    if cb == 1:
        return a
    if isinstance(a, Mul) and isinstance(a.b, IntImm):
        return mul(a.a, a.b.value * cb)
    base, c = _split(a)
    if c != 0:
        return _rebuild(mul(base, cb), c * cb, dt)
    return Mul(a, b)


def div(a, b):
    a, b = _pair(a, b, "/")
    if not a.dtype.is_float:
        raise IRError(f"`/` divides floats; the operands are {a.dtype}",
                      hint="write a // b for integer floor division (and a % b for the remainder)")
    return Div(a, b)


def floordiv(a, b):
    a, b = _pair(a, b, "//")
    _int_only(a, "//")
    dt = a.dtype
    cb = _ival(b)
    if cb == 0:
        raise IRError("integer division by the constant 0", hint="divide by a non-zero value")
    if cb is None:
        return FloorDiv(a, b)
    if isinstance(a, IntImm):
        return IntImm(dt.wrap(a.value // cb), dt)
    if cb == 1:
        return a
    if cb > 0:
        base, c = _split(a)
        if isinstance(base, Mul) and isinstance(base.b, IntImm) and base.b.value % cb == 0:
            return add(mul(base.a, base.b.value // cb), c // cb)
        if c == 0 and isinstance(a, FloorDiv) and isinstance(a.b, IntImm) and a.b.value > 0:
            return floordiv(a.a, a.b.value * cb)
    return FloorDiv(a, b)


def floormod(a, b):
    a, b = _pair(a, b, "%")
    _int_only(a, "%")
    dt = a.dtype
    cb = _ival(b)
    if cb == 0:
        raise IRError("integer modulo by the constant 0", hint="take the remainder by a non-zero value")
    if cb is None:
        return FloorMod(a, b)
    if isinstance(a, IntImm):
        return IntImm(dt.wrap(a.value % cb), dt)
    if cb == 1:
        return IntImm(0, dt)
    if cb > 0:
        base, c = _split(a)
        if isinstance(base, Mul) and isinstance(base.b, IntImm) and base.b.value % cb == 0:
            return IntImm(c % cb, dt)
        if c == 0 and isinstance(a, FloorMod) and isinstance(a.b, IntImm) and a.b.value > 0 and a.b.value % cb == 0:
            return floormod(a.a, cb)
    return FloorMod(a, b)


def _fold_int(cls, fn, sym, a, b):
    a, b = _pair(a, b, sym)
    _int_only(a, sym)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.dtype.wrap(fn(a.value, b.value)), a.dtype)
    return cls(a, b)


def shl(a, b):
    a, b = _pair(a, b, "<<")
    _int_only(a, "<<")
    if _ival(b) == 0:
        return a
    return _fold_int(Shl, lambda x, y: x << y, "<<", a, b)


def shr(a, b):
    a, b = _pair(a, b, ">>")
    _int_only(a, ">>")
    if _ival(b) == 0:
        return a
    return _fold_int(Shr, lambda x, y: x >> y, ">>", a, b)


def bitand(a, b):
    return _fold_int(BitAnd, operator.and_, "&", a, b)


def bitor(a, b):
    return _fold_int(BitOr, operator.or_, "|", a, b)


def bitxor(a, b):
    return _fold_int(BitXor, operator.xor, "^", a, b)


def bitnot(a):
    a = const(a)
    _int_only(a, "~")
    if isinstance(a, IntImm):
        return IntImm(a.dtype.wrap(~a.value), a.dtype)
    return BitNot(a)


def minimum(a, b):
    a, b = _pair(a, b, "T.min")
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return type(a)(min(a.value, b.value), a.dtype)
    if _same(a, b):
        return a
    return Min(a, b)


def maximum(a, b):
    a, b = _pair(a, b, "T.max")
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return type(a)(max(a.value, b.value), a.dtype)
    if _same(a, b):
        return a
    return Max(a, b)


_CMP = {"==": (EQ, operator.eq), "!=": (NE, operator.ne), "<": (LT, operator.lt), "<=": (LE, operator.le),
        ">": (GT, operator.gt), ">=": (GE, operator.ge)}


def compare(sym: str, a, b):
    cls, fn = _CMP[sym]
    a, b = _pair(a, b, sym)
    if isinstance(a, (IntImm, FloatImm, BoolImm)) and isinstance(b, (IntImm, FloatImm, BoolImm)):
        return BoolImm(fn(a.value, b.value))
    return cls(a, b)


def eq(a, b):
    return compare("==", a, b)


def ne(a, b):
    return compare("!=", a, b)


def lt(a, b):
    return compare("<", a, b)


def le(a, b):
    return compare("<=", a, b)


def gt(a, b):
    return compare(">", a, b)


def ge(a, b):
    return compare(">=", a, b)


def _as_bool(a, what):
    a = const(a)
    if a.dtype != bool_:
        raise IRError(f"`{what}` needs a bool condition, got {a.dtype} `{a}`",
                      hint=f"compare explicitly, e.g. `{a} != 0`")
    return a


def logical_and(a, b):
    a, b = _as_bool(a, "and"), _as_bool(b, "and")
    for x, y in ((a, b), (b, a)):
        if isinstance(x, BoolImm):
            return y if x.value else BoolImm(False)
    return And(a, b)


def logical_or(a, b):
    a, b = _as_bool(a, "or"), _as_bool(b, "or")
    for x, y in ((a, b), (b, a)):
        if isinstance(x, BoolImm):
            return BoolImm(True) if x.value else y
    return Or(a, b)


def logical_not(a):
    a = _as_bool(a, "not")
    if isinstance(a, BoolImm):
        return BoolImm(not a.value)
    return Not(a)


def select(cond, t, f):
    cond = _as_bool(cond, "T.select")
    t, f = _pair(t, f, "T.select")
    if isinstance(cond, BoolImm):
        return t if cond.value else f
    return Select(cond, t, f)


def cast(value, dtype):
    dt = DataType.get(dtype)
    v = const(value, dt) if not isinstance(value, Expr) else value
    if v.dtype == dt:
        return v
    if isinstance(v, IntImm):
        if dt.is_float:
            return FloatImm(float(v.value), dt)
        if dt.is_int:
            return IntImm(dt.wrap(v.value), dt)
        if dt.is_bool:
            return BoolImm(v.value != 0)
    if isinstance(v, BoolImm) and dt.is_int:
        return IntImm(int(v.value), dt)
    return Cast(dt, v)
