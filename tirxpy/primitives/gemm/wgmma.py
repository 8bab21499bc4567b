"""gemm / gemm_async / gemm_wait on Hopper (sm_90a): ``wgmma.mma_async`` over a warpgroup.

``Tx.wg.gemm_async(C, A, B, transpose_a=False, transpose_b=False, accumulate=True, wait=None)``
issues, per warpgroup: ``wgmma.fence``; one ``wgmma.mma_async.m64nNk*`` per (64 x N) tile of C
and k-step (k-step outermost); ``wgmma.commit_group``; and, with ``wait=n``, ``wgmma.wait_group n``
(at most ``n`` committed groups still pending). ``Tx.wg.gemm_wait(n, C, ...)`` is the wait alone
for the accumulators it names, so a pipeline issues k-tile ``t``, waits with ``wait=1`` until
k-tile ``t - 1`` has read its shared memory, releases that stage, and finishes with
``Tx.wg.gemm_wait(0, C)`` before reading C. ``Tx.wg.gemm(...)`` is ``gemm_async`` followed by
``wait_group 0``.

Every wait is followed by a compiler fence on the accumulators' registers (an empty
``asm volatile`` that takes each as a ``"+f"`` operand): ``wgmma.wait_group`` itself names no
registers, so without the fence the compiler may move reads (or new writes) of C above the
wait, while the tensor cores still write it. That is why ``gemm_wait`` must name C.

Operands: C in registers, float32, each 64 x N tile laid out as
:func:`~tirxpy.layout.atoms.wgmma_accumulator` (on ``wid_in_wg`` / ``laneid``, any register
slot base); A in shared memory (a canonical K- or MN-major layout, read through a descriptor)
or in registers (each 64 x K-step tile laid out as :func:`~tirxpy.layout.atoms.wgmma_a_fragment`);
B in shared memory. Inputs bf16 / f16 (both majors), tf32 (``float32``) and fp8 (K-major only).

Variant ``wgmma_folded`` (``Tx.wg.gemm_async(..., dispatch="wgmma_folded")``, never picked on its own):
the same instructions, the shared-memory descriptors built by ``gemm_smem_desc_folded`` (:mod:`.desc`),
one uniform add per k-step and operand. Fewer instructions, but they move how ptxas schedules the
code around the wgmmas: measure it per kernel (tirxpy_kernels/attention_sm90.py ``FOLD``).
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.layout.atoms import WGMMA_N, wgmma_a_fragment, wgmma_accumulator

from ..dispatch import fail, register_impl
from . import checks, desc
from .operands import dtype_name, parse, static_int

_K = {16: 16, 32: 8, 8: 32}
_INPUTS = ("float16", "bfloat16", "float32", "float8_e4m3", "float8_e5m2")
_FP8 = ("float8_e4m3", "float8_e5m2")


@dataclass(frozen=True)
class Plan:
    g: object
    n_inst: int
    k_inst: int
    c_tiles: tuple
    a_smem: object  # SmemOperand or None
    a_tiles: tuple  # register A tiles (or ())
    b_smem: object
    entry: str


def _n_inst(N):
    return max(n for n in WGMMA_N if N % n == 0)


def plan(ctx) -> Plan | str:
    cache = ctx.__dict__.setdefault("_tx_gemm_cache", {})
    if "wgmma" not in cache:
        cache["wgmma"] = _plan(ctx)
    return cache["wgmma"]


def _plan(ctx):
    from tirxpy.intrinsics import wgmma as family

    g = parse(ctx, ("wait",) if ctx.op == "gemm_async" else ())
    if isinstance(g, str):
        return g
    C, A, B = g.C, g.A, g.B
    if C.storage != "local":
        return f"C ({C.name}) is in {C.storage} memory; wgmma accumulates in registers (T.alloc_local)"
    if dtype_name(C) != "float32":
        return f"C ({C.name}) is {C.dtype}; this wgmma implementation accumulates in float32"
    if B.storage != "shared":
        return f"B ({B.name}) is in {B.storage} memory; wgmma reads B from shared memory"
    if A.storage not in ("shared", "local"):
        return f"A ({A.name}) is in {A.storage} memory; wgmma reads A from shared memory or registers"
    for t in (C, A):
        if t.storage == "local" and t.offset:
            return f"{t.name}: a register tile must be indexed with constants (its start is `{t.offset}`)"
    a_dt, b_dt = dtype_name(A), dtype_name(B)
    if a_dt not in _INPUTS or b_dt not in _INPUTS or not (a_dt == b_dt or (a_dt in _FP8 and b_dt in _FP8)):
        return f"wgmma takes A and B of one dtype among {list(_INPUTS)} (float32 = tf32; fp8 may mix); got {a_dt} and {b_dt}"
    bits = A.dtype.bits
    k_inst = _K[bits]
    if g.M % 64:
        return f"C has M = {g.M} rows; wgmma covers 64 rows per instruction (M must be a multiple of 64)"
    if g.N % 8:
        return f"C has N = {g.N} columns; wgmma N is a multiple of 8"
    if g.K % k_inst:
        return f"K = {g.K} is not a multiple of the wgmma K = {k_inst} for {a_dt}"
    n = _n_inst(g.N)
    fr = checks.fragment_tiles("C", C.layout, (g.M, g.N), wgmma_accumulator(n), (64, n), "wgmma")
    if fr.reason:
        return fr.reason
    majors = ("K", "MN") if bits == 16 else ("K",)
    a_smem, a_tiles = None, ()
    if A.storage == "shared":
        a_smem = checks.smem_operand("A", A.layout, A.shape, a_dt, k_inst, "wgmma", k_dim=g.a_kdim, majors=majors)
        if isinstance(a_smem, str):
            return a_smem
    else:
        if bits not in (8, 16):
            return f"A in registers must be 16-bit or 8-bit for wgmma; A is {a_dt} (put it in shared memory)"
        fa = checks.fragment_tiles("A", A.layout, (g.M, g.K), wgmma_a_fragment(a_dt), (64, k_inst), "wgmma",
                                   transposed=g.ta, align=32 // bits)
        if fa.reason:
            return fa.reason
        a_tiles = fa.tiles
    b_smem = checks.smem_operand("B", B.layout, B.shape, b_dt, k_inst, "wgmma", k_dim=g.b_kdim, majors=majors)
    if isinstance(b_smem, str):
        return b_smem
    entry = family.get(n=n, d="float32", a=a_dt, b=b_dt, a_from="smem" if a_smem else "reg").name
    return Plan(g, n, k_inst, fr.tiles, a_smem, a_tiles, b_smem, entry)


# ---------------------------------------------------------------- predicates
def warpgroup_scope(ctx):
    if ctx.scope.short != "wg":
        return f"wgmma is a warpgroup instruction; write Tx.wg.{ctx.op}(...) (the call is at {ctx.scope} scope)"
    return None


def whole_warpgroups(ctx):
    return checks.warpgroups_reason(ctx.threads)


def operands_fit(ctx):
    p = plan(ctx)
    return p if isinstance(p, str) else None


def wait_attr(ctx):
    w = ctx.attr("wait", None)
    if w is None:
        return None
    n = static_int(w)
    if n is None or not 0 <= n <= 7:
        return (f"wait= is how many committed wgmma groups may stay pending (an int 0..7), got {w!r}; "
                "wait for a TMA stage on its mbarrier before the call instead")
    return None


# ---------------------------------------------------------------- lowering
def _user(coord, transposed):
    return (coord[1], coord[0]) if transposed else coord


def issue(ctx, p: Plan, folded: bool = False) -> list:
    """fence; one mma per (tile of C, k-step); commit. ``folded``: descriptors by
    ``gemm_smem_desc_folded`` (:mod:`.desc`)."""
    g = p.g
    out = [ctx.emit("wgmma_fence")]
    c_slots = g.C.slots()
    a_regs = g.A.slots("uint32") if p.a_tiles else None
    a_per = 32 // g.A.dtype.bits
    b_desc0 = desc.static_desc("wgmma", p.b_smem)
    a_desc0 = desc.static_desc("wgmma", p.a_smem) if p.a_smem else None
    n16 = g.A.dtype.bits == 16
    for ks in range(g.K // p.k_inst):
        k0 = ks * p.k_inst
        scale_d = g.accumulate if ks == 0 else True
        for t in p.c_tiles:
            r0, c0 = t.origin
            d = c_slots[t.base:t.base + p.n_inst // 2]
            if p.a_smem:
                a = desc.desc_at(ctx, a_desc0, g.A.load(_user((r0, k0), g.ta)), folded)
            else:
                at = p.a_tiles[(r0 // 64) * (g.K // p.k_inst) + ks]
                a = a_regs[at.base // a_per:at.base // a_per + 4]
            b = desc.desc_at(ctx, b_desc0, g.B.load(_user((c0, k0), not g.tb)), folded)
            args = [d, a, b, scale_d, 1, 1]
            if n16:
                if p.a_smem:
                    args.append(int(p.a_smem.major == "MN"))
                args.append(int(p.b_smem.major == "MN"))
            out.append(ctx.emit(p.entry, *args))
    out.append(ctx.emit("wgmma_commit_group"))
    return out


_FENCE_CHUNK = 32  # registers per fence statement


def _fence_entry(dtype: str, n: int) -> str:
    from tirxpy.intrinsics import lookup, register_intrinsic

    name = f"wgmma_fence_operand_{dtype}_x{n}"
    if lookup(name) is None:
        register_intrinsic(name, "// tx: accumulator registers fenced {r}", [("r", "reg", dtype, "rw", n)],
                           memory=True, ptx="(no instruction: a compiler fence on registers)",
                           doc="Orders reads and writes of these registers after the preceding wgmma.wait_group.")
    return name


def fence_accumulators(ctx, tiles) -> list:
    """Compiler fences on every register slot of ``tiles`` (accumulators of in-flight wgmma)."""
    out = []
    for t in tiles:
        slots = t.slots()
        n = slots.shape[0]
        for lo in range(0, n, _FENCE_CHUNK):
            k = min(_FENCE_CHUNK, n - lo)
            out.append(ctx.emit(_fence_entry(slots.dtype.name, k), slots[lo:lo + k]))
    return out


def _lower(ctx, wait, folded=False):
    p = plan(ctx)
    if isinstance(p, str):
        fail(p)
    stmts = issue(ctx, p, folded)
    if wait is not None:
        stmts.append(ctx.emit("wgmma_wait_group", wait))
        stmts += fence_accumulators(ctx, [p.g.C])
    return ctx.seq(stmts)


_WHEN = [warpgroup_scope, whole_warpgroups, operands_fit]
_HOPPER = ("sm_90a", "sm_90a")


@register_impl("gemm_async", _HOPPER, variant="wgmma", priority=20, when=_WHEN + [wait_attr],
               doc="wgmma.mma_async: fence, one mma per 64xN tile and k-step, commit_group [, wait_group]")
def gemm_async_wgmma(ctx, folded=False):
    w = ctx.attr("wait", None)
    return _lower(ctx, None if w is None else static_int(w), folded)


@register_impl("gemm_async", _HOPPER, variant="wgmma_folded", priority=10, when=_WHEN + [wait_attr],
               doc="as wgmma, with the matrix descriptors computed in C++ (gemm_smem_desc_folded): one uniform add "
                   "per k-step and operand; only by name (dispatch='wgmma_folded'), as it moves how ptxas schedules "
                   "the kernel around the wgmmas, which helps some kernels and slows others: measure it per kernel")
def gemm_async_wgmma_folded(ctx):
    return gemm_async_wgmma(ctx, folded=True)


@register_impl("gemm", _HOPPER, variant="wgmma", priority=20, when=_WHEN,
               doc="wgmma.mma_async then wait_group 0 (C is ready after the call)")
def gemm_wgmma(ctx):
    return _lower(ctx, 0)


def _wait_operand(ctx):
    ops = ctx.operands
    if not ops or static_int(ops[0]) is None or not 0 <= static_int(ops[0]) <= 7:
        return ("Tx.wg.gemm_wait(n, C, ...) takes an int n in 0..7 (the number of committed wgmma groups left "
                "pending) and the accumulators it waits for")
    if len(ops) == 1:
        return ("Tx.wg.gemm_wait(n) must name the accumulators it waits for, e.g. Tx.wg.gemm_wait(0, C): their "
                "registers are fenced so the compiler cannot move reads of C above the wait")
    for i, t in enumerate(ops[1:], 1):
        if getattr(t, "storage", None) != "local":
            where = getattr(t, "storage", None) or "not a tensor"
            return f"operand {i} of gemm_wait must be a register accumulator (local); it is {where}"
    return None


@register_impl("gemm_wait", _HOPPER, variant="wgmma", priority=20, when=[warpgroup_scope, whole_warpgroups, _wait_operand],
               doc="wgmma.wait_group n, then a compiler fence on the named accumulators' registers")
def gemm_wait_wgmma(ctx):
    return ctx.seq([ctx.emit("wgmma_wait_group", static_int(ctx.operands[0]))]
                   + fence_accumulators(ctx, ctx.operands[1:]))

