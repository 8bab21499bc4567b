"""All-gather + GEMM (tirxpy_kernels/dist_ag_gemm.py) on two simulated ranks: float64 reference at ragged shapes,
a later call (flags at Need * (epoch - 1)), a late rank, and the protocol's mutations (no wait: a race; no
signal: a deadlock). The GPU checks are in test_dist_gpu.py."""
import numpy as np
import pytest
import torch

from tests.kernels.dist_helpers import close_to_float64, run_ag
from tirxpy_kernels.dist_ag_gemm import ag_gemm, ce_need_table, chunk_rows, need_table, own_range, piece_rows, \
    shared_own_rows
from tirxpy_kernels.errors import KernelConfigError


def test_two_ranks_match_float64_on_a_later_call_with_a_late_rank():
    seed = int(torch.randint(0, 2**31 - 1, (1,)))
    cs, a, b, flags, need, probs = run_ag(200, 136, 104, epoch=3, late={0: 400}, seed=seed % 1000)
    assert probs == []
    for c in cs:
        assert not torch.isnan(c).any() and close_to_float64(c, a, b)
    for r in range(2):          # every piece counted in once more
        assert (flags.get(r) == need[r].astype(np.float32) * 3).all()


def test_without_the_flag_wait_the_reads_race():
    cs, a, b, flags, need, probs = run_ag(256, 128, 64, drop="flag_wait", check=False, late={1: 2000})
    assert "race" in {p.kind for p in probs}
    assert any("reads A_sym of rank" in str(p) for p in probs)


@pytest.mark.parametrize("M,drop", [(256, "peer_signal"), (200, "local_signal")])
def test_a_missing_signal_deadlocks(M, drop):
    # at M = 200 every tile row holds rows of both ranks, so each rank also counts its own pieces in
    cs, a, b, flags, need, probs = run_ag(M, 128, 64, drop=drop, check=False)
    kinds = {p.kind for p in probs}
    assert "deadlock" in kinds
    assert any("flags@rank" in " ".join(p.notes) for p in probs if p.kind == "deadlock")


def test_two_ranks_read_their_own_rows_from_the_shard():
    # M = 400: rank 1 holds tile rows 2 and 3 alone (loaded from its shard), tile row 1 is shared
    seed = int(torch.randint(0, 2**31 - 1, (1,)))
    cs, a, b, flags, need, probs = run_ag(400, 136, 64, epoch=2, seed=seed % 1000)
    assert probs == []
    for c in cs:
        assert not torch.isnan(c).any() and close_to_float64(c, a, b)
    assert need[1][1].tolist() == [0, 7, 0, 0] and need[1][0].tolist() == [16, 9, 0, 0]


