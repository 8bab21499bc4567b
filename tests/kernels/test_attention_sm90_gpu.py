"""GPU tests (marker gpu) of tirxpy_kernels.attention / tirxpy_kernels.attention_sm90 on Hopper: output and
log-sum-exp against a float64 reference on fresh random inputs, for bf16 / f16, head dims 64 /
128 / 256, causal and not, ragged lengths, SQ != SK, grouped-query and multi-query heads, and
sequences shorter than one tile; outputs NaN-poisoned before the direct launches.

    python -m pytest -q -m gpu tests/kernels/test_attention_sm90_gpu.py
"""
import pytest
import torch

import tirxpy_kernels

from tests.kernels.attention_reference import reference
from tests.kernels.late_copy import late_copy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                 reason="the sm_90a kernel needs a Hopper GPU")]


def _inputs(B, SQ, SK, H, HKV, D, dtype):
    q = torch.randn(B, SQ, H, D, device="cuda").to(dtype)
    k = torch.randn(B, SK, HKV, D, device="cuda").to(dtype)
    v = torch.randn(B, SK, HKV, D, device="cuda").to(dtype)
    return q, k, v


def _check(o, lse, q, k, v, causal, scale):
    assert not torch.isnan(o).any(), "unwritten (NaN-poisoned) or NaN output elements"
    assert not torch.isnan(lse).any(), "unwritten (NaN-poisoned) or NaN log-sum-exp elements"
    ref, ref_lse = reference(q, k, v, causal, scale)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    # P is rounded to 16 bits before P V and O at the end: bf16 ~ 2**-9, f16 ~ 2**-12 relative
    tol = 1.5e-2 if q.dtype == torch.bfloat16 else 2.5e-3
    assert err < tol, (tuple(q.shape), tuple(k.shape), causal, err)
    assert (o.double() - ref).abs().max().item() < 8 * tol
    assert (lse.double() - ref_lse).abs().max().item() < 2e-3


SHAPES = [  # B, SQ, SK, H, HKV
    (2, 1024, 1024, 4, 4),
    (1, 1000, 1000, 4, 2),      # ragged, GQA 2:1
    (2, 333, 517, 4, 1),        # SQ != SK, ragged both, multi-query
    (1, 40, 24, 2, 2),          # shorter than one tile (padded by the wrapper)
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("B,SQ,SK,H,HKV", SHAPES)
def test_attention_bf16_matches_float64(B, SQ, SK, H, HKV, D, causal):
    q, k, v = _inputs(B, SQ, SK, H, HKV, D, torch.bfloat16)
    o, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (B, H, SQ)
    _check(o, lse, q, k, v, causal, D ** -0.5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_attention_f16_and_scale(D, causal):
    q, k, v = _inputs(1, 777, 777, 4, 2, D, torch.float16)
    o, lse = tirxpy_kernels.attention(q, k, v, causal=causal, scale=0.3 / D ** 0.5, return_lse=True)
    torch.cuda.synchronize()
    _check(o, lse, q, k, v, causal, 0.3 / D ** 0.5)


def test_matches_torch_sdpa():
    q, k, v = _inputs(2, 2048, 2048, 8, 8, 128, torch.bfloat16)
    for causal in (False, True):
        o = tirxpy_kernels.attention(q, k, v, causal=causal)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal).transpose(1, 2)
        err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        assert err < 1e-2, (causal, err)


@pytest.mark.parametrize("D,causal,NC,BN,pingpong", [
    (128, True, 2, 128, None), (64, False, 1, 64, None), (256, True, 2, 64, None), (64, False, 1, 128, None),
    (128, False, 2, 128, True), (128, True, 2, 176, False), (256, False, 2, 80, False)])
def test_direct_launch_poisoned(D, causal, NC, BN, pingpong):
    import tirxpy
    from tirxpy_kernels.attention_sm90 import attention_sm90

    B, S, H = 2, 700, 4
    q, k, v = _inputs(B, S, S, H, H, D, torch.bfloat16)
    kern = tirxpy.compile(attention_sm90(B, H, H, S, S, D, causal=causal, NC=NC, BN=BN, PINGPONG=pingpong), arch="sm_90a")
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S, 1), float("nan"), device="cuda")
    kern(q, k, v, o, lse)
    torch.cuda.synchronize()
    _check(o, lse[..., 0], q, k, v, causal, D ** -0.5)


