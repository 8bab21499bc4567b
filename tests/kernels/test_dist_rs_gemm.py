"""GEMM + reduce-scatter (tirxpy_kernels/dist_rs_gemm.py) on two simulated ranks: float64 reference at ragged
shapes (a shard ending inside a tile row, N inside a tile), a later call with a late rank, K long enough that an
own tile fetches the peer's partial inside its k-loop, and the protocol's mutations (an own tile that reads the
peer's partial before its flag, or a half counted in before its stores completed: races; a half never counted
in: deadlock)."""
import pytest
import torch

from tests.kernels.dist_helpers import rs_close_to_float64, run_rs
from tirxpy_kernels.dist_rs_gemm import rs_gemm, rs_lag, rs_plan, rs_tile, shard_tile_rows, walk_row
from tirxpy_kernels.errors import KernelConfigError


def test_two_ranks_match_float64_on_a_later_call_with_a_late_rank():
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(200, 136, 208, epoch=3, late={1: 500}, seed=seed)
    assert probs == []
    for r, o in enumerate(outs):
        assert not torch.isnan(o).any() and rs_close_to_float64(o, a, b, r)


def test_fetch_inside_the_k_loop_two_tile_rows_per_shard():
    # K shard 512 = 8 k-blocks > 3 store rounds (BN 192): the own tiles' fetch runs between the two k-loops
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(520, 320, 1024, BN=192, epoch=2, seed=seed)
    assert probs == []
    for r, o in enumerate(outs):
        assert not torch.isnan(o).any() and rs_close_to_float64(o, a, b, r)


@pytest.mark.parametrize("drop,sms,kind", [("flag_wait", 2, "race"), ("push_wait", 1, "race"),
                                           ("peer_signal", 2, "deadlock")])
def test_protocol_mutations_are_reported(drop, sms, kind):
    outs, a, b, probs = run_rs(256, 256, 128, drop=drop, sms=sms, seed=0, epoch=2, check=False)
    assert kind in {p.kind for p in probs}
    if kind == "race":
        assert any("reads R" in str(p) for p in probs if p.kind == "race")


@pytest.mark.parametrize("M,N,BN", [(520, 512, 128), (16384, 8192, 256), (8192, 28672, 256), (8192, 8192, 256)])
def test_walk_covers_both_shards_and_the_peer_computes_each_own_tile_first(M, N, BN):
    ms, tr = M // 2, shard_tile_rows(M, 2)
    P = rs_plan(M, N, 256, BN=BN, sms=132)
    lag = rs_lag(tr, P.tile_cols, P.units, P.group)
    walks = [[rs_tile(P, t, me, tr, ms, lag) for t in range(P.tiles)] for me in range(2)]
    half = P.tiles // 2
    for me in range(2):
        assert sorted((w[0], w[2]) for w in walks[me]) == sorted(
            (q * ms + l * 128, n * BN) for q in range(2) for l in range(tr) for n in range(P.tile_cols))
        assert all(w[0] == (me if w[3] else 1 - me) * ms + w[1] for w in walks[me])
        assert sum(w[3] for w in walks[me]) == half
    # the peer computes each of this rank's tiles before this rank needs it (walk_row's distance is tested on its
    # own below), and the peer's tiles are not all first where the shard is long enough to interleave
    for me in range(2):
        at_peer = {w[1:3]: t for t, w in enumerate(walks[1 - me]) if not w[3]}
        for t, w in enumerate(walks[me]):
            if w[3]:
                assert at_peer[w[1:3]] < t
        if lag < tr:
            assert [w[3] for w in walks[me]] != [False] * half + [True] * half


@pytest.mark.parametrize("tr", range(1, 40))
def test_walk_rows_are_a_permutation_with_each_own_row_at_least_lag_plus_group_after_the_peers(tr):
    for lag in range(tr + 1):
        if (tr - lag) % 4:
            continue
        rows = [walk_row(w, tr, lag, 4) for w in range(2 * tr)]
        assert sorted(rows) == sorted((own, r) for own in (False, True) for r in range(tr))
        pos = {x: i for i, x in enumerate(rows)}
        assert min(pos[(True, r)] - pos[(False, r)] for r in range(tr)) >= min(lag + 4, tr)


@pytest.mark.parametrize("M,N,lag", [(1024, 136, 0), (2048, 64, 4)])
def test_an_interleaved_walk_matches_float64(M, N, lag):
    # LAG = 0: own rows 4 walk rows after the peer's from the start, so own tiles wait for partials the peer
    # pushed moments before; Ms = 1024 with LAG = 4: four peer rows, then blocks of four alternating
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(M, N, 128, BN=64, epoch=2, seed=seed, LAG=lag, late={seed % 2: 300})
    assert probs == []
    for r, o in enumerate(outs):
        assert not torch.isnan(o).any() and rs_close_to_float64(o, a, b, r)


@pytest.mark.parametrize("kw,msg", [
    (dict(M=256, N=128, K=64, me=0, BN=96), "multiple of 64"),
    (dict(M=256, N=132, K=64, me=0, BN=128), "multiple of 8"),
    (dict(M=256, N=128, K=64, me=0, drop="nope"), "unknown drop"),
    (dict(M=256, N=128, K=64, me=0, world=3), "world = 2"),
    (dict(M=1024, N=128, K=64, me=0, BN=128, LAG=1), "LAG = 1"),
    (dict(M=1024, N=128, K=64, me=0, BN=128, LAG=5), "LAG = 5"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        rs_gemm(**kw)
