"""What an implementation sees: :class:`CallContext`, and :class:`Tile`, one tensor operand.

``CallContext`` fields: ``call`` (the :class:`~tirxpy.ir.PrimitiveCall`), ``op``, ``operands``
(each a :class:`Tile` for buffers / regions, else the expression), ``attrs``, ``scope`` (the
scope the call was written at, ``Tx.wg.copy`` -> WARPGROUP), ``threads`` (the active
:class:`~tirxpy.scope.ThreadSet` at the call: which CTA threads execute it), ``arch``
(:class:`~tirxpy.intrinsics.Arch`), ``kernel``, ``span`` (the user's line) and ``lets`` (the kernel's let-bound
names and their values, :func:`tirxpy.ir.analysis.let_values`, which a view's :class:`Tile` carries too, so that
an alignment proof sees ``c0 = T.cta_id(0) * 64`` through the name ``c0``).

Helpers that build IR (names are fresh per call site, so lowered code never collides):

- ``ctx.var(name, dtype)`` a fresh :class:`~tirxpy.ir.Var`; ``ctx.let(name, value)`` -> (var, LetStmt)
- ``ctx.local(name, shape, dtype, layout=None)`` -> (Buffer, Allocate) a fresh register buffer
- ``ctx.intrin(name, *args)`` an :class:`~tirxpy.ir.IntrinsicCall` of a table entry; calls
  ``fail`` when the target lacks it; ``ctx.emit(name, *args)`` the same as a statement
- ``ctx.loop(n, body_fn, kind="unroll", name="i")`` a :class:`~tirxpy.ir.For` whose body is
  ``body_fn(var)`` (``kind``: ``"unroll"``, ``"serial"`` or ``"rolled"``, as ``T.unroll`` / ``T.serial`` /
  ``T.rolled``); ``ctx.seq(stmts)``
- ``ctx.tensor(k)`` the k-th operand as a Tile (``fail`` if it is not a tensor); ``ctx.attr(name, default)``

``Tile`` (one operand): ``name``, ``buffer`` (the tensor it views), ``storage``, ``dtype``,
``shape`` (the view's shape, scalar-indexed dimensions dropped), ``layout`` (of the view,
over ``shape``), ``offset`` (symbolic part of the view's start, ``{axis: Expr}``),
``starts`` (the view's start index per buffer dimension), ``load(coord)`` / ``store(coord,
value)`` (element access by the view's logical coordinate, returned as BufferLoad /
BufferStore on the underlying buffer: codegen turns them into addresses through the layout),
``index(coord)`` (the buffer indices), ``is_whole`` and ``slots()``: for a register tile, an
alias of its storage as a flat array of the thread's slots, for raw per-slot access.

Register-tile convention (used by every implementation here): a ``local`` tile's logical
element ``e`` held by thread ``t`` lives in ``t``'s register slot ``L.apply(e)['m']``;
implementations reach it with ``tile.slots()[slot]`` (a constant slot), never by logical
coordinate, and only in the thread that owns the element.
"""
from __future__ import annotations

from math import prod

from tirxpy.ir import ops
from tirxpy.ir.buffer import Buffer, BufferRegion
from tirxpy.ir.errors import at_span
from tirxpy.ir.expr import Expr, IntImm, IntrinsicCall, Var
from tirxpy.ir.stmt import Allocate, BufferStore, Evaluate, For, LetStmt, SeqStmt
from tirxpy.layout import TileLayout

from .dispatch import fail


class Tile:
    """One tensor operand of a call (a whole buffer or a region of one)."""

    def __init__(self, obj, position: int, lets=None):
        self.obj = obj
        self.position = position
        self.lets = lets or {}          # the kernel's let-bound values (CallContext.lets)
        if isinstance(obj, Buffer):
            self.buffer = obj
            self.starts = tuple(IntImm(0) for _ in obj.shape)
            self.extents = obj.shape
            self.squeeze = (False,) * obj.ndim
            self.layout = obj.layout
            self.offset = {}
        else:
            self.buffer = obj.buffer
            self.starts, self.extents, self.squeeze = obj.starts, obj.extents, obj.squeeze
            self.layout = obj.layout
            self.offset = obj.offset
        self.shape = tuple(e for e, s in zip(self.extents, self.squeeze) if not s) or (1,)

    name = property(lambda self: self.buffer.name)
    storage = property(lambda self: self.buffer.storage)
    dtype = property(lambda self: self.buffer.dtype)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: prod(self.shape))

    @property
    def is_whole(self) -> bool:
        return all(isinstance(s, IntImm) and s.value == 0 for s in self.starts) and self.extents == self.buffer.shape

    @property
    def static_starts(self) -> bool:
        return all(isinstance(s, IntImm) for s in self.starts)

    def index(self, coord) -> tuple:
        """Buffer indices of the view's logical coordinate ``coord`` (len == ndim, or 1 int for a flat index)."""
        coord = list(coord)
        if len(coord) != len(self.shape):
            raise ValueError(f"{self.name}: coordinate {coord} does not match view shape {self.shape}")
        out, k = [], 0
        for s, sq in zip(self.starts, self.squeeze):
            if sq:
                out.append(s)
            else:
                out.append(ops.add(s, coord[k]) if not (isinstance(coord[k], int) and coord[k] == 0) else s)
                k += 1
        if len(self.shape) == 1 and self.shape == (1,) and all(self.squeeze):
            pass
        return tuple(ops.const(x) if not isinstance(x, Expr) else x for x in out)

    def load(self, coord):
        from tirxpy.ir.expr import BufferLoad

        return BufferLoad(self.buffer, self.index(coord))

    def store(self, coord, value):
        return BufferStore(self.buffer, self.index(coord), value)

    def slots(self, dtype=None) -> Buffer:
        """The thread's register slots of this local tile as a flat alias (``dtype`` reinterprets)."""
        if self.storage != "local":
            fail(f"{self.name} is in {self.storage} memory, not registers")
        cache = self.__dict__.setdefault("_slots", {})
        if dtype in cache:
            return cache[dtype]
        from tirxpy.ir.buffer import footprint

        n = footprint(self.buffer.layout)
        dt = self.dtype if dtype is None else dtype
        from tirxpy.ir.dtype import DataType

        bits = DataType.get(dt).bits
        count = n * self.dtype.bits // bits
        if count < 1:
            fail(f"{self.name}: {n} slot(s) of {self.dtype} do not fill one {dt}")
        lay = TileLayout.from_iters([_iter(count, 1, "m")])
        cache[dtype] = self.buffer.alias((count,), dt, lay, name=f"{self.name}_{DataType.get(dt).name}_slots"
                                         if dtype is not None else f"{self.name}_slots")
        return cache[dtype]

    def describe(self) -> str:
        return f"{self.name}{list(self.shape)} {self.dtype} in {self.storage}"

    def __repr__(self) -> str:
        return f"Tile({self.describe()})"