@pytest.mark.parametrize("chain", [True, False])
@pytest.mark.parametrize("D,causal,S", [(64, True, 700), (128, False, 700), (128, True, 700), (128, True, 600)])
def test_persistent_ctas_walk_many_tiles(D, causal, S, chain):
    """Five persistent CTAs over 3 x 4 x 6 (S = 600: 5) ragged query tiles: the K / V ring, Q and the
    O staging buffer carry over from tile to tile; causal walks pairs of query tiles (an odd count
    leaves a lone middle tile). ``chain``: each tile's first key block runs under the previous tile's
    last P V, with Q double-buffered."""
    _persistent(D, causal, S, CHAIN=chain)


@pytest.mark.parametrize("D,causal,S", [(64, True, 700), (128, False, 700), (256, True, 700), (256, False, 600)])
def test_persistent_ctas_stage_o_over_q(D, causal, S):
    """``OSTAGE='q'`` (the persistent default at head dim 256, where O has no room of its own): each
    tile's O is staged over its Q, and the next tile's Q loads once the O store has read it."""
    _persistent(D, causal, S, OSTAGE="q")


@pytest.mark.parametrize("D,causal,S", [(64, True, 700), (128, False, 700), (256, True, 700), (256, False, 600)])
def test_persistent_ctas_stage_o_over_the_last_k_v_stages(D, causal, S):
    """``OSTAGE='kv'``: consumer 0's O rows are staged over the tile's last K stage, consumer 1's over its
    last V stage, and those stages go back to the producer once the O store has read them."""
    _persistent(D, causal, S, OSTAGE="kv")


@pytest.mark.parametrize("D,S,kw", [(64, 700, {}), (128, 600, {}), (256, 700, dict(BN=64)), (64, 1000, dict(CHAIN=False))])
def test_persistent_causal_walk_deals_its_tail_as_single_tiles(D, S, kw):
    """``TAIL``: five persistent CTAs walk pairs of query tiles, then the last pairs' tiles one by one,
    heaviest first (S = 600: an odd number of query tiles, a lone middle tile in the pairs and in the
    tail)."""
    _persistent(D, True, S, TAIL=True, **kw)


@pytest.mark.parametrize("D,causal,S,fold", [(64, True, 700, True), (128, False, 700, True), (256, True, 700, False),
                                           (256, False, 600, True)])
def test_fold_on_and_off_against_the_defaults(D, causal, S, fold):
    """``FOLD`` (the ``wgmma_folded`` variant; the default only at head dim 256 causal) turned on where it
    is off by default and off where it is on: the same results on ragged persistent walks."""
    _persistent(D, causal, S, FOLD=fold)


def test_fold_through_the_torch_entry_point():
    """``tirxpy_kernels.attention(..., FOLD=...)`` reaches the kernel: forced on at head dim 128 causal, off at head
    dim 256 causal (where it is the default), on ragged lengths against float64."""
    for D, fold in ((128, True), (256, False)):
        q, k, v = _inputs(2, 333, 333, 4, 2, D, torch.bfloat16)
        o, lse = tirxpy_kernels.attention(q, k, v, causal=True, return_lse=True, FOLD=fold)
        torch.cuda.synchronize()
        _check(o, lse, q, k, v, True, D ** -0.5)


