"""Fuzz the multi-rank simulator (area "dist"): random two-rank signal protocols (rounds of write -> barrier ->
release on the peer's flag -> wait for one's own flag -> read the peer's data, with random signal instructions,
seeds and a late rank). A whole protocol gives the peer's values and no problem; one dropped signal is a
deadlock; one dropped wait is a race. Bad ``run_ranks`` / ``Symmetric`` calls are refused with a typed error."""
from __future__ import annotations

import numpy as np
from harness import EXAMPLES, HOSTILE, Hostile, accept, refuse
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
    h = Hostile()
    for fn, names in ((lambda: Symmetric(h, (2,), "uint32", 2), ["name"]), (lambda: Symmetric("x", h, "uint32", 2),
                                                                           ["shape"]),
                      (lambda: Symmetric("x", (h,), "uint32", 2), ["shape"]),
                      (lambda: Symmetric("x", (2,), h, 2), ["dtype"]), (lambda: Symmetric("x", (2,), "uint32", h),
                                                                       ["world"]),
                      (lambda: s.on(h), ["rank"]), (lambda: s.set(h, np.zeros(32, np.uint32)), ["rank"]),
                      (lambda: s.set(0, h), ["shape", "array"]), (lambda: run_ranks(h, [(), ()]), ["kernel"]),
                      (lambda: run_ranks(k, h), ["one argument tuple per rank"]),
                      (lambda: run_ranks(k, [h, h]), ["one argument tuple per rank"]),
                      (lambda: run_ranks(k, [(s.on(0), h), (s.on(1), h)]), ["argument", "parameter"]),
                      (lambda: run_ranks(k, [(s.on(r), s.on(1 - r), s.on(r), s.on(1 - r), s.on(r), 7)
                                             for r in range(2)], seed=h), ["seed"])):
        refuse(A, fn, names=names)


# ---- a second launch per rank (side=): a copy stream's copies and flag writes beside a kernel that waits ----

def _push_kernel(rounds, kinds, drop_signal=None, name="push"):
    body = []
    for i in range(rounds):
        body += [f"    PeerData[{i * 32} + T.lane_id()] = T.uint32({i * 1000}) + T.cast(T.lane_id(), \"uint32\") + base",
                 "    T.ptx.bar_warp_sync(0xFFFFFFFF)",
                 "    if T.lane_id() == 0:",
                 f"        {SIGNALS[kinds[i]].format(i=i) if drop_signal != i else 'T.evaluate(0)'}"]
    src = f'''
@T.prim_func
def {name}(PeerData: T.Tensor(({rounds * 32},), "uint32"), PeerFlag: T.Tensor(({rounds},), "uint32"), base: T.uint32):
    T.launch(grid=(1,), threads=32)
''' + "\n".join(body) + "\n"
    return T.parse_script(src)


def _wait_kernel(rounds, drop_wait=None, name="waitread"):
    body = []
    for i in range(rounds):
        if drop_wait != i:
            body.append(f"    T.ptx.wait_geq_sys_u32(Flag[{i}], T.uint32(1))")
        body.append(f"    Out[{i * 32} + T.lane_id()] = Mine[{i * 32} + T.lane_id()]")
    src = f'''
@T.prim_func
def {name}(Mine: T.Tensor(({rounds * 32},), "uint32"), Flag: T.Tensor(({rounds},), "uint32"),
           Out: T.Tensor(({rounds * 32},), "uint32")):
    T.launch(grid=(1,), threads=32)
''' + "\n".join(body) + "\n"
    return T.parse_script(src)


def _run_side(main, pushes, rounds, seed, late):
    data, flag = Symmetric("data", (rounds * 32,), "uint32", 2), Symmetric("flag", (rounds,), "uint32", 2)
    for r in range(2):
        flag.set(r, np.zeros(rounds, np.uint32))
    outs = [np.zeros(rounds * 32, np.uint32) for _ in range(2)]
    side = [(pushes[r], (data.on(1 - r), flag.on(1 - r), 7 + 100000 * r)) for r in range(2)]
    res = run_ranks(main, [(data.on(r), flag.on(r), outs[r]) for r in range(2)], seed=seed, late=late, check=False,
                    side=side)
    return outs, {p.kind for p in res[0].problems}


