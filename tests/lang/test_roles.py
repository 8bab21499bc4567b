"""Warp roles, register reallocation and barrier set-up (tirxpy/lang/roles.py)."""
import pytest

from tirxpy import T
from tirxpy.lang import LangError, StageRing, WarpRoles, register_split, setup_barriers


@pytest.mark.parametrize("threads, dec, inc", [(384, 40, 232), (256, 24, 240), (512, 24, 160)])
def test_a_split_that_fits_the_launch_allocation_is_kept(threads, dec, inc):
    per_thread = min(65536 // threads // 8 * 8, 248)
    assert 128 * dec + (threads - 128) * inc <= threads * per_thread
    assert register_split(threads, dec, inc) == (dec, inc)
    assert WarpRoles(threads, dec, inc).consumers == threads // 128 - 1


@pytest.mark.parametrize("args, msg", [
    ((384, 48, 232), "needs 65536 registers, over the CTA's 64512"),
    ((384, 41, 232), "dec = 41 must be a multiple of 8"),
    ((384, 40, 264), "inc = 264 must be a multiple of 8 in \\[24, 256\\]"),
    ((320, 40, 232), "whole warpgroups"),
    ((128, 40, 232), "whole warpgroups"),
    ((384, 40.0, 232), "must be an int"),
    ((True, 40, 232), "must be an int"),
])
def test_bad_splits_are_refused_naming_the_count(args, msg):
    with pytest.raises(LangError, match=msg):
        WarpRoles(*args)


def _kernel(rings_of, cluster, pdl, roles=None):
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(cluster,), threads=384, cluster=(cluster,) if cluster > 1 else None)
        qf = T.alloc_shared((2,), "uint64")
        qe = T.alloc_shared((2,), "uint64")
        kf = T.alloc_shared((3,), "uint64")
        ke = T.alloc_shared((3,), "uint64")
        vf = T.alloc_shared((3,), "uint64")
        ve = T.alloc_shared((3,), "uint64")
        q, kr, vr = StageRing(qf, qe, 2), StageRing(kf, ke, 3), StageRing(vf, ve, 3)
        setup_barriers(rings_of(q, kr, vr), cluster, pdl)
        if roles is not None:
            if T.warpgroup_id() == 0:
                roles.enter_producer()
            else:
                roles.enter_consumer()
    return k


def test_each_ring_gets_its_own_loop_unless_listed_together():
    text = str(_kernel(lambda q, k, v: [(q, 1, 4), (k, 1, 8), (v, 1, 8)], 1, False))
    assert text.count("T.serial(") == 3


def test_rings_listed_together_share_a_loop_fulls_first():
    text = str(_kernel(lambda q, k, v: [(q, 1, 4), [(k, 1, 8), (v, 1, 8)]], 1, False))
    loop_q = text.index("for s in T.serial(2):")
    loop_kv = text.index("T.serial(3):")
    order = [text.index(x) for x in ("qf[s]", "qe[s]")] + [text.index(x, loop_kv) for x in ("kf[", "vf[", "ke[", "ve[")]
    assert loop_q < order[0] < order[1] < loop_kv < order[2] < order[3] < order[4] < order[5]
    assert "T.ptx.mbarrier_init(ke[s_1], 8)" in text and "T.ptx.mbarrier_init(qf[s], 1)" in text
    assert "T.ptx.fence_mbarrier_init()" in text and "T.ptx.syncthreads()" in text
    assert "griddepcontrol_wait" not in text and "cluster_sync" not in text


def test_a_cluster_syncs_the_cluster_and_pdl_waits_after_the_set_up():
    text = str(_kernel(lambda q, k, v: [(q, 1, 4)], 2, True))
    assert text.index("T.ptx.fence_mbarrier_init()") < text.index("T.ptx.cluster_sync()") \
        < text.index("T.ptx.griddepcontrol_wait()")
    assert "syncthreads" not in text


def test_roles_emit_setmaxnreg_in_each_branch():
    text = str(_kernel(lambda q, k, v: [(q, 1, 4)], 1, False, roles=WarpRoles(384, 40, 232)))
    assert "T.ptx.setmaxnreg_dec(40)" in text and "T.ptx.setmaxnreg_inc(232)" in text


def test_a_malformed_ring_list_is_refused():
    from tirxpy.errors import TirxError

    with pytest.raises(TirxError, match=r"\(ring, full_arrivals, empty_arrivals\)"):
        _kernel(lambda q, k, v: [q], 1, False)
    with pytest.raises(TirxError, match=r"one stage count, got \[2, 3\]"):
        _kernel(lambda q, k, v: [[(q, 1, 4), (k, 1, 8)]], 1, False)