def test_causal_head_dim_64_past_16_key_blocks_runs_two_stages():
    """The default ring at head dim 64 is 2 stages for a causal mask past 16 key blocks (3 below):
    S = 2100 (17 blocks, the last ragged) on five persistent CTAs, with the chained walk."""
    from tirxpy_kernels.attention_plan import plan

    assert plan(3, 4, 4, 2100, 2100, 64, causal=True, sms=5)["STAGES"] == 2
    assert plan(3, 4, 4, 2048, 2048, 64, causal=True, sms=5)["STAGES"] == 3
    _persistent(64, True, 2100)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_rising_scores_with_and_without_lazy_rescale(D, causal, lazy):
    """Keys that grow along the sequence (row ``j`` scaled by ``1 + j / 8``) raise every big query row's
    max by far more than ``LAZY_LOG2`` from block to block, while every other query row (scaled down
    50x) stays under it: with ``LAZY`` some warps rescale O and some keep their stale max, block by
    block, and both must match float64 (as must the eager rescale on such inputs)."""
    B, S, H = 2, 1000, 4
    q, k, v = _inputs(B, S, S, H, H, D, torch.bfloat16)
    q[:, 1::2] = (q[:, 1::2].float() * 0.02).to(q.dtype)
    k = (k.float() * (1 + torch.arange(S, device="cuda").float() / 8).view(1, S, 1, 1)).to(k.dtype)
    o, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True, LAZY=lazy)
    torch.cuda.synchronize()
    _check(o, lse, q, k, v, causal, D ** -0.5)


@pytest.mark.parametrize("D,S,kw", [(256, 700, dict(BN=64)), (64, 700, dict(BN=32, OSTAGE="own")),
                                     (128, 600, dict(BN=32, OSTAGE="q")), (64, 700, dict(BN=16, PERSIST=False))])
def test_trim_first_consumer_stops_at_its_own_last_key_block(D, S, kw):
    """``TRIM``: in every causal tile the first consumer stops at its own rows' last key block (1, 2 or 4
    blocks before the tile's last at BN = 64 / 32 / 16) and hands the rest of the K / V stages back."""
    kw = dict(dict(PERSIST=True, sms=5), **kw)
    if not kw["PERSIST"]:
        kw.pop("sms")
    _launch(D, True, S, PINGPONG=False, CHAIN=False, TRIM=True, **kw)


def _persistent(D, causal, S, **kw):
    spec = _launch(D, causal, S, PERSIST=True, sms=5, **kw)
    assert tuple(int(x) for x in spec.launch.grid) == (5, 1, 1)


def _launch(D, causal, S, **kw):
    """``attention_sm90(3, 4, 4, S, S, D, **kw)`` on NaN-poisoned outputs, checked against float64."""
    import tirxpy
    from tirxpy_kernels.attention_sm90 import attention_sm90

    B, H = 3, 4
    q, k, v = _inputs(B, S, S, H, H, D, torch.bfloat16)
    spec = attention_sm90(B, H, H, S, S, D, causal=causal, **kw)
    kern = tirxpy.compile(spec, arch="sm_90a")
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S, 1), float("nan"), device="cuda")
    kern(q, k, v, o, lse)
    torch.cuda.synchronize()
    _check(o, lse[..., 0], q, k, v, causal, D ** -0.5)
    return spec


def test_repeated_calls_take_the_checked_fast_path():
    """A second call with the shapes and layouts of a checked one skips the checks and the planning
    (tirxpy_kernels.attention_api._FAST) and still computes on its own fresh inputs; a call with other strides
    (a transposed view) goes the checked way, and a non-bool ``causal`` still gets its error."""
    from tirxpy_kernels import attention_api

    for _ in range(2):
        q, k, v = _inputs(2, 512, 512, 4, 2, 128, torch.bfloat16)
        o, lse = tirxpy_kernels.attention(q, k, v, causal=True, return_lse=True)
        torch.cuda.synchronize()
        _check(o, lse, q, k, v, True, 128 ** -0.5)
    key = next(key for key in attention_api._FAST if key[0] == q.shape and key[15] is True)   # (causal)
    assert key[1] == q.stride()
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)      # same shape, other strides: not the cached key
    o = tirxpy_kernels.attention(qt, k, v, causal=True)
    torch.cuda.synchronize()
    _check(o, tirxpy_kernels.attention(q, k, v, causal=True, return_lse=True)[1], q, k, v, True, 128 ** -0.5)
    with pytest.raises(attention_api.AttentionArgumentError, match="causal must be True or False"):
        tirxpy_kernels.attention(q, k, v, causal=1)          # 1 == True as a key: the fast path must not take it


