"""Named CTA barriers, __syncthreads, warp sync, cluster barriers and fences.

``barrier.sync / arrive id, n`` count 32 per arriving warp (PTX: the warp size, whatever the
active lanes); the barrier's generation completes at ``n`` threads, and a warp that gives another ``n`` to a
phase already entered is reported (``barrier_count_mismatch``). Cluster barriers complete
when every warp of every CTA of the cluster arrived. ``fence.proxy.async`` makes generic-proxy
shared-memory writes ordered before it visible to TMA / wgmma / tcgen05 reads."""
from __future__ import annotations

from .interp import Block
from .races import join
from .registry import register_model


class Gen:
    def __init__(self):
        self.gen, self.count, self.vc, self.done, self.need = 0, 0, None, {}, None

    def arrive(self, vc, k, need):
        g = self.gen
        self.vc = vc.copy() if self.vc is None else join(self.vc, vc)
        self.count += k
        self.need = need
        if self.count >= need:
            self.done[g] = self.vc
            self.gen += 1
            self.count, self.vc = 0, None
        return g


def _named(ctx, bid, n, wait):
    st = ctx.cta.named.setdefault(bid, Gen())
    if st.count and n != st.need:       # PTX: every thread of one phase of a barrier gives the same count
        ctx.report("barrier_count_mismatch", f"named barrier {bid}: this warp gives a thread count of {n} to a "
                   f"phase that {st.count} threads entered with {st.need}; every thread of a phase must give one count "
                   "(the behaviour is undefined otherwise)", ["use one count for the barrier's phase, or another "
                                                              "barrier id for the other group of threads"])
    g = st.arrive(ctx.w.release(), 32, n)
    if wait:
        yield Block(lambda: st.gen > g, f"named barrier {bid} ({st.count} of {n} threads arrived)", ctx.span)
        ctx.w.acquire(st.done.get(g))


def _cta_threads(ctx):
    return -(-ctx.machine.kernel.launch.threads // 32) * 32


@register_model("syncthreads")
def _syncthreads(ctx):
    yield from _named(ctx, 0, _cta_threads(ctx), True)


@register_model("barrier_sync_all")
def _sync_all(ctx):
    yield from _named(ctx, ctx.imm("barrier_id"), _cta_threads(ctx), True)


@register_model("barrier_sync")
def _barrier_sync(ctx):
    yield from _named(ctx, ctx.imm("barrier_id"), ctx.imm("nthreads"), True)


@register_model("barrier_arrive")
def _barrier_arrive(ctx):
    yield from _named(ctx, ctx.imm("barrier_id"), ctx.imm("nthreads"), False)


@register_model("bar_warp_sync")
def _warp_sync(ctx):
    ctx.w.sync_lanes()


def _cluster_gen(ctx):
    return ctx.machine.cluster_state.setdefault("cluster_barrier", Gen())


def _cluster_warps(ctx):
    return sum(1 for c in ctx.machine.cluster for w in c.warps if w.alive.any())


@register_model("cluster_arrive")
def _cluster_arrive(ctx):
    st = _cluster_gen(ctx)
    ctx.w.cluster_gen = st.arrive(ctx.w.release(), 1, _cluster_warps(ctx))


@register_model("cluster_arrive_relaxed")
def _cluster_arrive_relaxed(ctx):
    """``barrier.cluster.arrive.relaxed`` has no release semantics: it releases only what the warp ordered before
    its last ``fence.acq_rel`` / ``fence.sc`` (a fence followed by the arrive is a release pattern), nothing when
    there was none."""
    st = _cluster_gen(ctx)
    fenced = getattr(ctx.w, "fence_vc", None)
    vc = fenced if fenced is not None else ctx.machine.clocks.fresh()
    inits = getattr(ctx.w, "fenced_inits", None)
    if inits:
        ctx.machine.cluster_state.setdefault("cluster_inits", {}).setdefault(st.gen, set()).update(inits)
    ctx.w.cluster_gen = st.arrive(vc, 1, _cluster_warps(ctx))


@register_model("fence_mbarrier_init")
def _fence_mbarrier_init(ctx):
    """``fence.mbarrier_init.release.cluster``: the warp's earlier ``mbarrier.init`` (only those) are released by
    its next relaxed cluster arrive (:func:`tirxpy.sim.mbarrier.init_ordered`)."""
    ctx.w.fenced_inits = list(ctx.w.mbar_inits)


def _fence_release(ctx):
    """``fence.acq_rel`` / ``fence.sc``: what the warp did so far is released by its next relaxed arrive."""
    ctx.w.fence_vc = ctx.w.release()


for _n in ("fence_acq_rel_cluster", "fence_acq_rel_gpu", "fence_acq_rel_cta", "fence_sc_gpu"):
    register_model(_n, _fence_release)


@register_model("cluster_wait")
def _cluster_wait(ctx):
    st = _cluster_gen(ctx)
    g = getattr(ctx.w, "cluster_gen", None)
    if g is None:
        ctx.report("cluster_barrier_misuse", "barrier.cluster.wait without a preceding barrier.cluster.arrive")
        return
    yield Block(lambda: st.gen > g, f"cluster barrier ({st.count} of {_cluster_warps(ctx)} warps arrived)", ctx.span)
    ctx.w.acquire(st.done.get(g))
    ctx.w.mbar_known.update(ctx.machine.cluster_state.get("cluster_inits", {}).get(g, ()))
    ctx.w.cluster_gen = None


@register_model("cluster_sync")
def _cluster_sync(ctx):
    _cluster_arrive(ctx)
    yield from _cluster_wait(ctx)


@register_model("fence_proxy_async")
def _fence_proxy_async(ctx):
    ctx.cta.shadow.fence_proxy(ctx.w.agent, ctx.w.vc)


register_model("fence_proxy_async_all", _fence_proxy_async)

for _n in ("fence_proxy_async_global", "fence_proxy_tensormap_acquire", "griddepcontrol_wait",
           "griddepcontrol_launch_dependents", "prefetch_tensormap"):
    register_model(_n, lambda ctx: None)