def _iter(e, s, a):
    from tirxpy.layout import Iter

    return Iter(e, s, a)


class CallContext:
    """Everything an implementation reads about one call, plus IR builders (module docstring)."""

    def __init__(self, call, kernel, threads, arch, prefix: str = "tx", lets=None):
        from tirxpy.intrinsics.target import parse_arch

        self.call = call
        self.kernel = kernel
        self.threads = threads
        self.arch = parse_arch(arch)
        self.prefix = prefix
        self.lets = lets or {}
        self.operands = tuple(Tile(o, k, self.lets) if isinstance(o, (Buffer, BufferRegion)) else o
                              for k, o in enumerate(call.operands))
        self.emitted: list = []
        self._names = 0

    op = property(lambda self: self.call.op)
    attrs = property(lambda self: self.call.attrs)
    scope = property(lambda self: self.call.scope)
    span = property(lambda self: self.call.span)

    @property
    def threads_per_cta(self) -> int:
        return self.kernel.launch.threads

    def tensor(self, k: int) -> Tile:
        if k >= len(self.operands):
            fail(f"{self.op} needs operand {k}, the call has {len(self.operands)}")
        t = self.operands[k]
        if not isinstance(t, Tile):
            fail(f"operand {k} is the scalar `{t}`, not a tensor")
        return t

    @property
    def tiles(self) -> list:
        return [o for o in self.operands if isinstance(o, Tile)]

    def attr(self, name, default=None):
        return self.call.attrs.get(name, default)

    def describe(self) -> str:
        ops_ = ", ".join(o.describe() if isinstance(o, Tile) else f"`{o}`" for o in self.operands)
        return f"({ops_}) at scope {self.scope} run by {self.threads.describe()} on {self.arch}"

    # ---------------------------------------------------------------- builders
    def _mark(self):
        return (self._names, len(self.emitted))

    def _reset(self, mark):
        self._names = mark[0]
        del self.emitted[mark[1]:]

    def fresh(self, name: str) -> str:
        self._names += 1
        return f"{self.prefix}_{name}{self._names}"

    def var(self, name: str = "v", dtype="int32") -> Var:
        with at_span(self.span):
            return Var(self.fresh(name), dtype)

    def let(self, name: str, value) -> tuple:
        value = ops.const(value) if not isinstance(value, Expr) else value
        with at_span(self.span):
            v = Var(self.fresh(name), value.dtype)
            return v, LetStmt(v, value)

    def local(self, name: str, shape, dtype, layout=None) -> tuple:
        with at_span(self.span):
            b = Buffer(self.fresh(name), shape, dtype, "local", layout)
            return b, Allocate(b)

    def intrin(self, name: str, *args) -> IntrinsicCall:
        from tirxpy.intrinsics import lookup

        e = lookup(name)
        if e is None:
            fail(f"the intrinsic table has no {name!r}")
        why = e.requirement.missing(self.arch)
        if why is not None:
            fail(f"{e.ptx} {why.split(' — ')[0]}")
        with at_span(self.span):
            call = IntrinsicCall(name, [ops.const(a) if isinstance(a, (int, float, bool)) else a for a in args],
                                 e.ret_dtype)
        self.emitted.append(name)
        return call

    def emit(self, name: str, *args) -> Evaluate:
        c = self.intrin(name, *args)
        with at_span(self.span):
            return Evaluate(c)

    def loop(self, n: int, body_fn, kind: str = "unroll", name: str = "i") -> For | SeqStmt:
        if n == 1:
            return SeqStmt([body_fn(IntImm(0))])
        v = self.var(name)
        with at_span(self.span):
            return For(v, IntImm(0), IntImm(n), kind, body_fn(v))

    def seq(self, stmts) -> SeqStmt:
        with at_span(self.span):
            return SeqStmt([s for s in stmts if s is not None])
