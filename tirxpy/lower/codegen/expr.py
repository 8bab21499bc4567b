"""Expressions -> C++ text with minimal parentheses.

Integer ``//`` and ``%`` keep floor semantics: by a power of two they are ``>>`` / ``&`` (exact
floor for two's complement), by other constants C ``/`` / ``%`` where the dividend is provably
non-negative, else the ``tx_floordiv`` / ``tx_floormod`` helpers. Half, bfloat16 and fp8 math
goes through float.
"""
from __future__ import annotations

from tirxpy.ir import expr as E
from tirxpy.ir.buffer import Buffer, BufferRegion
from tirxpy.layout import TileLayout

from .address import element_m
from .errors import CodegenError, span_of
from .types import NARROW_FLOATS, ctype, float_literal, int_literal

PRIMARY, UNARY, MUL, ADD, SHIFT, REL, EQ, BAND, BXOR, BOR, LAND, LOR, COND = 16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3
_BIN = {
    E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL), E.Div: ("/", MUL), E.Shl: ("<<", SHIFT),
    E.Shr: (">>", SHIFT), E.BitAnd: ("&", BAND), E.BitOr: ("|", BOR), E.BitXor: ("^", BXOR), E.EQ: ("==", EQ),
    E.NE: ("!=", EQ), E.LT: ("<", REL), E.LE: ("<=", REL), E.GT: (">", REL), E.GE: (">=", REL),
    E.And: ("&&", LAND), E.Or: ("||", LOR),
}
_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt",
         "abs": "fabs", "tanh": "tanh", "floor": "floor", "ceil": "ceil", "sin": "sin", "cos": "cos", "fma": "fma"}

