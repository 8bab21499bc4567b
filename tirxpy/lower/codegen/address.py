"""Element addresses from layouts.

The address of ``A[i, j]`` is the ``m`` coordinate the buffer's layout gives the element
(swizzle included): the layout is applied to bounded coordinate symbols ``c_d`` in
``[0, shape[d])`` (an index is in range by contract), the result is tightened with those
bounds (``c % 64 -> c`` for ``c < 64``, ``c // 64 -> 0``), the index expressions are
substituted (through :mod:`tirxpy.ir.sym`), tightened again with what codegen knows of loop
variables and hardware ids, and rebuilt as simplified IR.

    >>> from tirxpy.ir import Buffer, Var
    >>> from tirxpy.layout.atoms import mma_smem_layout
    >>> i, j = Var("i"), Var("j")
    >>> element_m(Buffer("A", (64, 32), "float32").layout, (64, 32), [i, j])
    i * 32 + j
    >>> L = mma_smem_layout(64, 64, "bfloat16", "K", 128)          # 128B-swizzled tile
    >>> element_m(L, (64, 64), [i, j])
    i * 64 + j ^ i % 8 * 8
    >>> element_m(L, (64, 64), [i, j], swizzle=False)
    i * 64 + j
"""
from __future__ import annotations

from math import prod

import sympy

from tirxpy.ir.expr import Cast
from tirxpy.ir.sym import SymTable, from_sympy, to_sympy
from tirxpy.layout import ComposeLayout, TileLayout, bitxor
from tirxpy.errors import shown

from .errors import CodegenError


