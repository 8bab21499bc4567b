"""Expression nodes.

Constants (:class:`IntImm`, :class:`FloatImm`, :class:`BoolImm`), variables (:class:`Var`),
arithmetic (:class:`Add`, :class:`Sub`, :class:`Mul`, :class:`Div` (float), :class:`FloorDiv`,
:class:`FloorMod`, :class:`Min`, :class:`Max`, :class:`Shl`, :class:`Shr`, :class:`BitAnd`,
:class:`BitOr`, :class:`BitXor`, :class:`BitNot`), comparisons (:class:`EQ` .. :class:`GE`),
logic (:class:`And`, :class:`Or`, :class:`Not`), :class:`Select`, :class:`Cast`, math
:class:`Call`, :class:`IntrinsicCall`, :class:`BufferLoad`, :class:`AddressOf`, hardware ids
(:class:`ScopeId`) and :class:`ElectOne`.

Python operators on expressions build folded, simplified nodes (see :mod:`tirxpy.ir.ops`):

    >>> from tirxpy.ir import Var
    >>> i = Var("i", "int32")
    >>> (i + 4) * 8 - 32
    i * 8
    >>> (i * 16 + 3) // 8
    i * 2
    >>> type((i + 1).b).__name__, (i + 1).dtype
    ('IntImm', int32)
"""
from __future__ import annotations
from tirxpy.errors import shown

from .dtype import DataType, bool_
from .errors import IRError
from .node import Node


MAX_EXPR_DEPTH = 100
"""Deepest expression tree a node may root (printing, comparing and lowering walk trees recursively)."""
MAX_EXPR_NODES = 1 << 16
"""Most nodes an expression tree may have, a subexpression shared by several parents counted at each use (what
printing, comparing and lowering visit): ``x = (x[0] + x[0],)`` in a parse-time loop doubles it every trip."""


def _measure(*children) -> tuple:
    """``(depth, nodes)`` of a node over ``children``; refuses trees deeper than :data:`MAX_EXPR_DEPTH` or of
    more than :data:`MAX_EXPR_NODES` nodes."""
    d = 1 + max((getattr(c, "depth", 1) for c in children), default=0)
    if d > MAX_EXPR_DEPTH:
        raise IRError(f"the expression nests more than {MAX_EXPR_DEPTH} levels deep (tirxpy.ir.expr.MAX_EXPR_DEPTH)",
                      hint="bind intermediate values to names (each becomes its own statement)")
    n = 1 + sum(getattr(c, "nodes", 1) for c in children)
    if n > MAX_EXPR_NODES:
        raise IRError(f"the expression has {n} nodes, over {MAX_EXPR_NODES} (tirxpy.ir.expr.MAX_EXPR_NODES; a "
                      "subexpression used twice counts twice)",
                      hint="bind intermediate values to names (each becomes its own statement)")
    return d, n


