"""The Hopper attention backward kernel (tirxpy_kernels/attention_bwd_sm90.py) under the CPU simulator at small
shapes: dQ, dK, dV against float64 autograd on fresh random inputs, dK / dV NaN-poisoned; ragged query and key
lengths, causal and not, grouped-query heads, both dQ splits, head dim 256 (consumers sharing 64 keys, each with
half the columns), the ordered (deterministic) dQ adds, the rotated query walk, consumer 1 trailing consumer 0
(head dim 128) and not, the CTA order."""
import itertools

import pytest
import torch

from tirxpy.sim import run
from tirxpy_kernels.attention_bwd_plan import plan
from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90
from tirxpy_kernels.errors import KernelConfigError

from tests.kernels.attention_bwd_reference import reference_grads
from tests.kernels.attention_reference import reference


def _pad(x, n):
    return torch.cat([x, x.new_zeros((x.shape[0], n - x.shape[1]) + tuple(x.shape[2:]))], 1)


def sim_backward(B, H, HKV, SQ, SK, D, causal, dtype, **kw):
    """Runs the kernel in the simulator on fresh inputs (O and LSE from the float64 forward, O rounded to
    ``dtype``); returns ``((dq, dk, dv), (ref_dq, ref_dk, ref_dv))``, the kernel's in float64."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    q, do = (torch.randn(B, SQ, H, D, generator=g).to(dtype) for _ in range(2))
    k, v = (torch.randn(B, SK, HKV, D, generator=g).to(dtype) for _ in range(2))
    scale = D ** -0.5
    o, lse = reference(q, k, v, causal, scale)
    SQP, SQT, SKT = -(-SQ // 64) * 64, max(SQ, 64), max(SK, 128)
    lp, dl = torch.zeros(B, H, SQP), torch.zeros(B, H, SQP)
    lp[:, :, :SQ] = lse.float()
    dl[:, :, :SQ] = (do.float() * o.to(dtype).float()).sum(-1).transpose(1, 2)
    dk, dv = (torch.full((B, SKT, HKV, D), float("nan")).to(dtype) for _ in range(2))
    dqa = torch.zeros(B, SQT, H, D)
    sem = torch.zeros(B, H, SQP // 64, 2, dtype=torch.int32)
    kern = attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=causal, dtype=str(dtype).removeprefix("torch."),
                              SQT=SQT, SKT=SKT, **kw)
    fused = (torch.full((B, SQ, H, D), float("nan")).to(dtype),) if kw.get("FUSE_DQ") else ()
    res = run(kern, _pad(q, SQT), _pad(k, SKT), _pad(v, SKT), _pad(do, SQT), lp, dl, dk, dv, dqa, sem, *fused,
              seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    dq = fused[0] if fused else dqa[:, :SQ]
    got = (dq.double(), dk[:, :SK].double(), dv[:, :SK].double())
    return got, reference_grads(q, k, v, do, causal, scale), sem


@pytest.mark.parametrize("B,H,HKV,SQ,SK,D,causal,dtype,kw", [
    (1, 4, 2, 130, 140, 64, True, torch.bfloat16, {}),      # GQA, 2 key blocks (one ragged), 3 query blocks
    (1, 4, 2, 130, 140, 64, True, torch.bfloat16, dict(DQ_SPLIT="keys", TRAIL=False)),  # head dim 64, dQ by keys
    (1, 2, 1, 130, 90, 128, False, torch.float16, {}),      # dQ split by columns over the shared dS
    (1, 1, 1, 150, 130, 64, False, torch.bfloat16, dict(ROTATE=True)),  # key blocks start at query blocks 0, 2
    (1, 1, 1, 100, 140, 128, True, torch.bfloat16, {}),     # MHA causal: the walk without divisions
    (1, 2, 1, 100, 150, 64, True, torch.bfloat16, dict(deterministic=True, STAGES=1, FOLD=False)),  # ordered adds
    (1, 2, 1, 100, 70, 256, True, torch.bfloat16, {}),      # head dim 256: GQA, 2 key blocks (one ragged), causal
    (1, 1, 1, 70, 100, 256, False, torch.float16, dict(deterministic=True)),  # head dim 256, ordered dQ adds
    (1, 2, 1, 200, 150, 128, False, torch.bfloat16, dict(TRAIL=False)),  # head dim 128, consumers in step
    (1, 1, 1, 64, 250, 128, True, torch.bfloat16, {}),      # trail: a CTA with no step, one with one step
    (1, 4, 2, 200, 150, 64, False, torch.bfloat16, dict(DQ_SPLIT="keys", TRAIL=True)),  # by keys, consumers apart
    (1, 1, 1, 130, 200, 64, False, torch.float16, dict(deterministic=True, DQ_SPLIT="cols")),  # 32-column dQ, ordered
    (1, 2, 1, 130, 150, 128, True, torch.float16, dict(deterministic=True, STAGES=1)),  # head dim 128, ordered adds
    (1, 4, 2, 200, 140, 64, True, torch.bfloat16, dict(FUSE_DQ=True)),  # dQ converted in the kernel: GQA, causal
    (1, 2, 1, 150, 250, 128, False, torch.float16, dict(FUSE_DQ=True)),  # ... not causal, 2 adds per block
    (1, 1, 1, 200, 70, 256, True, torch.bfloat16, dict(FUSE_DQ=True)),  # ... head dim 256
    (1, 2, 1, 130, 200, 64, False, torch.bfloat16, dict(FUSE_DQ=True, DQ_SPLIT="keys", TRAIL=False)),  # ... by keys
    (1, 1, 1, 130, 150, 128, True, torch.bfloat16, dict(FUSE_DQ=True, deterministic=True)),  # ... ordered adds
    (1, 1, 1, 200, 150, 64, False, torch.bfloat16, dict(FUSE_DQ=True, ROTATE=True)),  # ... the rotated walk
])
def test_backward_sim_matches_float64(B, H, HKV, SQ, SK, D, causal, dtype, kw):
    got, ref, sem = sim_backward(B, H, HKV, SQ, SK, D, causal, dtype, **kw)
    for name, a, r in zip(("dq", "dk", "dv"), got, ref):
        assert not torch.isnan(a).any(), f"{name}: unwritten (NaN-poisoned) or NaN elements"
        err = ((a - r).norm() / r.norm()).item()
        # P and dS are rounded to 16 bits before their products: bf16 ~ 2**-9, f16 ~ 2**-12 relative
        assert err < (1e-2 if dtype == torch.bfloat16 else 2e-3), (name, err)
    if kw.get("FUSE_DQ") or kw.get("deterministic"):
        # every add into a block is counted (FUSE_DQ) or takes a turn (deterministic): dQ split by keys (head dim 64),
        # both consumers of every key block on counter 0 of each query block they add into (counter 1 unused); by
        # columns, consumer c once on counter c
        p = plan(B, H, HKV, SQ, SK, D, causal, **kw)
        first = [min(n * p.BN // 64, sem.shape[2]) if causal else 0 for n in range(p.kv_blocks)]
        seen = torch.tensor([sum(1 for f in first if f <= mi) for mi in range(sem.shape[2])], dtype=torch.int32)
        if p.dq_split == "keys":
            assert torch.equal(sem[..., 0], (2 * seen).expand_as(sem[..., 0]))
            assert not sem[..., 1].any()
        else:
            assert torch.equal(sem, seen[:, None].expand_as(sem))


def test_keys_past_the_length_are_masked_where_lse_is_below_float32_exp_range():
    """Every score of a query row near -90 (``LSE < -88``): the zero key rows of the ragged last key block would give
    ``P = exp(-LSE)``, past float32's range, and ``dQ = inf * 0``; masked, the gradients stay finite and match."""
    B, H, SQ, SK, D = 1, 1, 64, 70, 64
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    k = (1 + 0.3 * torch.randn(B, SK, H, D, generator=g)).to(torch.bfloat16)
    q = (-14 + 0.05 * torch.randn(B, SQ, H, D, generator=g)).to(torch.bfloat16)
    v = torch.randn(B, SK, H, D, generator=g).to(torch.bfloat16)
    do = torch.randn(B, SQ, H, D, generator=g).to(torch.bfloat16)
    _, lse = reference(q, k, v, False, D ** -0.5)
    assert lse.max() < -88
    got = _run(q, k, v, do, False, torch.bfloat16, exact_d=True)
    for name, a, r, b in zip(("dq", "dk", "dv"), got, reference_grads(q, k, v, do, False, D ** -0.5),
                             _product_magnitudes(q, k, v, do, D ** -0.5)):
        assert torch.isfinite(a).all(), name
        # a product of operands rounded to bf16 (P, dS) is off by up to ~2**-8 of |A| |B|, not of |A B|: the large
        # common mean of the query rows cancels in dK = scale dS^T Q, so the error is measured against the
        # magnitudes; the keys' mean cancels in dQ = scale dS K only with D from the float64 O (``exact_d``)
        assert ((a - r).norm() / b.norm()).item() < 2 ** -8, name