# ---------------------------------------------------------------- interval bounds on sympy
def bound(e, b: dict):
    """``(lo, hi)`` integer bounds of sympy expression ``e`` given symbol bounds ``b`` (or None)."""
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        return b.get(e)
    if e.is_Add or e.is_Mul:
        parts = [bound(a, b) for a in e.args]
        if any(p is None for p in parts):
            return None
        lo, hi = parts[0]
        for plo, phi in parts[1:]:
            if e.is_Add:
                lo, hi = lo + plo, hi + phi
            else:
                c = (lo * plo, lo * phi, hi * plo, hi * phi)
                lo, hi = min(c), max(c)
        return lo, hi
    if isinstance(e, sympy.Mod):
        a, n = e.args
        if not n.is_Integer or int(n) <= 0:
            return None
        ba = bound(a, b)
        if ba is not None and 0 <= ba[0] and ba[1] < int(n):
            return ba
        return 0, int(n) - 1
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if not den.is_Integer or int(den) <= 0:
            return None
        bn = bound(num, b)
        return None if bn is None else (bn[0] // int(den), bn[1] // int(den))
    if isinstance(e, bitxor):
        ba, bb = bound(e.args[0], b), bound(e.args[1], b)
        if ba is None or bb is None or ba[0] < 0 or bb[0] < 0:
            return None
        return 0, (1 << max(ba[1], bb[1], 1).bit_length()) - 1
    return None


def tighten(e, b: dict):
    """Rewrite ``e`` with bounds ``b``: drop ``Mod`` / ``floor`` that cannot change the value and
    fuse ``c*n*floor(a/n) + c*Mod(a, n)`` into ``c*a``."""
    if e.is_Atom:
        return e
    e = e.func(*[tighten(a, b) for a in e.args])
    if isinstance(e, sympy.Mod):
        a, n = e.args
        ba = bound(a, b)
        if n.is_Integer and ba is not None and 0 <= ba[0] and ba[1] < int(n):
            return a
    elif isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        bn = bound(num, b)
        if den.is_Integer and bn is not None and 0 <= bn[0] and bn[1] < int(den):
            return sympy.Integer(0)
    elif e.is_Add:
        return _fuse_divmod(e)
    return e


def _fuse_divmod(e):
    terms = list(e.args)
    changed = True
    while changed:
        changed = False
        for x in terms:
            cx, fx = x.as_coeff_Mul()
            if not isinstance(fx, sympy.floor):
                continue
            num, den = sympy.fraction(sympy.together(fx.args[0]))
            if not den.is_Integer:
                continue
            for y in terms:
                cy, fy = y.as_coeff_Mul()
                if isinstance(fy, sympy.Mod) and fy.args[1] == den and fy.args[0] == num and cx == cy * den:
                    terms.remove(x)
                    terms.remove(y)
                    terms.append(cy * num)
                    changed = True
                    break
            if changed:
                break
    return sympy.Add(*terms)


# ---------------------------------------------------------------- addresses
def _atomize(e, atoms: dict):
    """``e`` with each ``Mod`` / ``floor`` replaced by an integer symbol (the same one for equal terms, recorded in
    ``atoms``: term -> symbol). Index expressions enter the layout's arithmetic as such opaque atoms: sympy 1.14
    rewrites ``Mod(2*Mod(l, 4), 32)`` into ``2*Mod(Mod(l, 4)**2, 16)``, a different value, and an atom gives it
    no nested ``Mod`` to rewrite. :func:`element_m` bounds each atom by its term and puts the terms back
    unevaluated at the end."""
    if e.is_Atom:
        return e
    args = [_atomize(a, atoms) for a in e.args]
    if isinstance(e, (sympy.Mod, sympy.floor)):
        inner = e.func(*args)
        if inner.is_Atom:
            return inner
        if inner not in atoms:
            atoms[inner] = sympy.Symbol(f"_a{len(atoms)}", integer=True)
        return atoms[inner]
    return e.func(*args)


def _substituted(m, syms, indices, b, ranges, atomize):
    """``(m, table, back)``: the layout's coordinate ``m`` (of coordinate symbols ``syms`` bounded by ``b``) with
    the index expressions substituted and tightened with what ``ranges`` knows of their leaves. With
    ``atomize`` each Mod / floor of an index enters as an atom (:func:`_atomize`); ``back`` maps the atoms to
    their terms (empty without)."""
    table = SymTable()
    atoms: dict = {}
    sub = {}
    for s, i in zip(syms, indices):
        t = to_sympy(i, table)[0]
        sub[s] = _atomize(t, atoms) if atomize else t
    m = sympy.sympify(m).xreplace(sub)
    leaf = {}
    if ranges is not None:
        for s, ir in table.sym_to_ir.items():
            r = ranges(ir)
            if r is not None:
                leaf[s] = r
    for inner, d in atoms.items():      # an atom is as bounded as the Mod / floor it stands for
        r = bound(inner, leaf)
        if r is not None:
            leaf[d] = r
    for s in syms:  # an index that is one leaf is in range by contract
        t = sub[s]
        if t.is_Symbol:
            lo, hi = b[s]
            old = leaf.get(t)
            leaf[t] = (lo, hi) if old is None else (max(lo, old[0]), min(hi, old[1]))
    m = tighten(sympy.expand(m) if not m.has(bitxor) else m, leaf)
    return m, table, {d: inner for inner, d in atoms.items()}


def _nonaffine(m) -> bool:
    """Whether ``m`` multiplies index terms together (a power, or a product of two non-constant factors): never
    an address of affine indices, the mark of sympy's Mod rewrite (:func:`_atomize`)."""
    for t in sympy.preorder_traversal(m):
        if isinstance(t, sympy.Pow) and not t.exp.is_negative and not t.base.is_Number:
            return True
        if isinstance(t, sympy.Mul) and sum(1 for f in t.args if not f.is_Number) > 1:
            return True
    return False


def _coords(shape):
    syms = [sympy.Symbol(f"_c{d}", integer=True, nonnegative=True) for d in range(len(shape))]
    return syms, {s: (0, n - 1) for s, n in zip(syms, shape)}


_LAYOUT_M: dict = {}


def layout_m(layout, shape: tuple, swizzle: bool = True, axis: str = "m"):
    """The ``axis`` coordinate of element ``(_c0, _c1, ...)`` of a tile of ``shape`` (a
    :class:`~tirxpy.layout.TileLayout` or a ``swizzle_inner`` :class:`~tirxpy.layout.ComposeLayout`) as a sympy
    expression of the coordinate symbols of :func:`_coords`, tightened with their bounds: the part of
    :func:`element_m` that does not depend on the indices. Memoized by the layout's value (layouts compare by
    structure and are immutable; a kernel addresses a few tiles thousands of times).

        >>> from tirxpy.layout import S
        >>> layout_m(TileLayout(S[(4, 8) : (8, 1)]), (4, 8))
        8*_c0 + _c1
    """
    key = (type(layout), layout, shape, bool(swizzle), axis)
    hit = _LAYOUT_M.get(key)
    if hit is not None:
        return hit
    syms, b = _coords(shape)
    if isinstance(layout, ComposeLayout):
        pre = layout.tile_layout.apply(*syms, shape=shape).get(axis, 0)
        m = layout.swizzle.apply(tighten(sympy.sympify(pre), b)) if swizzle and axis == layout.swizzle.axis.name else pre
    else:
        m = layout.apply(*syms, shape=shape).get(axis, 0)
    m = tighten(sympy.sympify(m), b)
    if len(_LAYOUT_M) >= 4096:
        _LAYOUT_M.clear()
    _LAYOUT_M[key] = m
    return m


def element_m(layout, shape, indices, *, swizzle: bool = True, ranges=None, axis: str = "m", span=None, units=None,
              wide: bool = False):
    """IR expression of the ``axis`` coordinate of element ``indices`` of a tile of ``shape``.

    ``ranges(ir_expr) -> (lo, hi) | None`` tells what is known of the leaves of the index
    expressions (loop variables, hardware ids); ``swizzle=False`` gives the coordinate before a
    :class:`~tirxpy.layout.ComposeLayout`'s swizzle (what matrix descriptors start from).
    ``units=(elem_bits, unit_bits)``: the coordinate in ``unit_bits``-bit units instead (bits, so
    sub-byte dtypes count right), or None where that is not an integer polynomial of the indices (a
    swizzle left in it, or a term that is not a multiple of the unit). ``wide=True``: the expression in 64-bit
    integers (every leaf cast to int64), for tensors whose offsets pass ``2**31 - 1``.
    """
    shape = tuple(shape)
    if len(indices) != len(shape):
        raise CodegenError(f"{len(indices)} indices for a tile of rank {len(shape)} {shape}", span)
    if layout.size() != prod(shape):
        raise CodegenError(f"layout {shown(layout)} has {layout.size()} elements, the tile {shape} has "
                           f"{prod(shape)}", span)
    syms, b = _coords(shape)
    if isinstance(layout, ComposeLayout):
        if not layout.swizzle_inner:
            raise CodegenError(f"layout {shown(layout)} swizzles the logical index (swizzle_inner=False); codegen "
                               "addresses swizzles of the memory coordinate only", span,
                               hint="build the ComposeLayout with swizzle_inner=True (the shared-memory swizzle)")
    elif not isinstance(layout, TileLayout):
        raise CodegenError(f"cannot address elements through a {type(layout).__name__}", span)
    m_layout = layout_m(layout, shape, swizzle, axis)
    m, table, back = _substituted(m_layout, syms, indices, b, ranges, atomize=False)
    if _nonaffine(m):       # sympy rewrote a Mod of an index term wrongly (_atomize): again, with atoms
        m, table, back = _substituted(m_layout, syms, indices, b, ranges, atomize=True)
    if units is not None:
        if m.has(bitxor):
            return None
        m = sympy.expand(m * sympy.Rational(units[0], units[1]))
        # every term an integer times integer-valued factors (index symbols, floor, Mod)
        if not all(t.as_coeff_Mul()[0].is_Integer for t in sympy.Add.make_args(m)):
            return None
    with sympy.evaluate(False):         # the atoms back (an atom's term may hold atoms), with no rewriting
        for _ in range(len(back)):
            if not m.free_symbols & back.keys():
                break
            m = m.xreplace(back)
    try:
        return from_sympy(m, _widened(table), "int64") if wide else from_sympy(m, table)
    except Exception as e:  # noqa: BLE001 - IRError from an index sympy cannot express as IR
        raise CodegenError(f"cannot turn the address {m} into integer arithmetic: {e}", span) from None


def _widened(table):
    """A copy of ``table`` whose integer leaves are cast to int64, so that the arithmetic over them is 64-bit."""
    out = SymTable()
    out.sym_to_ir = {s: Cast("int64", e) if (e.dtype.is_int or e.dtype.is_uint) and e.dtype.bits < 64 else e
                     for s, e in table.sym_to_ir.items()}
    return out


def slot_span(layout, axis: str = "m"):
    """``(lo, count, contiguous)`` of the ``axis`` slots a (static) layout touches."""
    names, t = layout.owner_table()
    if axis not in names:
        return 0, 1, True
    vals = sorted(set(int(v) for v in t[:, :, names.index(axis)].ravel()))
    lo, hi = vals[0], vals[-1]
    return lo, hi - lo + 1, len(vals) == hi - lo + 1
