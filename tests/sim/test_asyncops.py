"""tirxpy.sim.asyncops: async-unit agents, their issue clocks, and the hardware smem swizzle."""
from types import SimpleNamespace

import numpy as np

from tirxpy.sim.asyncops import agent, issue_vc, swizzle_addr


def _machine():
    names = []

    def add(name):
        names.append(name)
        return len(names) - 1
    return SimpleNamespace(cluster_state={}, clocks=SimpleNamespace(add=add), names=names)


def test_swizzle_addr_is_swizzle_b_4_3():
    a = np.arange(0, 2048, 16)
    assert (swizzle_addr(a, 0) == a).all()
    for sw, bits in ((32, 1), (64, 2), (128, 3)):
        want = [x ^ (((x >> 7) & ((1 << bits) - 1)) << 4) for x in a.tolist()]
        assert swizzle_addr(a, sw).tolist() == want
    # 128B swizzle: row 1 (bytes 128..255) swaps its 16-byte chunks pairwise
    assert swizzle_addr(np.array([128, 144, 128 * 7]), 128).tolist() == [144, 128, 128 * 7 + 112]


def test_agent_is_created_once_per_key():
    m = _machine()
    a = agent(m, ("tma", 0), "tma unit")
    b = agent(m, ("tma", 1), "tma unit 1")
    assert agent(m, ("tma", 0), "again") == a and a != b
    assert m.names == ["tma unit", "tma unit 1"]


def test_issue_vc_advances_the_agents_clock_and_ticks_the_warp():
    m = _machine()
    ticks = []
    w = SimpleNamespace(vc=np.array([5, 0], np.int64), cta=SimpleNamespace(machine=m), tick=lambda: ticks.append(1))
    a = 3
    v1 = issue_vc(w, a)
    v2 = issue_vc(w, a)
    assert len(v1) >= a + 1 and v1[0] == 5 and v1[a] == 1 and v2[a] == 2
    assert w.vc.tolist() == [5, 0] and len(ticks) == 2
