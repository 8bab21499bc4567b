"""The Hopper attention backward kernel (tirxpy_kernels/attention_bwd_sm90.py) under the CPU simulator at small
shapes: dQ, dK, dV against float64 autograd on fresh random inputs, dK / dV NaN-poisoned; ragged query and key
lengths, causal and not, grouped-query heads, both dQ splits, head dim 256 (consumers sharing 64 keys, each with
half the columns), the ordered (deterministic) dQ adds."""
import pytest
import torch

from tirxpy.sim import run
from tirxpy_kernels.attention_bwd_plan import plan
from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90

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
    res = run(kern, _pad(q, SQT), _pad(k, SKT), _pad(v, SKT), _pad(do, SQT), lp, dl, dk, dv, dqa, sem,
              seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    got = (dqa[:, :SQ].double(), dk[:, :SK].double(), dv[:, :SK].double())
    return got, reference_grads(q, k, v, do, causal, scale), sem


@pytest.mark.parametrize("B,H,HKV,SQ,SK,D,causal,dtype,kw", [
    (1, 4, 2, 150, 200, 64, True, torch.bfloat16, {}),      # GQA, 2 key blocks (one ragged), 3 query blocks
    (1, 2, 1, 130, 90, 128, False, torch.float16, {}),      # dQ split by columns over the shared dS
    (1, 2, 1, 100, 150, 64, True, torch.bfloat16, dict(deterministic=True, STAGES=1)),  # ordered dQ adds
    (1, 2, 1, 100, 70, 256, True, torch.bfloat16, {}),      # head dim 256: GQA, 2 key blocks (one ragged), causal
    (1, 1, 1, 70, 100, 256, False, torch.float16, dict(deterministic=True)),  # head dim 256, ordered dQ adds
])
def test_backward_sim_matches_float64(B, H, HKV, SQ, SK, D, causal, dtype, kw):
    got, ref, sem = sim_backward(B, H, HKV, SQ, SK, D, causal, dtype, **kw)
    for name, a, r in zip(("dq", "dk", "dv"), got, ref):
        assert not torch.isnan(a).any(), f"{name}: unwritten (NaN-poisoned) or NaN elements"
        err = ((a - r).norm() / r.norm()).item()
        # P and dS are rounded to 16 bits before their products: bf16 ~ 2**-9, f16 ~ 2**-12 relative
        assert err < (1e-2 if dtype == torch.bfloat16 else 2e-3), (name, err)
    if kw.get("deterministic"):
        # dQ split by keys (head dim 64): both consumers of every key block take a turn on counter 0 of each
        # query block they add into (counter 1 is unused); by columns: consumer c takes one on counter c
        p = plan(B, H, HKV, SQ, SK, D, causal, **kw)
        first = [min(n * p.BN // 64, sem.shape[2]) if causal else 0 for n in range(p.kv_blocks)]
        seen = torch.tensor([sum(1 for f in first if f <= mi) for mi in range(sem.shape[2])], dtype=torch.int32)
        if p.dq_split == "keys":
            assert torch.equal(sem[..., 0], (2 * seen).expand_as(sem[..., 0]))
            assert not sem[..., 1].any()
        else:
            assert torch.equal(sem, seen[:, None].expand_as(sem))


@pytest.mark.parametrize("B,H,SQ,D,dtype", [(1, 2, 150, 128, torch.bfloat16), (2, 1, 64, 64, torch.float16)])
def test_preprocess_sim_matches_float64(B, H, SQ, D, dtype):
    """``D = rowsum(O * dO)`` in float32 into ``(B, H, SQP)``, rows past SQ zero (poisoned before)."""
    from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_preprocess

    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    o, do = (torch.randn(B, SQ, H, D, generator=g).to(dtype) for _ in range(2))
    SQP = -(-SQ // 64) * 64
    dl = torch.full((B, H, SQP), float("nan"))
    assert run(attention_bwd_preprocess(B, H, SQ, D, str(dtype).removeprefix("torch.")), o, do, dl).problems == []
    ref = (o.double() * do.double()).sum(-1).transpose(1, 2)
    assert (dl[:, :, :SQ].double() - ref).abs().max().item() < 1e-4 * D
    assert torch.equal(dl[:, :, SQ:], torch.zeros(B, H, SQP - SQ))
