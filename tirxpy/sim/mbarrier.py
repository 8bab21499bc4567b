"""mbarrier models: init, arrive (counts, expect_tx), complete_tx, phases and parity waits
(PTX ISA 9.7.13.15). A phase completes when its pending arrival count and its transaction
count are both zero; ``test_wait / try_wait.parity(P)`` is true when the phase with parity
``P`` just before the current one has completed, i.e. ``P != current_phase % 2``.

Lifecycle: every use (arrive, expect_tx, wait, the complete_tx of a copy, issued with the copy) must be ordered
after the ``mbarrier.init``: by a barrier / mbarrier wait / released cluster barrier after the init, or, for a
relaxed cluster barrier, by the initializing warp's ``fence.mbarrier_init`` before its arrive (the fence releases
its earlier inits only). A use not ordered after the init is ``mbarrier_uninitialized`` in every schedule, as is a use
before it. ``mbarrier.inval`` (and an init of a live mbarrier) must come after every use,
ordered the same way, with no copy still completing bytes on it and no warp waiting on it
(``mbarrier_inval_in_use``).

Checks: use before init, arrivals beyond the expected count, transaction bytes that land after
the phase they were issued in has completed (no expect_tx announced them), a wait that observes the same completed phase twice (parity
not flipped), and (at the end) barriers whose arrivals / transaction bytes never balanced."""
from __future__ import annotations

import numpy as np

from .interp import Block
from .races import join
from .registry import register_model

CLUSTER_SHIFT = 24
_INIT_NOTE = ("initialize it with T.ptx.mbarrier_init(bar, count), then T.ptx.fence_mbarrier_init() and a barrier "
              "every user passes before its first use (T.ptx.syncthreads(), or a cluster barrier for other CTAs)")


class MBar:
    def __init__(self, addr, count, span, agent=-1, clock=0):
        self.addr, self.expected, self.pending, self.tx = addr, count, count, 0
        self.init_agent, self.init_clock = agent, clock     # the initializing warp and its clock at the init
        self.uses: dict = {}    # agent -> its clock at its last use (inval / re-init must be ordered after it)
        self.phase = 0
        self.vc = None
        self.done_vc: dict = {}
        self.span = span
        self.expect_seen = False
        self.last_span = span
        self.early = None      # (span, who) of the first bytes that drove this phase's tx-count below zero

    def join(self, vc):
        self.vc = vc.copy() if self.vc is None else join(self.vc, vc)

    def complete_if_ready(self):
        if self.pending == 0 and self.tx == 0:
            self.done_vc[self.phase] = self.vc
            self.phase += 1
            self.pending = self.expected
            self.vc = None
            self.expect_seen = False
            self.early = None
            return True
        return False


def _cta_and_addr(ctx, addr):
    """``(cta, offset)`` of an mbarrier address; a rank outside the cluster is reported and gives
    offset -1 (which holds no mbarrier)."""
    addr = int(addr)
    if addr >> 31:  # tagged by mapa: (1 << 31) | rank << 24 | offset
        rank = (addr >> CLUSTER_SHIFT) & 0x7F
        if rank >= len(ctx.machine.cluster):
            ctx.report("oob_shared", f"{ctx.call.name}: shared::cluster address {addr:#x} names CTA rank {rank}; the "
                       f"cluster has {len(ctx.machine.cluster)} CTA(s)")
            return ctx.cta, -1
        return ctx.machine.cluster[rank], addr & ((1 << CLUSTER_SHIFT) - 1)
    return ctx.cta, addr


def lookup(ctx, addr, what):
    cta, a = _cta_and_addr(ctx, addr)
    b = cta.mbarriers.get(a)
    if b is None:
        ctx.report("mbarrier_uninitialized", f"{what} on shared address {a:#x}, which holds no initialized mbarrier",
                   [_INIT_NOTE])
    return b


def init_ordered(b, agent, vc, known=()):
    """Whether a use by ``agent`` at clocks ``vc`` is ordered after the init of ``b`` (``known``: the mbarriers
    whose init the user's warp acquired through a relaxed cluster barrier after a ``fence.mbarrier_init``)."""
    a = b.init_agent
    return a < 0 or a == agent or (a < len(vc) and vc[a] >= b.init_clock) or b in known


def use(machine, b, agent, vc, what, span, who, known=()):
    """Record a use of ``b`` by ``agent`` (clocks ``vc``) and report it when not ordered after the init."""
    if not init_ordered(b, agent, vc, known):
        machine.report("mbarrier_uninitialized", f"{what} on the mbarrier at smem {b.addr:#x} is not ordered after "
                       f"its mbarrier.init ({b.span} by {machine.agent_name(b.init_agent)}): in another schedule it "
                       "runs first, on memory that holds no mbarrier yet", span, who,
                       [_INIT_NOTE],
                       key=("mbar_unordered", b.addr, getattr(span, "line", None)))
    if agent >= 0:
        c = int(vc[agent]) if agent < len(vc) else 0
        if c > b.uses.get(agent, -1):
            b.uses[agent] = c


