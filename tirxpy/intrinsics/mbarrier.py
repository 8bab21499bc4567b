"""mbarrier: init, arrive (with transaction counts), wait on a phase parity, invalidate.

PTX ISA 9.7.13.15 (Parallel Synchronization and Communication: mbarrier). ``bar`` is the
32-bit shared::cta address of an 8-byte aligned uint64 in shared memory.
"""
from .defs import cluster, out, pred, reg, row, smem

row("mbarrier_init", "mbarrier.init.shared::cta.b64 [{bar}], {count};", [smem("bar"), reg("count")],
    checks=[lambda k: None if k.get("count", 1) >= 1 and k.get("count", 1) < (1 << 20)
            else f"count {k['count']} must be in [1, 2**20 - 1]"],
    doc="Initialise the barrier at bar with an expected arrival count.")
row("mbarrier_inval", "mbarrier.inval.shared::cta.b64 [{bar}];", [smem("bar")])
row("mbarrier_arrive", "mbarrier.arrive.shared::cta.b64 {state}, [{bar}];", [out("state", "uint64"), smem("bar")],
    ret="state")
row("mbarrier_arrive_count", "mbarrier.arrive.shared::cta.b64 {state}, [{bar}], {count};",
    [out("state", "uint64"), smem("bar"), reg("count")], ret="state", lowest="sm_90")
row("mbarrier_arrive_expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64 {state}, [{bar}], {tx_bytes};",
    [out("state", "uint64"), smem("bar"), reg("tx_bytes")], ret="state", lowest="sm_90",
    doc="Arrive once and add tx_bytes to the barrier's expected transaction count (TMA completion).")
row("mbarrier_expect_tx", "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [{bar}], {tx_bytes};",
    [smem("bar"), reg("tx_bytes")], lowest="sm_90")
row("mbarrier_arrive_expect_tx_remote",
    "mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [{bar}], {tx_bytes};",
    [cluster("bar"), reg("tx_bytes")], lowest="sm_90",
    doc="Arrive once on a barrier of another CTA of the cluster (address from mapa) and add tx_bytes to its "
        "expected transaction count: announce the bytes a multicast TMA load will complete there.")
row("mbarrier_arrive_remote", "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [{bar}];", [cluster("bar")],
    lowest="sm_90", doc="Arrive on a barrier of another CTA of the cluster (address from mapa).")
row("mbarrier_arrive_cluster", "mbarrier.arrive.shared::cluster.b64 _, [{bar}];", [cluster("bar")],
    lowest="sm_90", doc="Arrive on a barrier of any CTA of the cluster (address from mapa) with the default "
                        ".release.cta semantics: what a pipeline uses to hand a stage back to a peer's producer "
                        "(the data was read by wgmma / TMA, already complete). mbarrier_arrive_remote's "
                        ".release.cluster also orders this thread's earlier memory accesses cluster-wide, a "
                        "GPU-scope fence in SASS that costs hundreds of cycles per arrival.")
row("mbarrier_test_wait_parity", "mbarrier.test_wait.parity.shared::cta.b64 {done}, [{bar}], {parity};",
    [pred("done", "w"), smem("bar"), reg("parity")], ret="done")
row("mbarrier_try_wait_parity", "mbarrier.try_wait.parity.shared::cta.b64 {done}, [{bar}], {parity};",
    [pred("done", "w"), smem("bar"), reg("parity")], ret="done", lowest="sm_90")
row("mbarrier_try_wait_parity_cluster",
    "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 {done}, [{bar}], {parity};",
    [pred("done", "w"), smem("bar"), reg("parity")], ret="done", lowest="sm_90")
row("mbarrier_wait_parity",
    """{
    .reg .pred P_wait;
    TX_WAIT_LOOP:
    mbarrier.try_wait.parity.shared::cta.b64 P_wait, [{bar}], {parity};
    @!P_wait bra TX_WAIT_LOOP;
    }""",
    [smem("bar"), reg("parity")], lowest="sm_90", ptx="mbarrier.try_wait.parity",
    doc="Spin until the barrier's phase with the given parity has completed.")
