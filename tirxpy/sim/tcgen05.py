"""tcgen05 (sm_100a): TMEM alloc / dealloc column accounting, ld / st with the register layouts
of ``tirxpy.layout.atoms.tmem_ld_layout`` (a warp reaches only its quarter of the 128 lanes),
mma (kinds f16, tf32, f8f6f4 with fp8, i8; A and B through tcgen05 shared-memory descriptors,
D in TMEM as ``tmem_accumulator``), commit (arrives on an mbarrier once the thread's earlier
mma ops completed) and the wait / fence instructions.

Block scaling: ``kind::mxf8f6f4.block_scale.scale_vec::1X`` (cta_group::1, M = 128) multiplies
every 32-element K chunk of A row ``m`` by ``2^(e - 127)`` (ue8m0 byte ``e``, 255 = NaN) read
from TMEM lane ``m``, column ``sfa + m / 32``, byte = the descriptor's A scale id, and of B column
``n`` by the byte at column ``sfb + n / 32`` of lane ``32 q + n % 32`` in the datapath quarter
``q`` computing the row (PTX ISA 9.7.16.10.7 Block Scaling; the layout ``tcgen05.cp
.32x128b.warpx4`` writes, :func:`~tirxpy.layout.atoms.tmem_warpx4_layout`). ``tcgen05.cp
.32x128b.warpx4`` reads 32 rows x 16 bytes through a no-swizzle descriptor and writes them to
lanes ``t + 32 q`` of all four quarters; it runs in issue order with the thread's mma s (one
tensor-core pipe) and is tracked by the next commit.

Checks: TMEM accesses outside the allocated columns or the warp's lane quarter, a ``tcgen05.st``, an mma or a
``tcgen05.cp`` (the last two checked when they run, with what the issuing thread knew at the issue) writing cells
another agent wrote or read with ``tcgen05.ld`` with nothing ordering the two (``race`` /
``tmem_overwrite_before_read``), a ``tcgen05.dealloc`` while an mma on its columns is pending or not ordered after
their last use (``tmem_dealloc_in_use``), a TMEM access or dealloc ordered after another warp's ``tcgen05.ld`` /
``st`` of the cells (or another thread's mma / cp) only by a thread sync that warp entered with no
``tcgen05.fence::before_thread_sync`` after the access, or that this warp left with no
``tcgen05.fence::after_thread_sync`` before it (``missing_tcgen05_fence``; a commit's arrive carries the
before-fence), reading TMEM written by an mma before a commit -> mbarrier wait ordered it
(``tmem_read_before_commit``, also for an mma reading scale factors another thread's ``tcgen05.cp`` wrote), shared
memory read by ``tcgen05.cp`` while TMA writes it (``race``), allocations never freed. Other ``tcgen05.cp`` shapes,
``shift``, other block-scaled kinds, ``.ts`` A operands are reported as unsupported by name. ``cta_group::2`` mma
(M = 256) reads A / B from the issuing even CTA and its peer and writes D to both CTAs' TMEM; its alloc / dealloc act
per CTA."""
from __future__ import annotations

import re

import numpy as np

from tirxpy.layout.atoms import tmem_accumulator, tmem_ld_layout, tmem_ld_tmem_layout

from . import mbarrier as MB
from .asyncops import agent, issue_vc
from .interp import Block
from .machine import INFLIGHT_TMEM_LD
from .memory import clamp
from .races import ASYNC, fit, join
from .registry import register_family, register_model
from .scheduler import Event
from .smem_matrix import operand_addresses, read_operand

WARP = 32


def _shadow(cta):
    if not hasattr(cta, "tmem_agent"):
        cta.tmem_agent = np.full((128, 512), -1, np.int32)
        cta.tmem_clock = np.zeros((128, 512), np.int64)
        cta.tmem_reader = np.full((128, 512), -1, np.int32)  # last tcgen05.ld: warp agent and its clock
        cta.tmem_rclock = np.zeros((128, 512), np.int64)
        cta.tmem_fclock = np.zeros((128, 512), np.int64)   # writer's / reader's fence::before_thread_sync clock
        cta.tmem_rfclock = np.zeros((128, 512), np.int64)
    return cta.tmem_agent, cta.tmem_clock


UNFENCED = np.iinfo(np.int64).max


def _fence_vc(w):
    """What warp ``w`` knew at its last ``tcgen05.fence::after_thread_sync``: a TMEM access ordered
    after another thread's only through a thread sync (mbarrier wait, barrier) needs that fence
    between the sync and the access (PTX ISA 9.7.16.6.4, the tcgen05 memory-consistency model)."""
    return getattr(w, "tc_fence_vc", np.zeros(0, np.int64))


