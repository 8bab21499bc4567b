"""Intrinsic calls -> helper calls, with each argument rendered by its operand kind.

- ``imm``: a compile-time int (a template argument); ``pred``: a bool expression.
- ``reg``: a value; a written scalar takes a buffer element (``x[i]``); a vector of ``count``
  registers takes a register tile whose slots are consecutive and exactly as many bytes
  (``*reinterpret_cast<uint32_t(*)[4]>(&frag[0])``).
- ``smem_addr``: a shared tile, element or ``T.address_of(...)`` -> ``tx_smem_addr(&s[off])``.
- ``smem_addr16``: the same address in 16-byte units, as ``(tx_smem_addr(&s[0]) >> 4) + off16`` when
  the element's byte offset is a multiple of 16 for every value of its indices (``off16`` is then
  plain integer arithmetic the C++ compiler folds: a constant k-step offset costs one add), else
  ``tx_smem_addr(&s[off]) >> 4``.
- ``gmem_ptr``: a global tile / element -> ``&A[off]``.
- ``tensormap``: a *global view* ``A[m0:m0 + 64, k0:k0 + 64]``. Codegen adds a hidden
  ``const __grid_constant__ CUtensorMap`` parameter for (A, box = the view's extents, swizzle of
  the call's shared tile); the host encodes it at launch. TMA coordinates are the call's
  coordinate arguments *plus* the view's starts, innermost dimension first (``c0`` is the last
  dimension): write the position either in the view (coordinates 0) or in the coordinates
  (a view at the origin), or split it between them.
- ``desc64``: a shared tile -> its WGMMA / tcgen05 matrix descriptor, static fields from the
  tile's layout folded at compile time, the start address added at run time.
"""
from __future__ import annotations

import re
from math import prod

from tirxpy.intrinsics import IntrinsicError, lookup
from tirxpy.target import TargetError
from tirxpy.ir import expr as E
from tirxpy.ir import ops
from tirxpy.ir.buffer import Buffer
from tirxpy.ir.visitor import walk_exprs

from .address import element_m, slot_span
from .context import TensorMapParam
from .errors import CodegenError
from .expr import EQ, UNARY, is_tile
from .types import ctype

_COORD = re.compile(r"c\d")
_LABEL = re.compile(r"^\s*(?:[{}]\s*|[A-Za-z_$][\w$]*:\s*|@!?[A-Za-z_$][\w$]*\s+)*")
_TYPE = re.compile(r"(?:b|s|u|f|bf)(\d+)(?:x(\d+))?")


