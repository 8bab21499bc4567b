"""The expression half of the kernel parser: Python expressions of a kernel body, evaluated node by node.

Nothing is handed to Python's ``eval``: each construct has its own method here, and what a name, call,
attribute, index or loop may reach is asked of the parse's :class:`~tirxpy.ir.trust.Policy`. A construct
without a method is refused. Device values (expressions, tensors, regions) build IR through
:mod:`tirxpy.ir.ops`; Python values compute at parse time within :mod:`tirxpy.ir.trust`'s limits.
"""
from __future__ import annotations

import ast
import operator

from tirxpy.layout import LayoutError
from tirxpy.scope import PrimitiveMarker
from tirxpy.errors import shown

from . import ops
from . import script as Tmod
from . import trust
from .buffer import Buffer, BufferRegion
from .errors import TirxError, at_span
from .expr import Expr

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul, ast.Pow: operator.pow,
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_PYCMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
          ">=": operator.ge}


def _is_ir(v) -> bool:
    return isinstance(v, (Expr, Buffer, BufferRegion))


class ExprEvaluator:
    """Mixin of :class:`~tirxpy.ir.parser.Parser`: ``eval(node)`` and one ``expr_<Node>`` per construct
    (uses the parser's ``span``, ``error``, ``lookup``, ``policy``, ``cond_value``, ``expand_macro`` and
    ``primitive``)."""

    def eval(self, node, stmt: bool = False):
        with at_span(self.span(node)):
            fn = getattr(self, "expr_" + type(node).__name__, None)
            if fn is None:
                raise self.error(node, f"`{type(node).__name__}` expressions are not supported in a kernel "
                                 "(parsing evaluates only the constructs tirxpy.ir.trust lists)",
                                 "write names, constants, arithmetic, comparisons, calls, indexing, tuples and lists")
            v = fn(node, stmt) if isinstance(node, ast.Call) else fn(node)
            self.values.note(v)        # nesting depth and the parse's held items (tirxpy.ir.trust.ValueLedger)
            return v

    def expr_Constant(self, node):
        return node.value

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Attribute(self, node):
        obj = self.eval(node.value)
        self.policy.check_attr(obj, node.attr, self.span(node))
        try:
            return getattr(obj, node.attr)
        except TirxError:
            raise
        except AttributeError:
            what = "T" if obj is Tmod.T else type(obj).__name__
            raise self.error(node, f"{what} has no attribute {shown(node.attr)}") from None

    def apply_binop(self, op, a, b, node):
        if not (_is_ir(a) or _is_ir(b)):
            why = trust.check_py_binop(op, a, b)
            if why is not None:
                raise self.error(node, why, "parse-time values are small: sizes, counts, tile indices")
        try:
            r = op(a, b)
        except TirxError:
            raise
        except TypeError as e:
            raise self.error(node, f"unsupported operation: {e}",
                             "device arithmetic supports + - * / // % << >> & | ^ and T.min / T.max") from None
        except (ArithmeticError, ValueError) as e:
            raise self.error(node, f"`{ast.unparse(node)}` has no value at parse time: {e}") from None
        why = trust.check_int_result(r)
        if why is not None:
            raise self.error(node, why, "parse-time values are small: sizes, counts, tile indices")
        return r

    def expr_BinOp(self, node):
        return self.apply_binop(_BINOPS[type(node.op)], self.eval(node.left), self.eval(node.right), node)

    def expr_UnaryOp(self, node):
        v = self.eval(node.operand)
        sym = {ast.Not: "not", ast.USub: "-", ast.UAdd: "+", ast.Invert: "~"}[type(node.op)]
        if isinstance(v, (Buffer, BufferRegion)):
            raise self.error(node, f"unary `{sym}` does not apply to the tensor {v.name}",
                             "apply it to an element (-A[i]) or use a primitive on the whole tile")
        if isinstance(node.op, ast.Not):
            return ops.logical_not(v) if isinstance(v, Expr) else (not v)
        op = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)]
        try:
            return op(v)
        except TirxError:
            raise
        except TypeError:
            raise self.error(node, f"unary `{sym}` does not apply to {trust.describe(v)}") from None

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        acc = self.eval(node.values[0])
        for vnode in node.values[1:]:
            if not isinstance(acc, Expr):
                if (not acc) if is_and else acc:
                    return acc
                acc = self.eval(vnode)
                continue
            v = self.eval(vnode)
            acc = ops.logical_and(acc, v) if is_and else ops.logical_or(acc, v)
        return acc

    def expr_Compare(self, node):
        left = self.eval(node.left)
        result = True
        for op, rnode in zip(node.ops, node.comparators):
            right = self.eval(rnode)
            sym = _CMPOPS.get(type(op))
            if sym is None:
                if _is_ir(left) or _is_ir(right):
                    raise self.error(node, f"`{type(op).__name__}` does not apply to device values",
                                     "use ==, !=, <, <=, >, >=")
                if isinstance(op, (ast.In, ast.NotIn)):
                    self.policy.check_container(right, "test membership in", self.span(rnode))
                r = {ast.Is: operator.is_, ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
                     ast.NotIn: lambda a, b: a not in b}[type(op)]
                r = self.py_compare(r, left, right, node)
            elif isinstance(left, Expr) or isinstance(right, Expr):
                r = ops.compare(sym, left, right)
            else:
                r = self.py_compare(_PYCMP[sym], left, right, node)
            if isinstance(result, Expr) or isinstance(r, Expr):
                result = ops.logical_and(result, r)
            elif not r:
                return False
            left = right
        return result

    def py_compare(self, fn, a, b, node):
        try:
            return fn(a, b)
        except TirxError:
            raise
        except TypeError as e:
            raise self.error(node, f"cannot compare at parse time: {e}") from None

    def expr_IfExp(self, node):
        c = self.cond_value(node.test)
        if isinstance(c, bool):
            return self.eval(node.body if c else node.orelse)
        return ops.select(c, self.eval(node.body), self.eval(node.orelse))

    def expr_Tuple(self, node):
        return tuple(self._elts(node.elts))

    def expr_List(self, node):
        return list(self._elts(node.elts))

    def _elts(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.unpack(e.value))
                if len(out) > trust.MAX_ITEMS:
                    raise self.error(e, f"*-unpacking makes more than {trust.MAX_ITEMS} items "
                                     "(tirxpy.ir.trust.MAX_ITEMS)")
            else:
                out.append(self.eval(e))
        return out

    def unpack(self, node) -> list:
        """``*x``: the items of a tuple, list or range (at most :data:`trust.MAX_ITEMS`)."""
        v = self.eval(node)
        if not isinstance(v, (tuple, list, range)):
            raise self.error(node, f"cannot unpack {trust.describe(v)} with *", "unpack a tuple, list or range")
        if len(v) > trust.MAX_ITEMS:
            raise self.error(node, f"*-unpacking {len(v)} items, over {trust.MAX_ITEMS} (tirxpy.ir.trust.MAX_ITEMS)")
        return list(v)

    def mapping(self, node) -> dict:
        """``**x``: a dict with string keys."""
        v = self.eval(node)
        if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
            raise self.error(node, f"cannot unpack {trust.describe(v)} with **", "unpack a dict with string keys")
        return v

    def expr_Dict(self, node):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.mapping(v))
            else:
                key = self.eval(k)
                try:
                    out[key] = self.eval(v)
                except TypeError:
                    raise self.error(k, f"{trust.describe(key)} cannot be a dict key") from None
        return out

    def eval_slice(self, node):
        if isinstance(node, ast.Slice):
            return slice(*(None if p is None else self.eval(p) for p in (node.lower, node.upper, node.step)))
        if isinstance(node, ast.Tuple):
            return tuple(self.eval_slice(e) for e in node.elts)
        return self.eval(node)

    def expr_Subscript(self, node):
        obj = self.eval(node.value)
        self.policy.check_container(obj, "index", self.span(node.value))
        key = self.eval_slice(node.slice)
        try:
            return obj[key]
        except TirxError:
            raise
        except (TypeError, IndexError, KeyError, ValueError) as e:
            raise self.error(node, f"cannot index {trust.describe(obj)} with {shown(key)}: {e}") from None

    def expr_Call(self, node, stmt=False):
        fn = self.eval(node.func)
        args = self._elts(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.mapping(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        if getattr(type(fn), "__tirx_macro__", False):
            if not stmt:
                raise self.error(node, f"macro {shown(fn.__name__)} expands to statements and has no value",
                                 f"call it on its own line: {ast.unparse(node)}")
            return self.expand_macro(fn, args, kwargs, node)
        if isinstance(fn, PrimitiveMarker):
            if not stmt:
                raise self.error(node, f"{shown(fn)}(...) is a statement and has no value",
                                 "write the primitive call on its own line")
            return self.primitive(fn, args, kwargs, node)
        name = getattr(fn, "__tirx_intrinsic__", None)
        if isinstance(name, str) and not isinstance(fn, Tmod.IntrinsicRef):
            return Tmod.call_intrin(name, *args, **kwargs)
        self.policy.check_call(fn, ast.unparse(node.func), self.span(node.func))
        try:
            return fn(*args, **kwargs)
        except (TirxError, LayoutError):
            raise
        except (TypeError, ValueError, ArithmeticError, IndexError, KeyError, AttributeError) as e:
            raise self.error(node, f"calling `{ast.unparse(node.func)}` failed: {type(e).__name__}: {e}") from None
