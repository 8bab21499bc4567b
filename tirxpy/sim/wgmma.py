"""WGMMA (sm_90a): wgmma.fence, mma_async (SS and RS), commit_group, wait_group.

D (64 x N) lives in the warpgroup's registers as ``tirxpy.layout.atoms.wgmma_accumulator(N)``
(float32; float16 accumulators pack two per register in the same element order); register A
follows ``wgmma_a_fragment``; shared A / B are read through their descriptors
(:mod:`tirxpy.sim.smem_matrix`). Products are exact and summed in float64, then rounded to the
accumulator type. Results are *in flight* until ``wgmma.wait_group`` retires their group:
reading or writing the accumulator (or a register A fragment) before that is reported, as is a warpgroup's
first wgmma with no ``wgmma.fence`` before it, a wgmma reading accumulators or an A fragment written by
ordinary code, or writing accumulators ordinary code read, without a ``wgmma.fence`` in between, and one
accumulating into registers an earlier wgmma in flight reads as A, or accumulates into with another shape
and no fence between."""
from __future__ import annotations

import numpy as np

from tirxpy.layout.atoms import wgmma_a_fragment, wgmma_accumulator

from .asyncops import agent, issue_vc
from .collective import collective, warpgroup_members
from .machine import INFLIGHT_WGMMA, INFLIGHT_WGMMA_A
from .races import ASYNC, join
from .registry import register_family, register_model
from .smem_matrix import operand_addresses, read_operand
from .values import from_bits

_IN = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3", "e5m2": "float8_e5m2"}
_PLACE: dict = {}


def placement(layout, shape):
    """``(wid_in_wg, laneid, m)`` arrays for each element of the logical tile, row-major."""
    key = (repr(layout), shape)
    hit = _PLACE.get(key)
    if hit is None:
        names, t = layout.owner_table()
        get = lambda a: t[:, 0, names.index(a)] if a in names else np.zeros(t.shape[0], np.int64)  # noqa: E731
        hit = (get("wid_in_wg").reshape(shape), get("laneid").reshape(shape), get("m").reshape(shape))
        _PLACE[key] = hit
    return hit


