"""kernels.attention argument checks: every error, on CPU tensors (the checks run before any
device work), with the message that says what to change."""
import pytest
import torch

import kernels
from kernels.attention_api import AttentionArgumentError


def _t(*shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


Q, KV = _t(1, 64, 4, 64), _t(1, 64, 2, 64)


@pytest.mark.parametrize("args,kw,msg", [
    (("x", KV, KV), {}, "q must be a torch.Tensor, got str"),
    ((_t(64, 4, 64), KV, KV), {}, "q must be 4-D (batch, seq, heads, dim), got shape (64, 4, 64)"),
    ((Q.float(), KV, KV), {}, "q has dtype torch.float32; the kernel takes torch.bfloat16 or torch.float16"),
    ((Q, KV.half(), KV.half()), {}, "use one dtype"),
    ((Q, KV, _t(1, 64, 1, 64)), {}, "must have one shape (batch, seq_k, kv_heads, dim)"),
    ((Q, _t(2, 64, 2, 64), _t(2, 64, 2, 64)), {}, "q has batch 1 but k / v have batch 2"),
    ((Q, _t(1, 64, 2, 128), _t(1, 64, 2, 128)), {}, "q has head dim 64 but k / v have 128"),
    ((_t(1, 64, 4, 96), _t(1, 64, 2, 96), _t(1, 64, 2, 96)), {}, "head dim 96 is not supported"),
    ((_t(1, 0, 4, 64), KV, KV), {}, "empty input"),
    ((Q, _t(1, 64, 3, 64), _t(1, 64, 3, 64)), {}, "4 query heads do not split into 3 key / value heads"),
    ((Q, KV, KV), {"causal": 1}, "causal must be True or False, got 1"),
    ((Q, KV, KV), {"scale": -1.0}, "scale must be a positive finite number or None"),
    ((Q, KV, KV), {"scale": float("nan")}, "scale must be a positive finite number or None"),
    ((Q, KV, KV), {}, "the tensors are on cpu; move them to a CUDA device"),
    ((Q, KV, KV), {"BM": 64}, "unknown tuning argument(s) ['BM']; the kernel takes ('BN', 'STAGES', 'NC', 'PINGPONG', 'PERSIST', 'CHAIN', 'OSTAGE', 'LAZY', 'TRIM', 'TAIL', 'FOLD', 'PDL', 'sms')"),
])
def test_argument_errors(args, kw, msg):
    with pytest.raises(AttentionArgumentError) as e:
        kernels.attention(*args, **kw)
    assert msg in str(e.value)