def _ordered(w, agents, clocks, me=None, vc=None, fv=None, fclocks=None):
    """Per cell: 0 = ordered (or no other agent), 1 = not ordered at all, 2 = ordered by a thread sync but with no
    ``tcgen05.fence::after_thread_sync`` after it, 3 = ordered by a thread sync the other warp entered with no
    ``tcgen05.fence::before_thread_sync`` between its tcgen05.ld / st and the sync. An access of warp ``w`` now, or
    by agent ``me`` at clocks ``vc`` with fence clocks ``fv`` (an mma when it runs, with what its issuing warp knew at
    the issue). ``fclocks``: per cell, the other agent's clock at its first ``fence::before_thread_sync`` after the
    access (``UNFENCED`` if none yet; an mma's / cp's own clock: its commit's arrive carries that fence); the
    access is released to ``w`` only once ``w`` knows that clock, through a sync and then an after-fence
    (PTX ISA 9.7.16.6.4)."""
    me, vc, fv = (w.agent, w.vc, _fence_vc(w)) if me is None else (me, vc, fv)
    fclocks = clocks if fclocks is None else fclocks
    other = (agents >= 0) & (agents != me)
    n = int(max(agents.max(initial=-1), 0)) + 1
    vc, fv = fit(vc, n), fit(fv, n)
    a = np.maximum(agents, 0)
    out = np.zeros(agents.shape, np.int8)
    out[other & (fclocks > fv[a])] = 2
    out[other & (fclocks > vc[a])] = 3
    out[other & (clocks > vc[a])] = 1
    return out


_FENCE_NOTE = ("after the mbarrier wait that orders it, issue T.ptx.tcgen05_fence_after_thread_sync() before the "
               "tcgen05 instruction")
_BEFORE_NOTE = ("after the tcgen05.ld / st (and its tcgen05.wait::ld / ::st), issue "
                "T.ptx.tcgen05_fence_before_thread_sync() before the barrier or mbarrier arrive that orders it")


def _report_fence(m, order, agents, what, span, who):
    """Report ``missing_tcgen05_fence`` for cells :func:`_ordered` marks 3 (no before-fence on the other side) or
    2 (no after-fence on this side); True if it did."""
    if (order == 3).any():
        m.report("missing_tcgen05_fence", f"{what}, ordered after {m.agent_name(int(agents[order == 3][0]))}'s "
                 "tcgen05.ld / st of them by a thread sync that warp entered with no "
                 "tcgen05.fence::before_thread_sync after those accesses", span, who, [_BEFORE_NOTE])
        return True
    if (order == 2).any():
        m.report("missing_tcgen05_fence", f"{what}, ordered after {m.agent_name(int(agents[order == 2][0]))}'s use "
                 "of them by a thread sync with no tcgen05.fence::after_thread_sync after it", span, who,
                 [_FENCE_NOTE])
        return True
    return False


def _check_tmem_init(m, cta, lanes, cols, what, span, who, note="write it first (tcgen05.st, tcgen05.cp, or "
                     "an mma with accumulate off)"):
    """Report TMEM cells read before anything wrote them since their allocation."""
    ini = cta.tmem.init[lanes, cols]
    if not ini.all():
        bl, bc = lanes[~ini], cols[~ini]
        m.report("uninitialized_read", f"{what} tensor memory never written since tcgen05.alloc (lanes "
                 f"{int(bl.min())}..{int(bl.max())}, columns {int(bc.min())}..{int(bc.max())} of {cta.describe()}): "
                 "its value is undefined", span, who, [note],
                 key=("uninitialized_read", "tmem", getattr(span, "line", None)))


