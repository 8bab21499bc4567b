"""End-of-cluster checks: mbarriers whose arrivals / transaction bytes never balanced, tensor
memory never deallocated, asynchronous copies that never landed."""
from __future__ import annotations


def finish_cluster(machine, ctas):
    for ev in list(machine.events):
        machine.events.remove(ev)
        ev.fire()
    for c in ctas:
        for addr, b in c.mbarriers.items():
            if b.tx < 0 and b.early is not None:
                span, who = b.early
                machine.report("tx_underflow", f"{-b.tx} bytes completed on the mbarrier at smem {addr:#x} in phase "
                               f"{b.phase} and no expect_tx ever announced them", span, who,
                               ["arrive with T.ptx.mbarrier_arrive_expect_tx(bar, bytes) (or mbarrier_expect_tx) "
                                "counting every byte that completes on the barrier in that phase"],
                               key=("txu", c.rank, addr))
            elif b.pending != b.expected or b.tx != 0:
                machine.report("mbarrier_unbalanced",
                               f"the mbarrier at smem {addr:#x} ends in phase {b.phase} with {b.expected - b.pending} of "
                               f"{b.expected} arrivals and tx-count {b.tx}: arrive counts / expect_tx bytes never balanced",
                               b.span, c.describe(), key=("unbal", c.rank, addr))
        if c.tmem.allocs:
            machine.report("tmem_leak", f"tensor memory columns {sorted(c.tmem.allocs.items())} (start, ncols) are "
                           "still allocated when the CTA exits (tcgen05.dealloc missing)", None, c.describe(),
                           key=("tmem_leak", c.rank))
