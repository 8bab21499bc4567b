"""A small lockstep interpreter of *lowered* IR, for checking what primitives emit on CPU.

Every thread of a CTA executes each statement before any thread moves on (so shuffles read a
partner's current value and ``syncthreads`` is a no-op); CTAs run one after another. Storage is
raw bytes: global tensors (row-major, from numpy arrays), one shared area per buffer per CTA,
one register area per thread per local root (aliases reinterpret it). Values are Python floats /
ints; stores round to the element dtype (bf16 with round-to-nearest-even).

Supports what the primitives emit: loops, ifs, lets, stores, allocations, element loads (global
and shared addresses through the buffer's layout, swizzles included), ``vld_* / vst_*``,
``shfl_sync_bfly_*``, ``syncthreads`` and the math builtins.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.buffer import Buffer

_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32, "uint32": np.uint32,
       "int64": np.int64, "uint64": np.uint64, "int16": np.int16, "uint16": np.uint16, "int8": np.int8,
       "uint8": np.uint8}


def bf16_round(x: float) -> float:
    u = struct.unpack("<I", struct.pack("<f", np.float32(x)))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def to_bytes(value, dt) -> bytes:
    n = dt.name
    if n == "bfloat16":
        u = struct.unpack("<I", struct.pack("<f", bf16_round(value)))[0]
        return struct.pack("<H", u >> 16)
    if dt.is_float:
        return np.array([value], dtype=_NP[n]).tobytes()
    if dt.is_bool:
        return bytes([1 if value else 0])
    return np.array([dt.wrap(int(value))], dtype=_NP[n]).tobytes()


def from_bytes(b: bytes, dt):
    n = dt.name
    if n == "bfloat16":
        return struct.unpack("<f", struct.pack("<I", struct.unpack("<H", b)[0] << 16))[0]
    if dt.is_bool:
        return bool(b[0])
    v = np.frombuffer(b, dtype=_NP[n])[0]
    return float(v) if dt.is_float else int(v)


def bf16_array(a) -> np.ndarray:
    """Round a float array to bf16 values (kept as float32)."""
    f = np.asarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)


class Machine:
    def __init__(self, kernel, args: dict):
        self.k = kernel
        self.threads = kernel.launch.threads
        self.glob = {}
        for p in kernel.params:
            if isinstance(p, Buffer):
                a = np.asarray(args[p.name])
                if p.dtype.name == "bfloat16":
                    u = bf16_array(a).view(np.uint32) >> 16
                    self.glob[id(p)] = bytearray(u.astype(np.uint16).tobytes())
                else:
                    self.glob[id(p)] = bytearray(np.ascontiguousarray(a, dtype=_NP[p.dtype.name]).tobytes())
        self.params = {p.name: p for p in kernel.params if isinstance(p, Buffer)}

    def result(self, name) -> np.ndarray:
        p = self.params[name]
        raw = bytes(self.glob[id(p)])
        if p.dtype.name == "bfloat16":
            u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            return u.view(np.float32).reshape(p.shape)
        return np.frombuffer(raw, dtype=_NP[p.dtype.name]).reshape(p.shape).copy()

    # ------------------------------------------------------------ run
    def run(self):
        g = [int(x.value) for x in self.k.launch.grid]
        for bz in range(g[2] if len(g) > 2 else 1):
            for by in range(g[1] if len(g) > 1 else 1):
                for bx in range(g[0]):
                    self.cta = (bx, by, bz)
                    self.shared = {}
                    self.env = [dict() for _ in range(self.threads)]
                    self.regs = [dict() for _ in range(self.threads)]
                    self.seq(self.k.body, list(range(self.threads)))
        return self

    def seq(self, s, act):
        for x in s.stmts:
            self.stmt(x, act)

    def stmt(self, s, act):
        if not act:
            return
        if isinstance(s, St.SeqStmt):
            self.seq(s, act)
        elif isinstance(s, St.LetStmt):
            vals = [self.ev(s.value, t) for t in act]
            for t, v in zip(act, vals):
                self.env[t][s.var] = v
        elif isinstance(s, St.Allocate):
            pass
        elif isinstance(s, St.BufferStore):
            vals = [(self.ev(s.value, t), [self.ev(i, t) for i in s.indices]) for t in act]
            for t, (v, idx) in zip(act, vals):
                self.write(s.buffer, idx, v, t)
        elif isinstance(s, St.IfThenElse):
            conds = [bool(self.ev(s.cond, t)) for t in act]
            then = [t for t, c in zip(act, conds) if c]
            other = [t for t, c in zip(act, conds) if not c]
            self.seq(s.then_body, then)
            if s.else_body is not None:
                self.seq(s.else_body, other)
        elif isinstance(s, St.For):
            lo, hi = self.ev(s.start, act[0]), self.ev(s.stop, act[0])
            for i in range(lo, hi):
                for t in act:
                    self.env[t][s.var] = i
                self.seq(s.body, act)
        elif isinstance(s, St.Evaluate):
            self.intrinsic(s.expr, act)
        else:
            raise NotImplementedError(type(s).__name__)

    # ------------------------------------------------------------ storage
    def _area(self, buf, t):
        root = buf.root
        if root.storage == "global":
            return self.glob[id(root)]
        if root.storage == "shared":
            return self.shared.setdefault(id(root), bytearray(root.bytes() + 16))
        return self.regs[t].setdefault(id(root), bytearray(root.bytes() + 16))

    def _offset(self, buf, idx):
        if buf.storage == "local" and buf.base is None and set(buf.layout.axes()) - {"m"}:
            raise NotImplementedError("distributed register tiles are reached through slot aliases")
        m = buf.layout.apply(*idx, shape=buf.shape).get("m", 0)
        return m * buf.dtype.bits // 8

    def read(self, buf, idx, t):
        off = self._offset(buf, idx)
        n = max(1, buf.dtype.bits // 8)
        return from_bytes(bytes(self._area(buf, t)[off:off + n]), buf.dtype)

    def write(self, buf, idx, v, t):
        off = self._offset(buf, idx)
        b = to_bytes(v, buf.dtype)
        self._area(buf, t)[off:off + len(b)] = b

    # ------------------------------------------------------------ intrinsics
    def intrinsic(self, c, act):
        n = c.name
        if n == "syncthreads":
            return
        if n.startswith(("vld_", "vst_")):
            nw = int(n.split("_v")[-1].split("_")[0])
            for t in act:
                if n.startswith("vld_"):
                    *outs, addr = c.args
                    buf, off = self._addr(addr, t)
                    area = self._area(buf, t)
                    for j, o in enumerate(outs):
                        w = struct.unpack("<I", bytes(area[off + 4 * j: off + 4 * j + 4]))[0]
                        self.write(o.buffer, [self.ev(i, t) for i in o.indices], w, t)
                else:
                    addr, *ins = c.args
                    buf, off = self._addr(addr, t)
                    area = self._area(buf, t)
                    for j, o in enumerate(ins):
                        area[off + 4 * j: off + 4 * j + 4] = struct.pack("<I", int(self.ev(o, t)) & 0xFFFFFFFF)
            del nw
            return
        if n.startswith(("ldmatrix_", "stmatrix_")):
            return self._matrix(c, act)
        raise NotImplementedError(n)

    def _matrix(self, c, act):
        """ldmatrix / stmatrix .x{n}(.trans), per warp: lane l addresses row l % 8 of matrix l / 8."""
        load = c.name.startswith("ldmatrix")
        nmat = int(c.name.split("_x")[1][0])
        trans = c.name.endswith("_trans")
        vec, addr = (c.args[0], c.args[1]) if load else (c.args[1], c.args[0])
        warps = {}
        for t in act:
            warps.setdefault(t // 32, []).append(t)
        for w, ts in warps.items():
            assert len(ts) == 32, "ldmatrix / stmatrix need the whole warp"
            rows = {t % 32: self._addr(addr, t) for t in ts}
            for t in ts:
                l = t % 32
                for j in range(nmat):
                    r0 = self.ev(vec.starts[0], t) + j
                    if not trans:
                        buf, off = rows[8 * j + l // 4]
                        parts = [(buf, off + 4 * (l % 4), 4)]
                    else:
                        parts = [(rows[8 * j + 2 * (l % 4) + h][0], rows[8 * j + 2 * (l % 4) + h][1] + 2 * (l // 4), 2)
                                 for h in (0, 1)]
                    reg_area = self._area(vec.buffer, t)
                    roff = r0 * 4
                    pos = 0
                    for buf, off, nb in parts:
                        area = self._area(buf, t)
                        if load:
                            reg_area[roff + pos: roff + pos + nb] = area[off: off + nb]
                        else:
                            area[off: off + nb] = reg_area[roff + pos: roff + pos + nb]
                        pos += nb

    def _addr(self, a, t):
        assert isinstance(a, E.AddressOf) and isinstance(a.target, E.BufferLoad)
        ld = a.target
        return ld.buffer, self._offset(ld.buffer, [self.ev(i, t) for i in ld.indices])

    # ------------------------------------------------------------ expressions
    def ev(self, e, t):
        if isinstance(e, (E.IntImm, E.BoolImm)):
            return e.value
        if isinstance(e, E.FloatImm):
            return e.value
        if isinstance(e, E.Var):
            return self.env[t][e]
        if isinstance(e, E.ScopeId):
            k = e.kind
            if k == "cta_id":
                return self.cta[e.dim]
            return {"lane_id": t % 32, "warp_id": t // 32, "warpgroup_id": t // 128, "warp_id_in_wg": (t // 32) % 4,
                    "thread_id": t, "thread_id_in_wg": t % 128}[k]
        if isinstance(e, E.BufferLoad):
            return self.read(e.buffer, [self.ev(i, t) for i in e.indices], t)
        if isinstance(e, E.Cast):
            v = self.ev(e.value, t)
            dt = e.dtype
            if dt.name == "bfloat16":
                return bf16_round(v)
            if dt.is_float:
                return float(_NP[dt.name](v))
            if dt.is_bool:
                return bool(v)
            if e.value.dtype is not None and e.value.dtype.is_float:
                v = int(v)
            return dt.wrap(int(v))
        if isinstance(e, E.Not):
            return not self.ev(e.a, t)
        if isinstance(e, E.Select):
            return self.ev(e.t, t) if self.ev(e.cond, t) else self.ev(e.f, t)
        if isinstance(e, E.IntrinsicCall):
            if e.name == "ex2_approx_f32":
                return _round(2.0 ** self.ev(e.args[0], t), e.dtype)
            if e.name == "rcp_approx_f32":
                return _round(1.0 / self.ev(e.args[0], t), e.dtype)
            if e.name.startswith("shfl_sync_bfly"):
                mask = self.ev(e.args[1], t)
                return self.ev(e.args[0], (t & ~31) | ((t % 32) ^ mask))
            raise NotImplementedError(e.name)
        if isinstance(e, E.Call):
            xs = [self.ev(a, t) for a in e.args]
            f = {"exp": math.exp, "exp2": lambda x: 2.0 ** x, "sqrt": math.sqrt, "rsqrt": lambda x: 1 / math.sqrt(x),
                 "log": math.log, "log2": math.log2, "abs": abs, "tanh": math.tanh,
                 "fma": lambda a, b, c: a * b + c}[e.name]
            return _round(f(*xs), e.dtype)
        if isinstance(e, E.BinaryOp):
            a, b = self.ev(e.a, t), self.ev(e.b, t)
            isf = e.a.dtype is not None and e.a.dtype.is_float
            r = _BIN[type(e)](a, b, isf)
            return _round(r, e.dtype) if isf and not isinstance(e, E.CmpOp) else r
        raise NotImplementedError(type(e).__name__)


def _round(v, dt):
    if dt is None or not dt.is_float:
        return v
    if dt.name == "bfloat16":
        return bf16_round(v)
    return float(_NP[dt.name](v))


_BIN = {
    E.Add: lambda a, b, f: a + b, E.Sub: lambda a, b, f: a - b, E.Mul: lambda a, b, f: a * b,
    E.Div: lambda a, b, f: a / b, E.FloorDiv: lambda a, b, f: a // b, E.FloorMod: lambda a, b, f: a % b,
    E.Min: lambda a, b, f: min(a, b), E.Max: lambda a, b, f: max(a, b), E.Shl: lambda a, b, f: a << b,
    E.Shr: lambda a, b, f: a >> b, E.BitAnd: lambda a, b, f: a & b, E.BitOr: lambda a, b, f: a | b,
    E.BitXor: lambda a, b, f: a ^ b, E.EQ: lambda a, b, f: a == b, E.NE: lambda a, b, f: a != b,
    E.LT: lambda a, b, f: a < b, E.LE: lambda a, b, f: a <= b, E.GT: lambda a, b, f: a > b,
    E.GE: lambda a, b, f: a >= b, E.And: lambda a, b, f: bool(a) and bool(b), E.Or: lambda a, b, f: bool(a) or bool(b),
}


def run_lowered(kernel, arch="sm_90a", **args) -> Machine:
    """Lower ``kernel`` with :func:`tirxpy.primitives.lower_calls` and interpret it on ``args``."""
    from tirxpy.primitives import lower_calls

    return Machine(lower_calls(kernel, arch), args).run()