def test_need_table_counts_every_piece_once():
    for M in (200, 256, 400, 8192 * 2):
        ms = M // 2
        for me in range(2):
            need = need_table(M, 2, me)
            lo, hi = own_range(M, 2, me)
            peer = 1 - me
            assert need[peer].sum() == ms // piece_rows(ms)          # all of the peer's pieces
            own = sum(1 for j in range(ms // piece_rows(ms)) if not lo <= (me * ms + j * piece_rows(ms)) // 128 <= hi)
            assert need[me].sum() == own                              # own pieces only in shared tile rows
            assert all(need[:, t].sum() == 0 for t in range(lo, hi + 1))
    assert piece_rows(7) == 1 and piece_rows(48) == 16


def test_tile_walk_starts_at_the_own_rows_and_covers_every_tile():
    from tirxpy_kernels.dist_ag_gemm import tile_of
    from tirxpy_kernels.gemm_plan import kernel_plan

    P = kernel_plan(1024, 256, 64, 128, 2, 1, "K", "MN", "bfloat16", "bfloat16", False, None, 4, 4, True, False,
                    None, True, None)
    for me in range(2):
        seen = [tuple(int(x) for x in tile_of(P, t, me, 2)[:2]) for t in range(P.tiles)]
        assert sorted(seen) == sorted({(m, n) for m in range(0, 1024, 128) for n in range(0, 256, 128)})
        assert seen[0][0] == 512 * me


@pytest.mark.parametrize("kw,msg", [
    (dict(M=256, N=128, K=64, me=0, world=4), "world = 2"),
    (dict(M=256, N=128, K=64, me=0, world=2.0), r"ag_gemm: world must be an int, got 2\.0 \(float\)"),
    (dict(M=256, N=128, K=64, me=0, world=True), r"ag_gemm: world must be an int, got True \(bool\)"),
    (dict(M=256, N=128, K=64, me=1.0), r"ag_gemm: me must be an int, got 1\.0 \(float\)"),
    (dict(M=255, N=128, K=64, me=0), "split evenly"),
    (dict(M=256, N=128, K=64, me=2), "me = 2"),
    (dict(M=256, N=128, K=64, me=0, drop="x"), "unknown drop"),
    (dict(M=256, N=128, K=64, me=0, DEPTH=0), "DEPTH"),
    (dict(M=256, N=128, K=64, me=0, transfer="nccl"), "transfer"),
    (dict(M=256, N=128, K=64, me=0, transfer="copy_engine", CHUNKS=0), "CHUNKS = 0"),
    (dict(M=256, N=128, K=64, me=0, transfer="copy_engine", CHUNKS=10 ** 12), "CHUNKS = 10+ is out of range"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        ag_gemm(**kw)


def test_check_world_takes_numpy_ints_as_python_ints():
    from tirxpy_kernels.dist_ag_gemm import check_world

    got = check_world(np.int64(256), np.int64(2), np.int32(1))
    assert got == (256, 2, 1) and all(type(x) is int for x in got)


# ---- the copy-engine transfer (each rank's copy stream modelled by ce_model beside the kernel) ----

@pytest.mark.parametrize("M,chunks", [(200, 3), (400, 4), (512, 2)])
def test_copy_engine_transfer_matches_float64_on_a_later_call_with_a_late_rank(M, chunks):
    seed = int(torch.randint(0, 2**31 - 1, (1,))) % 1000
    cs, a, b, flags, need, probs = run_ag(M, 136, 104, epoch=3, late={seed % 2: 300}, seed=seed,
                                          transfer="copy_engine", CHUNKS=chunks)
    assert probs == []
    for c in cs:
        assert not torch.isnan(c).any() and close_to_float64(c, a, b)
    for r in range(2):          # the peer's flag counts its chunks of three calls; a rank never counts its own
        assert flags.get(r).tolist() == [(2 if q == r else 3) * len(chunk_rows(M // 2, q, chunks)) for q in range(2)]


def test_copy_engine_without_the_flag_wait_the_reads_race():
    cs, a, b, flags, need, probs = run_ag(256, 128, 64, drop="flag_wait", check=False, late={1: 2000},
                                          transfer="copy_engine", CHUNKS=2)
    assert "race" in {p.kind for p in probs}
    assert any("reads A_sym of rank" in str(p) for p in probs)


def test_copy_engine_without_the_flag_writes_deadlocks():
    cs, a, b, flags, need, probs = run_ag(256, 128, 64, drop="peer_signal", check=False, transfer="copy_engine")
    assert "deadlock" in {p.kind for p in probs}


def test_copy_engine_chunks_cover_each_shard_and_need_counts_the_last_one_of_each_row():
    for M in (200, 256, 400, 2000, 16384):
        ms = M // 2
        for chunks in (1, 3, 4, 8):
            for me in range(2):
                q = 1 - me
                got = chunk_rows(ms, q, chunks)
                assert got[0][0] == 0 and got[-1][1] == ms and len(got) <= chunks
                assert all(a1 == b0 for (_, a1), (b0, _) in zip(got, got[1:]))
                need = ce_need_table(M, 2, me, chunks)
                assert not need[me].any()
                for t in range(need.shape[1]):      # the last chunk of q holding a row of tile row t
                    rows = set(range(t * 128, min(t * 128 + 128, M)))
                    want = max((c + 1 for c, (r0, r1) in enumerate(got)
                                if rows & set(range(q * ms + r0, q * ms + r1))), default=0)
                    assert need[q, t] == want
                # own rows the kernel reads from the buffer are exactly those outside own_range
                lo, hi = own_range(M, 2, me)
                outside = [r for r in range(ms) if not lo <= (me * ms + r) // 128 <= hi]
                copied = [r for r0, r1 in shared_own_rows(M, 2, me) for r in range(r0, r1)]
                assert copied == outside


def test_a_split_tiling_under_the_rotated_walk_covers_the_output_once():
    # 512 x 480: tile rows 0-1 split as 256 + 224 columns, rows 2-3 as 256 + 256 (clipped); the walk of rank 1
    # starts at tile row 2, so the split partition lands on its own rows
    seed = int(torch.randint(0, 2**31 - 1, (1,))) % 1000
    cs, a, b, flags, need, probs = run_ag(512, 480, 64, BN=256, SPLIT=(2, 1, 224), seed=seed)
    assert probs == []
    for c in cs:
        assert not torch.isnan(c).any() and close_to_float64(c, a, b)