def _check_overwrite(m, cta, w, L, C, what, span, who, me=None, vc=None, fv=None):
    """A write of TMEM cells ``(L, C)`` (a ``tcgen05.st`` by warp ``w`` now, or an mma / cp when it runs: agent ``me``
    at clocks ``vc``, fence clocks ``fv``) must be ordered after the last write (another warp's st, an mma, a cp)
    and the last ``tcgen05.ld`` of each cell by others: ``race`` / ``tmem_overwrite_before_read`` when not at all,
    ``missing_tcgen05_fence`` when by a thread sync with no after-fence after it, or one the other warp entered
    with no before-fence after its access."""
    ag, cl = _shadow(cta)
    for agents, clocks, fcl, reader in ((ag[L, C], cl[L, C], cta.tmem_fclock[L, C], False),
                                        (cta.tmem_reader[L, C], cta.tmem_rclock[L, C], cta.tmem_rfclock[L, C], True)):
        order = _ordered(w, agents, clocks, me, vc, fv, fcl)
        if (order == 1).any():
            other = m.agent_name(int(agents[order == 1][0]))
            if reader:
                m.report("tmem_overwrite_before_read", f"{what} overwrites TMEM that {other} reads with tcgen05.ld, "
                         "with no mbarrier wait ordering that read first", span, who,
                         ["have the reader arrive on an mbarrier (after tcgen05.fence::before_thread_sync) once its "
                          "tcgen05.ld are done, and wait on it before the write"])
            else:
                m.report("race", f"{what} writes TMEM that {other} also writes, with nothing ordering the two "
                         "writes (lanes {}..{}, columns {}..{} of {})".format(
                             int(L.min()), int(L.max()), int(C.min()), int(C.max()), cta.describe()), span, who,
                         ["order them: tcgen05.commit the mma on an mbarrier and wait on it (then "
                          "tcgen05.fence::after_thread_sync) before the st, or arrive on an mbarrier after "
                          "tcgen05.wait::st and wait on it before the mma"])
        else:
            _report_fence(m, order, agents, f"{what} writes TMEM cells", span, who)


def _check_cols(ctx, lanes, cols, what):
    ok = ctx.cta.tmem.allocated(cols) & (lanes >= 0) & (lanes < 128)
    if not ok.all():
        ctx.report("tmem_oob", f"{what} touches TMEM columns {int(cols[~ok].min())}..{int(cols[~ok].max())} outside the "
                   f"allocated ones {sorted(ctx.cta.tmem.allocs.items())} (start, ncols)")
    return ok


@register_model("tcgen05_alloc_cg1")
def _alloc(ctx):
    n = int(ctx.arg("ncols")[ctx.lanes[0]])
    dst = int(ctx.arg("dst")[ctx.lanes[0]])
    if n < 32 or n > 512 or n & (n - 1):
        ctx.report("tmem_misuse", f"tcgen05.alloc of {n} columns: must be a power of two in [32, 512]")
        return
    col = ctx.cta.tmem.alloc(n)
    if col is None:
        yield Block(lambda: ctx.cta.tmem.alloc(n) is not None and bool(ctx.cta.tmem.allocs.pop(
            max(ctx.cta.tmem.allocs), None) or True), f"{n} free TMEM columns "
            f"(allocated: {sorted(ctx.cta.tmem.allocs.items())})", ctx.span)
        col = ctx.cta.tmem.alloc(n)
    ctx.w.smem_access([dst], 4, True, 0, ctx.call)
    ctx.cta.smem.write(np.array([dst]), np.array([col], np.uint32), "uint32")


@register_model("tcgen05_dealloc_cg1")
def _dealloc(ctx):
    addr = int(ctx.arg("taddr")[ctx.lanes[0]])
    n = int(ctx.arg("ncols")[ctx.lanes[0]])
    col = addr & 0xFFFF
    have = ctx.cta.tmem.allocs.get(col)
    if have != n:
        ctx.report("tmem_misuse", f"tcgen05.dealloc of {n} columns at column {col}, but the allocation there is "
                   f"{have} columns" if have else f"tcgen05.dealloc at column {col}, which is not allocated")
        return
    _check_dealloc(ctx, col, n)
    del ctx.cta.tmem.allocs[col]


