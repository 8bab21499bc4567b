"""Memory and proxy fences (PTX ISA 9.7.13.4 membar / fence)."""
from .defs import row, tmap

row("fence_proxy_async", "fence.proxy.async.shared::cta;", lowest="sm_90",
    doc="Make generic-proxy writes to shared memory visible to the async proxy (TMA, wgmma, tcgen05).")
row("fence_proxy_async_global", "fence.proxy.async.global;", lowest="sm_90")
row("fence_proxy_async_all", "fence.proxy.async;", lowest="sm_90")
row("fence_mbarrier_init", "fence.mbarrier_init.release.cluster;", lowest="sm_90",
    doc="Make mbarrier.init visible to the other CTAs of the cluster before they arrive remotely.")
row("fence_acq_rel_cluster", "fence.acq_rel.cluster;", lowest="sm_90")
row("fence_acq_rel_gpu", "fence.acq_rel.gpu;")
row("fence_acq_rel_cta", "fence.acq_rel.cta;")
row("fence_sc_gpu", "fence.sc.gpu;")
row("fence_proxy_tensormap_acquire", "fence.proxy.tensormap::generic.acquire.gpu [{tmap}], 128;",
    [tmap()], lowest="sm_90")
