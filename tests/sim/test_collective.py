"""tirxpy.sim.collective: warpgroup rendezvous (the last warp to arrive runs the model once)."""
from types import SimpleNamespace

import numpy as np

from tirxpy.sim.collective import collective, warpgroup_members
from tirxpy.sim.interp import Block


def _warp(wid, cta, alive=True):
    return SimpleNamespace(wid=wid, cta=cta, coll_seq={}, alive=np.full(32, alive))


def test_warpgroup_members_are_the_live_warps_of_the_same_group():
    cta = SimpleNamespace(warps=[])
    cta.warps = [_warp(i, cta, alive=(i != 6)) for i in range(8)]
    assert warpgroup_members(cta.warps[1]) == [0, 1, 2, 3]
    assert warpgroup_members(cta.warps[5]) == [4, 5, 7]


def test_last_member_runs_fn_once_and_the_others_block_then_share_the_result():
    cta = SimpleNamespace(collectives={})
    calls = []

    def fn(parts):
        calls.append(sorted(parts))
        return "R"
    ws = [_warp(i, cta) for i in range(2)]
    ctxs = [SimpleNamespace(w=w, cta=cta, span=None) for w in ws]
    g0 = collective(ctxs[0], "wgmma", [0, 1], fn, "wgmma")
    blk = next(g0)
    assert isinstance(blk, Block) and not blk.cond() and "warps [1]" in blk.what
    g1 = collective(ctxs[1], "wgmma", [0, 1], fn, "wgmma")
    try:
        next(g1)
        raise AssertionError("the last member must not block")
    except StopIteration as e:
        assert e.value == "R"
    assert calls == [[0, 1]] and blk.cond() and cta.collectives == {}
    try:
        next(g0)
    except StopIteration as e:
        assert e.value == "R"
    # a second round uses a fresh rendezvous (sequence numbers advance)
    assert ws[0].coll_seq == {"wgmma": 1} and ws[1].coll_seq == {"wgmma": 1}