class Expr(Node):
    """Base of expressions; every expression has a ``dtype`` (``None`` for void calls), a ``depth``
    (1 for a leaf; at most :data:`MAX_EXPR_DEPTH`) and a tree size ``nodes`` (at most :data:`MAX_EXPR_NODES`)."""

    dtype: DataType | None = None
    depth: int = 1
    nodes: int = 1

    # arithmetic builds simplified nodes through tirxpy.ir.ops
    def __add__(self, o):
        return _ops().add(self, o)

    def __radd__(self, o):
        return _ops().add(o, self)

    def __sub__(self, o):
        return _ops().sub(self, o)

    def __rsub__(self, o):
        return _ops().sub(o, self)

    def __mul__(self, o):
        return _ops().mul(self, o)

    def __rmul__(self, o):
        return _ops().mul(o, self)

    def __truediv__(self, o):
        return _ops().div(self, o)

    def __rtruediv__(self, o):
        return _ops().div(o, self)

    def __floordiv__(self, o):
        return _ops().floordiv(self, o)

    def __rfloordiv__(self, o):
        return _ops().floordiv(o, self)

    def __mod__(self, o):
        return _ops().floormod(self, o)

    def __rmod__(self, o):
        return _ops().floormod(o, self)

    def __lshift__(self, o):
        return _ops().shl(self, o)

    def __rlshift__(self, o):
        return _ops().shl(o, self)

    def __rshift__(self, o):
        return _ops().shr(self, o)

    def __rrshift__(self, o):
        return _ops().shr(o, self)

    def __and__(self, o):
        return _ops().bitand(self, o)

    def __rand__(self, o):
        return _ops().bitand(o, self)

    def __or__(self, o):
        return _ops().bitor(self, o)

    def __ror__(self, o):
        return _ops().bitor(o, self)

    def __xor__(self, o):
        return _ops().bitxor(self, o)

    def __rxor__(self, o):
        return _ops().bitxor(o, self)

    def __invert__(self):
        return _ops().bitnot(self)

    def __neg__(self):
        return _ops().neg(self)

    def __pos__(self):
        return self

    def __lt__(self, o):
        return _ops().lt(self, o)

    def __le__(self, o):
        return _ops().le(self, o)

    def __gt__(self, o):
        return _ops().gt(self, o)

    def __ge__(self, o):
        return _ops().ge(self, o)

    __hash__ = Node.__hash__

    def __eq__(self, o):
        if isinstance(o, (bool, int, float)):
            _python_compare(self, "==", o)
        return self is o

    def __ne__(self, o):
        if isinstance(o, (bool, int, float)):
            _python_compare(self, "!=", o)
        return self is not o

    def __bool__(self):
        raise IRError(
            f"the device value `{self}` has no Python truth value at parse time",
            hint="branch on it with an `if` written directly in the kernel body (it becomes an IR if), "
            "combine conditions with `and` / `or` there, or use T.select(cond, a, b)",
        )

    def __index__(self):
        raise IRError(
            f"the device value `{self}` is not a compile-time int",
            hint="use a Python int (a closure or global constant) where a static size is needed, "
            "and T.serial(n) instead of range(n) for loops over device values",
        )

    def __iter__(self):
        raise IRError(f"the device value `{self}` cannot be iterated",
                      hint="loop with `for i in T.serial(n):`")


def _python_compare(e, op, o):
    """``e == o`` / ``e != o`` with a Python number, outside a kernel body (in a helper function called at
    parse time): Python would answer with object identity, never the device comparison; refuse."""
    raise IRError(
        f"`{e} {op} {shown(o)}` compares a device value with a Python number at parse time: Python would answer "
        "False / True by object identity, not compare on the device",
        hint="write the comparison in the kernel or macro body (it becomes an IR compare), or build it with "
        "T.select(...) and an ordering comparison (`<`, `>=`), which build device expressions anywhere",
    )


def _ops():
    from . import ops

    return ops


# ---------------------------------------------------------------- leaves
class IntImm(Expr):
    """An integer constant of an integer (or bool) dtype."""

    _fields = ("value", "dtype")

    def __init__(self, value: int, dtype="int32", span=None):
        super().__init__(span)
        self.dtype = DataType.get(dtype)
        if not (self.dtype.is_int or self.dtype.is_handle):
            raise IRError(f"IntImm needs an integer dtype, got {self.dtype}")
        self.value = int(value)
        lo, hi = self.dtype.min_value(), self.dtype.max_value()
        if lo is not None and not lo <= self.value <= hi:
            raise IRError(f"IntImm {self.value} does not fit {self.dtype} [{lo}, {hi}]",
                          hint=f"wrap it first: IntImm(DataType.get({str(self.dtype)!r}).wrap(v))")

    def __index__(self):
        """A constant is a compile-time int: ``range(c)``, ``int(c)`` and ``tuple[c]`` work.

        >>> int(IntImm(5)), list(range(IntImm(2)))
        (5, [0, 1])
        """
        return self.value

    __int__ = __index__


class FloatImm(Expr):
    """A floating-point constant (``value`` is a Python float)."""

    _fields = ("value", "dtype")

    def __init__(self, value: float, dtype="float32", span=None):
        super().__init__(span)
        self.dtype = DataType.get(dtype)
        if not self.dtype.is_float:
            raise IRError(f"FloatImm needs a float dtype, got {self.dtype}")
        self.value = float(value)


class BoolImm(Expr):
    """``True`` / ``False``."""

    _fields = ("value",)

    def __init__(self, value: bool, span=None):
        super().__init__(span)
        self.value = bool(value)
        self.dtype = bool_


