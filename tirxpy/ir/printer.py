"""Print IR as tirxpy script (TVMScript-like Python) that :func:`parse_script` reads back.

``print(kernel)`` / ``kernel.script()`` give the kernel; ``node_text(node)`` any expression or
statement. Names are kept unless two different variables would print the same, or a name
would hide a script name (``T``, ``S``, an axis such as ``m``): then a suffix is added.
"""
from __future__ import annotations

import keyword
import math

from tirxpy.layout import Layout
from tirxpy.scope import Scope

from . import expr as E
from . import stmt as St
from .buffer import Buffer, BufferRegion, default_layout
from .dtype import DataType
from .visitor import walk_values

_PREC = {
    E.Or: 1, E.And: 2, E.Not: 3, E.EQ: 4, E.NE: 4, E.LT: 4, E.LE: 4, E.GT: 4, E.GE: 4,
    E.BitOr: 5, E.BitXor: 6, E.BitAnd: 7, E.Shl: 8, E.Shr: 8, E.Add: 9, E.Sub: 9,
    E.Mul: 10, E.Div: 10, E.FloorDiv: 10, E.FloorMod: 10, E.BitNot: 11,
}
_NEG = 11
_ATOM = 13
RESERVED = {"T", "Tx", "TileLayout", "ComposeLayout", "SwizzleLayout", "S", "R", "Iter", "float", "True", "False", "None"}


def _reserved() -> set:
    return set(RESERVED)


def _layout_axes(node, acc) -> set:
    """Axis names used by the layouts printed in ``node`` (these names must stay free)."""
    for v in walk_values(node):
        if isinstance(v, Layout):
            acc.update(v.axes())
    return acc


def _aliases(node, acc: dict) -> dict:
    """Buffers in ``node`` that alias another's storage (:meth:`Buffer.alias`), grouped by root in order
    of first use: ``{id(root): [alias, ...]}``."""
    for n in walk_values(node):
        if isinstance(n, Buffer) and n.base is not None:
            group = acc.setdefault(id(n.base), [])
            if n not in group:
                group.append(n)
    return acc


def _is_neg(e) -> bool:
    return (isinstance(e, E.Sub) and isinstance(e.a, (E.IntImm, E.FloatImm)) and e.a.value == 0
            and not E.is_const(e.b)
            and not (isinstance(e.a, E.FloatImm) and math.copysign(1.0, e.a.value) < 0))


def dtype_text(dt: DataType) -> str:
    return f'"{dt!r}"'