def retire(ctx, cta, b, what):
    """``mbarrier.inval`` (or an init over a live mbarrier, ``what``) by the calling warp: every use must be
    ordered before it, no copy may still complete bytes on it and no warp may wait on it."""
    w, m = ctx.w, ctx.machine
    vc = w.vc
    late = [a for a, c in b.uses.items() if a != w.agent and (a >= len(vc) or vc[a] < c)]
    notes = ["issue it after every warp's last use of the mbarrier, ordered by a barrier (T.ptx.syncthreads()) or "
             "the mbarrier wait that the last copies complete"]
    if late:
        ctx.report("mbarrier_inval_in_use", f"{what} of the {name_of(ctx, b)} is not ordered after a use by "
                   f"{m.agent_name(late[0])}", notes)
    busy = [e for e in m.events if e.mbar is not None and e.mbar[0] is cta and e.mbar[1] == b.addr]
    if busy:
        ctx.report("mbarrier_inval_in_use", f"{what} of the {name_of(ctx, b)} while {busy[0].what} still completes "
                   "transaction bytes on it", notes)
    waiters = [x for c in m.cluster for x in c.warps if not x.done and getattr(x, "mbar_wait", None) is b]
    if waiters:
        ctx.report("mbarrier_inval_in_use", f"{what} of the {name_of(ctx, b)} while {waiters[0].describe()} waits "
                   "on it", notes)


def name_of(ctx, b):
    return f"mbarrier at smem {b.addr:#x} (initialized at {b.span})"


def arrive(ctx, b, n, vc):
    b.join(vc)
    b.pending -= n
    if b.pending < 0:
        ctx.report("mbarrier_over_arrive", f"{n} arrival(s) on the {name_of(ctx, b)} exceed its expected count "
                   f"{b.expected} in phase {b.phase}", key=("over", b.addr, b.phase))
        b.pending = 0
    b.complete_if_ready()


def complete_tx(machine, cta, addr, nbytes, vc, span, who, issue_phase=None, agent=-1):
    """Complete ``nbytes`` of transactions on the mbarrier at ``addr`` of ``cta``.

    The tx-count may go below zero for a while (PTX: its range is +-(2**20 - 1)): bytes may land
    before the arrival that announces them, as with a peer's multicast into a stage our producer
    has not armed yet. What is wrong is bytes landing in a *later* phase than the one current
    when their copy was issued (``issue_phase``): that phase completed without waiting for them,
    i.e. no expect_tx announced them. Without ``issue_phase``: bytes with no expect_tx yet in the
    phase."""
    b = cta.mbarriers.get(addr)
    if b is None:
        machine.report("mbarrier_uninitialized", f"complete_tx of {nbytes} bytes on shared address {addr:#x}, "
                       "which holds no initialized mbarrier", span, who)
        return
    if agent >= 0 and agent < len(vc) and vc[agent] > b.uses.get(agent, -1):
        b.uses[agent] = int(vc[agent])
    b.join(vc)
    b.tx -= nbytes
    if b.tx < 0 and b.early is None:
        b.early = (span, who)     # legal for now; finish_cluster reports it if nothing ever announces them
    late = issue_phase is not None and b.phase != issue_phase
    if late or (issue_phase is None and b.tx < 0 and not b.expect_seen):
        when = (f"issued during phase {issue_phase}, which completed before they landed (now phase {b.phase})"
                if late else f"drove the transaction count to {b.tx} in phase {b.phase}")
        machine.report("tx_underflow", f"complete_tx of {nbytes} bytes on the mbarrier at smem {addr:#x} {when}: "
                       f"no expect_tx announced these bytes",
                       span, who, ["arrive with T.ptx.mbarrier_arrive_expect_tx(bar, bytes) (or mbarrier_expect_tx) "
                                   "before the phase can complete, counting every byte that completes on it"],
                       key=("txu", addr))
    b.complete_if_ready()


def phase_of(cta, addr):
    """The current phase of the mbarrier at ``addr`` of ``cta`` (None when there is none)."""
    b = cta.mbarriers.get(addr)
    return None if b is None else b.phase


def _mask_one(ctx):
    return ctx.lanes


@register_model("mbarrier_init")
def _init(ctx):
    addr = ctx.arg("bar")
    cnt = ctx.arg("count")
    for l in ctx.lanes:
        a = int(addr[l])
        cta, a = _cta_and_addr(ctx, a)
        if a % 8:
            ctx.report("misaligned", f"{ctx.call.name}: shared address {a:#x} is not 8-byte aligned; an mbarrier is a "
                       "64-bit object (the GPU faults on it)", ["allocate barriers as T.alloc_shared((n,), \"uint64\") "
                                                                 "and pass one element, bar[i]"])
        old = cta.mbarriers.get(a)
        if old is not None:
            retire(ctx, cta, old, "mbarrier.init (again)")
        if cta.shadow is not None:
            ctx.w.smem_access([a], 8, True, 0, ctx.call)
        w = ctx.w
        b = cta.mbarriers[a] = MBar(a, int(cnt[l]), ctx.span, w.agent, int(w.vc[w.agent]))
        w.mbar_inits.append(b)


