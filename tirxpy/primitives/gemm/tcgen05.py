"""gemm_async on Blackwell (sm_100a): ``tcgen05.mma`` issued by one thread, C in tensor memory.

``Tx.gemm_async(C, A, B, taddr=..., transpose_a=False, transpose_b=False, accumulate=True,
cta_group=1, mbar=None, cta_mask=None)`` under ``if T.elect_one():`` issues one ``tcgen05.mma`` per
(N-tile, k-step) and, with ``mbar=bar``, ``tcgen05.commit`` so ``bar`` gets one arrival when
all of them (and every earlier tcgen05 op of this thread) have completed; ``cta_mask=`` makes
the commit arrive on ``bar`` in every CTA of the mask (``.multicast::cluster``). The waiting
is the author's: an ``mbarrier`` wait on ``bar`` before C (or A / B's stage) is touched.
``taddr`` is the tensor-memory address of C's buffer (lane 0, column 0 of its layout: the value
``tcgen05.alloc`` wrote to shared memory, e.g. ``taddr=tmem_base[0]``); each instruction's D
address adds the lane / column its tile starts at, read off C's layout.

- ``cta_group=1``: C is the CTA's ``(M, N)`` accumulator, M = 128 (PTX data-path Layout D:
  row i in TMEM lane i) or M = 64 (Layout F: rows 16w..16w+15 in lanes 32w + {0 or 16}..),
  columns on consecutive TMEM columns from any base; A ``(M, K)``; B ``(K, N)``.
- ``cta_group=2`` (a CTA pair, ``T.launch(cluster=(2, ...))``, issued from the even CTA):
  the ``M = 256`` instruction (Layout A); every operand is this CTA's share: C ``(128, N)``,
  A ``(128, K)``, B ``(K, N / 2)``; the peer's shares sit at the same shared / tensor memory
  addresses.

Kinds: ``f16`` (bf16 / f16 inputs, K-step 16), ``tf32`` (float32 inputs, 8), ``f8f6f4`` (fp8
inputs, 32); float32 accumulators. Block scaling: ``sfa=`` / ``sfb=`` (fp8 A and B, M = 128,
cta_group=1) make it ``kind::mxf8f6f4.block_scale.scale_vec::1X``: each is a ``(32, rows / 32)``
uint32 TMEM tile in :func:`~tirxpy.layout.atoms.tmem_warpx4_layout` (what ``tcgen05.cp``
``.32x128b.warpx4`` writes), word ``(t, j)`` holding the four ue8m0 scales of row ``32 j + t``;
k-step ``ks`` (K elements ``32 ks ..``) uses byte ``ks`` (the instruction descriptor's scale ids),
so K <= 128 per call. ``sf_taddr=`` (default ``taddr``) is the TMEM address the scale tiles'
layouts are relative to. A and B are canonical shared-memory layouts (K- or
MN-major, read through descriptors built from the layouts); the instruction descriptor is
:func:`~tirxpy.intrinsics.descriptors.tcgen05_instr_desc` of the call.
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.intrinsics.descriptors import (DescriptorError, mma_kind, tcgen05_block_scaled_instr_desc,
                                           tcgen05_instr_desc)
from tirxpy.ir import ops
from tirxpy.ir.buffer import Buffer, BufferRegion
from tirxpy.ir.expr import AddressOf, BufferLoad, Expr
from tirxpy.layout.atoms import tmem_accumulator

from ..dispatch import fail, register_impl
from . import checks, desc
from .operands import dtype_name, parse, static_int

_K_BYTES = 32  # every dense kind reads 32 bytes of K per instruction
_ATTRS = ("cta_group", "mbar", "cta_mask", "taddr", "sfa", "sfb", "sf_taddr")


@dataclass(frozen=True)
class Plan:
    g: object
    cta_group: int
    m_inst: int
    n_inst: int
    k_inst: int
    kind: str
    c_tiles: tuple
    a_smem: object
    b_smem: object
    idesc: int
    scaled: tuple = ()  # (sfa Tile, sfb Tile) for kind::mxf8f6f4.block_scale


def _cta_group(ctx):
    cg = static_int(ctx.attr("cta_group", 1))
    return cg if cg in (1, 2) else None


def plan(ctx) -> Plan | str:
    cache = ctx.__dict__.setdefault("_tx_gemm_cache", {})
    if "tcgen05" not in cache:
        cache["tcgen05"] = _plan(ctx)
    return cache["tcgen05"]


def _n_inst(N, step):
    return max(n for n in range(step, 257, step) if N % n == 0) if N % step == 0 else None


def _plan(ctx):
    cg = _cta_group(ctx)
    if cg is None:
        return f"cta_group= must be 1 or 2, got {ctx.attr('cta_group')!r}"
    g = parse(ctx, _ATTRS, b_split=cg)
    if isinstance(g, str):
        return g
    C, A, B = g.C, g.A, g.B
    if C.storage != "tmem":
        return f"C ({C.name}) is in {C.storage} memory; tcgen05.mma accumulates in tensor memory (T.alloc_tmem)"
    if A.storage != "shared":
        return f"A ({A.name}) is in {A.storage} memory; this tcgen05 implementation reads A from shared memory"
    if B.storage != "shared":
        return f"B ({B.name}) is in {B.storage} memory; tcgen05.mma reads B from shared memory"
    if dtype_name(C) != "float32":
        return f"C ({C.name}) is {C.dtype}; this tcgen05 implementation accumulates in float32"
    a_dt, b_dt = dtype_name(A), dtype_name(B)
    try:
        kind = mma_kind(a_dt, b_dt)
    except DescriptorError as e:
        return f"tcgen05.mma: {e}"
    if kind not in ("f16", "tf32", "f8f6f4") or A.dtype.bits not in (8, 16, 32) or B.dtype.bits != A.dtype.bits:
        return f"tcgen05 kind::{kind} with {a_dt} x {b_dt} is not implemented here (f16, tf32 and 8-bit f8f6f4 are)"
    k_inst = _K_BYTES * 8 // A.dtype.bits
    if g.K % k_inst:
        return f"K = {g.K} is not a multiple of the tcgen05 kind::{kind} K = {k_inst}"
    if cg == 1:
        if g.M not in (64, 128):
            return f"C has M = {g.M} rows; tcgen05.mma.cta_group::1 covers M = 64 or 128 rows of one CTA"
        m_inst, m_rows = g.M, g.M
    else:
        if g.M != 128:
            return (f"C has M = {g.M} rows; with cta_group=2 each CTA holds 128 rows of the M = 256 instruction "
                    "(M = 128 across a pair is not implemented)")
        m_inst, m_rows = 256, 128
    step = 8 if m_inst == 64 else 16
    n = _n_inst(g.N, step)
    if n is None:
        return f"C has N = {g.N} columns; tcgen05.mma with M = {m_inst} takes N in multiples of {step}"
    fr = checks.fragment_tiles("C", C.layout, (m_rows, g.N), tmem_accumulator(m_rows, n), (m_rows, n), "tcgen05.mma",
                               base_axes=("TCol", "TLane"))
    if fr.reason:
        return fr.reason
    for t in fr.tiles:
        lane = t.bases.get("TLane", 0)
        if lane not in ((0, 16) if m_rows == 64 else (0,)):
            return (f"C: the tile at element {t.origin} starts at TMEM lane {lane}; M = {m_rows} uses lanes "
                    + ("32w + 0 or 32w + 16 of each warp's quarter" if m_rows == 64 else "0..127"))
    a = checks.smem_operand("A", A.layout, A.shape, a_dt, k_inst, "tcgen05.mma", k_dim=g.a_kdim)
    if isinstance(a, str):
        return a
    b = checks.smem_operand("B", B.layout, B.shape, b_dt, k_inst, "tcgen05.mma", k_dim=g.b_kdim)
    if isinstance(b, str):
        return b
    if ctx.attr("sfa") is not None or ctx.attr("sfb") is not None:
        sc = _scales(ctx, g, kind, cg, a_dt)
        if isinstance(sc, str):
            return sc
        return Plan(g, cg, m_inst, n, k_inst, "mxf8f6f4", fr.tiles, a, b, 0, sc)
    idesc = tcgen05_instr_desc("float32", a_dt, b_dt, m=m_inst, n=n, a_major=a.major, b_major=b.major, cta_group=cg)
    return Plan(g, cg, m_inst, n, k_inst, kind, fr.tiles, a, b, idesc)


def _scales(ctx, g, kind, cg, a_dt):
    """Block scaling (``sfa=``, ``sfb=``): the two scale-factor TMEM tiles, or the reason not."""
    from ..context import Tile
    from ..copy.tmem_cp import warpx4_reason

    sfa, sfb = ctx.attr("sfa"), ctx.attr("sfb")
    if sfa is None or sfb is None:
        return "block scaling takes both sfa= and sfb= (TMEM scale-factor tiles of A and B)"
    if kind != "f8f6f4" or g.A.dtype.bits != 8:
        return (f"sfa= / sfb= (block scaling, kind::mxf8f6f4) need 8-bit float A and B; A is {a_dt} "
                "(other block-scaled kinds are not implemented here)")
    if cg != 1:
        return "block-scaled tcgen05.mma with cta_group=2 is not implemented here (cta_group=1 is)"
    if g.M != 128:
        return f"C has M = {g.M} rows; block-scaled tcgen05.mma here takes M = 128"
    if g.N % 32:
        return f"C has N = {g.N} columns; B's scale words cover 32 columns each, so N must be a multiple of 32"
    if g.K > 128:
        return (f"K = {g.K}: a scale word holds the 4 scale factors of K = 128 (scale_vec::1X, one per 32 elements); "
                "issue one call per 128 elements of K")
    tiles = []
    for what, v, rows in (("sfa", sfa, g.M), ("sfb", sfb, g.N)):
        if not isinstance(v, (Buffer, BufferRegion)):
            return f"{what}= takes a TMEM tile of scale words, got {v!r}"
        t = Tile(v, -1)
        if t.storage != "tmem":
            return (f"{what} ({t.name}) is in {t.storage} memory; tcgen05.mma reads scale factors from tensor memory "
                    "(copy them there with Tx.copy_async: tcgen05.cp)")
        r = warpx4_reason(what, t, rows // 32)
        if r:
            return r
        tiles.append(t)
    try:
        tcgen05_block_scaled_instr_desc("mxf8f6f4", a_dt, dtype_name(g.B), m=g.M, n=_n_inst(g.N, 16))
    except DescriptorError as e:
        return f"tcgen05.mma block_scale: {e}"
    return tuple(tiles)


# ---------------------------------------------------------------- predicates
def thread_scope(ctx):
    if ctx.scope.short != "thread":
        return (f"tcgen05.mma is issued by one thread; write Tx.{ctx.op}(...) under `if T.elect_one():` "
                f"(the call is at {ctx.scope} scope)")
    return None


def one_thread(ctx):
    return checks.one_thread_reason(ctx.threads)


def operands_fit(ctx):
    p = plan(ctx)
    return p if isinstance(p, str) else None


def _bar_element(v):
    if isinstance(v, BufferLoad):
        return v
    if isinstance(v, Buffer) and v.shape == (1,):
        return v[0]
    if isinstance(v, BufferRegion) and all(e == 1 for e in v.extents):
        return BufferLoad(v.buffer, v.starts)
    return None


def commit_attrs(ctx):
    ta = ctx.attr("taddr", None)
    if not (isinstance(ta, Expr) and ta.dtype is not None and ta.dtype.is_int):
        return ("taddr= is required: the 32-bit tensor-memory address of C's buffer (what tcgen05.alloc wrote to "
                f"shared memory, e.g. taddr=tmem_base[0]); got {ta!r}")
    bar = ctx.attr("mbar", None)
    if bar is not None:
        el = _bar_element(bar)
        if el is None or el.buffer.storage not in ("shared",) or el.buffer.dtype.bits != 64:
            return f"mbar= takes one uint64 mbarrier in shared memory (e.g. bars[stage]), got {bar!r}"
    mask = ctx.attr("cta_mask", None)
    if mask is not None:
        if bar is None:
            return "cta_mask= multicasts the commit's arrival; it needs mbar="
        if not (isinstance(mask, int) and 0 < mask < 1 << 16) and not (isinstance(mask, Expr) and mask.dtype.is_int):
            return f"cta_mask= is a 16-bit mask of cluster CTA ranks (an int or integer expression), got {mask!r}"
    if _cta_group(ctx) == 2:
        L = ctx.kernel.launch
        if L.cluster is None or L.cluster_size % 2:
            return ("cta_group=2 runs on a CTA pair: launch with a cluster of an even number of CTAs "
                    f"(T.launch(cluster=(2,))); the launch has cluster={L.cluster}")
    return None


# ---------------------------------------------------------------- lowering
def _user(coord, transposed):
    return (coord[1], coord[0]) if transposed else coord


def _tmem_addr(taddr, C, origin):
    """``taddr + (lane << 16) + column`` of C's element ``origin`` (from C's layout and view offset)."""
    at = C.layout.apply(*origin, shape=C.shape)
    lane, col = at.get("TLane", 0), at.get("TCol", 0)
    e = ops.add(ops.cast(taddr, "uint32"), ops.const((lane << 16) + col, "uint32"))
    for ax, v in C.offset.items():
        e = ops.add(e, ops.cast(ops.mul(v, 1 << 16) if ax == "TLane" else v, "uint32"))
    return e


@register_impl("gemm_async", "sm_100a", variant="tcgen05", priority=30,
               when=[thread_scope, one_thread, operands_fit, commit_attrs],
               doc="tcgen05.mma per N-tile and k-step from one thread, then tcgen05.commit to mbar")
def gemm_async_tcgen05(ctx):
    p = plan(ctx)
    if isinstance(p, str):
        fail(p)
    g = p.g
    if p.scaled:
        return ctx.seq(_lower_scaled(ctx, p))
    entry = f"tcgen05_mma_cg{p.cta_group}_{p.kind}_ss"
    a0 = desc.static_desc("tcgen05", p.a_smem)
    b0 = desc.static_desc("tcgen05", p.b_smem)
    idesc = ops.const(p.idesc, "uint32")
    bn = p.n_inst // p.cta_group  # B columns of this CTA per instruction
    out = []
    for ks in range(g.K // p.k_inst):
        k0 = ks * p.k_inst
        enable = g.accumulate if ks == 0 else True
        for j, t in enumerate(p.c_tiles):
            d = _tmem_addr(ctx.attr("taddr"), g.C, t.origin)
            a = desc.desc_at(ctx, a0, g.A.load(_user((0, k0), g.ta)))
            b = desc.desc_at(ctx, b0, g.B.load(_user((j * bn, k0), not g.tb)))
            out.append(ctx.emit(entry, d, a, b, idesc, enable))
    return ctx.seq(out + _commit(ctx, p))


def _lower_scaled(ctx, p):
    """``tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X``: k-step ``ks`` uses byte ``ks`` of each
    scale word (the instruction descriptor's scale-factor ids), the N-tile ``j`` the words from
    column ``j * n / 32`` of sfb."""
    g = p.g
    sfa, sfb = p.scaled
    a0 = desc.static_desc("tcgen05", p.a_smem)
    b0 = desc.static_desc("tcgen05", p.b_smem)
    sf_base = ctx.attr("sf_taddr", ctx.attr("taddr"))
    a_addr = _tmem_addr(sf_base, sfa, (0, 0))
    out = []
    for ks in range(g.K // p.k_inst):
        k0 = ks * p.k_inst
        enable = g.accumulate if ks == 0 else True
        idesc = tcgen05_block_scaled_instr_desc("mxf8f6f4", dtype_name(g.A), dtype_name(g.B), m=p.m_inst, n=p.n_inst,
                                                a_major=p.a_smem.major, b_major=p.b_smem.major, a_scale_id=ks,
                                                b_scale_id=ks)
        for j, t in enumerate(p.c_tiles):
            d = _tmem_addr(ctx.attr("taddr"), g.C, t.origin)
            a = desc.desc_at(ctx, a0, g.A.load(_user((0, k0), g.ta)))
            b = desc.desc_at(ctx, b0, g.B.load(_user((j * p.n_inst, k0), not g.tb)))
            b_addr = _tmem_addr(sf_base, sfb, (0, j * p.n_inst // 32))
            out.append(ctx.emit("tcgen05_mma_cg1_mxf8f6f4_block_scale", d, a, b, ops.const(idesc, "uint32"), a_addr,
                                b_addr, enable))
    return out + _commit(ctx, p)


def _commit(ctx, p):
    out = []
    bar = ctx.attr("mbar", None)
    if bar is not None:
        addr = AddressOf(_bar_element(bar))
        mask = ctx.attr("cta_mask", None)
        if mask is None:
            out.append(ctx.emit(f"tcgen05_commit_cg{p.cta_group}", addr))
        else:
            out.append(ctx.emit(f"tcgen05_commit_cg{p.cta_group}_multicast", addr, ops.const(mask, "uint16")))
    return out


def not_async(ctx):
    if ctx.scope.short == "thread" and ctx.operands and getattr(ctx.operands[0], "storage", None) == "tmem":
        return None
    return "only for C in tensor memory"


@register_impl("gemm", "sm_100a", variant="tcgen05", priority=30, when=[not_async])
def gemm_tcgen05(ctx):
    fail("tcgen05.mma is asynchronous: write Tx.gemm_async(C, A, B, mbar=bar) and wait on bar before reading C")