def access_bytes(template: str, operand: str) -> int:
    """Bytes the PTX instruction of ``template`` that addresses memory through ``[{operand}]`` moves at that
    address, to whose width the address must be aligned: the vector count times the type width of its opcode
    (``ld.global.v4.b32``: 16), the size of a ``cp.async`` (its literal), 16 for every bulk operation
    (``cp.async.bulk``, ``cp.reduce.async.bulk``, ``cp.async.bulk.prefetch``); 1 (no demand past the element's own)
    where the template does not say; 8 for the completion mbarrier of an instruction that signals one (the last
    address of ``cp.async.bulk...mbarrier::complete_tx::bytes``). The address may carry an offset
    (``[{addr}+16]``, ``[{addr}+{off}]``): the base then needs the same alignment, as the offset is the kernel's
    to keep aligned.

        >>> access_bytes("ld.global.v4.b32 { {a}, {b}, {c}, {d} }, [{addr}];", "addr")
        16
        >>> access_bytes("cp.async.cg.shared.global [{dst}], [{src}], 16, {n};", "src")
        16
        >>> access_bytes("{ .reg .b32 t; L: @p atom.global.add.u64 {old}, [{ptr}], {v}; }", "ptr")
        8
        >>> access_bytes("prefetch.global.L2 [{ptr}];", "ptr")
        1
        >>> access_bytes("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{dst}], [{src}], {n};", "dst")
        16
        >>> access_bytes("ld.global.v2.f32 { {x}, {y} }, [{row} + 8];", "row")
        8
    """
    address = re.compile(r"\[\s*\{" + re.escape(operand) + r"\}\s*(?:[-+]\s*(?:\w+|\{\w+\})\s*)?\]")
    for stmt in template.split(";"):
        found = address.search(stmt)
        if found is None:
            continue
        at = found.start()
        head = stmt[:at]
        parts = head[_LABEL.match(head).end():].split()
        if not parts:
            return 1
        op = parts[0].split(".")
        if any(c.startswith("mbarrier::") for c in op) and "[" not in stmt[found.end():] and "[" in head:
            return 8        # the completion mbarrier: the last address of an instruction that signals one
        if op[0] == "cp" and "bulk" in op:
            return 16
        if op[:2] == ["cp", "async"]:
            size = re.match(r"\s*,\s*(\d+)", stmt[found.end():])
            return int(size.group(1)) if size else 1
        bits = [_TYPE.fullmatch(c) for c in op[1:]]
        bits = [int(b.group(1)) * int(b.group(2) or 1) for b in bits if b]
        vec = [int(c[1:]) for c in op[1:] if re.fullmatch(r"v\d+", c)]
        return max(1, (vec[0] if vec else 1) * bits[-1] // 8) if bits else 1
    return 1


def _region(a):
    return a.full() if isinstance(a, Buffer) else a


class IntrinsicRenderer:
    def __init__(self, r):
        self.r = r
        self.ctx = r.ctx

    def fail(self, msg, node=None, hint=None):
        self.r.fail(msg, node, hint)

    def entry(self, name, node):
        e = lookup(name)
        if e is None:
            self.fail(f"T.ptx.{name} is not in the intrinsic table", node,
                      hint="register it with tirxpy.intrinsics.register_intrinsic(...) before building")
        try:
            e.check_target(self.ctx.arch)
        except TargetError as err:
            self.fail(f"T.ptx.{name}: {err}", node,
                      hint="build for a target that has the instruction, or use another instruction on this one")
        return e

    def use_entry(self, name, node):
        e = self.entry(name, node)
        self.ctx.use(e)
        return e

    def render(self, call) -> str:
        e = self.entry(call.name, call)
        if len(call.args) != e.n_args:
            self.fail(f"T.ptx.{call.name} takes {e.n_args} arguments ({', '.join(o.name for o in e.args)}), "
                      f"got {len(call.args)}", call)
        known = {o.name: (int(a.value)) for o, a in zip(e.args, call.args) if isinstance(a, (E.IntImm, E.BoolImm))}
        try:
            e.check_args(known)
        except IntrinsicError as err:
            msg = str(err)
            msg = msg[len(e.name) + 2:] if msg.startswith(f"{e.name}: ") else msg
            self.fail(f"T.ptx.{call.name}: {msg}", call)
        self.ctx.use(e)
        fixed = self.tma(e, call)
        args = [fixed[o.name] if o.name in fixed else self.operand(e, o, a, call) for o, a in zip(e.args, call.args)]
        return e.render_call(args)

    # ------------------------------------------------------------------ operands
    def operand(self, e, o, a, call) -> str:
        r, k = self.r, o.kind
        where = f"operand {o.name} of T.ptx.{call.name}"
        if k == "imm":
            if not isinstance(a, (E.IntImm, E.BoolImm)):
                self.fail(f"{where} must be a compile-time integer, got `{a}`", call)
            return str(int(a.value))
        if k == "pred":
            self.scalar(a, where, call)
            return r(a) if a.dtype.is_bool else f"{r.paren(a, EQ)} != 0"
        if k == "reg":
            if o.vector:
                return self.vector(o, a, where, call)
            if o.is_output:
                return self.lvalue(o, a, where, call)
            if is_tile(a):
                return self.packed(o, a, where, call)
            self.scalar(a, where, call)
            if a.dtype.name in ("float16", "bfloat16") and o.dtype == a.dtype.name:
                fn = "__half_as_ushort" if a.dtype.name == "float16" else "__bfloat16_as_ushort"
                return f"{fn}({r(a)})"
            return r(a)
        if k == "smem_addr16":
            return self.smem_addr16(a, where, call)
        if k == "smem_addr":
            if is_tile(a) or isinstance(a, E.BufferLoad):
                buf = a.buffer if not isinstance(a, Buffer) else a
                if not buf.storage.startswith("shared"):
                    self.fail(f"{where} is a shared-memory address, but {buf.name} is in {buf.storage} memory", call,
                              hint="pass a tile allocated with T.alloc_shared (or an element of one)")
                self.smem_aligned(e, o, a, buf, where, call)
                return f"tx_smem_addr(&{self.first(a, call)})"
            self.scalar(a, where, call)
            t = a.target if isinstance(a, E.AddressOf) else None
            if isinstance(t, E.BufferLoad) and t.buffer.storage.startswith("shared"):
                self.smem_aligned(e, o, t, t.buffer, where, call)
            return r(a)
        if k == "gmem_ptr":
            if is_tile(a) or isinstance(a, E.BufferLoad):
                buf = a.buffer if not isinstance(a, Buffer) else a
                if buf.storage != "global":
                    self.fail(f"{where} is a global-memory pointer, but {buf.name} is in {buf.storage} memory", call)
                if o.access != "r":
                    self.ctx.written.add(id(buf.root))
                    self.ctx.stored.add(id(buf.root))
                self.accessed(buf.root, e, o)
                return f"&{self.first(a, call)}"
            self.scalar(a, where, call)
            if isinstance(a, E.AddressOf) and a.target.buffer.storage == "global":
                if o.access != "r":
                    self.ctx.stored.add(id(a.target.buffer.root))      # (its rendering marks it written)
                self.accessed(a.target.buffer.root, e, o)
            return r(a)
        if k == "desc64" and is_tile(a):
            return self.descriptor(e, o, a, where, call)
        if is_tile(a):
            if k == "tmem_addr" or a.storage == "tmem":
                self.fail(f"{where} is a tensor-memory address; codegen does not know where {a.name} lives in "
                          f"tensor memory", call,
                          hint="pass the 32-bit TMEM address tcgen05.alloc wrote to shared memory "
                               "((lane << 16) | column), e.g. taddr_smem[0] + column")
            self.fail(f"{where} takes a {k} value, not the tile {a.name}", call)
        self.scalar(a, where, call)
        return r(a)

    def accessed(self, root, e, o) -> None:
        """Note that instruction ``e`` accesses global buffer ``root`` through its address operand ``o``: the
        buffer's base must be aligned to the instruction's access (:func:`access_bytes`, or the operand's declared
        ``align`` where larger), which the launch checks (:attr:`.kernel.CudaUnit.access`)."""
        n = max(access_bytes(e.template, o.name), o.align or 1)
        if n > self.ctx.access.get(id(root), 1):
            self.ctx.access[id(root)] = n

    def smem_aligned(self, e, o, a, buf, where, call) -> None:
        """A shared element that instruction ``e`` accesses through ``o`` must sit on a boundary of the width the
        instruction moves there (:func:`access_bytes`: an ``mbarrier`` ``.b64`` 8 bytes, ``ld.shared.v4.b32`` 16; or
        the operand's declared ``align`` where larger).
        Every shared allocation starts at least 128-byte aligned, so the rule is on the element's byte offset.
        Judged for a single element (``bars[i]``, ``T.address_of(bars[i])``; a tile's start is TMA's rule,
        :meth:`tma_aligned`) where the offset is known: a constant, or a polynomial of loop variables and hardware
        ids whose ranges are known, refused when some value in them puts it off the boundary (a ``uint32`` tile's
        ``bars[i]`` for an 8-byte ``mbarrier``). On the GPU such an access is a misaligned-address fault."""
        n = max(access_bytes(e.template, o.name), o.align or 1)
        if not isinstance(a, E.BufferLoad) or n <= buf.dtype.bits // 8:
            return
        bits, ranges = buf.dtype.bits, self.ctx.ranges.of
        try:
            in_bytes = element_m(buf.layout, buf.shape, list(a.indices), ranges=ranges, units=(bits, 8))
            in_width = element_m(buf.layout, buf.shape, list(a.indices), ranges=ranges, units=(bits, 8 * n))
        except CodegenError:
            return
        if in_bytes is None:
            return
        if isinstance(in_bytes, E.IntImm):
            off = in_bytes.value % n != 0
        else:
            spans = [ranges(v) for v in walk_exprs(in_bytes) if isinstance(v, E.Var)]
            off = in_width is None and ranges(in_bytes) is not None and all(
                r is not None and r[0] < r[1] < 2 ** 31 for r in spans)
        if off:
            self.fail(f"{where}: the instruction moves {n} bytes at the address, which must be {n}-byte aligned; the "
                      f"element of {buf.name} ({buf.dtype.name}) passed sits {self.r(in_bytes)} bytes into the tile, "
                      f"not a multiple of {n} for every index", call,
                      hint=f"allocate the tile with {n}-byte elements (an mbarrier: T.alloc_shared((count,), "
                           f"\"uint64\")) or index it in steps of {n * 8 // bits} elements")

    def smem_addr16(self, a, where, call) -> str:
        """``smem_addr16``: ``(base >> 4) + offset / 16`` where the offset is exact in 16-byte units (every
        shared allocation starts at least 128-byte aligned, :func:`.kernel.smem_plan`), else the element's
        address ``>> 4``."""
        t = a.target if isinstance(a, E.AddressOf) else a
        if not (is_tile(t) or isinstance(t, E.BufferLoad)):
            self.scalar(a, where, call)
            return f"({self.r.paren(a, UNARY)} >> 4)"
        buf = t.buffer if not isinstance(t, Buffer) else t
        if not buf.storage.startswith("shared"):
            self.fail(f"{where} is a shared-memory address, but {buf.name} is in {buf.storage} memory", call,
                      hint="pass an element of a tile allocated with T.alloc_shared")
        idx = list(t.indices) if isinstance(t, E.BufferLoad) else list(_region(t).starts)
        info = self.r.info(buf, call)
        off16 = element_m(buf.layout, buf.shape, idx, ranges=self.ctx.ranges.of, units=(buf.dtype.bits, 128))
        if off16 is None:
            return f"(tx_smem_addr(&{self.first(t, call)}) >> 4)"
        return f"((tx_smem_addr(&{info.cname}[0]) >> 4) + (unsigned)({self.r(off16)}))"

    def tma_aligned(self, sreg, call):
        """A TMA box's shared tile must start on a 128-byte boundary (every shared allocation does,
        :func:`.kernel.smem_plan`). Judged where it can be without the indices' values: the start with every
        index that is not a constant at 0 must be a whole number of 128-byte units, and so must the step of
        each index that picks a single slice (a stage ``buf[s]``, box extent 1); a :class:`CodegenError` names
        the tile and the fix. An index inside a wider extent (a column chunk ``buf[s, :, c0:c0 + 64]``) is not
        judged: its values are not known here."""
        root = sreg.buffer
        const = [st.value if isinstance(st, E.IntImm) else None for st in sreg.starts]
        base = [0 if c is None else c for c in const]

        def byte_of(idx):
            v = element_m(root.layout, root.shape, [ops.const(i) for i in idx], swizzle=False,
                          units=(root.dtype.bits, 8))
            return v.value if isinstance(v, E.IntImm) else None

        b0 = byte_of(base)
        steps = []
        for d, (c, n) in enumerate(zip(const, sreg.extents)):
            if c is None and n == 1 and root.shape[d] > 1 and b0 is not None:
                one = byte_of(base[:d] + [1] + base[d + 1:])
                steps.append(None if one is None else one - b0)
        if any(v is not None and v % 128 for v in [b0] + steps):
            self.fail(f"the TMA box {sreg.name}{list(sreg.starts)} does not start on a 128-byte boundary of shared "
                      f"memory for every index (its tile {root.name} {tuple(root.shape)} {root.dtype}); TMA writes and "
                      "reads shared memory from 128-byte aligned addresses", call,
                      hint=f"pad each stage of {root.name} to a multiple of 128 bytes and copy into a sub-tile "
                           "(e.g. T.alloc_shared((stages, 1, 32), \"float32\") and copy into buf[s, 0:1, 0:4])")

    def scalar(self, a, where, call):
        if not isinstance(a, E.Expr) or a.dtype is None:
            self.fail(f"{where} takes a value, got `{a}`", call)

    def first(self, a, call) -> str:
        """``name[off]`` of the first element of a tile or of an element."""
        if isinstance(a, E.BufferLoad):
            return self.r.element(a.buffer, a.indices, call)
        reg = _region(a)
        return self.r.element(reg.buffer, reg.starts, call)

    def slots(self, a, where, call):
        """``(cname, base offset text, slot count, dtype)`` of a tile's consecutive slots."""
        reg = _region(a)
        buf = reg.buffer
        info = self.r.info(buf, call)
        lo, count, contiguous = slot_span(reg.layout)
        if not contiguous:
            self.fail(f"{where}: the elements of {buf.name}{'' if isinstance(a, Buffer) else ' (view)'} are not "
                      f"consecutive slots of this thread", call,
                      hint="pass a view whose elements sit in consecutive registers (see the layout's m strides)")
        base = ops.add(ops.const(lo), reg.offset["m"]) if "m" in reg.offset else ops.const(lo)
        return info, self.r(base), count, buf

    def vector(self, o, a, where, call) -> str:
        if not is_tile(a):
            self.fail(f"{where} is {o.count} registers of {o.dtype}: pass a register tile (a T.alloc_local buffer or "
                      f"a view of one), got `{a}`", call)
        info, base, count, buf = self.slots(a, where, call)
        have, need = count * buf.dtype.bits // 8, o.count * _reg_bytes(o)
        if have != need:
            self.fail(f"{where} takes {o.count} x {o.dtype} ({need} bytes) but {buf.name} gives {count} x {buf.dtype} "
                      f"({have} bytes) per thread", call,
                      hint=f"pass a view of exactly {need} bytes per thread")
        if o.access != "r" and buf.storage == "global":
            self.ctx.written.add(id(buf.root))
            self.ctx.stored.add(id(buf.root))
        root = buf.root
        if (buf is root and base == "0" and ctype(buf.dtype) == ctype(o.dtype) and buf.storage == "local"
                and count * buf.dtype.bits == root.bytes() * 8):
            return info.cname
        return f"*reinterpret_cast<{ctype(o.dtype)}(*)[{o.count}]>(&{info.cname}[{base}])"

    def packed(self, o, a, where, call) -> str:
        info, base, count, buf = self.slots(a, where, call)
        if count * buf.dtype.bits != _reg_bytes(o) * 8:
            self.fail(f"{where} is one {o.dtype} but {buf.name} gives {count} x {buf.dtype}", call)
        return f"*reinterpret_cast<const {ctype(o.dtype)}*>(&{info.cname}[{base}])"

    def lvalue(self, o, a, where, call) -> str:
        if isinstance(a, E.BufferLoad) or is_tile(a):
            buf = a.buffer if not isinstance(a, Buffer) else a
            if buf.storage == "global":
                self.ctx.written.add(id(buf.root))
                self.ctx.stored.add(id(buf.root))
            if is_tile(a):
                info, base, count, buf = self.slots(a, where, call)
                ref = f"{info.cname}[{base}]"
                nbits = count * buf.dtype.bits
            else:
                ref = self.first(a, call)
                nbits = buf.dtype.bits
            if ctype(buf.dtype) == ctype(o.dtype) and nbits == _reg_bytes(o) * 8:
                return ref
            if nbits != _reg_bytes(o) * 8:
                self.fail(f"{where} writes one {o.dtype}, but the target holds {nbits} bits", call)
            return f"*reinterpret_cast<{ctype(o.dtype)}*>(&{ref})"
        self.fail(f"{where} is written by the instruction: pass a buffer element (x[i]) to receive it, got `{a}`",
                  call, hint="scalar variables are immutable; allocate a register tile with T.alloc_local((1,), dtype)")

    # ------------------------------------------------------------------ TMA
    def tma(self, e, call) -> dict:
        tms = [(o, a) for o, a in zip(e.args, call.args) if o.kind == "tensormap"]
        if not tms:
            return {}
        o, a = tms[0]
        where = f"operand {o.name} of T.ptx.{call.name}"
        if not is_tile(a) or a.storage != "global":
            self.fail(f"{where} takes the global tensor view the TMA box covers, e.g. A[m0:m0 + 64, k0:k0 + 64]; "
                      f"got `{a}`", call,
                      hint="codegen derives the tensor map from the view; do not build CUtensorMaps by hand")
        reg = _region(a)
        buf = reg.buffer
        params = list(self.ctx.kernel.params)
        if not any(p is buf for p in params):
            self.fail(f"{where}: {buf.name} is not a kernel parameter", call)
        if o.access != "r":         # a TMA store or reduction writes buf through its map
            self.ctx.stored.add(id(buf.root))
        coords = [(op, arg) for op, arg in zip(e.args, call.args) if _COORD.fullmatch(op.name)]
        if coords and len(coords) != buf.ndim:
            self.fail(f"T.ptx.{call.name} moves a {len(coords)}-D box but {buf.name} has rank {buf.ndim}", call,
                      hint=f"use the {buf.ndim}-D form (e.g. tma_load_{buf.ndim}d)")
        box = tuple(reg.extents)
        sw = 0
        smem = [(op, arg) for op, arg in zip(e.args, call.args)
                if op.kind == "smem_addr" and op.name != "bar" and not isinstance(arg, E.BufferLoad)]
        if smem:
            sop, sarg = smem[0]
            if not is_tile(sarg):
                self.fail(f"operand {sop.name} of T.ptx.{call.name}: pass the shared tile itself (e.g. sA or "
                          f"sA[stage]) so codegen can read its swizzle for the tensor map", call)
            sreg = _region(sarg)
            if sreg.dtype != buf.dtype:
                self.fail(f"T.ptx.{call.name}: {buf.name} is {buf.dtype} but the shared tile {sreg.name} is "
                          f"{sreg.dtype}", call)
            n = prod(sreg.shape)
            if n != prod(box):
                self.fail(f"T.ptx.{call.name}: the box {box} of {buf.name} has {prod(box)} elements but the shared "
                          f"tile {sreg.name} {sreg.shape} has {n}", call,
                          hint="slice the global view to the shared tile's shape")
            from ..errors import TmaError
            from ..tma import swizzle_of_layout

            try:
                sw = swizzle_of_layout(sreg.layout, buf.dtype.name, box)
            except TmaError as err:
                self.fail(f"T.ptx.{call.name}: the shared tile {sreg.name} cannot be a TMA box: {err}", call)
            self.tma_aligned(sreg, call)
        key = (id(buf), box, sw)
        tm = next((t for t in self.ctx.tmaps if (id(t.buffer), t.box, t.swizzle) == key), None)
        if tm is None:
            idx = next(i for i, p in enumerate(params) if p is buf)
            tm = TensorMapParam(self.ctx.name(("tmap",) + key, f"tmap_{buf.name}"), buf, idx, box, sw)
            self.ctx.tmaps.append(tm)
        out = {o.name: f"&{tm.cname}"}
        for i, (op, arg) in enumerate(coords):
            start = reg.starts[buf.ndim - 1 - i]
            if not isinstance(arg, E.Expr) or arg.dtype is None or not arg.dtype.is_int:
                self.fail(f"TMA coordinate {op.name} of T.ptx.{call.name} must be an integer, got `{arg}`", call)
            out[op.name] = self.r(ops.add(ops.cast(arg, "int32"), ops.cast(start, "int32")))
        return out

    # ------------------------------------------------------------------ descriptors
    def descriptor(self, e, o, a, where, call) -> str:
        from tirxpy.intrinsics.descriptors import desc_major, region_desc, start_field_cxx
        from tirxpy.layout import LayoutError

        reg = _region(a)
        buf = reg.buffer
        if not buf.storage.startswith("shared"):
            self.fail(f"{where} is a matrix descriptor of a shared-memory tile; {buf.name} is in {buf.storage}", call)
        shape = reg.shape
        if len(shape) != 2:
            self.fail(f"{where}: the operand tile {buf.name} {shape} must be 2-D (mn, k)", call)
        family = "wgmma" if e.name.startswith("wgmma") else "tcgen05"
        try:
            d0 = region_desc(family, reg, desc_major(family, o.name, dict(zip((x.name for x in e.args), call.args))))
        except (LayoutError, IntrinsicError) as err:
            self.fail(f"{where}: the layout of {buf.name} cannot be described by a matrix descriptor: {err}",
                      call, hint="use a canonical operand layout (tirxpy.layout.atoms.mma_smem_layout)")
        info = self.r.info(buf, call)
        m0 = element_m(buf.layout, buf.shape, list(reg.starts), swizzle=False, ranges=self.ctx.ranges.of)
        off = self.r(ops.mul(m0, ops.const(buf.dtype.bits // 8))) if buf.dtype.bits >= 8 else "0"
        addr = f"tx_smem_addr({info.cname})" + ("" if off == "0" else f" + {off}")
        return f"0x{d0:x}ull + (uint64_t){start_field_cxx(addr)}"


#: bytes of the register an asm operand constraint names: .b16 (h), .b32 (r, f), .b64 (l, d)
_CONSTRAINT_BYTES = {"h": 2, "r": 4, "f": 4, "l": 8, "d": 8}


def _reg_bytes(o) -> int:
    """Bytes of the register that holds operand ``o``: its asm constraint's width (an 8-bit or bool
    operand travels in a 32-bit register), not its dtype's size in memory."""
    return _CONSTRAINT_BYTES[o.constraint]