@register_model("mbarrier_inval")
def _inval(ctx):
    addr = ctx.arg("bar")
    for l in ctx.lanes:
        cta, a = _cta_and_addr(ctx, int(addr[l]))
        b = cta.mbarriers.pop(a, None)
        if b is not None:
            retire(ctx, cta, b, "mbarrier.inval")
            if cta.shadow is not None and cta is ctx.cta:
                ctx.w.smem_access([a], 8, True, 0, ctx.call)


def check_issue(ctx, cta, addr, what):
    """A copy issued now completes bytes on the mbarrier at ``addr`` of ``cta``: the issue is a use of it."""
    b = cta.mbarriers.get(addr)
    if b is not None:
        use(ctx.machine, b, ctx.w.agent, ctx.w.vc, what, ctx.span, ctx.threads(), ctx.w.mbar_known)


def _arrive_lanes(ctx, counts=None, tx=None):
    addr = ctx.arg("bar")
    state = np.zeros(32, np.uint64)
    by_addr = {}
    for l in ctx.lanes:
        by_addr.setdefault(int(addr[l]), []).append(l)
    vc = ctx.w.release()
    for a, lanes in by_addr.items():
        b = lookup(ctx, a, "arrive")
        if b is None:
            continue
        use(ctx.machine, b, ctx.w.agent, vc, ctx.call.name, ctx.span, ctx.threads(), ctx.w.mbar_known)
        if tx is not None:
            for l in lanes:
                b.tx += int(tx[l])
                b.expect_seen = True
        n = sum(int(counts[l]) for l in lanes) if counts is not None else len(lanes)
        ph = b.phase
        arrive(ctx, b, n, vc)
        for l in lanes:
            state[l] = ph
    return state


@register_model("mbarrier_arrive")
def _arrive(ctx):
    return _arrive_lanes(ctx)


@register_model("mbarrier_arrive_count")
def _arrive_count(ctx):
    return _arrive_lanes(ctx, counts=ctx.arg("count"))


@register_model("mbarrier_arrive_expect_tx")
def _arrive_tx(ctx):
    return _arrive_lanes(ctx, tx=ctx.arg("tx_bytes"))


@register_model("mbarrier_arrive_expect_tx_remote")
def _arrive_tx_remote(ctx):
    _arrive_lanes(ctx, tx=ctx.arg("tx_bytes"))


@register_model("mbarrier_arrive_remote")
@register_model("mbarrier_arrive_cluster")
def _arrive_remote(ctx):
    _arrive_lanes(ctx)


@register_model("mbarrier_expect_tx")
def _expect(ctx):
    addr, tx = ctx.arg("bar"), ctx.arg("tx_bytes")
    for l in ctx.lanes:
        b = lookup(ctx, int(addr[l]), "expect_tx")
        if b is not None:
            use(ctx.machine, b, ctx.w.agent, ctx.w.vc, ctx.call.name, ctx.span, ctx.threads(), ctx.w.mbar_known)
            b.tx += int(tx[l])
            b.expect_seen = True


def _observe(ctx, b):
    """Acquire the completed phase and check the wait advanced (parity flipped)."""
    ph = b.phase - 1
    ctx.w.acquire(b.done_vc.get(ph))
    key = b.addr
    last = ctx.w.last_phase.get((id(ctx.cta), key))
    if last is not None and ph <= last and ph >= 0:
        ctx.report("mbarrier_stale_wait", f"this wait on the mbarrier at smem {b.addr:#x} returned for phase {ph}, "
                   f"which this warp already waited for: the parity passed did not flip between waits",
                   ["waiting on the wrong parity passes without synchronizing with the producer"],
                   key=("stale", b.addr, ctx.span.line if ctx.span else None))
    ctx.w.last_phase[(id(ctx.cta), key)] = max(ph, last if last is not None else -1)


def _wait(ctx, blocking):
    addr, par = ctx.arg("bar"), ctx.arg("parity")
    l0 = ctx.lanes
    a = int(addr[l0[0]])
    p = int(par[l0[0]]) & 1
    b = lookup(ctx, a, "wait")
    if b is None:
        return np.zeros(32, bool)
    done = (b.phase % 2) != p
    if not done and blocking:
        ctx.w.mbar_wait = b
        yield Block(lambda: (b.phase % 2) != p, f"phase with parity {p} of the mbarrier at smem {a:#x} "
                    f"(current phase {b.phase}: {b.pending} of {b.expected} arrivals pending, tx-count {b.tx})",
                    ctx.span)
        done = True
        ctx.w.mbar_wait = None
    if done:
        _observe(ctx, b)
    use(ctx.machine, b, ctx.w.agent, ctx.w.vc, ctx.call.name, ctx.span, ctx.threads(), ctx.w.mbar_known)
    return np.full(32, done)


@register_model("mbarrier_wait_parity")
def _wait_parity(ctx):
    yield from _wait(ctx, True)


@register_model("mbarrier_try_wait_parity")
def _try_wait(ctx):
    return (yield from _wait(ctx, True))


register_model("mbarrier_try_wait_parity_cluster", _try_wait)


@register_model("mbarrier_test_wait_parity")
def _test_wait(ctx):
    return (yield from _wait(ctx, False))
