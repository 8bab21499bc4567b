"""Statements -> C++ lines.

Declarations follow the IR: ``LetStmt`` is a ``const`` local (let-bound variables are never
re-assigned), ``Allocate`` declares shared tiles as pointers into the dynamic shared-memory
array at their planned offsets and register tiles as per-thread arrays of their ``m``
footprint; tensor memory is reached only through tcgen05 intrinsics; aliases render as the
root's storage reinterpreted.
"""
from __future__ import annotations

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.buffer import footprint
from tirxpy.ir.visitor import sub_exprs, walk_stmts

from .context import BufferInfo
from .expr import REL
from .types import ctype


class StmtRenderer:
    def __init__(self, ctx, er, smem_offsets: dict):
        self.ctx, self.er = ctx, er
        self.smem_offsets = smem_offsets  # id(Allocate) -> byte offset
        self.lines: list = []
        self.origins: list = []     # per line: the IR statement it was rendered from
        self.depth = 1
        self._at = None

    def emit(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)
        self.origins.append(self._at)

    def block(self, seq) -> None:
        self.depth += 1
        self.seq(seq)
        self.depth -= 1

    def seq(self, seq) -> None:
        for s in seq.stmts:
            self.stmt(s)

    def stmt(self, s) -> None:
        outer, self._at = self._at, s
        try:
            self._stmt(s)
        finally:
            self._at = outer

    def _stmt(self, s) -> None:
        ctx, r = self.ctx, self.er
        r.stmt = s
        if isinstance(s, St.LetStmt):
            value = r(s.value)
            ctx.ranges.bind(s.var, ctx.ranges.of(s.value))
            name = ctx.name(s.var, s.var.name)
            self.emit(f"const {ctype(s.var.dtype, s.span)} {name} = {value};")
        elif isinstance(s, St.BufferStore):
            info = r.info(s.buffer, s)
            if s.buffer.root.storage == "global":
                ctx.written.add(id(s.buffer.root))
                ctx.stored.add(id(s.buffer.root))
            ref = r.element(s.buffer, s.indices, s)
            self.emit(f"{ref} = {r(s.value)};")
            del info
        elif isinstance(s, St.Evaluate):
            if isinstance(s.expr, E.IntrinsicCall):
                self.emit(f"{r(s.expr)};")
            elif not isinstance(s.expr, (E.IntImm, E.BoolImm, E.FloatImm)):
                self.emit(f"(void)({r(s.expr)});")
        elif isinstance(s, St.For):
            # the bound is the right operand of `<`: a ternary or a comparison there needs parentheses
            # (`i < c ? a : b` is `(i < c) ? a : b` in C++)
            start, stop = r(s.start), r.paren(s.stop, REL, right=True)
            lo, hi = ctx.ranges.of(s.start), ctx.ranges.of(s.stop)
            ctx.ranges.bind(s.var, None if lo is None or hi is None else (lo[0], max(lo[0], hi[1] - 1)))
            name = ctx.name(s.var, s.var.name)
            if s.kind == "unroll":
                self.emit("#pragma unroll")
            elif s.kind == "rolled":
                self.emit("#pragma unroll 1")                # T.rolled: kept a loop
            elif issues_wgmma(s.body):
                # ptxas (13.0 and 13.4 seen) may unroll such a loop, leave it from the middle of the
                # unrolled body and then schedule reads of the accumulators of the still-running
                # wgmma group above the WARPGROUP.DEPBAR of the wait_group after the loop (wrong
                # 8x8 blocks in gemm_sm90: docs/performance.md, "Fixed bug: CM=1 results wrong"). A loop it does not
                # unroll keeps the wait ahead of the reads.
                self.emit("#pragma unroll 1")
            self.emit(f"for ({ctype(s.var.dtype, s.span)} {name} = {start}; {name} < {stop}; ++{name}) {{")
            self.block(s.body)
            self.emit("}")
        elif isinstance(s, St.IfThenElse):
            self.emit(f"if ({r(s.cond)}) {{")
            self.block(s.then_body)
            if s.else_body is not None and s.else_body.stmts:
                self.emit("} else {")
                self.block(s.else_body)
            self.emit("}")
        elif isinstance(s, St.While):
            self.emit(f"while ({r(s.cond)}) {{")
            self.block(s.body)
            self.emit("}")
        elif isinstance(s, St.Allocate):
            self.allocate(s)
        elif isinstance(s, St.SeqStmt):
            self.seq(s)
        elif isinstance(s, St.PrimitiveCall):
            from .kernel import unlowered

            raise unlowered(s)
        else:
            r.fail(f"codegen cannot render the statement {type(s).__name__}", s)

    def allocate(self, s) -> None:
        b = s.buffer
        ctx = self.ctx
        if b.base is not None:
            return  # an alias names the root's storage (see ExprRenderer.info)
        name = ctx.name(b, b.name)
        t = ctype(b.dtype, s.span)
        if b.storage.startswith("shared"):
            off = self.smem_offsets[id(s)]
            ctx.buffers[id(b)] = BufferInfo(b, name, b.storage, off)
            self.emit(f"{t}* const {name} = reinterpret_cast<{t}*>(tx_smem + {off});  "
                      f"// {b.shape} {b.dtype}, {b.bytes()} bytes")
        elif b.storage == "local":
            n = footprint(b.layout, "m")
            ctx.buffers[id(b)] = BufferInfo(b, name, "local")
            align = "alignas(16) " if (n * b.dtype.bits) % 128 == 0 and b.dtype.bits < 128 else ""
            self.emit(f"{align}{t} {name}[{n}];  // {b.shape} {b.dtype} per-thread slots")
        elif b.storage == "tmem":
            ctx.buffers[id(b)] = BufferInfo(b, name, "tmem")
            self.emit(f"// {b.name}: tensor memory {b.shape} {b.dtype}, addressed through tcgen05 intrinsics")
        else:
            self.er.fail(f"{b.name}: kernels cannot allocate {b.storage} memory", s)


def issues_wgmma(node) -> bool:
    """Whether a statement at any depth under ``node`` evaluates ``wgmma.commit_group`` (an intrinsic
    call that is one of the statement's own expressions)."""
    return any(isinstance(e, E.IntrinsicCall) and e.name == "wgmma_commit_group"
               for s in walk_stmts(node) for e in sub_exprs(s))
