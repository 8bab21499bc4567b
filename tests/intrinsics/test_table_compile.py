"""Every table entry's helper compiles (and ptxas assembles it) for its lowest target."""
import pytest

import tirxpy.intrinsics as I
from tirxpy.intrinsics.exercise import exercise_source
from tirxpy.lower.nvrtc import compile_cuda


def _all_entries():
    for fam in I.families():
        for p in fam.examples():
            fam.get(**p)
    groups = {}
    for e in I.entries():
        if e.name.startswith(("demo_", "test_")):
            continue
        groups.setdefault(e.requirement.lowest, []).append(e)
    return groups


GROUPS = _all_entries()


@pytest.mark.parametrize("lowest", sorted(GROUPS))
def test_entries_assemble_for_lowest_target(lowest):
    es = GROUPS[lowest]
    mod = compile_cuda(exercise_source(es), lowest)
    assert "tx_exercise" in mod.resources
    assert len(mod.cubin) > 1000


def test_every_family_and_static_row_is_covered():
    names = {e.name for es in GROUPS.values() for e in es}
    for must in ("mbarrier_init", "mbarrier_arrive_expect_tx", "mbarrier_try_wait_parity", "mbarrier_inval",
                 "fence_proxy_async", "fence_mbarrier_init", "fence_acq_rel_cluster", "barrier_sync",
                 "cluster_arrive", "cluster_wait", "elect_sync", "setmaxnreg_inc", "cp_async_cg_16",
                 "cp_async_wait_group", "tma_load_5d_multicast", "tma_store_3d", "tma_reduce_add_2d",
                 "bulk_commit_group", "bulk_wait_group_read", "prefetch_tensormap", "ldmatrix_x4_trans",
                 "stmatrix_x2", "mma_sync_m16n8k16_f32_bf16_bf16_f32", "wgmma_fence", "wgmma_commit_group",
                 "wgmma_wait_group", "wgmma_m64n256k16_f32_bf16_bf16_ss", "wgmma_m64n64k32_f32_e4m3_e5m2_rs",
                 "tcgen05_alloc_cg2", "tcgen05_dealloc_cg1", "tcgen05_relinquish_alloc_permit_cg1",
                 "tcgen05_mma_cg2_f8f6f4_ss", "tcgen05_mma_cg1_mxf4nvf4_block_scale", "tcgen05_commit_cg2_multicast",
                 "tcgen05_ld_32x32b_x128", "tcgen05_st_16x256b_x32", "tcgen05_cp_cg1_128x256b", "tcgen05_shift_cg1",
                 "tcgen05_wait_ld", "tcgen05_fence_after_thread_sync", "mapa_shared", "cluster_ctarank",
                 "griddepcontrol_wait", "clusterlaunchcontrol_try_cancel", "clusterlaunchcontrol_query_first_ctaid_x",
                 "shfl_sync_bfly_f32", "atom_global_add_f32", "red_global_add_u32", "clock64", "nanosleep"):
        assert must in names, must


@pytest.mark.parametrize("arch, name", [
    ("sm_80", "wgmma_fence"), ("sm_80", "mbarrier_try_wait_parity"), ("sm_90a", "tcgen05_mma_cg1_f16_ss"),
    ("sm_90", "setmaxnreg_inc"), ("sm_80", "tma_load_2d"),
])
def test_entry_above_target_is_rejected_before_compiling(arch, name):
    e = I.get(name)
    with pytest.raises(I.TargetError, match=f"the kernel targets {arch}"):
        e.check_target(arch)
    with pytest.raises(I.TargetError):
        I.render_helpers([e], arch=arch)
