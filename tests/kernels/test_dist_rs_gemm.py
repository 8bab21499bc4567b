"""GEMM + reduce-scatter (tirxpy_kernels/dist_rs_gemm.py) on two simulated ranks, with both transfers: float64
reference at ragged shapes (a shard ending inside a tile row, N inside a tile), a later call with a late rank, K
long enough that the k-loop outlasts the store rounds, one CTA per rank, and the protocols' mutations (an own
tile that reads before its flag, or a half counted in before its stores completed: races; a half never counted
in, or a ready flag never set: deadlock)."""
import pytest
import torch

from tests.kernels.dist_helpers import rs_close_to_float64, run_rs
from tirxpy_kernels.dist_rs_gemm import rs_gemm
from tirxpy_kernels.errors import KernelConfigError


def _ok(outs, a, b, probs):
    assert probs == []
    for r, o in enumerate(outs):
        assert not torch.isnan(o).any() and rs_close_to_float64(o, a, b, r)


@pytest.mark.parametrize("transfer", ["copy_engine", "push"])
def test_two_ranks_match_float64_on_a_later_call_with_a_late_rank(transfer):
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(200, 136, 208, epoch=3, late={1: 500}, seed=seed, transfer=transfer)
    _ok(outs, a, b, probs)


@pytest.mark.parametrize("transfer", ["copy_engine", "push"])
def test_k_loop_longer_than_the_store_rounds_two_tile_rows_per_shard(transfer):
    # K shard 256 = 4 k-blocks > 3 store rounds (BN 192): pushes fetch the partial between the two k-loops
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(520, 320, 512, BN=192, epoch=2, seed=seed, transfer=transfer)
    _ok(outs, a, b, probs)


@pytest.mark.parametrize("drop,sms,kind", [("flag_wait", 2, "race"), ("push_wait", 1, "race"),
                                           ("peer_signal", 2, "deadlock")])
def test_push_protocol_mutations_are_reported(drop, sms, kind):
    outs, a, b, probs = run_rs(256, 256, 128, drop=drop, sms=sms, seed=0, epoch=2, check=False, transfer="push")
    assert kind in {p.kind for p in probs}
    if kind == "race":
        assert any("reads R" in str(p) for p in probs if p.kind == "race")


@pytest.mark.parametrize("drop,sms,kind,what", [("flag_wait", 2, "race", "reads OUT"),
                                                ("push_wait", 4, "race", "reads S"),
                                                ("peer_signal", 2, "deadlock", None),
                                                ("ready_signal", 2, "deadlock", None)])
def test_copy_engine_protocol_mutations_are_reported(drop, sms, kind, what):
    # flag_wait: an own tile reduce-adds before the copy engine put the peer's partial in OUT; push_wait: a half
    # counted in before its stores completed, so the copy reads S early; peer_signal / ready_signal: a chunk's
    # count, or its ready flag, never arrives
    outs, a, b, probs = run_rs(256, 256, 128, drop=drop, sms=sms, seed=0, epoch=2, check=False)
    assert kind in {p.kind for p in probs}
    if what:
        assert any(what in str(p) for p in probs if p.kind == "race")


@pytest.mark.parametrize("chunks", [1, 3, 8])
def test_copy_engine_chunks_and_one_cta_per_rank_match_float64(chunks):
    # Ms = 500: four tile rows, the last ragged; one CTA per rank walks every tile (the halves walk cannot
    # deadlock on any grid), and chunks of 4, 2 and 1 tile rows; N = 72: two tile columns, the last ragged
    seed = int(torch.randint(0, 1000, (1,)))
    _ok(*run_rs(1000, 72, 128, BN=64, sms=1, epoch=2, seed=seed, CHUNKS=chunks, late={seed % 2: 200}))


@pytest.mark.parametrize("M,N,split,sms", [(1000, 360, (4, 1, 112), 3), (2000, 200, (4, 0, 80), 5)])
def test_copy_engine_walk_with_a_split_matches_float64(M, N, split, sms):
    # narrow tiles (a prefix of the accumulator, the last chunk ending the tile) in the peer's rows, counted on
    # their chunks' flags; Ms = 1000: rows 4..7 of eight stay wide (tr - rows a multiple of 4)
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(M, N, 256, BN=128, sms=sms, epoch=2, seed=seed, SPLIT=split, CHUNKS=3,
                               late={seed % 2: 200})
    _ok(outs, a, b, probs)


@pytest.mark.parametrize("M,N,lag", [(1024, 72, 0), (2048, 64, 4)])
def test_an_interleaved_walk_matches_float64(M, N, lag):
    # LAG = 0: own rows 4 walk rows after the peer's from the start, so own tiles wait for partials the peer
    # pushed moments before; Ms = 1024 with LAG = 4: four peer rows, then blocks of four alternating
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(M, N, 128, BN=64, epoch=2, seed=seed, LAG=lag, late={seed % 2: 300}, transfer="push")
    _ok(outs, a, b, probs)


@pytest.mark.parametrize("kw,msg", [
    (dict(M=256, N=128, K=64, me=0, BN=96), "multiple of 64"),
    (dict(M=256, N=132, K=64, me=0, BN=128), "multiple of 8"),
    (dict(M=256, N=128, K=64, me=0, drop="nope"), "unknown drop"),
    (dict(M=256, N=128, K=64, me=0, world=3), "world = 2"),
    (dict(M=1024, N=128, K=64, me=0, BN=128, LAG=1, transfer="push"), "LAG = 1"),
    (dict(M=1024, N=128, K=64, me=0, BN=128, LAG=5, transfer="push"), "LAG = 5"),
    (dict(M=1024, N=128, K=64, me=0, BN=128, LAG=4), "applies to transfer='push'"),
    (dict(M=256, N=128, K=64, me=0, transfer="nccl"), "transfer = 'nccl'"),
    (dict(M=256, N=128, K=64, me=0, BN=128, CHUNKS=0), "CHUNKS = 0"),
    (dict(M=1024, N=512, K=64, me=0, b_major="K", SPLIT=(4, 1, 240), transfer="push"), "copy-engine walk only"),
    (dict(M=1024, N=512, K=64, me=0, b_major="K", SPLIT=(5, 1, 240)), r"rows in 1 \.\. 4"),
    (dict(M=2048, N=512, K=64, me=0, b_major="K", SPLIT=(6, 1, 240)),
     "multiple of group = 4 rows short of the peer's 8"),
    (dict(M=1024, N=512, K=64, me=0, b_major="K", SPLIT=[4, 1, 240]), "must be \\(rows, wide, bn2\\)"),
    (dict(M=1024, N=512, K=64, me=0, SPLIT=(4, 1, 240)), "rs_gemm: gemm_sm90: SPLIT is a tiling.*b_major='MN'"),
    (dict(M=1024, N=512, K=64, me=0, b_major="K", SPLIT=(4, 1, 176)), "narrow width 176"),
    (dict(M=1024, N=512, K=64, me=0, world=2.0), r"rs_gemm: world must be an int, got 2\.0 \(float\)"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        rs_gemm(**kw)
