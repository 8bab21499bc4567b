"""Fuzz the multi-rank simulator (area "dist"): random two-rank signal protocols (rounds of write -> barrier ->
release on the peer's flag -> wait for one's own flag -> read the peer's data, with random signal instructions,
seeds and a late rank). A whole protocol gives the peer's values and no problem; one dropped signal is a
deadlock; one dropped wait is a race. Bad ``run_ranks`` / ``Symmetric`` calls are refused with a typed error."""
from __future__ import annotations

import numpy as np
from harness import EXAMPLES, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy import T
from tirxpy.sim.ranks import Symmetric, run_ranks

A = "dist"
SETTINGS = settings(max_examples=min(EXAMPLES, 12), deadline=None, suppress_health_check=list(HealthCheck),
                    database=None)
SIGNALS = {"st": "T.ptx.st_release_sys_u32(PeerFlag[{i}], T.uint32(1))",
           "red": "T.ptx.red_release_sys_add_u32(PeerFlag[{i}], T.uint32(1))",
           "atom": "T.evaluate(T.ptx.atom_acq_rel_sys_add_u32(PeerFlag[{i}], T.uint32(1)))"}


def _kernel(rounds, kinds, drop_signal=None, drop_wait=None, name="proto"):
    body = []
    for i in range(rounds):
        body += [f"    if T.warp_id() == 0:",
                 f"        Mine[{i * 32} + T.lane_id()] = T.uint32({i * 1000}) + T.cast(T.lane_id(), \"uint32\") + base",
                 f"    T.ptx.barrier_sync(1, 64)",
                 f"    if T.warp_id() == 1:",
                 f"        if T.lane_id() == 0:",
                 f"            {SIGNALS[kinds[i]].format(i=i) if drop_signal != i else 'T.evaluate(0)'}"]
        if drop_wait != i:
            body.append(f"    T.ptx.wait_geq_sys_u32(Flag[{i}], T.uint32(1))")
        body += [f"    if T.warp_id() == 0:",
                 f"        Out[{i * 32} + T.lane_id()] = Peer[{i * 32} + T.lane_id()]"]
    src = f'''
@T.prim_func
def {name}(Mine: T.Tensor(({rounds * 32},), "uint32"), Peer: T.Tensor(({rounds * 32},), "uint32"),
           Flag: T.Tensor(({rounds},), "uint32"), PeerFlag: T.Tensor(({rounds},), "uint32"),
           Out: T.Tensor(({rounds * 32},), "uint32"), base: T.uint32):
    T.launch(grid=(1,), threads=64)
''' + "\n".join(body) + "\n"
    return T.parse_script(src)


def _run(kernels, rounds, seed, late):
    data, flag = Symmetric("data", (rounds * 32,), "uint32", 2), Symmetric("flag", (rounds,), "uint32", 2)
    for r in range(2):
        flag.set(r, np.zeros(rounds, np.uint32))
    outs = [np.zeros(rounds * 32, np.uint32) for _ in range(2)]
    res = run_ranks(kernels, [(data.on(r), data.on(1 - r), flag.on(r), flag.on(1 - r), outs[r], 7 + 100000 * r)
                              for r in range(2)], seed=seed, late=late, check=False)
    return outs, {p.kind for p in res[0].problems}


def _want(rounds, r):
    return np.concatenate([np.arange(32, dtype=np.uint32) + i * 1000 + 7 + 100000 * r for i in range(rounds)])


protocols = st.integers(1, 3).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.sampled_from(sorted(SIGNALS)),
                                                                                min_size=n, max_size=n)))


@SETTINGS
@given(protocols, st.integers(0, 10**6), st.sampled_from([None, 0, 1]), st.integers(0, 300))
def test_a_whole_protocol_gives_the_peer_values(proto, seed, late_rank, steps):
    rounds, kinds = proto
    k = _kernel(rounds, kinds)
    late = None if late_rank is None else {late_rank: steps}

    def check(v):
        outs, kinds_found = v
        return not kinds_found and all((outs[r] == _want(rounds, 1 - r)).all() for r in range(2))
    accept(A, lambda: _run(k, rounds, seed, late), check, seconds=30)


@SETTINGS
@given(protocols, st.integers(0, 10**6), st.integers(0, 1), st.data())
def test_one_dropped_signal_is_a_deadlock(proto, seed, who, data):
    rounds, kinds = proto
    i = data.draw(st.integers(0, rounds - 1))
    ks = [_kernel(rounds, kinds, name="ok"), _kernel(rounds, kinds, drop_signal=i, name="nosig")]
    if who:
        ks.reverse()
    accept(A, lambda: _run(ks, rounds, seed, None), lambda v: "deadlock" in v[1], seconds=30)


@SETTINGS
@given(protocols, st.integers(0, 10**6), st.integers(0, 1), st.data())
def test_one_dropped_wait_is_a_race(proto, seed, who, data):
    rounds, kinds = proto
    i = data.draw(st.integers(0, rounds - 1))
    ks = [_kernel(rounds, kinds, name="ok"), _kernel(rounds, kinds, drop_wait=i, name="nowait")]
    if who:
        ks.reverse()
    accept(A, lambda: _run(ks, rounds, seed, None), lambda v: "race" in v[1], seconds=30)


def test_bad_calls_are_refused():
    k = _kernel(1, ["st"])
    s = Symmetric("s", (32,), "uint32", 2)
    refuse(A, lambda: Symmetric("x", (2,), "uint32", 0), names=["world"])
    refuse(A, lambda: s.on(2), names=["ranks 0 .. 1"])
    refuse(A, lambda: s.set(0, np.zeros(3, np.uint32)), names=["shape"])
    refuse(A, lambda: run_ranks(k, "x"), names=["one argument tuple per rank"])
    refuse(A, lambda: run_ranks([k], [(), ()]), names=["list of 2 kernels"])
    refuse(A, lambda: run_ranks(k, [(s.on(0),) * 6, (s.on(1),) * 6]), names=["parameter", "scalar"])
