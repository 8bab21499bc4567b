"""mbarrier_arrive_expect_tx_remote: the table row (shared::cluster operand, sm_90).
Its simulator model is exercised by tests/kernels/test_gemm_sm90_sim.py (2-CTA multicast GEMM)."""
from tirxpy.intrinsics import lookup


def test_row():
    e = lookup("mbarrier_arrive_expect_tx_remote")
    assert "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [{bar}], {tx_bytes};" in e.template
    assert e.operand("bar").kind == "cluster_addr" and str(e.lowest) == "sm_90"
