"""The Hopper GEMM (tirxpy_kernels/gemm_sm90.py) under the CPU simulator at small shapes: a 2-CTA
cluster with TMA multicast, a persistent unit taking two tiles, ragged M / N / K edges, both
operand majors, against float64 on fresh random inputs with a NaN-poisoned output. A bf16 output
runs the deferred epilogue (a tile's chunks stored during the next tile's k-loop, leftovers after
it when the tile has fewer k-blocks than chunks, the last tile after the tile loop)."""
import pytest
import torch

from tirxpy_kernels.gemm_sm90 import gemm_sm90
from tirxpy.sim import run


@pytest.mark.parametrize("M,N,K,a_major,b_major,CM,sms,BN", [
    (200, 136, 104, "K", "K", 2, 2, 128),     # ragged everywhere; one cluster takes both tiles (persistent)
    (136, 200, 136, "MN", "MN", 2, 4, 128),   # column-major A and row-major B
    (130, 128, 72, "K", "MN", 1, 2, 64),      # no cluster
    (152, 200, 136, "MN", "K", 1, 2, 176),    # BN = 176: 64-byte (16-column) float32 output chunks
])
def test_gemm_sm90_sim_matches_float64(M, N, K, a_major, b_major, CM, sms, BN):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    k = gemm_sm90(M, N, K, BN=BN, STAGES=2, CM=CM, sms=sms, a_major=a_major, b_major=b_major, out_dtype="float32")
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(K, N, generator=g).bfloat16()
    A = a if a_major == "K" else a.t().contiguous()
    B = b.t().contiguous() if b_major == "K" else b
    c = torch.full((M, N), float("nan"))
    res = run(k, A, B, torch.zeros(1, 1), c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    ref = a.double() @ b.double()
    bound = K * 2.0 ** -23 * (a.double().abs() @ b.double().abs()) + 1e-30
    assert torch.all((c.double() - ref).abs() <= bound)


@pytest.mark.parametrize("M,N,K,BN,CM,sms,DEFER", [
    (300, 136, 136, 64, 1, 1, True),     # 3 tiles of 1 chunk on one CTA: chunk 0 rides under k-block 0
    (260, 200, 64, 128, 1, 2, True),     # K = 64: one k-block, 2 chunks: chunk 1 is stored after the k-loop
    (520, 256, 200, 128, 2, 2, True),    # cluster, 2 tiles per CTA, 4 k-blocks > 2 chunks
    # an odd number of chunks per tile (3): the staging buffers alternate across tiles (a tile's
    # first chunk took buffer 0 while its predecessor's last store still read it, before the fix)
    (300, 200, 136, 192, 1, 1, False),
    (300, 200, 136, 192, 1, 1, True),
    # BN not a multiple of 64: 32-byte output chunks (11 per tile at BN = 176), deferred in 3 rounds of
    # 4 / 4 / 3 boxes under the next tile's first 3 k-blocks; ragged last tile column
    (300, 360, 136, 176, 1, 1, True),
    (260, 360, 64, 176, 1, 2, True),     # one k-block: rounds 1 and 2 after the k-loop
    (300, 200, 136, 80, 1, 2, False),    # not deferred: one 16-column box per round, 5 per tile
    (520, 360, 200, 176, 2, 2, True),    # cluster: each CTA multicasts 88 of B's 176 rows
])
def test_bf16_epilogue_sim_matches_float64(M, N, K, BN, CM, sms, DEFER):
    _check_bf16_output(gemm_sm90(M, N, K, BN=BN, STAGES=2, CM=CM, sms=sms, DEFER=DEFER), M, N, K)


@pytest.mark.parametrize("M,N,K,BN,split,sms", [
    (384, 352, 136, 128, (2, 1, 112), 2),   # split rows 128 + 112 + 112, then a plain row; two CTAs, odd tile count
    (260, 200, 64, 128, (1, 0, 112), 2),    # one k-block: the deferred rounds after the k-loop; a narrow tile past N
    (300, 272, 200, 128, (3, 1, 80), 3),    # every row split; the narrow tiles' last chunk overlaps 48 columns
])
def test_split_grid_sim_matches_float64(M, N, K, BN, split, sms):
    """``SPLIT``: narrow tiles (a prefix of the accumulator, the last output chunk ending the tile) mixed with wide
    ones on the same CTAs, so deferred stores of either width ride under k-loops of either width."""
    _check_bf16_output(gemm_sm90(M, N, K, BN=BN, STAGES=2, sms=sms, SPLIT=split), M, N, K)


def _check_bf16_output(k, M, N, K):
    """Runs the ``(M, N, K)`` kernel ``k`` (bf16 output) in the simulator on fresh inputs and a NaN-poisoned
    output: no problem reported, every element within bf16 rounding of float64."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(N, K, generator=g).bfloat16()
    c = torch.full((M, N), float("nan")).bfloat16()
    res = run(k, a, b, torch.zeros(1, 1).bfloat16(), c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    ref = a.double() @ b.double().t()
    bound = 2.0 ** -8 * ref.abs() + K * 2.0 ** -23 * (a.double().abs() @ b.double().abs().t()) + 1e-30
    assert torch.all((c.double() - ref).abs() <= bound)


@pytest.mark.parametrize("M,N,K,BN,CM,sms,a_major,b_major,out_dtype", [
    (300, 360, 136, 176, 1, 1, "K", "K", "bfloat16"),    # 3 x 3 tiles on one CTA: the consumers alternate, odd count
    (520, 256, 200, 128, 2, 2, "K", "K", "bfloat16"),    # cluster: B multicast, both CTAs' empty barriers
    (256, 200, 64, 128, 1, 2, "MN", "MN", "float32"),     # one k-block per tile; float32 output
])
def test_pingpong_sim_matches_float64(M, N, K, BN, CM, sms, a_major, b_major, out_dtype):
    """``PINGPONG``: each consumer warpgroup takes every other tile of its CTA whole (a (128, BN) accumulator
    in two halves), the k-loops take turns, each consumer stages and stores its own chunks."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    k = gemm_sm90(M, N, K, BN=BN, STAGES=2, CM=CM, sms=sms, a_major=a_major, b_major=b_major, out_dtype=out_dtype,
                  PINGPONG=True)
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(K, N, generator=g).bfloat16()
    A = a if a_major == "K" else a.t().contiguous()
    B = b.t().contiguous() if b_major == "K" else b
    tdt = torch.float32 if out_dtype == "float32" else torch.bfloat16
    c = torch.full((M, N), float("nan")).to(tdt)
    res = run(k, A, B, torch.zeros(1, 1).to(tdt), c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    ref = a.double() @ b.double()
    bound = (2.0 ** -8 * ref.abs() if out_dtype != "float32" else 0) \
        + K * 2.0 ** -23 * (a.double().abs() @ b.double().abs()) + 1e-30
    assert torch.all((c.double() - ref).abs() <= bound)


@pytest.mark.parametrize("M,N,K,BN,CM,sms,pp,b_major,out_dtype", [
    (300, 360, 136, 176, 1, 1, True, "K", "bfloat16"),     # ping-pong, 16-column chunks, ragged M and N
    (256, 200, 72, 128, 1, 2, True, "MN", "float32"),      # ping-pong, MN-major B (the MLP backward's form)
    (260, 200, 136, 128, 2, 2, False, "K", "bfloat16"),    # cooperative store-at-once, cluster, ragged edges
])
def test_gate_sim_matches_float64(M, N, K, BN, CM, sms, pp, b_major, out_dtype):
    """``gate``: the output is 0 where the (M, N) gate is <= 0 and the product elsewhere (ReLU's backward,
    ``where(gate <= 0, 0, a @ b)``); the gate holds exact zeros, negatives, positives and NaN (which passes)."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    k = gemm_sm90(M, N, K, BN=BN, STAGES=2, CM=CM, sms=sms, b_major=b_major, out_dtype=out_dtype, PINGPONG=pp,
                  gate=True)
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(K, N, generator=g).bfloat16()
    tdt = torch.float32 if out_dtype == "float32" else torch.bfloat16
    gate = torch.randn(M, N, generator=g)
    gate[torch.rand(M, N, generator=g) < 0.1] = 0.0
    gate[torch.rand(M, N, generator=g) < 0.01] = float("nan")
    gate = gate.to(tdt)
    c = torch.full((M, N), float("nan")).to(tdt)
    B = b.t().contiguous() if b_major == "K" else b
    res = run(k, a, B, torch.zeros(1, 1).to(tdt), gate, c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    prod = a.double() @ b.double()
    keep = ~(gate.double() <= 0)
    assert (c[~keep] == 0).all()
    bound = (2.0 ** -8 * prod.abs() if out_dtype != "float32" else 0) \
        + K * 2.0 ** -23 * (a.double().abs() @ b.double().abs()) + 1e-30
    assert torch.all((c.double() - prod).abs()[keep] <= bound[keep])
    assert keep.sum() > M * N // 4 and (~keep).sum() > M * N // 4