class Var(Expr):
    """A scalar variable: kernel parameter, loop variable or let-bound name."""

    _fields = ("name", "dtype")

    def __init__(self, name: str, dtype="int32", span=None):
        super().__init__(span)
        if not isinstance(name, str) or not name.isidentifier():
            raise IRError(f"a variable name must be a Python identifier, got {shown(name)}")
        self.name = name
        self.dtype = DataType.get(dtype)


# ---------------------------------------------------------------- operators
class BinaryOp(Expr):
    """``a <op> b``; ``dtype`` is the operands' dtype."""

    _fields = ("a", "b")
    symbol = "?"

    def __init__(self, a: Expr, b: Expr, span=None):
        super().__init__(span)
        if not isinstance(a, Expr) or not isinstance(b, Expr):
            raise IRError(f"{type(self).__name__} takes two expressions, got {shown(a)} and {shown(b)}")
        self.a, self.b = a, b
        self.dtype = a.dtype
        self.depth, self.nodes = _measure(a, b)


class Add(BinaryOp):
    symbol = "+"


class Sub(BinaryOp):
    symbol = "-"


class Mul(BinaryOp):
    symbol = "*"


class Div(BinaryOp):
    """True division of floats."""

    symbol = "/"


class FloorDiv(BinaryOp):
    symbol = "//"


class FloorMod(BinaryOp):
    symbol = "%"


class Min(BinaryOp):
    symbol = "min"


class Max(BinaryOp):
    symbol = "max"


class Shl(BinaryOp):
    symbol = "<<"


class Shr(BinaryOp):
    """Arithmetic shift for signed, logical for unsigned."""

    symbol = ">>"


class BitAnd(BinaryOp):
    symbol = "&"


class BitOr(BinaryOp):
    symbol = "|"


class BitXor(BinaryOp):
    symbol = "^"


class CmpOp(BinaryOp):
    """Comparison; ``dtype`` is bool."""

    def __init__(self, a, b, span=None):
        super().__init__(a, b, span)
        self.dtype = bool_


class EQ(CmpOp):
    symbol = "=="


class NE(CmpOp):
    symbol = "!="


class LT(CmpOp):
    symbol = "<"


class LE(CmpOp):
    symbol = "<="


class GT(CmpOp):
    symbol = ">"


class GE(CmpOp):
    symbol = ">="


class And(CmpOp):
    """Logical and of two bools."""

    symbol = "and"


class Or(CmpOp):
    """Logical or of two bools."""

    symbol = "or"


class Not(Expr):
    _fields = ("a",)

    def __init__(self, a: Expr, span=None):
        super().__init__(span)
        self.a = a
        self.dtype = bool_
        self.depth, self.nodes = _measure(a)


class BitNot(Expr):
    _fields = ("a",)

    def __init__(self, a: Expr, span=None):
        super().__init__(span)
        self.a = a
        self.dtype = a.dtype
        self.depth, self.nodes = _measure(a)


class Select(Expr):
    """``T.select(cond, t, f)``: ``t`` where ``cond`` else ``f`` (both evaluated)."""

    _fields = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr, span=None):
        super().__init__(span)
        self.cond, self.t, self.f = cond, t, f
        self.dtype = t.dtype
        self.depth, self.nodes = _measure(cond, t, f)


class Cast(Expr):
    """``T.cast(value, dtype)``."""

    _fields = ("dtype", "value")

    def __init__(self, dtype, value: Expr, span=None):
        super().__init__(span)
        self.dtype = DataType.get(dtype)
        self.value = value
        self.depth, self.nodes = _measure(value)


class Call(Expr):
    """A math builtin: ``T.exp(x)``, ``T.sqrt(x)``, ``T.fma(a, b, c)`` ... (``name`` is the T function)."""

    _fields = ("name", "args", "dtype")

    def __init__(self, name: str, args, dtype, span=None):
        super().__init__(span)
        self.name = name
        self.args = tuple(args)
        self.dtype = DataType.get(dtype)
        self.depth, self.nodes = _measure(*self.args)