@pytest.mark.parametrize("D,causal", [(64, True), (128, False), (256, True)])
def test_pdl_launch_reads_what_the_previous_kernel_wrote(D, causal):
    """PDL (default on): the kernel may start while the previous kernel in the stream runs, and waits for it
    before reading. Q is written by a kernel that lets dependents launch at once and copies Q only after
    ~200 us into a NaN-poisoned buffer: an attention that read Q early would return NaN."""
    q, k, v = _inputs(2, 1024, 1024, 4, 4, D, torch.bfloat16)
    tirxpy_kernels.attention(q, k, v, causal=causal)           # built before: a compile would let the copy finish
    q_late = torch.full_like(q, float("nan"))
    torch.cuda.synchronize()
    late_copy(q, q_late)
    o, lse = tirxpy_kernels.attention(q_late, k, v, causal=causal, return_lse=True)
    torch.cuda.synchronize()
    assert torch.equal(q_late, q)
    _check(o, lse, q, k, v, causal, D ** -0.5)


@pytest.mark.parametrize("D,causal", [(64, True), (128, False)])
def test_captured_in_a_cuda_graph_replays_on_new_inputs(D, causal):
    """``torch.cuda.graph`` captures the (PDL) launch: replayed on new values copied into Q, K and V, with O
    and the log-sum-exp NaN-poisoned before each replay, it matches float64 each time."""
    q, k, v = _inputs(2, 640, 640, 4, 2, D, torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):               # warm-up (build, load, tensor maps) outside the capture
        tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
    for _ in range(2):
        for t in (q, k, v):
            t.copy_(torch.randn_like(t, dtype=torch.float32).to(t.dtype))
        o.fill_(float("nan"))
        lse.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(o, lse, q, k, v, causal, D ** -0.5)


@pytest.mark.parametrize("D,causal,HKV", [(64, True, 4), (128, False, 2), (128, True, 4), (256, True, 1)])
def test_fused_projection_views_are_read_in_place(D, causal, HKV, monkeypatch):
    """``q``, ``k``, ``v`` sliced out of one ``(B, S, H + 2 HKV, D)`` projection go to the kernel as they are (its
    ``strides`` are theirs, no copy), the result matches float64, and a repeated call takes the fast path."""
    from tirxpy_kernels import attention_api

    B, S, H = 2, 700, 4
    qkv = torch.randn(B, S, H + 2 * HKV, D, device="cuda").to(torch.bfloat16)
    q, k, v = qkv[:, :, :H], qkv[:, :, H:H + HKV], qkv[:, :, H + HKV:]
    attention_api._FAST.clear()         # an earlier call like this one (another test's) would skip the build
    built = []
    real = attention_api.attention_sm90
    monkeypatch.setattr(attention_api, "attention_sm90", lambda *a, **kw: built.append(kw["strides"]) or real(*a, **kw))
    o, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
    assert built == [(q.stride(), k.stride(), v.stride())]
    _check(o, lse, q, k, v, causal, D ** -0.5)
    o2 = tirxpy_kernels.attention(q, k, v, causal=causal)
    assert len(built) == 1 and torch.equal(o, o2)            # the fast path: no second build


def test_misaligned_inputs_are_copied_on_every_call():
    """An input whose address is off 16 bytes (TMA cannot read it in place) is copied, on the first call and on a
    repeated one (the fast path is keyed by alignment too); forward and backward match float64."""
    B, S, H, D = 1, 300, 2, 64
    flat = torch.randn(B * S * H * D + 8, device="cuda").to(torch.bfloat16)
    q = flat[1:1 + B * S * H * D].view(B, S, H, D)
    k, v = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(2))
    assert q.data_ptr() % 16
    for _ in range(2):
        o, lse = tirxpy_kernels.attention(q, k, v, causal=True, return_lse=True)
        _check(o, lse, q, k, v, True, D ** -0.5)
    do = torch.randn_like(q)
    dq, dk, dv = tirxpy_kernels.attention_backward(q, k, v, o, do, lse, causal=True)
    from tests.kernels.attention_bwd_reference import reference_grads

    for a, r in zip((dq, dk, dv), reference_grads(q, k, v, do, True, D ** -0.5)):
        assert ((a.double() - r).norm() / r.norm()).item() < 2e-2