FLOOR_HELPERS = """\
template <typename T> __device__ __forceinline__ T tx_floordiv(T a, T b) {
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T tx_floormod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""


def _narrow(dt) -> bool:
    return dt is not None and dt.name in NARROW_FLOATS and not dt.is_pointer


class ExprRenderer:
    """Renders expressions of one kernel; ``stmt`` is the statement being rendered (for spans and
    the active thread set that ``T.elect_one()`` reads)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.stmt = None
        from .intrin import IntrinsicRenderer

        self.intrin = IntrinsicRenderer(self)

    # ------------------------------------------------------------------ entry points
    def __call__(self, e) -> str:
        return self.render(e)[0]

    def fail(self, msg, node=None, hint=None):
        raise CodegenError(msg, span_of(node, self.stmt, self.ctx.kernel), hint)

    def render(self, e):
        """``(text, precedence)``."""
        meth = getattr(self, "_" + type(e).__name__, None)
        if meth is None:
            if isinstance(e, E.BinaryOp) and type(e) in _BIN:
                return self._binary(e)
            self.fail(f"codegen cannot render {type(e).__name__} `{e}` as a value", e)
        return meth(e)

    def paren(self, e, prec: int, right: bool = False) -> str:
        text, p = self.render(e)
        return f"({text})" if p < prec or (right and p == prec) else text

    # ------------------------------------------------------------------ leaves
    def _IntImm(self, e):
        t = int_literal(e.value, e.dtype)
        return t, (PRIMARY if not t.startswith(("-", "(")) else UNARY)

    def _FloatImm(self, e):
        t = float_literal(e.value, e.dtype)
        return t, (UNARY if t.startswith("-") else PRIMARY)

    def _BoolImm(self, e):
        return ("true" if e.value else "false"), PRIMARY

    def _Var(self, e):
        ent = self.ctx.names.get(id(e))
        if ent is None or ent[0] is not e:
            self.fail(f"variable {e.name!r} has no definition in the generated code", e)
        return ent[1], PRIMARY

    def _ScopeId(self, e):
        c = self.ctx
        k, d = e.kind, e.dim
        if k == "thread_id":
            return "(int)threadIdx.x", UNARY
        if k == "lane_id":
            return "((int)threadIdx.x & 31)", PRIMARY
        if k == "thread_id_in_wg":
            return "((int)threadIdx.x & 127)", PRIMARY
        if k == "cta_id":
            return f"(int)blockIdx.{'xyz'[d]}", UNARY
        if k in ("warp_id", "warp_id_in_wg"):
            c.ids.setdefault("tx_warp_id", "__shfl_sync(0xffffffffu, (int)threadIdx.x >> 5, 0)")
            return ("tx_warp_id", PRIMARY) if k == "warp_id" else ("(tx_warp_id & 3)", PRIMARY)
        if k == "warpgroup_id":
            c.ids.setdefault("tx_warpgroup_id", "__shfl_sync(0xffffffffu, (int)threadIdx.x >> 7, 0)")
            return "tx_warpgroup_id", PRIMARY
        entry = "cluster_ctarank" if k == "cluster_rank" else f"cluster_ctaid_{'xyz'[d]}"
        var = "tx_cluster_rank" if k == "cluster_rank" else f"tx_cta_in_cluster_{'xyz'[d]}"
        self.intrin.use_entry(entry, e)
        c.ids.setdefault(var, f"(int)tx_{entry}()")
        return var, PRIMARY

    def _ElectOne(self, e):
        ts = self.ctx.active.get(self.stmt) if self.ctx.active is not None and self.stmt is not None else None
        if ts is None or not ts.exact or not len(ts):
            self.fail("T.elect_one() needs an active thread set known at compile time, but the enclosing branch "
                      "depends on run-time data", e,
                      hint="branch on thread ids (T.warp_id() == 0, T.thread_id() < 32) around T.elect_one(), and "
                           "test run-time values inside it")
        warps = ts.warps()
        w = min(warps)
        lanes = warps[w]
        mask = sum(1 << lane for lane in lanes)
        if self.ctx.arch.sm < 90:
            return f"((int)threadIdx.x == {min(ts.tids)})", EQ
        self.intrin.use_entry("elect_sync", e)
        if len(warps) == 1 and len(ts.tids) == len(lanes) and w == 0 and ts.threads_per_cta <= 32:
            return f"tx_elect_sync(0x{mask:08x}u)", PRIMARY
        self.ctx.ids.setdefault("tx_warp_id", "__shfl_sync(0xffffffffu, (int)threadIdx.x >> 5, 0)")
        return f"tx_warp_id == {w} && tx_elect_sync(0x{mask:08x}u)", LAND

    # ------------------------------------------------------------------ operators
    def _binary(self, e):
        op, prec = _BIN[type(e)]
        dt = e.a.dtype
        if _narrow(dt) and dt.name.startswith("float8"):
            a, b = self.as_float(e.a), self.as_float(e.b)
            text = f"{a} {op} {b}"
            return (text, prec) if isinstance(e, E.CmpOp) else (f"{ctype(dt)}({text})", PRIMARY)
        return f"{self.paren(e.a, prec)} {op} {self.paren(e.b, prec, right=True)}", prec

    def _FloorDiv(self, e):
        return self._floor(e, "/")

    def _FloorMod(self, e):
        return self._floor(e, "%")

    def _floor(self, e, op):
        dt = e.dtype
        if dt.is_float:
            a, b = self.as_float(e.a), self.as_float(e.b)
            fn = "floor" if dt.name == "float64" else "floorf"
            if op == "/":
                return self.from_float(f"{fn}({a} / {b})", dt), PRIMARY
            return self.from_float(f"({a} - {b} * {fn}({a} / {b}))", dt), PRIMARY
        b = e.b.value if isinstance(e.b, E.IntImm) else None
        if b is not None and b > 0 and b & (b - 1) == 0 and dt.is_signed:
            k = b.bit_length() - 1
            if op == "/":
                return f"{self.paren(e.a, SHIFT)} >> {k}", SHIFT
            return f"{self.paren(e.a, BAND)} & {int_literal(b - 1, dt)}", BAND
        if dt.is_uint or (self.ctx.ranges.nonneg(e.a) and self.ctx.ranges.of(e.b) is not None
                          and self.ctx.ranges.of(e.b)[0] > 0):
            return f"{self.paren(e.a, MUL)} {op} {self.paren(e.b, MUL, right=True)}", MUL
        self.ctx.helpers.add("floor")
        fn = "tx_floordiv" if op == "/" else "tx_floormod"
        return f"{fn}<{ctype(dt)}>({self(e.a)}, {self(e.b)})", PRIMARY

    def _Min(self, e):
        return self._minmax(e, "min")

    def _Max(self, e):
        return self._minmax(e, "max")

    def _minmax(self, e, fn):
        dt = e.dtype
        if dt.is_int:
            return f"{fn}({self(e.a)}, {self(e.b)})", PRIMARY
        if dt.name == "float32":
            return f"f{fn}f({self(e.a)}, {self(e.b)})", PRIMARY
        if dt.name == "float64":
            return f"f{fn}({self(e.a)}, {self(e.b)})", PRIMARY
        return self.from_float(f"f{fn}f({self.as_float(e.a)}, {self.as_float(e.b)})", dt), PRIMARY

    def _Not(self, e):
        return f"!{self.paren(e.a, UNARY)}", UNARY

    def _BitNot(self, e):
        return f"~{self.paren(e.a, UNARY)}", UNARY

    def _Select(self, e):
        return f"{self.paren(e.cond, LOR)} ? {self.paren(e.t, COND)} : {self.paren(e.f, COND)}", COND

    def _Cast(self, e):
        src, dst = e.value.dtype, e.dtype
        if src is not None and (src.is_pointer or dst.is_pointer):
            return f"reinterpret_cast<{ctype(dst)}>({self(e.value)})", PRIMARY
        if dst.is_bool:
            return f"{self.paren(e.value, EQ)} != {'0' if not _narrow(src) else ctype(src) + '(0.0f)'}", EQ
        if _narrow(dst) or _narrow(src):
            inner = self.as_float(e.value) if _narrow(src) or not dst.name.startswith("float") else self(e.value)
            if _narrow(dst):
                return self.from_float(inner, dst), PRIMARY
            if dst.name == "float32" and _narrow(src):
                return inner, PRIMARY
            return f"static_cast<{ctype(dst)}>({inner})", PRIMARY
        return f"static_cast<{ctype(dst)}>({self(e.value)})", PRIMARY

    def as_float(self, e) -> str:
        """``e`` as a float expression (narrow floats converted)."""
        if _narrow(e.dtype):
            return f"static_cast<float>({self(e)})"
        return self.paren(e, UNARY)

    def from_float(self, text: str, dt) -> str:
        return f"{ctype(dt)}({text})" if _narrow(dt) else text

    def _Call(self, e):
        dt = e.dtype
        fn = _MATH.get(e.name)
        if fn is None:
            self.fail(f"T.{e.name} has no CUDA rendering", e)
        if dt.is_int:
            if e.name != "abs":
                self.fail(f"T.{e.name} on {dt} has no CUDA rendering", e)
            return f"{'llabs' if dt.bits == 64 else 'abs'}({self(e.args[0])})", PRIMARY
        suffix = "" if dt.name == "float64" else "f"
        args = ", ".join(self.as_float(a) if _narrow(dt) else self(a) for a in e.args)
        return self.from_float(f"{fn}{suffix}({args})", dt), PRIMARY

    # ------------------------------------------------------------------ memory
    def _BufferLoad(self, e):
        return self.element(e.buffer, e.indices, e), PRIMARY

    def element(self, buf, indices, node) -> str:
        """``name[offset]`` of one element."""
        info = self.info(buf, node)
        off = self.offset(buf, indices, node)
        return f"{info.cname}[{off}]"

    def info(self, buf, node):
        if buf.storage == "tmem":
            self.fail(f"{buf.name} is in tensor memory, which has no element addresses in C++", node,
                      hint="move data between tensor memory and registers with the tcgen05 ld / st intrinsics "
                           "(T.ptx.tcgen05_ld_32x32b_x8(...)) and index the register tile instead")
        info = self.ctx.buffer(buf)
        if info is None and buf.base is not None:
            root = self.info(buf.root, node)
            cname = root.cname
            if ctype(buf.dtype) != ctype(buf.root.dtype):
                cname = f"reinterpret_cast<{ctype(buf.dtype)}*>({root.cname})"
            from .context import BufferInfo

            info = self.ctx.buffers[id(buf)] = BufferInfo(buf, cname, buf.storage)
        if info is None:
            self.fail(f"tensor {buf.name!r} has no storage in the generated code", node)
        return info

    def offset(self, buf, indices, node, swizzle=True) -> str:
        """The element offset of ``buf[indices]`` in C: in 64-bit integers for a global tensor whose offsets can pass
        ``2**31 - 1`` (:func:`wide_offsets`), in ``int`` otherwise."""
        m = element_m(buf.layout, buf.shape, list(indices), swizzle=swizzle, ranges=self.ctx.ranges.of,
                      span=span_of(node, self.stmt), wide=wide_offsets(buf))
        return self(m)

    def _AddressOf(self, e):
        t = e.target
        if isinstance(t, E.BufferLoad):
            buf, idx = t.buffer, t.indices
        else:
            buf, idx = t.buffer, t.starts
        ref = self.element(buf, idx, e)
        if buf.storage.startswith("shared"):
            return f"tx_smem_addr(&{ref})", PRIMARY
        if buf.storage == "global":
            self.ctx.written.add(id(buf.root))
        return f"&{ref}", UNARY

    def _IntrinsicCall(self, e):
        return self.intrin.render(e), PRIMARY

    def _Buffer(self, e):
        self.fail(f"the tensor {e.name} is used as a scalar value", e,
                  hint=f"index it ({e.name}[i, j]) or pass it to an intrinsic operand that takes a tile")

    def _BufferRegion(self, e):
        self.fail(f"the view of {e.name} is used as a scalar value", e,
                  hint="pass views to intrinsic operands that take tiles, or take T.address_of(view)")


def wide_offsets(buf) -> bool:
    """Whether element offsets into global tensor ``buf`` (a view counts its root's elements, in its own dtype) can
    pass ``2**31 - 1``, so that codegen computes them in 64-bit integers.

        >>> wide_offsets(Buffer("A", (70000, 70000), "float32")), wide_offsets(Buffer("A", (4096, 4096), "float32"))
        (True, False)
    """
    if buf.storage != "global":
        return False
    root, lay = buf.root, buf.root.layout
    if isinstance(lay, TileLayout):      # the farthest element from 0, whatever the strides' signs
        reach = 1 + abs(int(lay.offset.get("m", 0))) + sum(
            (it.extent - 1) * abs(it.stride) for it in lay.shard + lay.replica if it.axis.name == "m")
    else:
        reach = lay.span("m")
    return reach * root.dtype.bits // max(buf.dtype.bits, 1) > (1 << 31) - 1


def is_tile(a) -> bool:
    return isinstance(a, (Buffer, BufferRegion))