class IntrinsicCall(Expr):
    """A native instruction from the intrinsic table: ``T.ptx.<name>(args...)``.

    ``args`` are expressions, buffer elements (:class:`BufferLoad`) or regions
    (:class:`~tirxpy.ir.buffer.BufferRegion`, whole :class:`~tirxpy.ir.buffer.Buffer`), kept
    as IR so codegen can turn them into addresses through their layouts. ``dtype`` is the
    return type, ``None`` for instructions that return nothing (use them as statements).
    """

    _fields = ("name", "args", "dtype")

    def __init__(self, name: str, args, dtype=None, span=None):
        super().__init__(span)
        self.name = name
        self.args = tuple(args)
        self.dtype = None if dtype is None else DataType.get(dtype)
        self.depth, self.nodes = _measure(*self.args)


class BufferLoad(Expr):
    """``A[i, j]``: one element of a buffer (one index per dimension)."""

    _fields = ("buffer", "indices")

    def __init__(self, buffer, indices, span=None):
        super().__init__(span)
        self.buffer = buffer
        self.indices = tuple(indices)
        self.dtype = buffer.dtype
        self.depth, self.nodes = _measure(*self.indices)


class AddressOf(Expr):
    """``T.address_of(A[i, j])`` or ``T.address_of(smem[stage])``: a pointer to an element or
    to the first element of a region, in the buffer's storage scope."""

    _fields = ("target",)

    def __init__(self, target, span=None):
        super().__init__(span)
        from .dtype import PointerType

        self.target = target
        buf = target.buffer
        self.dtype = PointerType(buf.dtype, buf.storage)


SCOPE_IDS = {
    # kind: (axis names, takes a dim argument)
    "lane_id": ("laneid",),
    "warp_id": ("warpid",),
    "warpgroup_id": ("wgid",),
    "warp_id_in_wg": ("wid_in_wg",),
    "thread_id": ("tx",),
    "thread_id_in_wg": ("tid_in_wg",),
    "cta_id": ("bx", "by", "bz"),
    "cta_id_in_cluster": ("cbx", "cby", "cbz"),
    "cluster_rank": ("cbx", "cby", "cbz"),
}


class ScopeId(Expr):
    """A hardware index: ``T.lane_id()``, ``T.warp_id()``, ``T.warpgroup_id()``,
    ``T.warp_id_in_wg()``, ``T.thread_id()``, ``T.thread_id_in_wg()``, ``T.cta_id(dim)``,
    ``T.cta_id_in_cluster(dim)``, ``T.cluster_rank()``; bound to the layout axes in
    :attr:`axis` (``cluster_rank`` is the linear rank over ``cbx, cby, cbz``)."""

    _fields = ("kind", "dim")

    def __init__(self, kind: str, dim: int | None = None, span=None):
        super().__init__(span)
        if kind not in SCOPE_IDS:
            raise IRError(f"unknown hardware id {shown(kind)}; known: {', '.join(SCOPE_IDS)}")
        takes_dim = kind in ("cta_id", "cta_id_in_cluster")
        if takes_dim:
            if dim not in (0, 1, 2):
                raise IRError(f"T.{kind}(dim) takes dim 0, 1 or 2 (x, y, z), got {shown(dim)}")
        elif dim is not None:
            raise IRError(f"T.{kind}() takes no argument")
        self.kind = kind
        self.dim = dim
        self.dtype = DataType.get("int32")

    @property
    def axis(self):
        """The layout :class:`~tirxpy.layout.Axis` this id reads (``cluster_rank``: ``cbx``)."""
        from tirxpy.layout import Axis

        names = SCOPE_IDS[self.kind]
        return Axis.get(names[self.dim or 0])

    @property
    def is_thread_id(self) -> bool:
        return self.kind in ("lane_id", "warp_id", "warpgroup_id", "warp_id_in_wg", "thread_id", "thread_id_in_wg")


class ElectOne(Expr):
    """``T.elect_one()``: true in exactly one issuing thread of the active set (``elect.sync``)."""

    _fields = ()

    def __init__(self, span=None):
        super().__init__(span)
        self.dtype = bool_


CONST_TYPES = (IntImm, FloatImm, BoolImm)


def is_const(e) -> bool:
    return isinstance(e, CONST_TYPES)
