"""The reduce-scatter's walk and chunks (tirxpy_kernels/dist_rs_walk.py): both walks cover both shards once, the
interleaved walk keeps each own row at least lag + group rows after the peer's, the halves walk puts every peer
tile before every own tile in each CTA's sequence (what makes the copy-engine protocol deadlock-free), also with
a split's narrow tiles in the peer's rows, and the chunks cover each shard's rows in whole tile rows and count
every tile of the walk."""
import pytest
from hypothesis import given, settings, strategies as st

from tirxpy_kernels.dist_rs_gemm import rs_plan
from tirxpy_kernels.dist_rs_walk import (HALVES, chunk_halves, chunk_shard_rows, rs_chunks, rs_lag, rs_split, rs_tile,
                                         shard_tile_rows, walk_row)
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


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(2, 6), st.integers(0, 4), st.sampled_from([208, 224, 240]), st.integers(1, 9),
       st.integers(0, 1), st.integers(0, 5), st.data())
def test_split_walk_covers_each_row_and_keeps_own_tiles_wide_and_last(tr, cols, wide, bn2, sms, me, chunks, data):
    ms = tr * 128 - 40 * (tr > 1)
    M, N = 2 * ms, cols * 256 - 56
    wide = min(wide, cols - 1)
    rows = data.draw(st.sampled_from(range(tr, 0, -4)))
    P = rs_plan(M, N, 64, BN=256, sms=sms, b_major="K", SPLIT=(rows, wide, bn2))
    walk = [rs_tile(P, t, me, tr, ms, None) for t in range(P.tiles)]
    spans = {}
    for a0, l0, n0, own, w in walk:
        assert a0 == (me if own else 1 - me) * ms + l0
        assert w or (not own and l0 // 128 < rows)      # narrow tiles: only in the peer's split rows
        spans.setdefault((own, l0), []).append((n0, n0 + (256 if w else bn2)))
    assert sorted(spans) == sorted((own, l * 128) for own in (False, True) for l in range(tr))
    for row in spans.values():      # each row's tiles abut from column 0 to past N
        row.sort()
        assert row[0][0] == 0 and row[-1][1] >= N > row[-1][0]
        assert all(x[1] == y[0] for x, y in zip(row, row[1:]))
    for unit in range(P.units):
        seq = [walk[t][3] for t in range(unit, P.tiles, P.units)]
        assert seq == sorted(seq)
    n = max(chunks, 1)
    per, _ = rs_chunks(tr, n)
    counted = [0] * len(chunk_shard_rows(M, 2, n))
    for _a0, l0, _n0, own, _w in walk:
        if not own:
            counted[l0 // 128 // per] += HALVES
    assert chunk_halves(M, N, 256, 2, n, (rows, wide, bn2)) == counted


@pytest.mark.parametrize("M,N,K,splits", [(16384, 8192, 4096, True), (8192, 28672, 4096, True),
                                          (8192, 8192, 14336, True), (4096, 4096, 2048, True),
                                          (3000, 3000, 1032, True), (2000, 3000, 1024, False)])
def test_rs_split_keeps_its_rows_in_the_peers_shard_and_lowers_the_busiest_cta(M, N, K, splits):
    # (4096, 4096, 2048) and (3000, 3000, 1032) are the split walks tests/kernels/test_dist_gpu.py runs
    # 2000 x 3000: 192 tiles on 132 CTAs, where no split lowers the busiest CTA's two tiles by the search's margin
    from tirxpy_kernels.gemm_plan import _unit_loads, _split_widths, persistent_units

    tr = shard_tile_rows(M, 2)
    split = rs_split(M, N, K, 256)
    TN, KT = -(-N // 256), K // 64
    plain = _unit_loads([256] * (2 * tr * TN), KT, persistent_units(2 * tr * TN, 132)).max()
    assert (split is not None) == splits
    if split is None:
        return
    rows, wide, bn2 = split
    assert 1 <= rows <= tr and (tr - rows) % 4 == 0
    narrow = -(-(N - wide * 256) // bn2)
    widths = _split_widths(rows, wide, narrow, bn2, 2 * tr, TN, 256, 4)
    assert _unit_loads(widths, KT, persistent_units(len(widths), 132)).max() < plain
