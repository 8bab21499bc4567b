"""tirxpy_kernels.attention_varlen and the VARLEN variant of the Hopper attention kernel.

CPU: argument and cu_seqlens checks (typed errors), the plan, the overlapping output views (each sequence's rows
at x < XQ of view row = its end), and small packed batches through the simulator against float64 with NaN-poisoned
outputs; both varlen kernels (forward, packed backward) on offsets the host check refuses, inside their tensors.
GPU (marker gpu): mixed ragged lengths against per-sequence dense attention (float64), head dims 64 / 128 / 256,
causal and not, GQA, SQ != SK per sequence, empty sequences, opcheck; gradients of the packed backward
(attention_bwd_api.attention_varlen_backward) against float64 per sequence; bad device offsets raising.
"""
import pytest
import torch

import tirxpy_kernels
from tirxpy.errors import ArgumentError
from tirxpy.sim import run
from tirxpy_kernels.attention_plan import plan, varlen_window
from tirxpy_kernels.attention_sm90 import attention_sm90
from tirxpy_kernels.attention_walk import EMPTY_TILE, varlen_slots
from tirxpy_kernels.attention_varlen_api import (VarlenArgumentError, check, check_lengths, clipped_view,
                                                 batch_strides, empty_outputs, launch_order, output_views, tile_map)
from tirxpy_kernels.attention_bwd_api import attention_varlen_backward
from tirxpy_kernels.attention_bwd_plan import plan as bwd_plan
from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90
from tirxpy_kernels.errors import KernelConfigError
from tirxpy_kernels.views import packed_input

from tests.kernels.attention_reference import output_bound, reference

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9
hopper = pytest.mark.skipif(not HOPPER, reason="the sm_90a kernel needs a Hopper GPU")


def _cu(lens, device="cpu"):
    return torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=device)


