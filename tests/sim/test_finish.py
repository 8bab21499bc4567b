"""tirxpy.sim.finish: end-of-cluster checks (pending events fire, unbalanced mbarriers, TMEM leaks)."""
from types import SimpleNamespace

from tirxpy.sim.finish import finish_cluster
from tirxpy.sim.mbarrier import MBar


def _machine():
    reports = []
    m = SimpleNamespace(events=[], reports=reports)
    m.report = lambda kind, msg, *a, **k: reports.append((kind, msg))
    return m


def _cta(bars, allocs=None):
    return SimpleNamespace(mbarriers=bars, tmem=SimpleNamespace(allocs=allocs or {}), rank=0, describe=lambda: "cta 0")


def test_balanced_barrier_and_no_tmem_is_clean_and_events_fire():
    m = _machine()
    fired = []
    m.events.append(SimpleNamespace(fire=lambda: fired.append(1)))
    b = MBar(0x10, 1, None)
    b.pending = 0
    b.complete_if_ready()
    finish_cluster(m, [_cta({0x10: b})])
    assert fired == [1] and m.events == [] and m.reports == []


def test_unbalanced_barrier_is_reported():
    m = _machine()
    b = MBar(0x20, 2, None)
    b.pending = 1
    finish_cluster(m, [_cta({0x20: b})])
    assert [k for k, _ in m.reports] == ["mbarrier_unbalanced"]
    assert "1 of 2 arrivals" in m.reports[0][1] and "0x20" in m.reports[0][1]


def test_negative_tx_with_early_bytes_is_tx_underflow():
    m = _machine()
    b = MBar(0x30, 1, None)
    b.tx, b.early = -128, (None, "warp 0")
    finish_cluster(m, [_cta({0x30: b})])
    assert [k for k, _ in m.reports] == ["tx_underflow"] and "128 bytes" in m.reports[0][1]


def test_tmem_left_allocated_is_a_leak():
    m = _machine()
    finish_cluster(m, [_cta({}, {0: 32})])
    assert [k for k, _ in m.reports] == ["tmem_leak"] and "(0, 32)" in m.reports[0][1]