def _product_magnitudes(q, k, v, do, scale):
    """``|dQ|, |dK|, |dV|`` bounds of one head in float64: ``scale |dS| |K|``, ``scale |dS|^T |Q|``, ``|P|^T |dO|``,
    shaped like the gradients (batch 1, one head)."""
    Q, K, V, dO = (t[0, :, 0].double() for t in (q, k, v, do))
    P = torch.softmax(scale * Q @ K.T, -1)
    dS = P * (dO @ V.T - (dO * (P @ V)).sum(-1, keepdim=True))
    return (m[None, :, None] for m in (scale * dS.abs() @ K.abs(), scale * dS.abs().T @ Q.abs(), P.T @ dO.abs()))


@pytest.mark.parametrize("D,causal,lens,det,fused,heads,trail,fuse", [
    # a first sequence
    (64, True, [(41, 50), (100, 150), (70, 45), (0, 0), (64, 130)], False, False, (2, 1), None, False),
    # under one block; one query row
    (128, False, [(100, 130), (1, 3), (70, 1), (77, 77)], False, False, (2, 1), None, False),
    # head dim 256 (64 keys shared)
    (256, True, [(90, 100), (100, 70)], False, False, (2, 1), None, False),
    # ordered dQ adds, CTAs skipped
    (64, False, [(100, 200), (0, 20), (70, 100)], True, False, (2, 1), None, False),
    (64, True, [(41, 41), (100, 100), (70, 70)], False, True, (2, 1), None, False),       # q, k, v, dO read in place
    # MHA: the walk without divisions; full key blocks (no column bound) beside ragged ones
    (128, True, [(70, 150), (30, 20)], False, False, (2, 2), None, False),
    # head dims 128 and 64 with the consumers in step
    (128, True, [(100, 130), (70, 90)], False, False, (2, 1), False, False),
    (64, False, [(100, 130), (1, 3), (70, 90)], False, False, (2, 1), False, False),
    # dQ converted in the kernel, by the CTA of each block's last add (a sequence without keys: its rows unwritten);
    # head dims 64, 128, 256; ordered adds counted alike
    (64, True, [(41, 50), (100, 150), (50, 0), (0, 0), (64, 130)], False, False, (2, 1), None, True),
    (128, False, [(100, 130), (1, 3), (70, 1), (77, 77)], False, False, (2, 1), None, True),
    (256, True, [(90, 100), (100, 70)], False, False, (2, 1), None, True),
    (64, False, [(100, 200), (0, 20), (70, 100)], True, False, (2, 1), None, True),
])
def test_packed_sequences_match_each_sequence_alone(D, causal, lens, det, fused, heads, trail, fuse):
    """``PACKED``: sequences packed row after row (``cu_seqlens``), NaN in the rows past the last one (a block past a
    sequence's end loads its neighbour's rows, or these): each sequence's gradients are the float64 ones of the
    sequence alone, and the stores write each sequence's rows only; ``deterministic``: every query block's turns
    are taken by the key blocks that see it, none by a CTA past its sequence's keys. (The overlapping output views
    are passed as arrays of their logical shape; the simulator addresses them through the views' strides, as the
    GPU does, so packed row ``r`` is storage row ``X + r``: :func:`_storage_rows`.) ``fused``: ``q``, ``k``, ``v`` are
    slices of one packed projection and ``dO`` the first half of wider rows, passed with ``strides=``. ``fuse``: the
    kernel converts ``dQ`` itself (``FUSE_DQ``) into a NaN-poisoned view, writing each sequence's rows that have keys
    and nothing else."""
    (H, HKV), extra = heads, 5
    SQ, SK = max(l for l, _ in lens), max(l for _, l in lens)
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    TQ, TK = sum(l for l, _ in lens) + extra, sum(l for _, l in lens) + extra
    TQ, TK = max(TQ, 64), max(TK, 128)
    cuq = torch.tensor([0] + list(itertools.accumulate(l for l, _ in lens)), dtype=torch.int32)
    cuk = torch.tensor([0] + list(itertools.accumulate(l for _, l in lens)), dtype=torch.int32)
    if fused:
        assert TQ == TK
        qkv = torch.randn(TQ, H + 2 * HKV, D, generator=g).to(torch.bfloat16)
        q, k, v = qkv[:, :H], qkv[:, H:H + HKV], qkv[:, H + HKV:]
        do = torch.randn(TQ, H, 2 * D, generator=g).to(torch.bfloat16)[..., :D]
    else:
        q, do = (torch.randn(TQ, H, D, generator=g).to(torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(TK, HKV, D, generator=g).to(torch.bfloat16) for _ in range(2))
    for t, cu in ((q, cuq), (do, cuq), (k, cuk), (v, cuk)):
        t[int(cu[-1]):] = float("nan")          # past the last sequence: must not reach any gradient
    p = plan(len(lens), H, HKV, SQ, SK, D, causal, deterministic=det, PACKED=True)
    XQ, XK = p.q_blocks * p.BM, p.kv_blocks * p.BN
    lp, dl = torch.zeros(H, len(lens), XQ), torch.zeros(H, len(lens), XQ)     # each sequence's rows from 0
    refs = []
    for b, (lq, lk) in enumerate(lens):
        q0, k0 = int(cuq[b]), int(cuk[b])
        if lq and lk:
            qs, ks, vs, ds = q[None, q0:q0 + lq], k[None, k0:k0 + lk], v[None, k0:k0 + lk], do[None, q0:q0 + lq]
            o, lse = reference(qs, ks, vs, causal, D ** -0.5)
            lp[:, b, :lq] = lse[0].float()
            # D from the float64 O, as the reference's: with D from O rounded to bf16 the rounding cancels badly in
            # dP - D where a row has few keys (the one-row, three-key sequence: ~1% of its dQ)
            dl[:, b, :lq] = (ds.double() * o.double()).sum(-1)[0].t().float()
            refs.append(reference_grads(qs, ks, vs, ds, causal, D ** -0.5))
        else:
            refs.append(None)
    kern = attention_bwd_sm90(len(lens), H, HKV, SQ, SK, D, causal=causal, deterministic=det, SQT=TQ, SKT=TK,
                              PACKED=True, strides=tuple(t.stride() for t in (q, k, v, do)) if fused else None,
                              TRAIL=trail, FUSE_DQ=fuse)
    dK, dV = (torch.full((TK + 1, XK, HKV, D), float("nan")).to(torch.bfloat16) for _ in range(2))
    dQ = torch.zeros(TQ + 1, XQ, H, D)
    sem = torch.zeros(len(lens), H, p.q_blocks, 2, dtype=torch.int32)
    dQo = (torch.full((TQ + 1, XQ, H, D), float("nan")).to(torch.bfloat16),) if fuse else ()
    res = run(kern, q, k, v, do, lp, dl, dK, dV, dQ, sem, *dQo, cuq, cuk, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    dQr, dKr, dVr = _storage_rows(dQ, XQ), _storage_rows(dK, XK), _storage_rows(dV, XK)
    nq_, nk_ = int(cuq[-1]), int(cuk[-1])
    assert not dQr[:XQ].any() and not dQr[XQ + nq_:].any()         # no add outside the sequences' rows
    if fuse:                        # dQ's rows are the converted ones; nothing outside the sequences is written
        dQs = _storage_rows(dQo[0], XQ)
        assert torch.isnan(dQs[:XQ]).all() and torch.isnan(dQs[XQ + nq_:]).all()
        for b, (lq, lk) in enumerate(lens):
            rows = dQs[XQ + int(cuq[b]):XQ + int(cuq[b + 1])]
            assert torch.isnan(rows).all() if lk == 0 else torch.equal(rows, dQr[XQ + int(cuq[b]):XQ + int(cuq[b + 1])]
                                                                           .to(torch.bfloat16)), b
    for t in (dKr, dVr):                                             # nor a store
        assert torch.isnan(t[:XK]).all() and torch.isnan(t[XK + nk_:]).all()
    for b, (lq, lk) in enumerate(lens):
        q0, q1, k0, k1 = int(cuq[b]), int(cuq[b + 1]), int(cuk[b]), int(cuk[b + 1])
        got = tuple(x.double()[None] for x in (dQr[XQ + q0:XQ + q1], dKr[XK + k0:XK + k1], dVr[XK + k0:XK + k1]))
        if refs[b] is None:         # an empty side: zero gradients on the other
            assert all(not a.any() for a in got)
            continue
        for name, a, r in zip(("dq", "dk", "dv"), got, refs[b]):
            assert (a - r).norm() <= 1e-2 * r.norm() + 1e-4 * r.numel() ** 0.5, (b, name)
    if det:     # dQ split by keys: both consumers of each of a sequence's key blocks add to each of its query blocks
        for b, (lq, lk) in enumerate(lens):
            nq, nk = -(-lq // p.BM), -(-lk // p.BN)
            assert (sem[b, :, :nq, 0] == 2 * nk).all() and not sem[b, :, nq:].any() and not sem[b, :, :, 1].any()


def _storage_rows(t, X):
    """The storage of an overlapping output view ``(N + 1, X, heads, D)`` (strides ``(heads D, heads D, D, 1)``) passed
    as an array of its logical shape, by row: element ``(k, x)`` is row ``k + x``, packed row ``r`` row ``X + r``."""
    return t.reshape(-1, t.shape[2], t.shape[3])


def _run(q, k, v, do, causal, dtype, exact_d=False):
    """The kernel in the simulator on ``q, k, v, do`` (O and LSE from the float64 forward; ``D`` from O rounded to
    ``dtype`` as the forward returns it, or from the float64 O with ``exact_d``); ``(dq, dk, dv)`` in float64, dK /
    dV NaN-poisoned before, dQ's accumulator zeroed."""
    B, SQ, H, D = q.shape
    SK, HKV = k.shape[1], k.shape[2]
    SQP, SQT, SKT = -(-SQ // 64) * 64, max(SQ, 64), max(SK, 128)
    lp, dl = torch.zeros(B, H, SQP), torch.zeros(B, H, SQP)
    o, lse = reference(q, k, v, causal, D ** -0.5)
    o = o if exact_d else o.to(dtype)
    lp[:, :, :SQ] = lse.float()
    dl[:, :, :SQ] = (do.double() * o.double()).sum(-1).transpose(1, 2).float()
    dk, dv = (torch.full((B, SKT, HKV, D), float("nan")).to(dtype) for _ in range(2))
    dqa = torch.zeros(B, SQT, H, D)
    sem = torch.zeros(B, H, SQP // 64, 2, dtype=torch.int32)
    kern = attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=causal, dtype=str(dtype).removeprefix("torch."),
                              SQT=SQT, SKT=SKT)
    res = run(kern, _pad(q, SQT), _pad(k, SKT), _pad(v, SKT), _pad(do, SQT), lp, dl, dk, dv, dqa, sem,
              seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    return dqa[:, :SQ].double(), dk[:, :SK].double(), dv[:, :SK].double()


@pytest.mark.parametrize("D,causal", [(64, True), (128, False)])
def test_strided_views_are_read_in_place(D, causal):
    """``q``, ``k``, ``v`` as slices of one fused projection ``(B, S, H + 2 HKV, D)`` (rows ``(H + 2 HKV) D`` apart)
    and ``dO`` as the first half of wider rows, passed as they are with ``strides=``: the gradients match float64."""
    B, H, HKV, S = 2, 2, 1, 128
    dtype = torch.bfloat16
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    qkv = torch.randn(B, S, H + 2 * HKV, D, generator=g).to(dtype)
    q, k, v = qkv[:, :, :H], qkv[:, :, H:H + HKV], qkv[:, :, H + HKV:]
    do = torch.randn(B, S, H, 2 * D, generator=g).to(dtype)[..., :D]
    o, lse = reference(q, k, v, causal, D ** -0.5)
    dl = (do.float() * o.to(dtype).float()).sum(-1).transpose(1, 2).contiguous()
    dk, dv = (torch.full((B, S, HKV, D), float("nan")).to(dtype) for _ in range(2))
    dqa = torch.zeros(B, S, H, D)
    sem = torch.zeros(B, H, S // 64, 2, dtype=torch.int32)
    kern = attention_bwd_sm90(B, H, HKV, S, S, D, causal=causal, strides=(q.stride(), k.stride(), v.stride(),
                                                                          do.stride()))
    assert kern is not attention_bwd_sm90(B, H, HKV, S, S, D, causal=causal)
    res = run(kern, q, k, v, do, lse.float().contiguous(), dl, dk, dv, dqa, sem, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    for name, a, r in zip(("dq", "dk", "dv"), (dqa, dk, dv), reference_grads(q, k, v, do, causal, D ** -0.5)):
        assert not torch.isnan(a).any(), name
        assert ((a.double() - r).norm() / r.norm()).item() < 1e-2, name


@pytest.mark.parametrize("B,H,SQ,D,dtype", [(1, 2, 150, 128, torch.bfloat16), (2, 1, 64, 64, torch.float16),
                                             (1, 1, 70, 256, torch.bfloat16)])
def test_preprocess_sim_matches_float64(B, H, SQ, D, dtype):
    """``D = rowsum(O * dO)`` in float32 into ``(B, H, SQP)``, rows past SQ zero, and the accumulator ``DQA`` zeroed
    (both poisoned before); a NaN planted in ``O`` past its rows reaches neither."""
    from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess

    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    o, do = (torch.randn(B, SQ + 1, H, D, generator=g).to(dtype) for _ in range(2))
    o[:, SQ:] = float("nan")
    o, do = o[:, :SQ], do[:, :SQ]
    SQP = -(-SQ // 64) * 64
    dl = torch.full((B, H, SQP), float("nan"))
    dqa = torch.full((B, SQ + 1, H, D), float("nan"))
    kern = attention_bwd_preprocess(B, H, SQ, D, str(dtype).removeprefix("torch."))
    assert run(kern, o, do, dl, dqa[:, :SQ]).problems == []
    ref = (o.double() * do.double()).sum(-1).transpose(1, 2)
    assert (dl[:, :, :SQ].double() - ref).abs().max().item() < 1e-4 * D
    assert torch.equal(dl[:, :, SQ:], torch.zeros(B, H, SQP - SQ))
    assert torch.equal(dqa[:, :SQ], torch.zeros(B, SQ, H, D))
    assert dqa[:, SQ:].isnan().all()                    # the row past the tensor is not written


@pytest.mark.parametrize("lens,total,D,dtype", [
    ([70, 0, 130, 1], 210, 128, torch.bfloat16),       # an empty sequence, one of one row, rows past the last
    ([64, 200], 264, 64, torch.float16),               # a sequence of exactly one block
    ([100], 128, 256, torch.bfloat16),                 # head dim 256: four column chunks
])
def test_packed_preprocess_sim_matches_float64(lens, total, D, dtype):
    """Packed sequences: ``D`` and the forward's ``LSE`` gathered per sequence into ``(H, B, XQ)``, rows from 0,
    zero past each sequence's length (poisoned before); NaN in the packed rows past the last sequence reaches none.
    The ``dQ`` accumulator (poisoned) is zero on every sequence's rows; a row past the tensor is left alone."""
    from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess_packed

    H, B = 2, len(lens)
    SQ = max(lens)
    XQ = -(-SQ // 64) * 64
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32)
    o, do = (torch.randn(total, H, D, generator=g).to(dtype) for _ in range(2))
    lse = torch.randn(H, total, generator=g)
    for t in (o, do):
        t[int(cu[-1]):] = float("nan")
    lse[:, int(cu[-1]):] = float("nan")
    dl, ls = (torch.full((H, B, XQ), float("nan")) for _ in range(2))
    dqa = torch.full((total + 1, H, D), float("nan"))
    kern = attention_bwd_preprocess_packed(B, H, total, D, SQ, XQ, str(dtype).removeprefix("torch."))
    assert run(kern, o, do, lse, cu, dl, ls, dqa[:total]).problems == []
    ref = (o.double() * do.double()).sum(-1).t()          # (H, total)
    for b, n in enumerate(lens):
        q0 = int(cu[b])
        assert (dl[:, b, :n].double() - ref[:, q0:q0 + n]).abs().max().item() < 1e-4 * D if n else True
        assert torch.equal(ls[:, b, :n], lse[:, q0:q0 + n])
        assert not dl[:, b, n:].any() and not ls[:, b, n:].any()     # zero past the length (no NaN either)
    end = int(cu[-1])
    assert torch.equal(dqa[:end], torch.zeros(end, H, D))
    assert dqa[total:].isnan().all()                    # the row past the tensor is not written


@pytest.mark.parametrize("cq", [[-2 ** 30, 4, 10], [0, 2 ** 31 - 1, 10], [0, 6, 4], [0, 4, 2 ** 30], [60, 70, 80]])
def test_packed_preprocess_stays_inside_its_tensors_on_any_offsets(cq):
    """Offsets the host check refuses: each sequence clamped to the window and the packed rows, no access outside
    a tensor, every row of the outputs written (finite), and the accumulator holds only zeros and what it held."""
    from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess_packed

    H, TQ, D = 2, 64, 64
    o, do = (torch.randn(TQ, H, D).to(torch.bfloat16) for _ in range(2))
    dl, ls = (torch.full((H, 2, 64), float("nan")) for _ in range(2))
    dqa = torch.ones(TQ, H, D)
    kern = attention_bwd_preprocess_packed(2, H, TQ, D, 6, 64)
    cu = torch.tensor(cq, dtype=torch.int32)
    assert run(kern, o, do, torch.randn(H, TQ), cu, dl, ls, dqa).problems == []
    assert torch.isfinite(dl).all() and torch.isfinite(ls).all()
    assert ((dqa == 0) | (dqa == 1)).all()


@pytest.mark.parametrize("TQ,SQ,XQ,match", [(32, 6, 64, "fewer than one block of 64"),
                                            (128, 100, 96, "multiple of 64 of at least SQ = 100"),
                                            (128, 60, 100, "multiple of 64")])
def test_packed_preprocess_refuses_a_malformed_window(TQ, SQ, XQ, match):
    from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess_packed
    from tirxpy_kernels.errors import KernelConfigError

    with pytest.raises(KernelConfigError, match=match):
        attention_bwd_preprocess_packed(2, 2, TQ, 64, SQ, XQ)


@pytest.mark.parametrize("D,causal", [(64, True)])
def test_grads_written_into_a_packed_dqkv(D, causal):
    """``grad_strides=``: ``dK`` and ``dV`` written straight into the slices of one ``(B, S, 3, H, D)`` gradient
    buffer (the qkv-packed backward), ``Q``, ``K``, ``V`` read from the same packing; the slot between them (``dq``'s,
    poisoned) is left alone, and the gradients match float64."""
    B, H, S = 2, 2, 128
    dtype = torch.bfloat16
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    qkv = torch.randn(B, S, 3, H, D, generator=g).to(dtype)
    q, k, v = qkv.unbind(2)
    do = torch.randn(B, S, H, D, generator=g).to(dtype)
    o, lse = reference(q, k, v, causal, D ** -0.5)
    dl = (do.float() * o.to(dtype).float()).sum(-1).transpose(1, 2).contiguous()
    dqkv = torch.full((B, S, 3, H, D), float("nan")).to(dtype)
    dk, dv = dqkv[:, :, 1], dqkv[:, :, 2]
    dqa = torch.zeros(B, S, H, D)
    sem = torch.zeros(B, H, S // 64, 2, dtype=torch.int32)
    kern = attention_bwd_sm90(B, H, H, S, S, D, causal=causal, strides=(q.stride(), k.stride(), v.stride(), None),
                              grad_strides=(dk.stride(), dv.stride()))
    res = run(kern, q, k, v, do, lse.float().contiguous(), dl, dk, dv, dqa, sem, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert torch.isnan(dqkv[:, :, 0]).all()
    for name, a, r in zip(("dq", "dk", "dv"), (dqa, dk, dv), reference_grads(q, k, v, do, causal, D ** -0.5)):
        assert not torch.isnan(a).any(), name
        assert ((a.double() - r).norm() / r.norm()).item() < 1e-2, name


@pytest.mark.parametrize("SQ,D", [(100, 128), (1000, 128)])
def test_mha_kernels_whose_last_block_is_ragged_build(SQ, D):
    """Not causal, one head a group: the walk's block count is a constant, so the last ``dQ`` add's box sits at a
    fixed row past ``SQ``; the kernel still builds (TMA clips the box), as every other walk does."""
    from tirxpy.primitives.lower_pass import lower_calls

    k = attention_bwd_sm90(1, 2, 2, SQ, 130, D)
    assert [int(g) for g in k.launch.grid] == [-(-130 // plan(1, 2, 2, SQ, 130, D).BN), 2, 1]
    lower_calls(k, "sm_90a")        # every primitive call has a native form


def test_pdl_is_a_flag_of_each_backward_kernel():
    from tirxpy_kernels.attention_bwd_post import attention_bwd_dq_store
    from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess

    for make in (lambda f: attention_bwd_sm90(1, 2, 2, 128, 128, 64, PDL=f),
                 lambda f: attention_bwd_preprocess(1, 2, 128, 64, PDL=f),
                 lambda f: attention_bwd_dq_store(1, 128, 2, 64, PDL=f)):
        assert make(True).launch.pdl and not make(False).launch.pdl
        with pytest.raises(KernelConfigError, match="PDL must be True or False"):
            make(2)


def test_grad_strides_are_checked():
    with pytest.raises(KernelConfigError, match="strides of dk"):
        attention_bwd_sm90(1, 2, 2, 128, 128, 64, grad_strides=((1, 2, 3, 4), None))
    with pytest.raises(KernelConfigError, match="grad_strides is for the dense kernel"):
        attention_bwd_sm90(2, 2, 2, 128, 128, 64, PACKED=True, SQT=256, SKT=256,
                           grad_strides=((384, 64, 1), None))


@pytest.mark.parametrize("B,HKV,SK,causal,TAIL,sms", [
    (3, 2, 300, True, 1, 4),        # 6 pairs of 3 key blocks: the last 2 pairs key block by key block
    (2, 1, 500, True, 3, 132),      # every pair in the window
    (2, 2, 300, False, 3, 4),       # not causal: the grid's order
])
def test_cta_order_covers_the_grid_with_heavy_key_blocks_first_in_the_tail(B, HKV, SK, causal, TAIL, sms):
    """:func:`cta_block` as the kernel evaluates it, in the simulator: every (key block, head, batch) exactly once;
    the pairs before the tail window in the grid's order; inside it, CTA by CTA, key block 0 of every pair, then
    block 1, ... (so a pair's lower key blocks always come first, as the ordered dQ adds need)."""
    from tirxpy import T
    from tirxpy_kernels.attention_bwd_sm90 import cta_block
    p = plan(B, 2 * HKV, HKV, SK, SK, 64, causal, TAIL=TAIL, sms=sms)
    NKV, n = p.kv_blocks, p.kv_blocks * HKV * B

    @T.prim_func
    def order(OUT: T.Tensor((n, 3), "int32")):
        T.launch(grid=p.grid, threads=32)
        kb, hk, b = cta_block(p)
        lin = T.cta_id(0) + NKV * (T.cta_id(1) + HKV * T.cta_id(2))
        if T.thread_id() == 0:
            OUT[lin, 0] = kb
            OUT[lin, 1] = hk
            OUT[lin, 2] = b

    out = torch.full((n, 3), -1, dtype=torch.int32)
    run(order, out)
    got = [tuple(r) for r in out.tolist()]
    nt = -(-TAIL * sms // NKV) if causal else 0
    nt = min(nt, B * HKV)
    assert p.tail_heads == nt
    pairs = [(b, h) for b in range(B) for h in range(HKV)]
    want = [(kb, h, b) for b, h in pairs[:len(pairs) - nt] for kb in range(NKV)]
    want += [(kb, h, b) for kb in range(NKV) for b, h in pairs[len(pairs) - nt:]]
    assert got == want
