"""Named CTA barriers, warp sync and cluster barriers (PTX ISA 9.7.13.1 bar / barrier.cluster)."""
from .defs import reg, row


def _nthreads(k):
    n = k.get("nthreads")
    if n is not None and (n <= 0 or n % 32):
        return f"nthreads = {n} must be a positive multiple of 32 (whole warps take part in a named barrier)"
    return None


def _barrier_id(k):
    b = k.get("barrier_id")
    if b is not None and not 0 <= b < 16:
        return f"barrier_id = {b} must be in [0, 16) (a CTA has 16 named barriers)"
    return None


row("barrier_sync", "barrier.sync.aligned {barrier_id}, {nthreads};", [reg("barrier_id"), reg("nthreads")],
    scope="warp", checks=[_barrier_id, _nthreads], doc="Named barrier: wait until nthreads threads arrived.")
row("barrier_arrive", "barrier.arrive.aligned {barrier_id}, {nthreads};", [reg("barrier_id"), reg("nthreads")],
    scope="warp", checks=[_barrier_id, _nthreads])
row("barrier_sync_all", "barrier.sync.aligned {barrier_id};", [reg("barrier_id")], scope="cta", checks=[_barrier_id])
row("syncthreads", "barrier.sync.aligned 0;", scope="cta")
row("bar_warp_sync", "bar.warp.sync {mask};", [reg("mask")], scope="warp")
row("cluster_arrive", "barrier.cluster.arrive.release.aligned;", lowest="sm_90", scope="cluster")
row("cluster_arrive_relaxed", "barrier.cluster.arrive.relaxed.aligned;", lowest="sm_90", scope="cluster")
row("cluster_wait", "barrier.cluster.wait.acquire.aligned;", lowest="sm_90", scope="cluster")
row("cluster_sync", "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;",
    lowest="sm_90", scope="cluster", ptx="barrier.cluster.arrive+wait")
