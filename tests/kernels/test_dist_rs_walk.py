"""The reduce-scatter's walk and chunks (tirxpy_kernels/dist_rs_walk.py): both walks cover both shards once, the
interleaved walk keeps each own row at least lag + group rows after the peer's, the halves walk puts every peer
tile before every own tile in each CTA's sequence (what makes the copy-engine protocol deadlock-free), and the
chunks cover each shard's rows in whole tile rows."""
import pytest
from hypothesis import given, settings, strategies as st

from tirxpy_kernels.dist_rs_gemm import rs_plan
from tirxpy_kernels.dist_rs_walk import (chunk_halves, chunk_shard_rows, rs_chunks, rs_lag, rs_tile, shard_tile_rows,
                                         walk_row)
from tirxpy_kernels.errors import KernelConfigError


def _cover(walk, M, N, BN, ms, tr, cols, me):
    assert sorted((w[0], w[2]) for w in walk) == sorted(
        (q * ms + l * 128, n * BN) for q in range(2) for l in range(tr) for n in range(cols))
    assert all(w[0] == (me if w[3] else 1 - me) * ms + w[1] for w in walk)


@pytest.mark.parametrize("M,N,BN", [(520, 512, 128), (16384, 8192, 256), (8192, 28672, 256), (8192, 8192, 256)])
def test_interleaved_walk_covers_both_shards_and_the_peer_computes_each_own_tile_first(M, N, BN):
    ms, tr = M // 2, shard_tile_rows(M, 2)
    P = rs_plan(M, N, 256, BN=BN, sms=132)
    lag = rs_lag(tr, P.tile_cols, P.units, P.group)
    walks = [[rs_tile(P, t, me, tr, ms, lag) for t in range(P.tiles)] for me in range(2)]
    half = P.tiles // 2
    for me in range(2):
        _cover(walks[me], M, N, BN, ms, tr, P.tile_cols, me)
        assert sum(w[3] for w in walks[me]) == half
    # the peer computes each of this rank's tiles before this rank needs it, and the peer's tiles are not all
    # first where the shard is long enough to interleave
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


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(1, 6), st.sampled_from([64, 128, 256]), st.integers(1, 9), st.integers(0, 1))
def test_halves_walk_puts_every_peer_tile_before_every_own_tile_of_each_cta(tr, cols, BN, sms, me):
    # a shard of tr tile rows (the last one ragged) and cols column tiles, on any grid
    ms = tr * 128 - 40 * (tr > 1)
    M, N = 2 * ms, cols * BN
    P = rs_plan(M, N, 64, BN=BN, sms=sms)
    walk = [rs_tile(P, t, me, tr, ms, None) for t in range(P.tiles)]
    _cover(walk, M, N, BN, ms, tr, cols, me)
    assert [w[3] for w in walk] == [False] * (P.tiles // 2) + [True] * (P.tiles // 2)
    for unit in range(P.units):
        seq = [walk[t][3] for t in range(unit, P.tiles, P.units)]
        assert seq == sorted(seq)        # within a CTA: peer tiles (False) first


@given(st.integers(1, 200), st.integers(1, 40))
def test_chunks_are_whole_tile_rows_covering_the_shard(tr, chunks):
    per, n = rs_chunks(tr, chunks)
    assert n <= chunks and (n - 1) * per < tr <= n * per
    ms = tr * 128 - 17
    rows = chunk_shard_rows(2 * ms, 2, chunks)
    assert rows[0][0] == 0 and rows[-1][1] == ms and len(rows) == n
    assert all(a[1] == b[0] and a[0] % 128 == 0 for a, b in zip(rows, rows[1:]))
    halves = chunk_halves(2 * ms, 300, 128, 2, chunks)
    assert sum(halves) == 2 * tr * 3 and len(halves) == n


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, None])
def test_bad_chunk_counts_are_typed_errors(bad):
    with pytest.raises(KernelConfigError, match="CHUNKS"):
        rs_chunks(8, bad)