class Printer:
    def __init__(self, reserve: bool = True):
        self.aliases: dict = {}   # id(root buffer) -> its aliases, defined right after the root
        self.names: dict = {}
        self.used: set = set(_reserved()) if reserve else set()
        self.lines: list = []

    # ---- names ----
    def define(self, obj) -> str:
        base = obj.name
        name = base
        k = 0
        while name in self.used or keyword.iskeyword(name):
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.names[id(obj)] = (obj, name)
        return name

    def name(self, obj) -> str:
        ent = self.names.get(id(obj))
        if ent is not None and ent[0] is obj:
            return ent[1]
        return self.define(obj)  # free variable: print under its own (unique) name

    # ---- expressions ----
    def expr(self, e, prec: int = 0) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def _expr(self, e):
        if isinstance(e, E.BoolImm):
            return ("True" if e.value else "False"), _ATOM
        if isinstance(e, E.IntImm):
            if e.dtype.name == "int32":
                return str(e.value), (_ATOM if e.value >= 0 else _NEG)
            return f"T.{e.dtype.name}({e.value})", _ATOM
        if isinstance(e, E.FloatImm):
            v = e.value
            lit = repr(v) if math.isfinite(v) else f'"{v}"'
            return f"T.{e.dtype.name}({lit})", _ATOM
        if isinstance(e, E.Var):
            return self.name(e), _ATOM
        if _is_neg(e):
            return "-" + self.expr(e.b, _NEG), _NEG
        if isinstance(e, (E.Min, E.Max)):
            fn = "min" if isinstance(e, E.Min) else "max"
            return f"T.{fn}({self.expr(e.a)}, {self.expr(e.b)})", _ATOM
        if isinstance(e, E.BinaryOp):
            p = _PREC[type(e)]
            if isinstance(e, E.CmpOp) and not isinstance(e, (E.And, E.Or)):
                return f"{self.expr(e.a, p + 1)} {e.symbol} {self.expr(e.b, p + 1)}", p
            return f"{self.expr(e.a, p)} {e.symbol} {self.expr(e.b, p + 1)}", p
        if isinstance(e, E.Not):
            return "not " + self.expr(e.a, 3), 3
        if isinstance(e, E.BitNot):
            return "~" + self.expr(e.a, _NEG), _NEG
        if isinstance(e, E.Select):
            return f"T.select({self.expr(e.cond)}, {self.expr(e.t)}, {self.expr(e.f)})", _ATOM
        if isinstance(e, E.Cast):
            return f"T.cast({self.expr(e.value)}, {dtype_text(e.dtype)})", _ATOM
        if isinstance(e, E.Call):
            return f"T.{e.name}({', '.join(self.expr(a) for a in e.args)})", _ATOM
        if isinstance(e, E.IntrinsicCall):
            args = ", ".join(self.operand(a) for a in e.args)
            if e.name.isidentifier() and not keyword.iskeyword(e.name):
                return f"T.ptx.{e.name}({args})", _ATOM
            return f"T.call_intrin({e.name!r}{', ' if args else ''}{args})", _ATOM
        if isinstance(e, E.BufferLoad):
            return f"{self.name(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]", _ATOM
        if isinstance(e, E.AddressOf):
            return f"T.address_of({self.operand(e.target)})", _ATOM
        if isinstance(e, E.ScopeId):
            return f"T.{e.kind}({'' if e.dim is None else e.dim})", _ATOM
        if isinstance(e, E.ElectOne):
            return "T.elect_one()", _ATOM
        return f"<{type(e).__name__}>", _ATOM

    def region(self, r: BufferRegion) -> str:
        parts = []
        for s, n, sq, full in zip(r.starts, r.extents, r.squeeze, r.buffer.shape):
            if sq:
                parts.append(self.expr(s))
            elif isinstance(s, E.IntImm) and s.value == 0 and n == full:
                parts.append(":")
            else:
                parts.append(f"{self.expr(s)}:{self.expr(s + n)}")
        while len(parts) > 1 and parts[-1] == ":":
            parts.pop()
        return f"{self.name(r.buffer)}[{', '.join(parts)}]"

    def operand(self, v) -> str:
        if isinstance(v, Buffer):
            return self.name(v)
        if isinstance(v, BufferRegion):
            return self.region(v)
        if isinstance(v, E.Expr):
            return self.expr(v)
        return self.value(v)

    def value(self, v) -> str:
        if isinstance(v, E.IntImm):  # keep IR constants apart from Python literals in attributes
            return f"T.{v.dtype.name}({v.value})"
        if isinstance(v, E.BoolImm):
            return f"T.bool({v.value})"
        if isinstance(v, (Buffer, BufferRegion, E.Expr)):
            return self.operand(v)
        if isinstance(v, DataType):
            if v.is_tf32:
                return "T.tf32"
            return f"T.{v.name}" if v.name.isidentifier() else dtype_text(v)
        if isinstance(v, Layout):
            return repr(v)
        if isinstance(v, Scope):
            return repr(v.name_)
        if isinstance(v, tuple):
            inner = ", ".join(self.value(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, float) and not math.isfinite(v):
            return f'float("{v}")'
        return repr(v)

    # ---- statements ----
    def emit(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def body(self, seq, depth):
        if not seq.stmts:
            self.emit(depth, "pass")
        for s in seq.stmts:
            self.stmt(s, depth)

    def stmt(self, s, depth):
        if isinstance(s, St.LetStmt):
            v = self.expr(s.value)
            name = self.define(s.var)
            if E.is_const(s.value) or s.var.dtype != s.value.dtype:
                self.emit(depth, f"{name}: {self.value(s.var.dtype)} = {v}")
            else:
                self.emit(depth, f"{name} = {v}")
        elif isinstance(s, St.Allocate):
            self.emit(depth, self.alloc(s.buffer))
            self.define_aliases(s.buffer, depth)
        elif isinstance(s, St.BufferStore):
            idx = ", ".join(self.expr(i) for i in s.indices)
            self.emit(depth, f"{self.name(s.buffer)}[{idx}] = {self.expr(s.value)}")
        elif isinstance(s, St.Evaluate):
            if isinstance(s.expr, E.IntrinsicCall):
                self.emit(depth, self.expr(s.expr))
            else:
                self.emit(depth, f"T.evaluate({self.expr(s.expr)})")
        elif isinstance(s, St.For):
            start, stop = self.expr(s.start), self.expr(s.stop)
            var = self.define(s.var)
            rng = stop if isinstance(s.start, E.IntImm) and s.start.value == 0 and s.start.dtype.name == "int32" else f"{start}, {stop}"
            self.emit(depth, f"for {var} in T.{s.kind}({rng}):")
            self.body(s.body, depth + 1)
        elif isinstance(s, St.IfThenElse):
            self.emit(depth, f"if {self.cond(s.cond)}:")
            self.body(s.then_body, depth + 1)
            e = s.else_body
            while e is not None and len(e.stmts) == 1 and isinstance(e.stmts[0], St.IfThenElse):
                self.emit(depth, f"elif {self.cond(e.stmts[0].cond)}:")
                self.body(e.stmts[0].then_body, depth + 1)
                e = e.stmts[0].else_body
            if e is not None:
                self.emit(depth, "else:")
                self.body(e, depth + 1)
        elif isinstance(s, St.While):
            self.emit(depth, f"while {self.cond(s.cond)}:")
            self.body(s.body, depth + 1)
        elif isinstance(s, St.PrimitiveCall):
            self.emit(depth, self.primitive(s))
        elif isinstance(s, St.SeqStmt):
            self.body(s, depth)
        else:
            self.emit(depth, f"# <{type(s).__name__}>")

    def define_aliases(self, root, depth):
        """``view = root.alias(shape, dtype, layout=..., name=...)`` for every alias of ``root`` the kernel uses."""
        for a in self.aliases.pop(id(root), ()):
            args = [self.value(tuple(a.shape)), dtype_text(a.dtype)]
            if not _is_default(a):
                args.append(f"layout={a.layout!r}")
            name = self.define(a)
            args.append(f"name={name!r}")
            self.emit(depth, f"{name} = {self.name(root)}.alias({', '.join(args)})")

    def cond(self, c) -> str:
        """A device condition; a constant is wrapped (``T.bool(False)``) so it stays IR."""
        if isinstance(c, E.BoolImm):
            return f"T.bool({c.value})"
        return self.expr(c)

    def primitive(self, s) -> str:
        head = f"Tx.{s.op}" if s.scope is Scope.THREAD else f"Tx.{s.scope.short}.{s.op}"
        args = [self.operand(o) for o in s.operands]
        if s.dispatch is not None:
            args.append(f"dispatch={s.dispatch!r}")
        args += [f"{k}={self.value(v)}" for k, v in s.attrs.items()]
        return f"{head}({', '.join(args)})"

    def alloc(self, b: Buffer) -> str:
        name = self.define(b)
        fn = {"shared": "alloc_shared", "local": "alloc_local", "tmem": "alloc_tmem"}.get(b.storage)
        args = [self.value(tuple(b.shape)), dtype_text(b.dtype)]
        if fn is None:
            fn = "alloc_buffer"
            args.append(f"scope={b.storage!r}")
        if not _is_default(b):
            args.append(f"layout={b.layout!r}")
        return f"{name} = T.{fn}({', '.join(args)})"

    def tensor_type(self, b: Buffer) -> str:
        args = [self.value(tuple(b.shape)), dtype_text(b.dtype)]
        if b.storage != "global":
            args.append(f"scope={b.storage!r}")
        if not _is_default(b):
            args.append(f"layout={b.layout!r}")
        return f"T.Tensor({', '.join(args)})"

    def kernel(self, k) -> str:
        self.used |= _layout_axes(k.params, set()) | _layout_axes(k.body, set())
        self.aliases = _aliases(k.body, {})
        params = []
        for p in k.params:
            name = self.define(p)
            if isinstance(p, Buffer):
                params.append(f"{name}: {self.tensor_type(p)}")
            else:
                params.append(f"{name}: {self.value(p.dtype)}")
        self.lines.append("@T.prim_func")
        self.lines.append(f"def {k.name}({', '.join(params)}):")
        L = k.launch
        args = [f"grid={_tuple(self.expr(g) for g in L.grid)}", f"threads={L.threads}"]
        if L.cluster is not None:
            args.append(f"cluster={self.value(tuple(L.cluster))}")
        if L.smem is not None:
            args.append(f"smem={L.smem}")
        if L.pdl:
            args.append("pdl=True")
        if L.may_alias:
            args.append(f"may_alias={L.may_alias!r}")
        self.emit(1, f"T.launch({', '.join(args)})")
        for p in k.params:
            if isinstance(p, Buffer):
                self.define_aliases(p, 1)
        for s in k.body.stmts:
            self.stmt(s, 1)
        return "\n".join(self.lines)


def _is_default(b: Buffer) -> bool:
    try:
        d = default_layout(b.shape, b.dtype, b.storage)
    except Exception:
        return False
    return type(d) is type(b.layout) and d.identical(b.layout)


def _tuple(items) -> str:
    items = list(items)
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def script(kernel) -> str:
    """The tirxpy script of ``kernel``."""
    return Printer().kernel(kernel)


def node_text(node) -> str:
    """Script text of one node (expression, region, statement, buffer or kernel)."""
    from .kernel import Kernel, LaunchConfig

    if isinstance(node, Kernel):
        return Printer().kernel(node)
    p = Printer(reserve=False)
    if isinstance(node, E.Expr):
        return p.expr(node)
    if isinstance(node, BufferRegion):
        return p.region(node)
    if isinstance(node, Buffer):
        return f"{node.name}: {p.tensor_type(node)}"
    if isinstance(node, LaunchConfig):
        return f"T.launch(grid={_tuple(p.expr(g) for g in node.grid)}, threads={node.threads})"
    if isinstance(node, St.Stmt):
        p.stmt(node, 0)
        return "\n".join(p.lines)
    return object.__repr__(node)
