"""gemm on a warp (sm_80+): ``mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}``.

``Tx.warp.gemm(C, A, B, transpose_a=False, transpose_b=False, accumulate=True)`` with every
operand in registers: C (M x N, float32) made of 16 x 8 tiles laid out as
:func:`~tirxpy.layout.atoms.mma_m16n8k16_c`, A (M x K) of 16 x 16 tiles as
:func:`~tirxpy.layout.atoms.mma_m16n8k16_a`, B (K x N) of 16 x 8 tiles as
:func:`~tirxpy.layout.atoms.mma_m16n8k16_b` (each tile at any register-slot base; A / B tiles
at even slots, two 16-bit values per 32-bit register). Every warp that runs the call does its
own product on its own registers. One ``mma.sync`` per (16 x 8 tile of C, k-step of 16).
``accumulate=False`` computes C = A @ B (the first k-step adds to zero instead of C).
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.ir import ops
from tirxpy.layout.atoms import mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c

from ..dispatch import fail, register_impl
from . import checks
from .operands import dtype_name, parse

_TOKEN = {"bfloat16": "bf16", "float16": "f16"}


@dataclass(frozen=True)
class Plan:
    g: object
    c_tiles: tuple
    a_tiles: tuple
    b_tiles: tuple
    entry: str


def plan(ctx) -> Plan | str:
    cache = ctx.__dict__.setdefault("_tx_gemm_cache", {})
    if "mma_sync" not in cache:
        cache["mma_sync"] = _plan(ctx)
    return cache["mma_sync"]


def _plan(ctx):
    g = parse(ctx)
    if isinstance(g, str):
        return g
    for name, t in (("C", g.C), ("A", g.A), ("B", g.B)):
        if t.storage != "local":
            return f"{name} ({t.name}) is in {t.storage} memory; mma.sync takes every operand in registers"
        if t.offset:
            return f"{name} ({t.name}): a register tile must be indexed with constants (its start is `{t.offset}`)"
    if dtype_name(g.C) != "float32":
        return f"C ({g.C.name}) is {g.C.dtype}; mma.sync here accumulates in float32"
    a_dt, b_dt = dtype_name(g.A), dtype_name(g.B)
    if a_dt not in _TOKEN or a_dt != b_dt:
        return f"mma.sync m16n8k16 takes A and B both bfloat16 or both float16; got {a_dt} and {b_dt}"
    if g.M % 16 or g.N % 8 or g.K % 16:
        return f"mma.sync m16n8k16 needs M % 16 == N % 8 == K % 16 == 0; got M={g.M}, N={g.N}, K={g.K}"
    fc = checks.fragment_tiles("C", g.C.layout, (g.M, g.N), mma_m16n8k16_c(), (16, 8), "mma.sync")
    if fc.reason:
        return fc.reason
    fa = checks.fragment_tiles("A", g.A.layout, (g.M, g.K), mma_m16n8k16_a(), (16, 16), "mma.sync",
                               transposed=g.ta, align=2)
    if fa.reason:
        return fa.reason
    fb = checks.fragment_tiles("B", g.B.layout, (g.K, g.N), mma_m16n8k16_b(), (16, 8), "mma.sync",
                               transposed=g.tb, align=2)
    if fb.reason:
        return fb.reason
    t = _TOKEN[a_dt]
    return Plan(g, fc.tiles, fa.tiles, fb.tiles, f"mma_sync_m16n8k16_f32_{t}_{t}_f32")


def warp_scope(ctx):
    if ctx.scope.short != "warp":
        return f"mma.sync is a warp instruction; write Tx.warp.{ctx.op}(...) (the call is at {ctx.scope} scope)"
    return None


def whole_warps(ctx):
    return checks.whole_warps_reason(ctx.threads)


def operands_fit(ctx):
    p = plan(ctx)
    return p if isinstance(p, str) else None


@register_impl("gemm", "sm_80", variant="mma_sync", priority=10, when=[warp_scope, whole_warps, operands_fit],
               doc="mma.sync.m16n8k16 per 16x8 tile of C and k-step of 16, register fragments")
def gemm_mma_sync(ctx):
    p = plan(ctx)
    if isinstance(p, str):
        fail(p)
    g = p.g
    c = g.C.slots()
    a = g.A.slots("uint32")
    b = g.B.slots("uint32")
    nk = g.K // 16
    out = []
    zero_init, z = [], None
    if g.accumulate is not True:
        # accumulate False (or false at run time): the first k-step adds to z = 0 instead of C.
        z, alloc = ctx.local("zero", (4,), "float32")
        zero_init = [alloc] + ([_store(z, i, 0.0) for i in range(4)] if g.accumulate is False else [])
    for t in p.c_tiles:
        r0, c0 = t.origin
        d = c[t.base:t.base + 4]
        for ks in range(nk):
            at = p.a_tiles[(r0 // 16) * nk + ks]
            bt = p.b_tiles[ks * (g.N // 8) + c0 // 8]
            src = d
            if ks == 0 and g.accumulate is not True:
                src = z[0:4] if g.accumulate is False else None
            if src is None:  # run-time flag: select per register
                src = _select_acc(ctx, out, g.accumulate, c, t.base, z)
            out.append(ctx.emit(p.entry, d, a[at.base // 2:at.base // 2 + 4], b[bt.base // 2:bt.base // 2 + 2], src))
    return ctx.seq(zero_init + out)


def _store(buf, i, v):
    from tirxpy.ir.stmt import BufferStore

    return BufferStore(buf, (ops.const(i),), ops.const(v, "float32"))


def _select_acc(ctx, out, flag, c, base, z):
    """``z[i] = flag ? C[i] : 0`` for the four registers of one C tile; returns ``z[0:4]``."""
    from tirxpy.ir.expr import BufferLoad
    from tirxpy.ir.stmt import BufferStore

    f = flag if flag.dtype.is_bool else ops.ne(flag, 0)
    for i in range(4):
        v = ops.select(f, BufferLoad(c, (ops.const(base + i),)), ops.const(0.0, "float32"))
        out.append(BufferStore(z, (ops.const(i),), v))
    return z[0:4]