def _m(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize("args,match", [
    ((_m(10, 2, 64, 1), _m(10, 2, 64), _m(10, 2, 64)), "q must be"),
    ((_m(10, 2, 64, dtype=torch.float32), _m(10, 2, 64), _m(10, 2, 64)), "dtype"),
    ((_m(10, 2, 64), _m(10, 2, 64), _m(10, 1, 64)), "one shape"),
    ((_m(10, 3, 64), _m(10, 2, 64), _m(10, 2, 64)), "do not split"),
    ((_m(10, 2, 96), _m(10, 2, 96), _m(10, 2, 96)), "head dim 96"),
])
def test_tensor_checks(args, match):
    cu = _cu([4, 6])
    with pytest.raises(VarlenArgumentError, match=match) as e:
        check(*args, cu, cu, 6, 6)
    assert isinstance(e.value, ArgumentError)


@pytest.mark.parametrize("kw,match", [
    (dict(cu_seqlens_q=torch.tensor([0, 4, 10])), "int32"),
    (dict(cu_seqlens_q=torch.tensor([[0, 4, 10]], dtype=torch.int32)), "1-D"),
    (dict(cu_seqlens_q=torch.tensor([0], dtype=torch.int32)), "batch \\+ 1 >= 2"),
    (dict(cu_seqlens_k=torch.tensor([0, 10], dtype=torch.int32)), "both hold batch"),
    (dict(max_seqlen_q=0), "max_seqlen_q must be a positive int"),
    (dict(max_seqlen_k=True), "max_seqlen_k must be a positive int"),
    (dict(causal=1), "causal must be True or False"),
    (dict(scale=-1.0), "scale must be a positive"),
    (dict(scale=10 ** 400), "scale must be a positive finite number"),
    (dict(cu_seqlens_q=torch.tensor([0, 4, 10], dtype=torch.int32).to_sparse()), "sparse tensor"),
    (dict(cu_seqlens_k=torch.tensor([0, 9, 4, 9, 10, 9], dtype=torch.int32)[::2]), "strided view .stride 2."),
])
def test_argument_checks(kw, match):
    q = _m(10, 2, 64)
    args = dict(cu_seqlens_q=_cu([4, 6]), cu_seqlens_k=_cu([4, 6]), max_seqlen_q=6, max_seqlen_k=6)
    args.update(kw)
    with pytest.raises(VarlenArgumentError, match=match):
        check(q, q, q, args.pop("cu_seqlens_q"), args.pop("cu_seqlens_k"), args.pop("max_seqlen_q"),
              args.pop("max_seqlen_k"), **args)


@pytest.mark.parametrize("cq,ck,match", [
    ([1, 4, 10], [0, 4, 10], "start at 0"),
    ([0, 6, 4], [0, 4, 10], "decreases"),
    ([0, 2, 10], [0, 4, 10], "over max_seqlen"),
    ([0, 6, 12], [0, 4, 10], "past the 10 packed rows"),
    ([0, 4, 10], [0, 4, 4], "no keys in cu_seqlens_k"),
])
def test_length_checks(cq, ck, match):
    with pytest.raises(VarlenArgumentError, match=match):
        check_lengths(cq, ck, 10, 10, 6, 6)
    check_lengths([0, 4, 4, 10], [0, 4, 5, 10], 10, 10, 6, 6)    # an empty query sequence may have keys


def test_cpu_tensors_refused_after_the_checks():
    """The device error is the varlen API's own (VarlenArgumentError, worded attention_varlen), as every other."""
    from tirxpy_kernels.attention_varlen_api import VarlenArgumentError

    q, cu = torch.zeros(10, 2, 64, dtype=torch.bfloat16), _cu([4, 6])
    with pytest.raises(VarlenArgumentError, match="attention_varlen: the tensors are on cpu; move them to a CUDA"):
        tirxpy_kernels.attention_varlen(q, q, q, cu, cu, 6, 6)
    with pytest.raises(VarlenArgumentError, match=r"attention_varlen: q, k, v are on cpu, meta, cpu"):
        tirxpy_kernels.attention_varlen(q, q.to("meta"), q, cu, cu, 6, 6)


def test_plan():
    p = plan(5, 8, 2, 1000, 3000, 128, causal=True, VARLEN=True)
    assert p.varlen and not p.persist and not p.chain and p.grid == (8, 8, 5) and p.xq == 1024
    assert varlen_window(1) == 128 and varlen_window(129) == 256
    with pytest.raises(KernelConfigError, match="one slot of its tile map per CTA"):
        plan(5, 8, 2, 1000, 1000, 128, VARLEN=True, PERSIST=True)
    assert not plan(5, 8, 2, 1000, 1000, 128).varlen


@pytest.mark.parametrize("seed", range(4))
def test_tile_map_lists_every_tile_once_most_work_first(seed):
    """Every query tile of every sequence is in exactly one slot, sequences in launch order and each one's tiles
    from its last down; the slots after the last tile name a tile past sequence 0's end."""
    g = torch.Generator().manual_seed(seed)
    B, BM = int(torch.randint(1, 9, (1,), generator=g)), (64, 128)[seed % 2]
    lq = torch.randint(0, 700, (B,), generator=g).tolist()
    lk = torch.randint(1, 700, (B,), generator=g).tolist()
    cq, ck = _cu(lq), _cu(lk)
    slots = varlen_slots(sum(lq), BM, B)
    m = tile_map(cq, ck, BM, slots)
    want = [(b, t) for b in launch_order(cq, ck).tolist() for t in reversed(range(-(-lq[b] // BM)))]
    got = list(zip(m[0].tolist(), m[1].tolist()))
    assert got[:len(want)] == want
    assert all(x == (0, EMPTY_TILE) for x in got[len(want):]) and EMPTY_TILE * BM >= 2 ** 26


@pytest.mark.parametrize("seed", range(4))
def test_pair_map_puts_each_tile_in_one_slot_with_its_partner(seed):
    """With two tiles a slot (PAIRS) sequence ``b``'s slot ``j`` holds its tiles ``n - 1 - j`` and ``j``, the middle
    tile of an odd ``n`` alone; every tile is in exactly one slot, sequences in launch order, the map fits the slots
    :func:`varlen_slots` counts."""
    g = torch.Generator().manual_seed(seed)
    B, BM = int(torch.randint(1, 9, (1,), generator=g)), (64, 128)[seed % 2]
    lq = torch.randint(0, 900, (B,), generator=g).tolist()
    lk = torch.randint(1, 700, (B,), generator=g).tolist()
    cq, ck = _cu(lq), _cu(lk)
    slots = varlen_slots(sum(lq), BM, B, 2)
    m = tile_map(cq, ck, BM, slots, per=2)
    assert m.shape == (3, slots)
    want = []
    for b in launch_order(cq, ck).tolist():
        n = -(-lq[b] // BM)
        want += [(b, n - 1 - j, j if j < n - 1 - j else EMPTY_TILE) for j in range(-(-n // 2))]
    got = list(zip(*m.tolist()))
    assert got[:len(want)] == want
    assert all(x == (0, EMPTY_TILE, EMPTY_TILE) for x in got[len(want):])
    tiles = sorted((b, t) for b, t0, t1 in want for t in (t0, t1) if t != EMPTY_TILE)
    assert tiles == sorted((b, t) for b in range(B) for t in range(-(-lq[b] // BM)))


def test_launch_order_is_most_work_first():
    cq, ck = _cu([10, 300, 0, 300, 50]), _cu([10, 300, 5, 200, 60])
    assert launch_order(cq, ck).tolist() == [1, 3, 4, 0, 2]


def test_output_views_clip_each_sequence_at_its_end():
    """Row r of a sequence ending at q1 is view element (q1, XQ - q1 + r); its rows past q1 are at x >= XQ."""
    lens, H, D = [30, 0, 100, 20], 2, 64
    cu = _cu(lens).tolist()
    out, lse = empty_outputs(torch.empty(sum(lens), H, D), 100)
    XQ = varlen_window(100)
    O, L = output_views(out, lse, 100)
    assert O.shape == (sum(lens) + 1, XQ, H, D) and L.shape == (sum(lens) + 1, H, XQ, 1)
    out.zero_()
    lse.zero_()
    for b, n in enumerate(lens):
        q0, q1 = cu[b], cu[b + 1]
        O[q1, XQ - n:XQ] = b + 1
        L[q1, :, XQ - n:XQ] = b + 1
        with pytest.raises(IndexError):   # the row after the sequence's last is past the view's edge
            O[q1, XQ]
    want = torch.tensor(sum(([b + 1] * n for b, n in enumerate(lens)), []), dtype=out.dtype)
    assert torch.equal(out[:, 0, 0], want) and torch.equal(lse[0], want)
    small, _ = empty_outputs(torch.empty(100, H, D), 100)     # below one tile: computed on padded copies
    assert small.is_contiguous() and small.storage_offset() == 0


def _sim_case(lq, lk, H, HKV, D, causal, BN, NC, dtype, pairs=None, fused=False, **extra):
    """``fused``: ``q``, ``k``, ``v`` are slices of one packed projection ``(total, H + 2 HKV, D)`` (``lq == lk``), read
    in place through their strides."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    tdt = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    cq, ck = _cu(lq), _cu(lk)
    NQ, NK, XQ = sum(lq), sum(lk), varlen_window(max(lq))
    if fused:
        qkv = torch.randn(NQ, H + 2 * HKV, D, generator=g).to(tdt)
        q, k, v = qkv[:, :H], qkv[:, H:H + HKV], qkv[:, H + HKV:]
        extra["strides"] = batch_strides(*(packed_input(t, 1) for t in (q, k, v)))
        assert extra["strides"] is not None
    else:
        q = torch.randn(NQ, H, D, generator=g).to(tdt)
        k, v = (torch.randn(NK, HKV, D, generator=g).to(tdt) for _ in range(2))
    opts = dict(causal=causal, BN=BN, STAGES=2, NC=NC, dtype=dtype, VARLEN=True, PAIRS=pairs, **extra)
    kern = attention_sm90(len(lq), H, HKV, XQ, varlen_window(max(lk)), D, SQT=NQ, SKT=NK, **opts)
    plan_opts = {n: x for n, x in opts.items() if n != "strides"}
    per = plan(len(lq), H, HKV, XQ, varlen_window(max(lk)), D, **plan_opts).per_cta
    assert per == (1 if pairs is False else 2)
    # each view is passed as an array of its logical shape, which the simulator addresses through the view's
    # strides (as the GPU does): element (k, x) of O is storage row k + x, packed row r is storage row XQ + r
    O = torch.full((NQ + 1, XQ, H, D), float("nan")).to(tdt)
    L = torch.full(((NQ + 1) * H * XQ,), float("nan"))
    BM = 64 * NC
    tiles = tile_map(cq, ck, BM, varlen_slots(NQ, BM, len(lq), per), per=per)    # every real tile once, then padding
    res = run(kern, q[None], k[None], v[None], O, L.view(NQ + 1, H, XQ, 1), cq, ck, tiles,
              seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    lse = L[:H * (XQ + NQ)].view(H, XQ + NQ)[:, XQ:]
    rows = O.reshape(-1, H, D)
    written = ~torch.isnan(rows.float()).all(-1).all(-1)
    assert written[XQ:XQ + NQ].all() and int(written.sum()) == NQ   # nothing stored past any sequence's end
    for b in range(len(lq)):
        q0, q1, k0, k1 = cq[b], cq[b + 1], ck[b], ck[b + 1]
        if q1 == q0:
            continue
        ref, ref_lse = reference(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal, D ** -0.5)
        o = rows[XQ + q0:XQ + q1]
        assert not torch.isnan(o).any() and not torch.isnan(lse[:, q0:q1]).any()
        bound = output_bound(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal, D ** -0.5)
        assert ((o.double() - ref[0]).abs() <= bound[0]).all()
        assert (lse[:, q0:q1].double() - ref_lse[0]).abs().max().item() < 1e-4


@pytest.mark.parametrize("lq,lk,H,HKV,D,causal,BN,NC,dtype,pairs", [
    ([70, 20, 150], [50, 90, 33], 2, 1, 64, True, 32, 1, "bfloat16", None),    # ragged, GQA, SQ != SK per sequence;
                                                                                # pairs, a lone middle tile
    ([40, 0, 130], [100, 7, 64], 2, 2, 64, False, 32, 2, "float16", None),      # an empty sequence, two consumers
    ([70, 20, 150], [50, 90, 33], 2, 1, 64, True, 32, 1, "bfloat16", False),   # one tile a CTA
])
def test_varlen_sim_matches_float64(lq, lk, H, HKV, D, causal, BN, NC, dtype, pairs):
    _sim_case(lq, lk, H, HKV, D, causal, BN, NC, dtype, pairs)


def test_varlen_reads_a_packed_projection_in_place_in_the_simulator():
    _sim_case([70, 20, 150], [70, 20, 150], 2, 1, 64, True, 32, 1, "bfloat16", fused=True)


@pytest.mark.parametrize("pingpong", [False, True])
def test_varlen_pairs_with_two_consumers_in_the_simulator(pingpong):
    """Causal pairs of 128-row tiles with two consumer warpgroups, with and without their turns on the tensor cores
    (which carry over from a pair's first tile to its second): sequences of 3 and 4 tiles, one of 1."""
    _sim_case([300, 100, 400], [300, 120, 390], 1, 1, 64, True, 64, 2, "bfloat16", None, PINGPONG=pingpong)


HOSTILE_OFFSETS = [       # (cu_seqlens_q, cu_seqlens_k) of two sequences over 10 packed rows with max_seqlen 6, and
    ([1, 4, 10], [0, 4, 10], "start at 0"),                     # what the host check's refusal names
    ([-2 ** 30, 4, 10], [0, 4, 10], "start at 0"),
    ([0, 4, 10], [-2 ** 31, 0, 10], "start at 0"),
    ([0, 6, 4], [0, 4, 10], "decreases"),
    ([0, -5, 10], [0, 4, 10], "decreases"),
    ([0, 2, 10], [0, 4, 10], "over max_seqlen"),
    ([0, 2 ** 30, 10], [0, 4, 10], "over max_seqlen"),
    ([0, 2 ** 31 - 1, 10], [0, 4, 2 ** 31 - 1], "over max_seqlen"),
    ([0, 6, 12], [0, 4, 10], "past the 10 packed rows"),
    ([0, 4, 10], [0, 4, 4], "no keys in cu_seqlens_k"),
]


@pytest.mark.parametrize("cq,ck,match", HOSTILE_OFFSETS)
def test_host_check_names_each_hostile_kind(cq, ck, match):
    with pytest.raises(VarlenArgumentError, match=match):
        check_lengths(cq, ck, 10, 10, 6, 6)


@pytest.mark.parametrize("cq,ck,_", HOSTILE_OFFSETS)
def test_varlen_kernel_finishes_inside_its_tensors_on_any_offsets(cq, ck, _):
    """The VARLEN kernel on offsets the host check refuses (as it runs while a CUDA graph is captured, or before the
    API's deferred check): each sequence is clamped to its window and the packed rows, so the simulator sees no
    access outside a tensor, no deadlock and no unbounded walk. (One head: the clamping is per sequence.)"""
    H, D, N = 1, 64, 128
    cq, ck = (torch.tensor(c, dtype=torch.int32) for c in (cq, ck))
    kern = attention_sm90(2, H, H, 128, 128, D, SQT=N, SKT=N, BN=64, STAGES=2, NC=1, VARLEN=True)
    per = plan(2, H, H, 128, 128, D, BN=64, STAGES=2, NC=1, VARLEN=True).per_cta
    q, k, v = (torch.randn(1, N, H, D).to(torch.bfloat16) for _ in range(3))
    O = torch.zeros((N + 1, 128, H, D), dtype=torch.bfloat16)
    L = torch.zeros((N + 1, H, 128, 1))
    tiles = tile_map(cq, ck, 64, varlen_slots(N, 64, 2, per), per=per)
    res = run(kern, q, k, v, O, L, cq, ck, tiles, check=False, max_steps=2_000_000)
    assert res.problems == []


@pytest.mark.parametrize("cq,ck,_", HOSTILE_OFFSETS)
@pytest.mark.parametrize("det", [False, True])
def test_packed_backward_kernel_finishes_inside_its_tensors_on_any_offsets(cq, ck, _, det):
    """The packed backward kernel likewise (:func:`~tirxpy_kernels.attention_bwd_sm90.lengths` clamps each sequence),
    with the ordered dQ adds too: every turn a CTA waits for is taken. (One head: the clamping is per sequence.)"""
    H, D, N = 1, 64, 128
    cq, ck = (torch.tensor(c, dtype=torch.int32) for c in (cq, ck))
    p = bwd_plan(2, H, H, 128, 128, D, True, deterministic=det, PACKED=True)
    XQ, XK = p.q_blocks * p.BM, p.kv_blocks * p.BN
    kern = attention_bwd_sm90(2, H, H, 128, 128, D, causal=True, deterministic=det, SQT=N, SKT=N, PACKED=True)
    q, k, v, do = (torch.randn(N, H, D).to(torch.bfloat16) for _ in range(4))
    lp, dl = torch.zeros(H, 2, XQ), torch.zeros(H, 2, XQ)
    dK, dV = (torch.zeros((N + 1, XK, H, D), dtype=torch.bfloat16) for _ in range(2))
    dQ = torch.zeros(N + 1, XQ, H, D)
    sem = torch.zeros(2, H, p.q_blocks, 2, dtype=torch.int32)
    res = run(kern, q, k, v, do, lp, dl, dK, dV, dQ, sem, cq, ck, check=False, max_steps=2_000_000)
    assert res.problems == []


def test_clipped_view_stores_each_sequence_up_to_its_end():
    """The varlen kernels' store view: writing sequence ``b``'s rows at view elements ``(q1, X - lq + r)`` for every
    ``r`` of a box of ``X`` rows lands them at packed rows ``q0 + r`` and the box's rows past ``q1`` (``x >= X``)
    are not in the view; the rows in front of the packed rows are the window's."""
    lens, X = [3, 0, 5, 2], 8
    cu = _cu(lens).tolist()
    buf = torch.zeros(X + cu[-1], 1, 1)
    v = clipped_view(buf[X:], X)
    for b, n in enumerate(lens):
        q1 = cu[b + 1]
        v[q1, X - n:, 0, 0] = torch.arange(cu[b], q1, dtype=torch.float32) + 1
    assert buf[X:, 0, 0].tolist() == [r + 1.0 for r in range(cu[-1])] and not buf[:X].any()


def test_varlen_backward_refuses_bad_tensors_with_the_shape_it_takes():
    q = torch.empty(300, 4, 64, dtype=torch.bfloat16, device="meta")
    k = torch.empty(250, 2, 64, dtype=torch.bfloat16, device="meta")
    cq, ck = _cu([100, 200]), _cu([50, 200])
    lse = torch.empty(4, 300, device="meta")
    bad = [((q, k, k, q[:10], q, lse), "out is torch.bfloat16 (10, 4, 64); it must be q's torch.bfloat16 (300, 4, 64)"),
           ((q, k, k, q, q.half(), lse), "dout is torch.float16 (300, 4, 64); it must be q's"),
           ((q, k, k, q, q, lse.t()), "lse is torch.float32 (300, 4); it must be the float32 (heads, total_tokens)"),
           ((q, k, k, q, q, lse.double()), "lse is torch.float64 (4, 300)"),
           ((q, k[:, :1, :32], k, q, q, lse), "k (250, 1, 32) and v (250, 2, 64) must have one shape")]
    for args, msg in bad:
        with pytest.raises(VarlenArgumentError) as e:
            attention_varlen_backward(*args, cq, ck, 200, 200)
        assert msg in str(e.value)
    with pytest.raises(ArgumentError, match="CUDA device"):      # good tensors: the device check is next
        attention_varlen_backward(q, k, k, q, q, lse, cq, ck, 200, 200)


# ---------------------------------------------------------------------------------------------------- GPU
GPU_BATCHES = pytest.mark.parametrize("lq,lk,H,HKV", [
    ([1, 513, 77, 1000, 0, 300], [1, 513, 77, 1000, 5, 300], 4, 2),    # self-attention lengths, one empty
    ([129, 700, 64], [300, 65, 1024], 2, 1),                            # SQ != SK in each sequence, MQA
])


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@GPU_BATCHES
def test_varlen_matches_dense_per_sequence(D, causal, lq, lk, H, HKV):
    dt = torch.bfloat16
    q = torch.randn(sum(lq), H, D, device="cuda").to(dt)
    k, v = (torch.randn(sum(lk), HKV, D, device="cuda").to(dt) for _ in range(2))
    cq, ck = _cu(lq, "cuda"), _cu(lk, "cuda")
    torch.full((1 << 27,), float("nan"), device="cuda")        # freed NaN memory: fresh outputs start poisoned
    o, lse = tirxpy_kernels.attention_varlen(q, k, v, cq, ck, max(lq) + 5, max(lk), causal=causal, return_lse=True)
    assert o.shape == q.shape and lse.shape == (H, sum(lq))
    cql, ckl = cq.tolist(), ck.tolist()
    for b in range(len(lq)):
        q0, q1, k0, k1 = cql[b], cql[b + 1], ckl[b], ckl[b + 1]
        if q1 == q0:
            continue
        ref, ref_lse = reference(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal, D ** -0.5)
        assert not torch.isnan(o[q0:q1]).any() and not torch.isnan(lse[:, q0:q1]).any()
        err = ((o[q0:q1].double() - ref[0]).norm() / ref.norm()).item()
        assert err < 1.5e-2, (b, err)
        assert (lse[:, q0:q1].double() - ref_lse[0]).abs().max().item() < 2e-3


@pytest.mark.gpu
@hopper
def test_varlen_opcheck_and_compile():
    import tirxpy_kernels.torch_ops  # noqa: F401  (registers torch.ops.tirxpy.*, whatever ran before)

    lens = [200, 57, 300]
    q = torch.randn(sum(lens), 4, 128, device="cuda", dtype=torch.bfloat16)
    cu = _cu(lens, "cuda")
    torch.library.opcheck(torch.ops.tirxpy.attention_varlen.default, (q, q, q, cu, cu, 300, 300, True, None))
    fn = torch.compile(lambda q: tirxpy_kernels.attention_varlen(q, q, q, cu, cu, 300, 300, causal=True) * 2,
                       fullgraph=True)
    assert torch.equal(fn(q), tirxpy_kernels.attention_varlen(q, q, q, cu, cu, 300, 300, causal=True) * 2)


def test_bench_train_sim_and_its_argument_checks(capsys):
    """``bench train --sim`` runs the VARLEN kernel in the simulator; bad shapes exit 2 before any GPU work."""
    from tirxpy_kernels.bench import main
    from tirxpy_kernels.bench_train import varlen_lengths

    assert main(["train", "--sim", "--seed", "3"]) == 0
    assert "VARLEN" in capsys.readouterr().out
    assert main(["train", "--dim", "100"]) == 2
    assert "multiple of 128" in capsys.readouterr().err
    for seed in range(20):
        ls = varlen_lengths(20000, seed)
        assert sum(ls) == 20000 and min(ls) >= 512 and max(ls) <= 8192


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@GPU_BATCHES
def test_varlen_gradients_match_float64_per_sequence(D, causal, lq, lk, H, HKV):
    """torch.autograd.grad through tirxpy_kernels.attention_varlen against float64 autograd through the math
    attention of each sequence alone; the packed buffers have rows past the last sequence (their gradients are
    zero), and the allocator's memory is NaN-poisoned first."""
    from tests.kernels.attention_bwd_reference import reference_grads

    dt = torch.bfloat16
    extra = 3
    q = torch.randn(sum(lq) + extra, H, D, device="cuda").to(dt).requires_grad_()
    k, v = (torch.randn(sum(lk) + extra, HKV, D, device="cuda").to(dt).requires_grad_() for _ in range(2))
    cq, ck = _cu(lq, "cuda"), _cu(lk, "cuda")
    torch.full((1 << 27,), float("nan"), device="cuda")        # freed NaN memory: fresh outputs start poisoned
    out = tirxpy_kernels.attention_varlen(q, k, v, cq, ck, max(lq) + 200, max(lk) + 70, causal=causal)   # loose bounds
    do = torch.randn_like(out)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), do)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert not dq[sum(lq):].any()                               # rows past the last sequence
    assert not dk[sum(lk):].any() and not dv[sum(lk):].any()
    refs = [torch.zeros(t.shape, dtype=torch.float64, device="cuda") for t in (q, k, v)]
    cql, ckl = cq.tolist(), ck.tolist()
    for b in range(len(lq)):
        q0, q1, k0, k1 = cql[b], cql[b + 1], ckl[b], ckl[b + 1]
        if q1 == q0:
            assert not dk[k0:k1].any() and not dv[k0:k1].any()  # keys no query sees
            continue
        ref = reference_grads(q[None, q0:q1].detach(), k[None, k0:k1].detach(), v[None, k0:k1].detach(),
                              do[None, q0:q1], causal, D ** -0.5)
        for r, rows, part in zip(refs, (slice(q0, q1), slice(k0, k1), slice(k0, k1)), ref):
            r[rows] = part[0]
    # relative to each whole gradient: a one-key sequence's dq is zero in float64 and only rounding here
    for name, got, r in zip(("dq", "dk", "dv"), (dq, dk, dv), refs):
        assert not torch.isnan(got).any(), name
        err = ((got.double() - r).norm() / r.norm()).item()
        assert err < 2e-2, (name, err)
        worst = max(((got[i:j].double() - r[i:j]).norm() / r.norm()).item()
                    for i, j in zip(cql[:-1], cql[1:]) if j > i) if name == "dq" else 0.0
        assert worst < 2e-2, (name, worst)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("D", [64, 128])
def test_varlen_backward_deterministic_is_bit_equal_run_to_run(D):
    """``deterministic=True``: two calls on the same packed inputs give bit-equal gradients (each query block's dQ
    adds in key-block order), equal to the unordered call's within float32 summation order."""
    lq = lk = [700, 0, 129, 1500, 64]
    H, HKV = 4, 2
    q, do = (torch.randn(sum(lq), H, D, device="cuda").to(torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(sum(lk), HKV, D, device="cuda").to(torch.bfloat16) for _ in range(2))
    cq, ck = _cu(lq, "cuda"), _cu(lk, "cuda")
    out, lse = tirxpy_kernels.attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=True, return_lse=True)
    args = (q, k, v, out, do, lse, cq, ck, max(lq), max(lk))
    g1, g2 = (attention_varlen_backward(*args, causal=True, deterministic=True) for _ in range(2))
    g0 = attention_varlen_backward(*args, causal=True)
    for a, b, c in zip(g1, g2, g0):
        assert torch.equal(a, b)
        assert (a.float() - c.float()).abs().max() <= 1e-2 * c.float().abs().max()




@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("deterministic", [False, True])
def test_bad_device_offsets_raise_and_leave_the_gpu_usable(deterministic):
    """``cu_seqlens`` on the device: each bad kind raises :class:`VarlenArgumentError` naming it from the forward and
    the backward (checked after the launches: the kernels ran on the offsets clamped, inside their tensors), so the
    GPU stays usable and a good call after them gives what it gave before them."""
    H, D, N = 2, 64, 10
    q, k, v, do = (torch.randn(N, H, D, device="cuda").to(torch.bfloat16) for _ in range(4))
    good = _cu([4, 6], "cuda")
    out, lse = tirxpy_kernels.attention_varlen(q, k, v, good, good, 6, 6, return_lse=True)
    grads = attention_varlen_backward(q, k, v, out, do, lse, good, good, 6, 6, deterministic=deterministic)
    for cq, ck, match in HOSTILE_OFFSETS:
        cq, ck = (torch.tensor(c, dtype=torch.int32, device="cuda") for c in (cq, ck))
        with pytest.raises(VarlenArgumentError, match=match):
            tirxpy_kernels.attention_varlen(q, k, v, cq, ck, 6, 6)
        with pytest.raises(VarlenArgumentError, match=match):
            attention_varlen_backward(q, k, v, out, do, lse, cq, ck, 6, 6, deterministic=deterministic)
    torch.cuda.synchronize()
    assert torch.equal(tirxpy_kernels.attention_varlen(q, k, v, good, good, 6, 6), out)
    again = attention_varlen_backward(q, k, v, out, do, lse, good, good, 6, 6, deterministic=deterministic)
    for a, b in zip(again, grads):
        assert torch.allclose(a.float(), b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("D,causal", [(64, True), (128, False), (128, True)])
def test_varlen_reads_a_packed_projection_in_place(D, causal, monkeypatch):
    """``q``, ``k``, ``v`` sliced out of one packed projection ``(total, H + 2 HKV, D)`` go to the forward and the
    backward kernels as they are (built with their strides); output and gradients (through autograd, into the
    projection) match float64 per sequence."""
    from tests.kernels.attention_bwd_reference import reference_grads
    from tirxpy_kernels import attention_bwd_api, attention_varlen_api

    lens, H, HKV = [300, 57, 700], 4, 2
    built = []
    for mod, name in ((attention_varlen_api, "attention_sm90"), (attention_bwd_api, "attention_bwd_sm90")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _r=real, **kw: built.append(kw.get("strides")) or _r(*a, **kw))
    qkv = torch.randn(sum(lens), H + 2 * HKV, D, device="cuda").to(torch.bfloat16).requires_grad_()
    q, k, v = qkv[:, :H], qkv[:, H:H + HKV], qkv[:, H + HKV:]
    cu = _cu(lens, "cuda")
    out = tirxpy_kernels.attention_varlen(q, k, v, cu, cu, max(lens), max(lens), causal=causal)
    do = torch.randn_like(out)
    dqkv, = torch.autograd.grad(out, qkv, do)
    assert len(built) == 2 and all(st is not None for st in built)
    c = cu.tolist()
    for b in range(len(lens)):
        rows = slice(c[b], c[b + 1])
        qs, ks, vs = (t[None, rows].detach() for t in (q, k, v))
        ref, _ = reference(qs, ks, vs, causal, D ** -0.5)
        assert ((out[rows].double() - ref[0]).norm() / ref.norm()).item() < 2e-2
        for got, r in zip((dqkv[rows, :H], dqkv[rows, H:H + HKV], dqkv[rows, H + HKV:]),
                          reference_grads(qs, ks, vs, do[None, rows], causal, D ** -0.5)):
            assert ((got.double() - r[0]).norm() / r.norm()).item() < 2e-2


def test_numpy_bounds_are_ints_and_a_bound_past_the_rows_builds_for_the_rows():
    import numpy as np

    from tirxpy_kernels.attention_varlen_api import windows

    q = _m(10, 2, 64)
    check(q, q, q, _cu([4, 6]), _cu([4, 6]), np.int64(6), np.int32(6))
    # a bound of 10 ** 12 rows allocated an output window of 10 ** 12 rows; no sequence is longer than its tensor
    assert windows(10 ** 12, 10 ** 12, 1000, 300) == (1024, 384)


def test_numpy_bool_flags_come_back_as_python_bools():
    """``check`` hands ``causal`` / ``return_lse`` on as Python bools (so a numpy bool keys the same kernel build
    as the Python bool); an int is still refused."""
    import numpy as np

    q = _m(10, 2, 64)
    got = check(q, q, q, _cu([4, 6]), _cu([4, 6]), 6, 6, causal=np.bool_(True), return_lse=np.bool_(False))
    assert got == (True, False) and all(type(f) is bool for f in got)
    with pytest.raises(VarlenArgumentError, match="causal must be True or False"):
        check(q, q, q, _cu([4, 6]), _cu([4, 6]), 6, 6, causal=1)
