"""Asynchronous units as agents: each keeps its own vector clock so the race checker can tell
which waits order its accesses."""
from __future__ import annotations

import numpy as np

from .races import fit


def agent(machine, key, name):
    tab = machine.cluster_state.setdefault("agents", {})
    a = tab.get(key)
    if a is None:
        a = machine.clocks.add(name)
        tab[key] = a
    return a


def issue_vc(w, a):
    """The clock an async operation issued now by warp ``w`` runs with on agent ``a``."""
    vc = fit(w.vc.copy(), a + 1)
    clocks = w.cta.machine.cluster_state.setdefault("agent_clock", {})
    clocks[a] = clocks.get(a, 0) + 1
    vc[a] = max(vc[a], clocks[a])
    w.tick()
    return vc


def swizzle_addr(addr, swizzle_bytes):
    """The hardware's shared-memory swizzle of byte addresses (Swizzle<B, 4, 3>)."""
    if not swizzle_bytes:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[swizzle_bytes]
    addr = np.asarray(addr, np.int64)
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)
