"""All-gather + GEMM (tirxpy_kernels/dist_ag_gemm.py) on two simulated ranks: float64 reference at ragged shapes,
a later call (flags at Need * (epoch - 1)), a late rank, and the protocol's mutations (no wait: a race; no
signal: a deadlock). The GPU checks are in test_dist_gpu.py."""
import numpy as np
import pytest
import torch

from tests.kernels.dist_helpers import close_to_float64, run_ag
from tirxpy_kernels.dist_ag_gemm import ag_gemm, need_table, own_range, piece_rows
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
    (dict(M=255, N=128, K=64, me=0), "split evenly"),
    (dict(M=256, N=128, K=64, me=2), "me = 2"),
    (dict(M=256, N=128, K=64, me=0, drop="x"), "unknown drop"),
    (dict(M=256, N=128, K=64, me=0, DEPTH=0), "DEPTH"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        ag_gemm(**kw)
