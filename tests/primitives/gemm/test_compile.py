"""Every gemm implementation's lowered code compiles through NVRTC (and ptxas) for each target
it claims, with no local-memory spills."""
import pytest

from tirxpy.lower.build import build

from . import gemm_kernels as g

CASES = [
    ("mma_sync", lambda: g.mma_sync_gemm(40, 24, 32), "sm_80", "mma.sync.aligned.m16n8k16"),
    ("mma_sync_on_hopper", lambda: g.mma_sync_gemm(32, 16, 64), "sm_90a", "mma.sync.aligned.m16n8k16"),
    ("mma_sync_on_blackwell", lambda: g.mma_sync_gemm(32, 16, 16), "sm_100a", "mma.sync.aligned.m16n8k16"),
    ("wgmma_ss_k_major", lambda: g.wgmma_gemm(72, 80, 64), "sm_90a", "wgmma.mma_async.sync.aligned.m64n64k16"),
    ("wgmma_ss_b_mn_major", lambda: g.wgmma_gemm(64, 128, 128, BN=128, b_nk=False), "sm_90a", "m64n128k16"),
    ("wgmma_rs", lambda: g.wgmma_gemm(64, 64, 64, a_regs=True), "sm_90a", "wgmma.mma_async.sync.aligned.m64n64k16"),
    ("tcgen05_cg1", lambda: g.tcgen05_gemm(), "sm_100a", "tcgen05.mma.cta_group::1.kind::f16"),
    ("tcgen05_cg2_multicast", lambda: g.tcgen05_gemm(N=256, cta_group=2), "sm_100a",
     "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster"),
]


@pytest.mark.parametrize("name, make, arch, needle", CASES, ids=[c[0] for c in CASES])
def test_compiles(name, make, arch, needle):
    ck = build(make(), arch)
    assert needle in ck.cuda_source
    assert ck.resources.spill_stores == 0 and ck.resources.spill_loads == 0