def _check_dealloc(ctx, col, n):
    """``tcgen05.dealloc`` of columns ``col .. col + n``: every tcgen05 operation on them must be complete and
    ordered before it (``tmem_dealloc_in_use``): no mma / cp of any warp still pending on them, every mma write
    ordered by its commit -> mbarrier wait, every other warp's ``tcgen05.ld`` / ``st`` by a barrier the other warp
    entered after a ``tcgen05.fence::before_thread_sync`` and this warp left before a
    ``tcgen05.fence::after_thread_sync`` (``missing_tcgen05_fence`` otherwise)."""
    m, cta, w = ctx.machine, ctx.cta, ctx.w
    note = ["before tcgen05.dealloc, wait for the mma's commit on its mbarrier and have every warp that reads or "
            "writes the columns finish (tcgen05.wait::ld / ::st, tcgen05.fence::before_thread_sync) and pass a "
            "barrier (T.ptx.syncthreads()) with the deallocating warp"]
    for c in m.cluster:
        for x in c.warps:
            for op in getattr(x, "tc_pending", ()):
                cols = op.get("cols")
                if not op["done"] and cols is not None and cta in op["ctas"] and cols[0] < col + n and cols[1] >= col:
                    ctx.report("tmem_dealloc_in_use", f"tcgen05.dealloc of TMEM columns {col}..{col + n - 1} while "
                               f"an mma issued by {x.describe()} on them has not run", note)
                    return
    ag, cl = _shadow(cta)
    cs = slice(col, col + n)
    for agents, clocks, fcl in ((ag[:, cs], cl[:, cs], cta.tmem_fclock[:, cs]),
                                (cta.tmem_reader[:, cs], cta.tmem_rclock[:, cs], cta.tmem_rfclock[:, cs])):
        order = _ordered(w, agents, clocks, fclocks=fcl)
        if (order == 1).any():
            ctx.report("tmem_dealloc_in_use", f"tcgen05.dealloc of TMEM columns {col}..{col + n - 1} is not ordered "
                       f"after their use by {m.agent_name(int(agents[order == 1][0]))}", note)
            return
        if _report_fence(m, order, agents, f"tcgen05.dealloc frees TMEM columns {col}..{col + n - 1}", ctx.span,
                         ctx.threads()):
            break
    for arr in (ag, cta.tmem_reader):
        arr[:, col:col + n] = -1


register_model("tcgen05_relinquish_alloc_permit_cg1", lambda ctx: None)
register_model("tcgen05_wait_st", lambda ctx: None)


@register_model("tcgen05_fence_before_thread_sync")
def _fence_before(ctx):
    """The warp's earlier tcgen05.ld / st are released to the warp's next thread sync: each TMEM cell it last read
    or wrote with no fence since gets the warp's clock now (what a thread that syncs with it later must know)."""
    w, cta = ctx.w, ctx.cta
    ag, _ = _shadow(cta)
    now = w.vc[w.agent]
    for agents, fcl in ((ag, cta.tmem_fclock), (cta.tmem_reader, cta.tmem_rfclock)):
        fcl[(agents == w.agent) & (fcl == UNFENCED)] = now


@register_model("tcgen05_wait_ld")
def _wait_ld(ctx):
    """The warp's earlier tcgen05.ld completed: their destination registers may be used."""
    ctx.w.retire_inflight(INFLIGHT_TMEM_LD)


@register_model("tcgen05_fence_after_thread_sync")
def _fence_after(ctx):
    ctx.w.tc_fence_vc = ctx.w.vc.copy()


def _ldst_place(ctx, shape, rep):
    addr = int(ctx.arg("taddr")[ctx.lanes[0]])
    lane, col = addr >> 16, addr & 0xFFFF
    q = ctx.w.wid % 4
    base = lane - 32 * q
    lanes16 = shape != "32x32b"
    if base not in ((0, 16) if lanes16 else (0,)):
        ctx.report("tmem_lane_access", f"warp {ctx.w.wid} (quarter {q} of its warpgroup) addresses TMEM lane {lane}; "
                   f"it may reach lanes {32 * q}..{32 * q + 31} only" + (" at offset 0 or 16" if lanes16 else ""))
        return None
    R = tmem_ld_layout(shape, rep)
    M = tmem_ld_tmem_layout(shape, rep, lane_base=base, col=col)
    rn, rt = R.owner_table()
    mn, mt = M.owner_table()
    sel = rt[:, 0, rn.index("wid_in_wg")] == q
    return (rt[sel, 0, rn.index("laneid")], rt[sel, 0, rn.index("m")], mt[sel, 0, mn.index("TLane")],
            mt[sel, 0, mn.index("TCol")])