@SETTINGS
@given(protocols, st.integers(0, 10**6), st.sampled_from([None, 0, 1]), st.integers(0, 300),
       st.sampled_from(["whole", "no_signal", "no_wait"]), st.data())
def test_a_side_launch_protocol_gives_the_values_or_its_report(proto, seed, late_rank, steps, mutation, data):
    rounds, kinds = proto
    i = data.draw(st.integers(0, rounds - 1))
    who = data.draw(st.integers(0, 1))
    late = None if late_rank is None else {late_rank: steps}
    pushes = [_push_kernel(rounds, kinds, name=f"push{r}") for r in range(2)]
    mains = [_wait_kernel(rounds, name=f"wait{r}") for r in range(2)]
    if mutation == "no_signal":
        pushes[who] = _push_kernel(rounds, kinds, drop_signal=i, name="nosig")
    if mutation == "no_wait":
        mains[who] = _wait_kernel(rounds, drop_wait=i, name="nowait")
        late = {1 - who: 400}       # the peer's pushes come late, so the read without its wait is early

    def check(v):
        outs, found = v
        if mutation == "no_signal":
            return "deadlock" in found
        if mutation == "no_wait":
            return "race" in found
        return not found and all((outs[r] == _want(rounds, 1 - r)).all() for r in range(2))
    accept(A, lambda: _run_side(mains, pushes, rounds, seed, late), check, seconds=30)


def test_bad_side_launches_are_refused():
    k = _wait_kernel(1)
    s, f = Symmetric("s", (32,), "uint32", 2), Symmetric("f", (1,), "uint32", 2)
    main = [(s.on(r), f.on(r), np.zeros(32, np.uint32)) for r in range(2)]
    refuse(A, lambda: run_ranks(k, main, side="x"), names=["side="])
    refuse(A, lambda: run_ranks(k, main, side=[None]), names=["side="])
    refuse(A, lambda: run_ranks(k, main, side=[None, (k,)]), names=["side[1]"])
    refuse(A, lambda: run_ranks(k, main, side=[None, (k, [(s.on(0),)])]), names=["argument"])
    refuse(A, lambda: run_ranks(k, main, side=Hostile()), names=["side="])
    refuse(A, lambda: run_ranks(k, main, side=[None, Hostile()]), names=["side[1]"])
    refuse(A, lambda: run_ranks(k, main, late=Hostile()), names=["late="])
    refuse(A, lambda: run_ranks(k, main, late=[(0, 5)]), names=["late="])


# ---- the dist kernels' options: a kernel or a typed error naming the option ----

@SETTINGS
@given(st.integers(1, 40).map(lambda x: 64 * x),
       st.sampled_from([64, 128, 136, 200]), st.sampled_from([64, 104, 256]), st.integers(-1, 2),
       st.one_of(st.sampled_from(["movers", "copy_engine", "nccl", None, 3]), HOSTILE),
       st.one_of(st.integers(-2, 12), st.none(), st.just(2.5), HOSTILE))
def test_all_gather_options_build_or_refuse(M, N, K, me, transfer, chunks):
    from tirxpy_kernels.dist_ag_gemm import ag_gemm

    refuse(A, lambda: ag_gemm(M, N, K, me=me, BN=64, STAGES=2, sms=2, transfer=transfer, CHUNKS=chunks),
           names=["transfer", "CHUNKS", "me =", "split evenly", "world", "BN", "M ="], allow=lambda v: v is not None,
           seconds=30)


@SETTINGS
@given(st.integers(2, 40).map(lambda x: 64 * x), st.one_of(st.integers(-2, 24), HOSTILE),
       st.sampled_from([64, 128]))