def _trunc_tf32(x):
    return (np.ascontiguousarray(np.asarray(x, np.float32)).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _mma(parts, ctx0, n, k, td, ta, tb, src):
    m = ctx0.machine
    cta = ctx0.cta
    wids = sorted(parts)
    for c in parts.values():
        if not c.w.wg_fences:     # reported once, then as if fenced (no second report of it)
            m.report("missing_wgmma_fence", "the warpgroup's first wgmma has no wgmma.fence before it", ctx0.span,
                     c.w.describe(), ["issue T.ptx.wgmma_fence() before a warpgroup's first wgmma (PTX requires it)"])
            c.w.wgmma_fenced()
    da, db = _IN[ta], _IN[tb]
    # ---- operands
    if src == "ss":
        desc_a = int(np.asarray(ctx0.arg("a_desc")).ravel()[0])
        maj_a = "MN" if ctx0.has("trans_a") and ctx0.imm("trans_a") == 1 else "K"
        addr_a = operand_addresses(desc_a, 64, k, da, maj_a)
        A = read_operand(cta.smem, addr_a, da).astype(np.float64)
    else:
        addr_a = None
        wl, ll, ml = placement(wgmma_a_fragment(da), (64, k))
        per = {}
        for wid, c in parts.items():
            aref = c.arg("a")
            regs = aref.read(c.mask, by_wgmma=True)  # (32, 4) uint32
            fa = c.w.dirty.get(aref.root)
            if fa is not None and fa[np.clip(aref.byte_index()[0], 0, fa.size - 1)].any():
                m.report("missing_wgmma_fence", f"wgmma reads A fragment registers of {aref.root.name} written by "
                         "ordinary code without a wgmma.fence in between", ctx0.span, c.w.describe(),
                         ["issue T.ptx.wgmma_fence() after writing the A fragment and before the wgmma"])
            el = np.ascontiguousarray(regs.astype(np.uint32)).view(np.uint16 if k == 16 else np.uint8)
            per[wid % 4] = from_bits(el, da)
        A = np.zeros((64, k), np.float64)
        for q, vals in per.items():
            sel = wl == q
            A[sel] = vals[ll[sel], ml[sel]]
    desc_b = int(np.asarray(ctx0.arg("b_desc")).ravel()[0])
    maj_b = "MN" if ctx0.has("trans_b") and ctx0.imm("trans_b") == 1 else "K"
    addr_b = operand_addresses(desc_b, n, k, db, maj_b)
    B = read_operand(cta.smem, addr_b, db).astype(np.float64)
    if ta == "tf32":
        A, B = _trunc_tf32(A).astype(np.float64), _trunc_tf32(B).astype(np.float64)
    A *= ctx0.imm("scale_a")
    B *= ctx0.imm("scale_b")
    # ---- race bookkeeping: the tensor cores read shared memory as the async proxy
    a_id = agent(m, ("wgmma", cta.rank, wids[0] // 4), f"tensor cores of warpgroup {wids[0] // 4} of cta {cta.cta_id}")
    vc = None
    for c in parts.values():
        vc = c.w.vc.copy() if vc is None else join(vc, c.w.vc)
    w0 = ctx0.w
    w0.vc = join(w0.vc, vc)
    op_vc = issue_vc(w0, a_id)
    nb_a = np.dtype(np.uint8).itemsize
    for addrs, dt in ((addr_a, da), (addr_b, db)):
        if addrs is not None:
            from .values import nbytes

            idx = addrs.ravel()[:, None] + np.arange(nbytes(dt))
            m.check_access(cta, idx.ravel(), a_id, op_vc, False, ASYNC, ctx0.call, w0)
    del nb_a
    # ---- accumulator
    wl, ll, ml = placement(wgmma_accumulator(n), (64, n))
    f32 = td == "f32"
    D = np.zeros((64, n), np.float64)
    dregs = {}
    for wid, c in parts.items():
        ref = c.arg("d")
        dregs[wid] = ref
        raw = ref.read(c.mask, check=False)
        vals = raw.astype(np.float32) if f32 else \
            np.ascontiguousarray(raw.astype(np.uint32)).view(np.float16).astype(np.float32)
        sel = wl == wid % 4
        D[sel] = vals[ll[sel], ml[sel]]
        f = c.w.dirty.get(ref.root)
        scale_d = bool(np.asarray(c.arg("scale_d")).ravel()[int(np.argmax(c.mask))])
        if scale_d and ref.root not in c.w.rfull:
            idx = np.minimum(np.maximum(ref.byte_index(), 0), max(ref.root.bytes(), 1) - 1)
            c.w.check_init(ref.root, idx, c.mask, ctx0.call, "wgmma with scale-d 1 (accumulate) reads")
        if scale_d and f is not None and f[ref.byte_index().ravel() % max(f.size, 1)].any():
            m.report("missing_wgmma_fence", f"wgmma reads accumulator registers of {ref.root.name} written by "
                     "ordinary code without a wgmma.fence in between", ctx0.span, c.w.describe(),
                     ["issue T.ptx.wgmma_fence() after writing the accumulator (e.g. zero-fill) and before the wgmma"])
        _check_shared_accumulator(c, ref, (n, k), ctx0)
        r = c.w.read_since_fence.get(ref.root)
        if r is not None and r[ref.byte_index().ravel() % max(r.size, 1)].any():
            m.report("missing_wgmma_fence", f"wgmma writes accumulator registers of {ref.root.name} that ordinary code "
                     "read since the last wgmma.fence (PTX orders a thread's register accesses before a wgmma touching "
                     "the same registers only through a wgmma.fence)", ctx0.span, c.w.describe(),
                     ["issue T.ptx.wgmma_fence() after reading the accumulator (e.g. the epilogue) and before the "
                      "next wgmma into it"])
        c.w.wg_acc_roots.add(ref.root)
    scale_d = bool(np.asarray(ctx0.arg("scale_d")).ravel()[int(np.argmax(ctx0.mask))])
    out = A @ B.T + (D if scale_d else 0.0)
    out = out.astype(np.float32) if f32 else out.astype(np.float16).astype(np.float32)
    for wid, c in parts.items():
        ref = dregs[wid]
        sel = wl == wid % 4
        cur = ref.read(c.mask, check=False).astype(np.float32 if f32 else np.uint32)
        if f32:
            cur = cur.copy()
            cur[ll[sel], ml[sel]] = out[sel]
            ref.write(c.mask, cur)
        else:
            h = np.ascontiguousarray(cur).view(np.float16).copy()
            h[ll[sel], ml[sel]] = out[sel].astype(np.float16)
            ref.write(c.mask, h.view(np.uint32))
        op = {"root": ref.root, "bytes": ref.byte_index()[0], "vc": op_vc, "shape": (n, k),
              "fence": c.w.wg_fences}
        ops = [op]
        if src == "rs":     # PTX: the A fragment registers too are not to be accessed before the wait
            aref = c.arg("a")
            ops.append({"root": aref.root, "bytes": aref.byte_index()[0], "vc": op_vc, "bit": INFLIGHT_WGMMA_A})
        c.w.wg_open = getattr(c.w, "wg_open", []) + ops
        for o in ops:
            c.w.mark_inflight(o["root"], o["bytes"], o.get("bit", INFLIGHT_WGMMA))
    return None


def _check_shared_accumulator(c, ref, shape, ctx0):
    """PTX (wgmma.fence): a wgmma may take as its accumulator registers that an earlier wgmma still in flight uses
    as its accumulator only when both have the same shape (``m64nNkK``) or a ``wgmma.fence`` lies between them, and
    never registers an earlier wgmma in flight reads as its A fragment."""
    w = c.w
    if ref.root not in w.inflight:
        return
    mine = ref.byte_index()[0]
    for op in [o for g in getattr(w, "wg_groups", []) for o in g] + getattr(w, "wg_open", []):
        if op["root"] is not ref.root or not np.intersect1d(op["bytes"], mine).size:
            continue
        if op.get("bit") == INFLIGHT_WGMMA_A:
            c.machine.report("wgmma_accumulator_before_wait", f"wgmma writes accumulator registers of "
                             f"{ref.root.name} that an earlier wgmma still in flight reads as its A fragment",
                             ctx0.span, w.describe(), ["wait for the earlier wgmma (wgmma.wait_group) before "
                                                       "accumulating into its A fragment's registers"])
            return
        if op.get("shape") != shape and op.get("fence") == w.wg_fences:
            (n0, k0), (n1, k1) = op["shape"], shape
            c.machine.report("missing_wgmma_fence", f"wgmma m64n{n1}k{k1} accumulates into registers of "
                             f"{ref.root.name} that a wgmma m64n{n0}k{k0} still in flight accumulates into, with no "
                             "wgmma.fence between them (PTX orders accumulator accesses only across wgmmas of one "
                             "shape)", ctx0.span, w.describe(),
                             ["issue T.ptx.wgmma_fence() between the two wgmmas, or give them one shape"])
            return


def _mma_model(ctx):
    n, k, td, ta, tb, src = ctx.match.groups()
    n, k = int(n), int(k)
    if not ctx.mask.all():
        ctx.report("wgmma_misuse", f"{ctx.call.name} issued by {int(ctx.mask.sum())} of 32 lanes; wgmma is "
                   ".sync.aligned: every thread of the warpgroup must issue it")
    yield from collective(ctx, "wgmma", warpgroup_members(ctx.w),
                          lambda parts: _mma(parts, ctx, n, k, td, ta, tb, src), ctx.call.name)


register_family(r"wgmma_m64n(\d+)k(\d+)_(f32|f16)_(f16|bf16|tf32|e4m3|e5m2)_(f16|bf16|tf32|e4m3|e5m2)_(ss|rs)",
                _mma_model)


@register_model("wgmma_fence")
def _fence(ctx):
    ctx.w.wgmma_fenced()


@register_model("wgmma_commit_group")
def _commit(ctx):
    w = ctx.w
    groups = getattr(w, "wg_groups", [])
    groups.append(getattr(w, "wg_open", []))
    w.wg_groups, w.wg_open = groups, []


@register_model("wgmma_wait_group")
def _wait(ctx):
    n = ctx.imm("n")
    w = ctx.w
    groups = getattr(w, "wg_groups", [])
    keep = groups[len(groups) - n:] if n else []
    done = groups[:len(groups) - len(keep)]
    for g in done:
        for op in g:
            w.acquire(op["vc"])
    w.wg_groups = keep
    w.retire_inflight(INFLIGHT_WGMMA | INFLIGHT_WGMMA_A)
    for g in keep + [getattr(w, "wg_open", [])]:
        for op in g:
            w.mark_inflight(op["root"], op["bytes"], op.get("bit", INFLIGHT_WGMMA))


# A compiler fence on accumulator registers (no instruction): nothing happens at run time.
register_family(r"wgmma_fence_operand_\w+_x\d+", lambda ctx: None)
