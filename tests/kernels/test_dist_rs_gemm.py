"""GEMM + reduce-scatter (tirxpy_kernels/dist_rs_gemm.py) on two simulated ranks: float64 reference at a ragged
shape (a tile half straddling the two shards), a later call with a late rank, and the protocol's mutations
(reducers that do not wait, halves signalled before their stores completed: races)."""
import pytest
import torch

from tests.kernels.dist_helpers import rs_close_to_float64, run_rs
from tirxpy_kernels.dist_rs_gemm import rs_gemm, rs_need
from tirxpy_kernels.errors import KernelConfigError


def test_two_ranks_match_float64_on_a_later_call_with_a_late_rank():
    seed = int(torch.randint(0, 1000, (1,)))
    outs, a, b, probs = run_rs(200, 136, 208, epoch=3, late={1: 500}, seed=seed)
    assert probs == []
    for r, o in enumerate(outs):
        assert not torch.isnan(o).any() and rs_close_to_float64(o, a, b, r)


@pytest.mark.parametrize("drop,sms,seed", [("flag_wait", 2, 0), ("store_wait", 1, 0)])
def test_protocol_mutations_are_races(drop, sms, seed):
    outs, a, b, probs = run_rs(256, 128, 128, drop=drop, sms=sms, seed=seed, epoch=2, check=False)
    assert "race" in {p.kind for p in probs}
    assert any("reads R" in str(p) for p in probs if p.kind == "race")


def test_need_table_counts_every_half_once():
    for M, cols in ((200, 2), (256, 3), (130, 1)):
        tot = sum(rs_need(M, 2, cols, r)[0] for r in range(2))
        halves = [(t, h) for t in range(-(-M // 128)) for h in range(2) if t * 128 + 64 * h < M]
        straddle = sum(1 for t, h in halves if (t * 128 + 64 * h) // (M // 2) != min(t * 128 + 64 * h + 63, M - 1) // (M // 2))
        assert int(tot.sum()) == cols * (len(halves) + straddle)


@pytest.mark.parametrize("kw,msg", [
    (dict(M=256, N=128, K=64, me=0, BN=96), "multiple of 64"),
    (dict(M=256, N=132, K=64, me=0, BN=128), "multiple of 8"),
    (dict(M=256, N=128, K=64, me=0, drop="nope"), "unknown drop"),
    (dict(M=256, N=128, K=64, me=0, world=3), "world = 2"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        rs_gemm(**kw)