def test_reduce_scatter_lags_build_or_refuse(M, lag, BN):
    from tirxpy_kernels.dist_rs_gemm import rs_gemm

    refuse(A, lambda: rs_gemm(M, 128, 64, me=0, BN=BN, STAGES=2, sms=2, LAG=lag, transfer="push"), names=["LAG"],
           allow=lambda v: v is not None, seconds=30)


@SETTINGS
@given(st.integers(1, 40).map(lambda x: 64 * x), st.sampled_from([64, 128, 136, 200]),
       st.one_of(st.sampled_from(["copy_engine", "push", "nccl", None, 1]), HOSTILE),
       st.one_of(st.integers(-2, 40), st.none(), st.just(True), HOSTILE),
       st.one_of(st.none(), st.integers(-1, 12), HOSTILE))
def test_reduce_scatter_transfers_and_chunks_build_or_refuse(M, N, transfer, chunks, lag):
    from tirxpy_kernels.dist_rs_gemm import rs_gemm

    kw = {} if chunks is None else {"CHUNKS": chunks}
    refuse(A, lambda: rs_gemm(M, N, 64, me=0, BN=64, STAGES=2, sms=2, LAG=lag, transfer=transfer, **kw),
           names=["transfer", "CHUNKS", "LAG", "split evenly", "M =", "N ="], allow=lambda v: v is not None, seconds=30)


@SETTINGS
@given(st.integers(1, 24).map(lambda x: 128 * x), st.sampled_from([256, 512, 1000]), st.sampled_from(["K", "MN"]),
       st.sampled_from(["copy_engine", "copy_engine", "push"]),
       st.one_of(st.tuples(st.sampled_from([0, 0, 4, 1, 2, -1, -20]), st.integers(-1, 3),
                           st.sampled_from([80, 112, 176, 208, 240, 250])),
                 st.just([4, 1, 240]), st.just((4, 1)), st.none(), HOSTILE,
                 HOSTILE.map(lambda h: [h, 1, 240])))
def test_reduce_scatter_splits_build_or_refuse(M, N, major, transfer, split):
    # split rows drawn as an offset below the shard's tile rows (0 and 4 fit, the others do not)
    from tirxpy_kernels.dist_rs_gemm import rs_gemm

    tr = -(-(M // 2) // 128)
    if isinstance(split, tuple) and len(split) == 3:
        split = (tr - split[0], split[1], split[2])
    refuse(A, lambda: rs_gemm(M, N, 64, me=0, BN=256 if N >= 512 else 128, STAGES=2, sms=4, b_major=major,
                              transfer=transfer, SPLIT=split),
           names=["SPLIT", "split evenly"], allow=lambda v: v is not None, seconds=30)


@settings(max_examples=min(EXAMPLES, 4), deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.integers(1, 3), st.sampled_from([64, 136]), st.integers(1, 5), st.integers(1, 3), st.integers(0, 10**6),
       st.sampled_from([None, "flag_wait", "peer_signal", "ready_signal"]))
def test_reduce_scatter_copy_engine_protocol_gives_float64_or_its_report(rows, N, chunks, sms, seed, drop):
    # Ms of `rows` tile rows (the last one 40 rows short), random chunks and grid: the whole protocol matches the
    # float64 reference with no problem; each mutation is reported (a race or a deadlock)
    import torch

    from tirxpy_kernels.dist_rs_gemm import simulate

    M = 2 * (rows * 128 - 40)

    def run():
        return simulate(M, N, 128, BN=64, sms=sms, seed=seed, epoch=2, drop=drop, check=False, CHUNKS=chunks)

    def good(res):
        outs, a, b, probs = res
        kinds = {p.kind for p in probs}
        if drop is None:
            ref = [a[r * (M // 2):(r + 1) * (M // 2)].double() @ b.double() for r in range(2)]
            mag = [a[r * (M // 2):(r + 1) * (M // 2)].double().abs() @ b.double().abs() for r in range(2)]
            return not probs and all(bool(torch.all((o.double() - ref[r]).abs() <= 2 ** -7 * mag[r] + 1e-6))
                                     for r, o in enumerate(outs))
        return kinds & {"race", "deadlock"} != set()
    accept(A, run, good, seconds=120)
