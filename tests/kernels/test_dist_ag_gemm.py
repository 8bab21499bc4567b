"""All-gather + GEMM (tirxpy_kernels/dist_ag_gemm.py) on two simulated ranks: float64 reference at ragged shapes,
a later call (flags at Need * (epoch - 1)), a late rank, and the protocol's mutations (no wait: a race; no
signal: a deadlock). The GPU checks are in test_dist_gpu.py."""
import numpy as np
import pytest
import torch

from tests.kernels.dist_helpers import close_to_float64, run_ag
from tirxpy_kernels.dist_ag_gemm import ag_gemm, need_table, piece_rows
from tirxpy_kernels.errors import KernelConfigError


def test_two_ranks_match_float64_on_a_later_call_with_a_late_rank():
    seed = int(torch.randint(0, 2**31 - 1, (1,)))
    cs, a, b, flags, need, probs = run_ag(200, 136, 104, epoch=3, late={0: 400}, seed=seed % 1000)
    assert probs == []
    for c in cs:
        assert not torch.isnan(c).any() and close_to_float64(c, a, b)
    for r in range(2):          # every piece counted in once more
        assert (flags.get(r) == need.astype(np.float32) * 3).all()


def test_without_the_flag_wait_the_reads_race():
    cs, a, b, flags, need, probs = run_ag(256, 128, 64, drop="flag_wait", check=False, late={1: 2000})
    assert "race" in {p.kind for p in probs}
    assert any("reads A_sym of rank" in str(p) for p in probs)


def test_a_missing_signal_deadlocks():
    cs, a, b, flags, need, probs = run_ag(256, 128, 64, drop="local_signal", check=False)
    kinds = {p.kind for p in probs}
    assert "deadlock" in kinds
    assert any("flags@rank" in " ".join(p.notes) for p in probs if p.kind == "deadlock")


def test_need_table_counts_every_piece_once():
    for M in (200, 256, 8192 * 2):
        need = need_table(M, 2)
        ms = M // 2
        assert need.sum(axis=1).tolist() == [ms // piece_rows(ms)] * 2
    assert piece_rows(7) == 1 and piece_rows(48) == 16


@pytest.mark.parametrize("kw,msg", [
    (dict(M=256, N=128, K=64, me=0, world=4), "world = 2"),
    (dict(M=255, N=128, K=64, me=0), "split evenly"),
    (dict(M=256, N=128, K=64, me=2), "me = 2"),
    (dict(M=256, N=128, K=64, me=0, drop="x"), "unknown drop"),
])
def test_bad_configs_are_typed_errors(kw, msg):
    with pytest.raises(KernelConfigError, match=msg):
        ag_gemm(**kw)