def _ldst(ctx):
    store, shape, rep, pack = ctx.match.group(1) == "st", ctx.match.group(2), int(ctx.match.group(3)), ctx.match.group(4)
    if pack or shape == "16x32bx2":
        ctx.report("unsupported", f"intrinsic {ctx.call.name} has no simulator model", key=("unsupported", ctx.call.name))
        return
    p = _ldst_place(ctx, shape, rep)
    if p is None:
        return
    tl, tm_, L, C = p
    ok = _check_cols(ctx, L, C, ctx.call.name)
    ag, cl = _shadow(ctx.cta)
    cells = ctx.cta.tmem.cells
    if store:
        _check_overwrite(ctx.machine, ctx.cta, ctx.w, L[ok], C[ok], ctx.call.name, ctx.span, ctx.threads())
        vals = ctx.arg("v").read(ctx.mask).astype(np.uint32)
        cells[L[ok], C[ok]] = vals[tl[ok], tm_[ok]]
        ctx.cta.tmem.init[L[ok], C[ok]] = True
        ag[L[ok], C[ok]] = ctx.w.agent
        cl[L[ok], C[ok]] = ctx.w.vc[ctx.w.agent]
        ctx.cta.tmem_fclock[L[ok], C[ok]] = UNFENCED
        return
    a = ag[L, C]
    order = _ordered(ctx.w, a, cl[L, C], fclocks=ctx.cta.tmem_fclock[L, C])
    bad = order == 1
    if bad.any():
        ctx.report("tmem_read_before_commit", f"{ctx.call.name} reads TMEM written by "
                   f"{ctx.machine.agent_name(int(a[bad][0]))} before a tcgen05.commit -> mbarrier wait ordered it",
                   ["commit the mma with tcgen05.commit on an mbarrier and wait on it before tcgen05.ld"])
    else:
        _report_fence(ctx.machine, order, a, f"{ctx.call.name} reads TMEM cells", ctx.span, ctx.threads())
    _check_tmem_init(ctx.machine, ctx.cta, L[ok], C[ok], f"{ctx.call.name} reads", ctx.span, ctx.threads())
    sh_r, sh_rc = ctx.cta.tmem_reader, ctx.cta.tmem_rclock
    sh_r[L[ok], C[ok]] = ctx.w.agent
    sh_rc[L[ok], C[ok]] = ctx.w.vc[ctx.w.agent]
    ctx.cta.tmem_rfclock[L[ok], C[ok]] = UNFENCED
    out = np.zeros((WARP, tmem_ld_layout(shape, rep).size() // 128), np.uint32)
    out[tl, tm_] = np.where(ok, cells[clamp(L, 0, 127), clamp(C, 0, 511)], 0)
    ref = ctx.arg("d")
    ref.write(ctx.mask, out, ordinary=True)
    ctx.w.mark_inflight(ref.root, ref.byte_index()[ctx.lanes[0]], INFLIGHT_TMEM_LD)   # until tcgen05.wait::ld


register_family(r"tcgen05_(ld|st)_(32x32b|16x64b|16x128b|16x256b|16x32bx2)_x(\d+)(_pack16|_unpack16)?", _ldst)

_D = {0: "float16", 1: "float32", 2: "int32"}
_AB = {"f16": {0: "float16", 1: "bfloat16"}, "tf32": {2: "float32"}, "f8f6f4": {0: "float8_e4m3", 1: "float8_e5m2"},
       "i8": {0: "uint8", 1: "int8"}}


def _mma(ctx):
    cg, kind = int(ctx.match.group(1)), ctx.match.group(2)
    idesc = int(ctx.arg("idesc")[ctx.lanes[0]])
    scaled = kind == "mxf8f6f4"
    tk = "f8f6f4" if scaled else kind
    da, db = _AB[tk].get((idesc >> 7) & 7), _AB[tk].get((idesc >> 10) & 7)
    dd = "float32" if scaled else _D.get((idesc >> 4) & 3)
    if da is None or db is None or dd is None:
        ctx.report("unsupported", f"{ctx.call.name}: instruction descriptor {idesc:#x} names operand types the "
                   "simulator does not model")
        return
    n, mm = ((idesc >> 17) & 0x3F) << 3, ((idesc >> 24) & 0x1F) << 4
    if scaled:
        mm = ((idesc >> 27) & 3) << 7
        if cg != 1 or mm != 128:
            ctx.report("unsupported", f"{ctx.call.name}: block scaling is modelled for cta_group::1, M = 128 "
                       f"(got cta_group::{cg}, M = {mm})")
            return
        if not (idesc >> 23) & 1:
            ctx.report("tcgen05_misuse", f"{ctx.call.name}: instruction descriptor {idesc:#x} selects UE4M3 scale "
                       "factors; kind::mxf8f6f4 takes UE8M0 only (bit 23 = 1)")
            return
    from .values import nbytes

    k = 32 // nbytes(da)
    maj_a = "MN" if (idesc >> 15) & 1 else "K"
    maj_b = "MN" if (idesc >> 16) & 1 else "K"
    m, w, cta = ctx.machine, ctx.w, ctx.cta
    # cta_group::2: the issuing (even) CTA and its peer each hold 128 rows of A, N / 2 rows of B
    # and 128 rows of D at the same shared / tensor memory addresses (PTX ISA 9.7.16.10.5, Layout A)
    if cg == 2:
        if cta.rank % 2 or cta.rank + 1 >= len(m.cluster):
            ctx.report("tcgen05_misuse", f"{ctx.call.name} is issued by cluster rank {cta.rank}; cta_group::2 is "
                       "issued by the even CTA of a pair (launch with cluster=(2,) and issue from rank 0)")
            return
        if mm != 256:
            ctx.report("unsupported", f"{ctx.call.name}: cta_group::2 with M = {mm} is not modelled (M = 256 is)")
            return
        pair, rows, brows = [cta, m.cluster[cta.rank + 1]], 128, n // 2
    else:
        pair, rows, brows = [cta], mm, n
    a_id = agent(m, ("tcgen05", cta.rank, w.wid), f"tensor cores (tcgen05) issued by {w.describe()}")
    for l in ctx.lanes[:1]:
        vc = issue_vc(w, a_id)
        addr_a = operand_addresses(int(ctx.arg("a_desc")[l]), rows, k, da, maj_a, "tcgen05")
        addr_b = operand_addresses(int(ctx.arg("b_desc")[l]), brows, k, db, maj_b, "tcgen05")
        d = int(ctx.arg("d")[l])
        en = bool(ctx.arg("enable_d")[l])
        neg_a, neg_b = (idesc >> 13) & 1, (idesc >> 14) & 1
        try:
            lay = tmem_accumulator(rows, n, lane_base=d >> 16, col=d & 0xFFFF)
        except Exception as e:  # noqa: BLE001 - LayoutError names the bad shape
            ctx.report("tcgen05_misuse", f"{ctx.call.name}: {e}")
            return
        names, t = lay.owner_table()
        L = t[:, 0, names.index("TLane")].reshape(rows, n)
        C = t[:, 0, names.index("TCol")].reshape(rows, n)
        for c in pair:
            ok = c.tmem.allocated(C.ravel())
            if not ok.all():
                ctx.report("tmem_oob", f"{ctx.call.name} writes TMEM columns {int(C.min())}..{int(C.max())} of "
                           f"{c.describe()} outside its allocated ones {sorted(c.tmem.allocs.items())} (start, ncols)")
                return
        sf = _scale_cells(ctx, cta, idesc, n) if scaled else None
        if scaled and sf is None:
            return
        op = {"done": False, "vc": vc, "ctas": pair, "cols": (int(C.min()), int(C.max()))}
        call = ctx.call
        fv = _fence_vc(w).copy()
        who = ctx.threads()

        def fire():
            for c in pair:     # the D cells, when the mma runs: prior writes and reads must be ordered before its issue
                _check_overwrite(m, c, w, L.ravel(), C.ravel(), call.name, call.span, who, a_id, vc, fv)
            As, Bs = [], []
            for c in pair:
                for addrs, dt in ((addr_a, da), (addr_b, db)):
                    idx = addrs.ravel()[:, None] + np.arange(nbytes(dt))
                    m.check_access(c, idx.ravel(), a_id, vc, False, ASYNC, call, w)
                As.append(read_operand(c.smem, addr_a, da).astype(np.float64))
                Bs.append(read_operand(c.smem, addr_b, db).astype(np.float64))
            A = np.concatenate(As) * (-1 if neg_a else 1)
            B = np.concatenate(Bs) * (-1 if neg_b else 1)
            if kind == "tf32":
                from .wgmma import _trunc_tf32

                A, B = _trunc_tf32(A).astype(np.float64), _trunc_tf32(B).astype(np.float64)
            if sf is not None:
                for L_, C_ in ((sf[0], sf[1]), (sf[3].ravel(), sf[4].ravel())):
                    _check_tmem_init(m, cta, L_, C_, f"{call.name} reads scale factors from", call.span, w.describe(),
                                     "write the scale factors first (tcgen05.cp or tcgen05.st)")
            prod = A @ B.T if sf is None else _scaled_product(cta, A, B, sf)
            for r, c in enumerate(pair):
                if en:
                    _check_tmem_init(m, c, L.ravel(), C.ravel(), f"{call.name} with accumulate on (enable_d) reads "
                                     "its accumulator from", call.span, w.describe(),
                                     "the first mma into a freshly allocated accumulator passes accumulate=False "
                                     "(enable_d = 0)")
                c.tmem.init[L, C] = True
                cells = c.tmem.cells
                old = cells[L, C]
                if dd == "float32":
                    D = old.view(np.float32).astype(np.float64)
                elif dd == "int32":
                    D = old.view(np.int32).astype(np.float64)
                else:
                    D = old.astype(np.uint16).view(np.float16).astype(np.float64)
                out = prod[r * rows:(r + 1) * rows] + (D if en else 0)
                if dd == "float32":
                    cells[L, C] = out.astype(np.float32).view(np.uint32)
                elif dd == "int32":
                    cells[L, C] = out.astype(np.int64).astype(np.int32).view(np.uint32)
                else:
                    cells[L, C] = out.astype(np.float16).view(np.uint16).astype(np.uint32)
                ag, cl = _shadow(c)
                ag[L, C] = a_id
                cl[L, C] = c.tmem_fclock[L, C] = vc[a_id]    # released by its commit (an implicit before-fence)
            op["done"] = True
        _in_order(m, w, op, fire, "tcgen05.mma")


register_family(r"tcgen05_mma_cg([12])_(f16|tf32|f8f6f4|i8)_ss", _mma)
register_family(r"tcgen05_mma_cg([12])_(mxf8f6f4)_block_scale", _mma)


def _ue8m0(byte):
    """ue8m0 scale bytes -> 2^(e - 127) (255 is NaN)."""
    e = byte.astype(np.float64)
    return np.where(byte == 255, np.nan, np.exp2(e - 127))


def _scale_cells(ctx, cta, idesc, n):
    """Where the mma reads its scale factors: (A lanes, A columns, A byte, B columns, B byte), after
    the column and ordering checks; None when reported."""
    sa, sb = int(ctx.arg("sfa")[ctx.lanes[0]]), int(ctx.arg("sfb")[ctx.lanes[0]])
    if sa >> 16 or sb >> 16:
        ctx.report("tcgen05_misuse", f"{ctx.call.name}: scale-factor addresses {sa:#x}, {sb:#x} name lane "
                   f"{max(sa >> 16, sb >> 16)}; they start at lane 0 (the layout tcgen05.cp .32x128b.warpx4 writes)")
        return None
    rows = np.arange(128)
    la, ca = rows, (sa & 0xFFFF) + rows // 32
    cols = np.arange(n)
    lb = (32 * (rows[:, None] // 32) + cols[None, :] % 32)  # (128, n): quarter of row m, lane n % 32
    cb = np.broadcast_to((sb & 0xFFFF) + cols[None, :] // 32, lb.shape)
    for L, C in ((la, ca), (lb.ravel(), cb.ravel())):
        if not _check_cols(ctx, L, C, f"{ctx.call.name} (scale factors)").all():
            return None
        ag, cl = _shadow(cta)
        order = _ordered(ctx.w, ag[L, C], cl[L, C], fclocks=cta.tmem_fclock[L, C])
        mine = ag[L, C] == agent(ctx.machine, ("tcgen05", cta.rank, ctx.w.wid), "")
        if ((order == 1) & ~mine).any():
            ctx.report("tmem_read_before_commit", f"{ctx.call.name} reads scale factors written by "
                       f"{ctx.machine.agent_name(int(ag[L, C][(order == 1) & ~mine][0]))} before a tcgen05.commit -> "
                       "mbarrier wait ordered it", ["issue tcgen05.cp from the thread that issues the mma (they run in "
                                                    "order), or commit it to an mbarrier and wait"])
        else:
            _report_fence(ctx.machine, np.where(mine, 0, order), ag[L, C], f"{ctx.call.name} reads scale factors",
                          ctx.span, ctx.threads())
    return la, ca, (idesc >> 29) & 3, lb, cb, (idesc >> 4) & 3


def _scaled_product(cta, A, B, sf):
    la, ca, ia, lb, cb, ib = sf
    cells = cta.tmem.cells
    s_a = _ue8m0((cells[la, ca] >> (8 * ia)) & 0xFF)  # (128,)
    s_b = _ue8m0((cells[lb, cb] >> (8 * ib)) & 0xFF)  # (128, n): B's scale as seen by row m's datapath quarter
    return (A @ B.T) * s_a[:, None] * s_b


@register_model("tcgen05_cp_cg1_32x128b_warpx4")
def _cp(ctx):
    m, w, cta = ctx.machine, ctx.w, ctx.cta
    a_id = agent(m, ("tcgen05", cta.rank, w.wid), f"tensor cores (tcgen05) issued by {w.describe()}")
    l = ctx.lanes[0]
    taddr = int(ctx.arg("taddr")[l])
    if taddr >> 16:
        ctx.report("tcgen05_misuse", f"{ctx.call.name} targets TMEM lane {taddr >> 16}; .32x128b.warpx4 writes lanes "
                   "t + 32 q of every quarter, so the address's lane is 0")
        return
    addrs = operand_addresses(int(ctx.arg("src_desc")[l]), 32, 16, "uint8", "K", "tcgen05")  # (32 rows, 16 bytes)
    t, j, q = np.meshgrid(np.arange(32), np.arange(4), np.arange(4), indexing="ij")
    L, C = (t + 32 * q).ravel(), ((taddr & 0xFFFF) + j).ravel()
    if not _check_cols(ctx, L, C, ctx.call.name).all():
        return
    vc = issue_vc(w, a_id)
    op = {"done": False, "vc": vc}
    call = ctx.call
    fv = _fence_vc(w).copy()
    who = ctx.threads()

    def fire():    # like the mma: prior writes and reads of the cells must be ordered before its issue
        _check_overwrite(m, cta, w, L, C, call.name, call.span, who, a_id, vc, fv)
        m.check_access(cta, addrs.ravel(), a_id, vc, False, ASYNC, call, w)
        raw = cta.smem.data[clamp(addrs, 0, cta.smem.size - 1)].astype(np.uint8)
        words = np.ascontiguousarray(raw).view(np.uint32).reshape(32, 4)
        cta.tmem.cells[L, C] = words[t.ravel(), j.ravel()]
        cta.tmem.init[L, C] = True
        ag, cl = _shadow(cta)
        ag[L, C] = a_id
        cl[L, C] = cta.tmem_fclock[L, C] = vc[a_id]
        op["done"] = True
    _in_order(m, w, op, fire, "tcgen05.cp")


def _in_order(m, w, op, fire, what):
    """Queue an async tcgen05 op: the mma / cp ops of one thread execute in issue order (an
    accumulate=False MMA must not overtake the one before it; a cp lands before the mma after it),
    and the thread's next commit tracks it."""
    prev = getattr(w, "tc_last", None)
    w.tc_last = op
    m.events.append(Event(fire, what, ready=lambda prev=prev: prev is None or prev["done"]))
    w.tc_pending.append(op)


def _commit(ctx):
    w, m = ctx.w, ctx.machine
    # a commit tracks *every* earlier tcgen05 op of the thread, including ones an earlier commit
    # already tracked: keep the unfinished ones, fold the finished ones' clocks into tc_done_vc
    done = [op for op in w.tc_pending if op["done"]]
    w.tc_pending = [op for op in w.tc_pending if not op["done"]]
    w.tc_done_vc = getattr(w, "tc_done_vc", np.zeros(0, np.int64))
    for op in done:
        w.tc_done_vc = join(w.tc_done_vc.copy(), op["vc"])
    ops = list(w.tc_pending)
    addr = int(ctx.arg("bar")[ctx.lanes[0]])
    mask = int(ctx.arg("cta_mask")[ctx.lanes[0]]) if ctx.has("cta_mask") else None
    for r in ([w.cta.rank] if mask is None else [r for r in range(len(m.cluster)) if (mask >> r) & 1]):
        MB.check_issue(ctx, m.cluster[r], addr, ctx.call.name)
    vc0 = join(np.array(w.release(), copy=True), w.tc_done_vc)

    def fire():
        vc = vc0.copy()
        for op in ops:
            vc = join(vc, op["vc"])
        ranks = [w.cta.rank] if mask is None else [r for r in range(len(m.cluster)) if (mask >> r) & 1]
        for r in ranks:
            b = m.cluster[r].mbarriers.get(addr)
            if b is None:
                m.report("mbarrier_uninitialized", f"tcgen05.commit arrives on smem {addr:#x}, which holds no mbarrier",
                         ctx.span, w.describe())
                continue
            MB.arrive(ctx, b, 1, vc)
    m.events.append(Event(fire, "tcgen05.commit", ready=lambda: all(op["done"] for op in ops)))


for _cg in (1, 2):
    register_model(f"tcgen05_commit_cg{_cg}", _commit)
    register_model(f"tcgen05_commit_cg{_cg}_multicast", _commit)
# cta_group::2 alloc / dealloc: one warp of each CTA of the pair, each in its own TMEM
register_model("tcgen05_alloc_cg2", _alloc)
register_model("tcgen05_dealloc_cg2", _dealloc)
register_model("tcgen05_relinquish_alloc_permit_cg2", lambda ctx: None)
