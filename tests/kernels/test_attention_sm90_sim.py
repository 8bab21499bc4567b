"""The Hopper attention kernel (tirxpy_kernels/attention_sm90.py) under the CPU simulator at small
shapes: ragged query / key lengths, causal and not, grouped-query heads, several key blocks
through the 2-stage ring, two consumer warpgroups; against float64 on fresh random inputs with
NaN-poisoned outputs (O and LSE)."""
import pytest
import torch

from tirxpy_kernels.attention_sm90 import attention_sm90
from tirxpy.lower.build import tensor_strides
from tirxpy.sim import run

from tests.kernels.attention_reference import output_bound, reference


@pytest.mark.parametrize("B,H,HKV,SQ,SK,D,causal,BN,NC,dtype,kw", [
    (1, 2, 1, 80, 80, 64, False, 32, 1, "bfloat16", {}),    # ragged: 3 key blocks, last one 16 wide; ring wraps
    (1, 2, 1, 80, 80, 64, True, 32, 1, "bfloat16", {}),     # causal diagonal blocks
    (1, 4, 2, 100, 72, 64, True, 48, 1, "float16", {}),     # GQA, SQ > SK (rows past SK see every key)
    (1, 2, 2, 150, 130, 128, True, 64, 2, "bfloat16", {}),  # two consumer warpgroups in ping-pong, D = 128
    (1, 2, 2, 130, 200, 64, False, 32, 2, "bfloat16", {}),  # two consumers without turns; 7 blocks, ring wraps
    (1, 4, 2, 100, 72, 64, False, 48, 1, "float16", {}),
    # persistent CTAs walking several tiles: the K / V ring and the Q / O buffers carry over tiles
    (1, 2, 1, 150, 130, 64, True, 32, 2, "bfloat16", dict(sms=2, PERSIST=True, PINGPONG=True)),  # ping-pong, chained
    (2, 2, 1, 80, 100, 64, False, 32, 1, "bfloat16", dict(sms=3)),   # 8 tiles over 3 CTAs
    (2, 2, 1, 80, 100, 64, True, 32, 1, "bfloat16", dict(sms=3, PERSIST=True)),  # causal pairs, one consumer
    (1, 2, 1, 150, 150, 64, True, 32, 1, "bfloat16", dict(sms=2, PERSIST=True)),  # 3 query tiles: a lone middle
    (1, 2, 1, 150, 130, 64, True, 32, 2, "bfloat16", dict(PERSIST=False)),  # one tile per CTA
    # CHAIN (the default with persistence) vs not: the same walks with each tile's block 0 run on its own
    (2, 2, 1, 80, 100, 64, False, 32, 1, "bfloat16", dict(sms=3, CHAIN=False)),
    (1, 2, 1, 150, 150, 64, True, 32, 2, "bfloat16", dict(sms=2, PERSIST=True, CHAIN=False)),
    (2, 2, 1, 100, 32, 64, False, 32, 1, "bfloat16", dict(sms=3)),  # one key block per tile, chained
    # OSTAGE="q": persistent, O staged over Q, Q reloaded after the store has read it
    (2, 2, 1, 80, 100, 64, False, 32, 1, "bfloat16", dict(sms=3, OSTAGE="q")),
    (1, 2, 1, 150, 150, 64, True, 32, 2, "bfloat16", dict(sms=2, PERSIST=True, PINGPONG=True, OSTAGE="q")),
    (2, 2, 1, 80, 100, 64, True, 32, 1, "bfloat16", dict(sms=3, PERSIST=True, OSTAGE="q")),  # one consumer
    (2, 2, 1, 130, 32, 64, False, 32, 2, "bfloat16", dict(sms=3, OSTAGE="q")),  # one key block per tile
    # OSTAGE="kv": O over the last block's K (consumer 0) / V (consumer 1) stage, released after the store's read
    (1, 2, 1, 150, 150, 64, True, 64, 2, "bfloat16", dict(sms=2, PERSIST=True, PINGPONG=True, OSTAGE="kv")),
    (1, 2, 1, 130, 130, 64, False, 64, 2, "bfloat16", dict(sms=3, OSTAGE="kv")),
    (2, 2, 1, 130, 64, 64, False, 64, 2, "float16", dict(sms=3, OSTAGE="kv")),    # one key block per tile
    (1, 2, 1, 80, 130, 64, False, 64, 1, "bfloat16", dict(sms=3, OSTAGE="kv")),   # one consumer
    # FOLD: the wgmma_folded variant (descriptors in 16-byte units added in C++), ping-pong and chained
    (1, 2, 1, 150, 130, 64, True, 32, 2, "bfloat16", dict(sms=2, PERSIST=True, PINGPONG=True, FOLD=True)),
])
def test_attention_sim_matches_float64(B, H, HKV, SQ, SK, D, causal, BN, NC, dtype, kw):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    kern = attention_sm90(B, H, HKV, SQ, SK, D, causal=causal, BN=BN, STAGES=2, NC=NC, dtype=dtype, **kw)
    q = torch.randn(B, SQ, H, D, generator=g).to(tdt)
    k = torch.randn(B, SK, HKV, D, generator=g).to(tdt)
    v = torch.randn(B, SK, HKV, D, generator=g).to(tdt)
    lse, ref_lse = _run_and_check_o(kern, q, k, v, causal, D)
    assert (lse - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("causal,kw", [(True, dict(BN=64, NC=1)), (False, dict(BN=32, NC=2, sms=2, PERSIST=True))])
def test_strided_views_are_read_in_place(causal, kw):
    """``q``, ``k``, ``v`` as slices of one fused projection ``(B, S, H + 2 HKV, D)`` (rows ``(H + 2 HKV) D`` apart),
    passed as they are with ``strides=``: O and the log-sum-exp match float64."""
    B, H, HKV, S, D = 2, 2, 1, 128, 64
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    qkv = torch.randn(B, S, H + 2 * HKV, D, generator=g).to(torch.bfloat16)
    q, k, v = qkv[:, :, :H], qkv[:, :, H:H + HKV], qkv[:, :, H + HKV:]
    kern = attention_sm90(B, H, HKV, S, S, D, causal=causal, strides=(q.stride(), k.stride(), v.stride()), **kw)
    assert tensor_strides(kern.params[0])[1] == q.stride()                      # Q read through its own strides
    lse, ref_lse = _run_and_check_o(kern, q, k, v, causal, D)
    assert (lse - ref_lse).abs().max().item() < 1e-4


def _run_and_check_o(kern, q, k, v, causal, D):
    """Runs ``kern`` in the simulator on NaN-poisoned outputs, checks that it reports no problem and that
    O matches float64; returns its log-sum-exp and the reference's, (B, H, SQ) float64."""
    B, SQ, H, _ = q.shape
    o = torch.full((B, SQ, H, D), float("nan")).to(q.dtype)
    lse = torch.full((B, H, SQ, 1), float("nan"))
    res = run(kern, q, k, v, o, lse, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()
    ref, ref_lse = reference(q, k, v, causal, D ** -0.5)
    assert ((o.double() - ref).abs() <= output_bound(q, k, v, causal, D ** -0.5)).all()
    return lse[..., 0].double(), ref_lse


def _rising(B, S, H, D, g, tdt, steep):
    """Keys whose scores grow along the sequence (row ``j`` scaled by ``1 + steep * j``), so that a row's
    running max rises by far more than ``LAZY_LOG2`` from block to block."""
    x = torch.randn(B, S, H, D, generator=g)
    if steep:
        x = x * (1 + steep * torch.arange(S, dtype=torch.float32)).view(1, S, 1, 1)
    return x.to(tdt)


@pytest.mark.parametrize("B,H,HKV,SQ,SK,D,causal,BN,NC,dtype,kw", [
    (1, 2, 1, 80, 130, 64, False, 32, 1, "bfloat16", {}),           # overlapped loop, one consumer
    (1, 2, 1, 130, 130, 64, True, 32, 2, "float16", dict(PINGPONG=True)),
    (1, 2, 1, 80, 100, 64, True, 32, 1, "bfloat16", {}),           # causal, one consumer
    (1, 2, 1, 150, 150, 64, True, 32, 2, "bfloat16", dict(sms=2, PERSIST=True, PINGPONG=True)),  # chained
    (1, 2, 1, 130, 200, 64, False, 64, 2, "bfloat16", dict(sms=3, OSTAGE="kv")),
])
@pytest.mark.parametrize("steep", [0.0, 0.5])
def test_lazy_rescale_sim_matches_float64(B, H, HKV, SQ, SK, D, causal, BN, NC, dtype, kw, steep):
    """``LAZY``: O is rescaled only when a row's max rises past the threshold. With plain random inputs
    (``steep = 0``) almost no block rescales; with keys that grow along the sequence most blocks do,
    in some warps and not in others (query rows of two magnitudes): both must match float64."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    kern = attention_sm90(B, H, HKV, SQ, SK, D, causal=causal, BN=BN, STAGES=2, NC=NC, dtype=dtype, LAZY=True, **kw)
    q = torch.randn(B, SQ, H, D, generator=g)
    q[:, 1::2] *= 0.02                       # every other row: small scores, a max that hardly moves
    q = q.to(tdt)
    k = _rising(B, SK, HKV, D, g, tdt, steep)
    v = torch.randn(B, SK, HKV, D, generator=g).to(tdt)
    lse, ref_lse = _run_and_check_o(kern, q, k, v, causal, D)
    assert ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1)).max().item() < 1e-4    # LSE reaches ~100 here


@pytest.mark.parametrize("B,H,HKV,SQ,SK,BN,kw", [
    (1, 2, 1, 150, 150, 64, dict(PERSIST=True, sms=2, OSTAGE="kv")),   # the head dim 256 default, in small
    (1, 2, 1, 200, 200, 16, dict(PERSIST=False)),                      # the first consumer skips 4 blocks
    (1, 2, 1, 130, 130, 32, dict(PERSIST=True, sms=1, OSTAGE="own")),  # 2 skipped per tile, O in its own buffer
    (1, 4, 2, 150, 100, 32, dict(PERSIST=True, sms=3, OSTAGE="q")),    # SQ > SK: rows past SK see every block
])
def test_trim_sim_matches_float64(B, H, HKV, SQ, SK, BN, kw):
    """``TRIM``: the first consumer of each causal tile stops at its own rows' last key block and hands the
    rest of the tile's K / V stages back unread (without the waits that precede those arrivals the
    simulator reports a race at BN = 16 / 32, without the arrivals a deadlock)."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    kern = attention_sm90(B, H, HKV, SQ, SK, 64, causal=True, BN=BN, STAGES=2, NC=2, PINGPONG=False, CHAIN=False,
                          TRIM=True, **kw)
    q, k, v = (torch.randn(B, n, h, 64, generator=g).bfloat16() for n, h in ((SQ, H), (SK, HKV), (SK, HKV)))
    lse, ref_lse = _run_and_check_o(kern, q, k, v, True, 64)
    assert (lse - ref_lse).abs().max().item() < 1e-4


