"""Signal / wait intrinsics across GPUs (tirxpy/intrinsics/peer.py): table rows, rendering, NVRTC, models."""
import pytest

import tirxpy.intrinsics as I
from tirxpy.intrinsics.exercise import exercise_source
from tirxpy.sim import has_model

NAMES = ["st_release_gpu_u32", "st_release_sys_u32", "red_release_gpu_add_u32", "red_release_sys_add_u32",
         "atom_acq_rel_gpu_add_u32", "atom_acq_rel_sys_add_u32", "ld_acquire_sys_u32", "fence_acq_rel_sys",
         "wait_geq_sys_u32"]


@pytest.mark.parametrize("name", NAMES)
def test_rows_exist_with_a_model_and_no_multicast(name):
    e = I.get(name)
    assert str(e.requirement) == "sm_80" and e.scope == "thread"
    assert has_model(name)
    assert "multimem" not in e.template and "multicast" not in e.template


def test_scopes_and_semantics_in_the_ptx():
    assert I.get("st_release_sys_u32").ptx == "st.release.sys.global.u32"
    assert I.get("red_release_sys_add_u32").ptx == "red.release.sys.global.add.u32"
    assert I.get("atom_acq_rel_gpu_add_u32").ret_dtype == "uint32"
    assert I.get("ld_acquire_sys_u32").render_call(["p"]) == "tx_ld_acquire_sys_u32(p)"
    h = I.get("wait_geq_sys_u32").render_helper()
    assert "ld.acquire.sys.global.u32" in h and "setp.ge.u32" in h and "nanosleep" in h


def test_peer_rows_assemble():
    from tirxpy.lower.nvrtc import compile_cuda

    mod = compile_cuda(exercise_source([I.get(n) for n in NAMES]), "sm_90a")
    assert len(mod.cubin) > 1000
