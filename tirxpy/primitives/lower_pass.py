"""``lower_calls(kernel, arch) -> Kernel``: every primitive call replaced in place by native IR.

Local by construction: each :class:`~tirxpy.ir.PrimitiveCall` is handed, with its active thread
set (``tirxpy.ir.analysis``) and the target, to the dispatcher; the statement the chosen
implementation returns takes the call's place. Nothing looks at other calls. Statements an
implementation returns may themselves contain primitive calls (composition); those are lowered
the same way with the same active thread set. The input kernel is not modified.

``lower_calls_traced(kernel, arch)`` also returns the :class:`Site` list (one per call site, in
source order: the call, the choice, the rejected candidates, the intrinsics emitted) that
:func:`tirxpy.explain` prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.ir import stmt as St
from tirxpy.ir.analysis import annotate_active_threads, let_values
from tirxpy.ir.errors import at_span
from tirxpy.ir.kernel import Kernel
from tirxpy.ir.visitor import map_bodies
from tirxpy.target import as_target

from .context import CallContext
from .dispatch import DispatchError, dispatch_call

_MAX_DEPTH = 8


@dataclass
class Site:
    """One lowered call site."""

    call: object
    threads: object
    impl: object
    rejected: list
    emitted: list = field(default_factory=list)
    stmt: object = None


def _load_builtin_impls():
    from . import copy, elementwise, reduce  # noqa: F401  (registration side effects)
    try:
        from . import gemm  # noqa: F401
    except ImportError:
        pass


def lower_calls(kernel: Kernel, arch) -> Kernel:
    """A new kernel with every primitive call lowered for ``arch`` (``"sm_80"``, ``"sm_90a"``, ...)."""
    return lower_calls_traced(kernel, arch)[0]


def lower_calls_traced(kernel: Kernel, arch):
    target = as_target(arch)
    _load_builtin_impls()
    info = annotate_active_threads(kernel)
    lw = _Lowerer(kernel, info, target)
    body = lw.seq(kernel.body, None)
    out = Kernel(kernel.name, kernel.params, kernel.launch, body, span=kernel.span)
    return out, lw.sites


class _Lowerer:
    def __init__(self, kernel, info, arch):
        self.kernel, self.info, self.arch = kernel, info, arch
        self.lets = let_values(kernel)
        self.sites: list[Site] = []
        self.count = 0

    def seq(self, seq, threads):
        out = []
        for s in seq.stmts:
            r = self.stmt(s, threads)
            out.append(r)
        return St.SeqStmt(out, span=seq.span)

    def stmt(self, s, threads, depth=0):
        ts = self.info.get(s) or threads
        if isinstance(s, St.PrimitiveCall):
            return self.call(s, ts, depth)
        return map_bodies(s, lambda b: self.stmt(b, ts))

    def call(self, s, threads, depth):
        if depth > _MAX_DEPTH:
            raise DispatchError(f"Tx.{s.op}: implementations keep emitting primitive calls ({_MAX_DEPTH} levels deep)",
                                s.span, hint="an implementation must eventually return native IR")
        self.count += 1
        ctx = CallContext(s, self.kernel, threads, self.arch, prefix=f"tx{self.count}", lets=self.lets)
        with at_span(s.span):   # native statements an implementation builds name the call's line
            choice = dispatch_call(ctx)
        site = Site(s, threads, choice.impl, choice.rejected, list(ctx.emitted), None)
        self.sites.append(site)
        site.stmt = self.nested(choice.stmt, threads, depth + 1)
        return site.stmt

    def nested(self, s, threads, depth):
        if isinstance(s, St.PrimitiveCall):
            return self.call(s, threads, depth)
        return map_bodies(s, lambda b: self.nested(b, threads, depth))