@pytest.mark.parametrize("B,H,HKV,SQ,SK,BN,kw", [
    (2, 3, 1, 260, 260, 64, dict(sms=5)),                    # 3 query tiles: a lone middle tile in pairs and tail
    (1, 2, 1, 520, 520, 64, dict(sms=3)),                    # 5 query tiles, chained
    (1, 2, 1, 512, 400, 64, dict(sms=3, CHAIN=False)),       # GQA, SK < SQ
    (1, 2, 1, 384, 384, 64, dict(sms=2, OSTAGE="kv", PINGPONG=False, TRIM=True, CHAIN=False)),
])
def test_causal_tail_sim_matches_float64(B, H, HKV, SQ, SK, BN, kw):
    """``TAIL``: persistent causal CTAs walk pairs of query tiles, then the last pairs' tiles one by one,
    heaviest first, in rounds alternating direction over the CTAs.

    Each case has pairs before the tail (``causal_tail``'s ``S0 > 0``) and dealt tiles after it: 3 query tiles
    (a lone middle one) over 5 CTAs, 12 dealt tiles in 2 rounds and a remainder, two batches (the batch of a
    dealt tile); 5 query tiles over 3 CTAs, chained, 5 dealt tiles in one round and a remainder dealt in
    reverse; 4 query tiles (even: no lone tile), grouped heads, SK < SQ, 12 dealt tiles in 4 rounds; 3 query
    tiles over 2 CTAs with TRIM and O over K / V, 3 dealt tiles in one round and a reversed remainder. One
    batch where a second would only add pairs before the tail (the same dealt rounds)."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    kern = attention_sm90(B, H, HKV, SQ, SK, 64, causal=True, BN=BN, STAGES=2, NC=2, PERSIST=True, TAIL=True, **kw)
    q, k, v = (torch.randn(B, n, h, 64, generator=g).bfloat16() for n, h in ((SQ, H), (SK, HKV), (SK, HKV)))
    lse, ref_lse = _run_and_check_o(kern, q, k, v, True, 64)
    assert (lse - ref_lse).abs().max().item() < 1e-4
