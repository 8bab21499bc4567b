"""Conversions between IR index expressions and sympy (used for layout offsets of views).

    >>> from tirxpy.ir import Var
    >>> from tirxpy.ir.sym import to_sympy, from_sympy
    >>> i = Var("i")
    >>> e, table = to_sympy(i * 64 + 8)
    >>> e
    64*i + 8
    >>> from_sympy(e // 16, table)
    i * 4
"""
from __future__ import annotations

import sympy

from .errors import IRError
from .expr import Add, Expr, FloorDiv, FloorMod, IntImm, Mul, Sub, Var


class SymTable:
    """Maps sympy symbols back to the IR expressions they stand for."""

    def __init__(self):
        self.sym_to_ir: dict = {}
        self.ir_to_sym: dict = {}

    def symbol_for(self, e: Expr):
        key = id(e)
        if key in self.ir_to_sym:
            return self.ir_to_sym[key]
        from .structural import structural_equal

        for s, ex in self.sym_to_ir.items():
            if structural_equal(ex, e, map_free_vars=False):
                self.ir_to_sym[key] = s
                return s
        base = e.name if isinstance(e, Var) else "_e"
        name, k = base, 0
        while any(str(s) == name for s in self.sym_to_ir):
            k += 1
            name = f"{base}_{k}"
        s = sympy.Symbol(name, integer=True, nonnegative=True)
        self.sym_to_ir[s] = e
        self.ir_to_sym[key] = s
        return s


def to_sympy(e, table: SymTable | None = None):
    """``(sympy_expr, table)`` for an integer IR expression (opaque subterms become symbols)."""
    table = table or SymTable()
    return _to(e, table), table


def _to(e, t):
    if isinstance(e, int):
        return sympy.Integer(e)
    if isinstance(e, IntImm):
        return sympy.Integer(e.value)
    if isinstance(e, Add):
        return _to(e.a, t) + _to(e.b, t)
    if isinstance(e, Sub):
        return _to(e.a, t) - _to(e.b, t)
    if isinstance(e, Mul):
        return _to(e.a, t) * _to(e.b, t)
    if isinstance(e, FloorDiv):
        return sympy.floor(_to(e.a, t) / _to(e.b, t))
    if isinstance(e, FloorMod):
        return sympy.Mod(_to(e.a, t), _to(e.b, t))
    return t.symbol_for(e)


def from_sympy(s, table: SymTable, dtype="int32"):
    """Rebuild an IR expression (through the simplifying constructors) from sympy."""
    from . import ops
    from tirxpy.layout import bitxor

    s = sympy.sympify(s)
    if s.is_Integer:
        return ops.const(int(s), dtype)
    if s.is_Symbol:
        if s in table.sym_to_ir:
            return table.sym_to_ir[s]
        return Var(str(s), dtype)
    if s.is_Add:
        terms = sorted(s.args, key=lambda a: (a.is_number, -abs(a.as_coeff_Mul()[0]), sympy.default_sort_key(a)))
        out = None
        for a in terms:
            if a.is_Mul and a.args[0].is_number and a.args[0] < 0:
                v = from_sympy(-a, table, dtype)
                out = ops.neg(v) if out is None else ops.sub(out, v)
                continue
            v = from_sympy(a, table, dtype)
            out = v if out is None else ops.add(out, v)
        return out
    if s.is_Mul:
        coeff, rest = s.as_coeff_Mul()
        if not coeff.is_Integer:
            raise IRError(f"cannot express the fractional index {s} as integer arithmetic")
        v = from_sympy(rest, table, dtype)
        return v if coeff == 1 else ops.mul(v, int(coeff))
    if isinstance(s, sympy.floor):
        num, den = sympy.fraction(sympy.together(s.args[0]))
        return ops.floordiv(from_sympy(sympy.expand(num), table, dtype), from_sympy(den, table, dtype))
    if isinstance(s, sympy.Mod):
        return ops.floormod(from_sympy(s.args[0], table, dtype), from_sympy(s.args[1], table, dtype))
    if isinstance(s, bitxor):
        return ops.bitxor(from_sympy(s.args[0], table, dtype), from_sympy(s.args[1], table, dtype))
    if s.is_Pow and s.exp.is_Integer and s.exp > 0:
        base = from_sympy(s.base, table, dtype)
        out = base
        for _ in range(int(s.exp) - 1):
            out = ops.mul(out, base)
        return out
    raise IRError(f"cannot turn the index expression {s} into IR arithmetic")
