"""Cluster launch control under the simulator (tirxpy.sim.clc): a persistent kernel that takes its next tile by
cancelling a cluster not yet started covers every tile exactly once; the mistakes PTX leaves undefined (a request
after a failed response was observed, the CTA id of a failed response, a misaligned response) and a response
overwritten while another thread still reads it are reported."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import run


def _persistent(cluster=1, sync=True, after_failure=False, ctaid_of_failure=False, misaligned=False):
    """Grid of 8 CTAs in clusters of ``cluster``; each CTA adds 1 to ``C[tile]`` and writes its id to
    ``W[tile]`` for its own tile, then asks to cancel a cluster not yet started and takes that cluster's tile
    (rank ``r`` of the cluster: the cancelled cluster's first CTA + ``r``) until a request fails. With clusters of
    2 the first CTA asks for both, multicast. ``sync=False``: no barrier between reading a response and the next
    request; ``after_failure``: one more request after the failure; ``ctaid_of_failure``: the CTA id read from the
    failed response; ``misaligned``: the response 4 bytes past a 16-byte boundary."""
    SYNC, AFTER, CTAID, CL, OFF = sync, after_failure, ctaid_of_failure, cluster, 1 if misaligned else 0

    @T.macro
    def request(res, bar):
        if T.thread_id() == 0:
            T.ptx.mbarrier_arrive_expect_tx(bar[0], 16)
            if CL == 1:
                T.ptx.clusterlaunchcontrol_try_cancel(res[OFF], bar[0])
            elif T.cluster_rank() == 0:
                T.ptx.clusterlaunchcontrol_try_cancel_multicast(res[OFF], bar[0])

    @T.macro
    def meet():
        if CL == 1:
            T.ptx.syncthreads()
        else:
            T.ptx.cluster_sync()

    @T.prim_func
    def k(C: T.Tensor((8,), "int32"), W: T.Tensor((8,), "int32")):
        T.launch(grid=(8,), threads=64, cluster=(CL,))
        res = T.alloc_shared((8,), "uint32")
        bar = T.alloc_shared((1,), "uint64")
        tile = T.alloc_local((1,), "int32")
        go = T.alloc_local((1,), "int32")
        ph = T.alloc_local((1,), "uint32")
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        meet()
        tile[0] = T.cta_id(0)
        go[0] = 1
        ph[0] = T.uint32(0)
        while go[0] == 1:
            if T.thread_id() == 0:
                C[tile[0]] = C[tile[0]] + 1
                W[tile[0]] = T.cta_id(0)
            request(res, bar)
            T.ptx.mbarrier_wait_parity(bar[0], ph[0])
            ph[0] = ph[0] ^ T.uint32(1)
            if T.ptx.clusterlaunchcontrol_query_is_canceled(res[OFF]):
                tile[0] = T.cast(T.ptx.clusterlaunchcontrol_query_first_ctaid_x(res[OFF]), "int32") + \
                    T.cast(T.cluster_rank(), "int32")
            else:
                if CTAID:
                    tile[0] = T.cast(T.ptx.clusterlaunchcontrol_query_first_ctaid_x(res[OFF]), "int32")
                go[0] = 0
            if SYNC:
                meet()
        if AFTER:
            request(res, bar)
            T.ptx.mbarrier_wait_parity(bar[0], ph[0])
    return k


def _run(k):
    c, w = np.zeros(8, np.int32), np.full(8, -1, np.int32)
    res = run(k, c, w, check=False)
    return res, c, w


@pytest.mark.parametrize("cluster", [1, 2])
def test_a_persistent_kernel_takes_every_tile_once_by_cancelling_clusters(cluster):
    """Clusters run one after another in launch order, so the first cluster cancels every later one and takes
    each of their tiles, once; the cancelled clusters never run."""
    res, c, w = _run(_persistent(cluster))
    assert res.problems == []
    np.testing.assert_array_equal(c, np.ones(8, np.int32))
    np.testing.assert_array_equal(w, np.arange(8) % cluster)


@pytest.mark.parametrize("cluster", [1, 2])
def test_a_request_overwriting_a_response_still_being_read_is_a_race(cluster):
    res, _, _ = _run(_persistent(cluster, sync=False))
    assert "race" in [p.kind for p in res.problems], res.problems


@pytest.mark.parametrize("mistake,kind,text", [
    ("after_failure", "clc_after_failure", "clusterlaunchcontrol_try_cancel from a CTA that already observed a "
                                           "failed response"),
    ("ctaid_of_failure", "clc_undefined_ctaid", "clusterlaunchcontrol_query_first_ctaid_x of a failed response: its "
                                                "CTA id is undefined"),
    ("misaligned", "misaligned", "the response address (16-byte aligned)")])
def test_undefined_uses_are_reported(mistake, kind, text):
    res, _, _ = _run(_persistent(**{mistake: True}))
    assert [p.kind for p in res.problems][:1] == [kind], res.problems
    assert text in str(res.problems[0])
