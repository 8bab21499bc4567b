"""tirxpy_kernels.attention argument checks: every error, on CPU tensors (the checks run before any
device work), with the message that says what to change."""
import numpy as np
import pytest
import torch

import tirxpy_kernels
from tirxpy_kernels.attention_api import AttentionArgumentError


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
        tirxpy_kernels.attention(*args, **kw)
    assert msg in str(e.value)


@pytest.mark.parametrize("kw,msg", [
    (dict(BN=-1), "attention: BN = -1 must be a multiple of 16 in [16, 256]"),
    (dict(BN=True), "attention: BN must be an int or None, got True (bool)"),
    (dict(STAGES=[1]), "attention: STAGES must be an int or None, got [1] (list)"),
    (dict(NC=5), "attention: NC = 5 consumer warpgroups; use 1 or 2"),
    (dict(OSTAGE=["q"]), "attention: OSTAGE = ['q']; use 'own'"),
    (dict(PERSIST="yes"), "attention: PERSIST must be True or False (or None: the default), got 'yes'"),
    (dict(PDL=None), "attention: PDL must be True or False, got None"),
    (dict(sms=0), "attention: sms = 0 must be the GPU's SM count (a positive int)"),
    (dict(return_lse=[1]), "attention: return_lse must be True or False, got [1]"),
    (dict(CHAIN=True, PERSIST=False), "attention: CHAIN runs a tile's first key block"),
])
def test_options_are_checked_before_the_device(kw, msg):
    with pytest.raises(AttentionArgumentError) as e:
        tirxpy_kernels.attention(Q, KV, KV, **kw)
    assert msg in str(e.value) and "attention_sm90" not in str(e.value)


@pytest.mark.parametrize("q,msg", [
    (Q.to_sparse(), "q is a sparse tensor (layout torch.sparse_coo); pass a dense one (q.to_dense())"),
    (torch.nested.nested_tensor([torch.zeros(64, 4, 64), torch.zeros(32, 4, 64)]), "q is a nested tensor"),
    (torch.zeros((), dtype=torch.bfloat16), "q must be 4-D (batch, seq, heads, dim), got shape ()"),
    (torch.zeros(1, 64, 4, 64, dtype=torch.complex64), "q has dtype torch.complex64"),
])
def test_tensor_kinds_are_named(q, msg):
    with pytest.raises(AttentionArgumentError) as e:
        tirxpy_kernels.attention(q, KV, KV)
    assert msg in str(e.value)


@pytest.mark.parametrize("kw", [dict(), dict(causal=True, return_lse=True), dict(BN=64, STAGES=2, NC=2),
                                dict(sms=1), dict(OSTAGE="q", PERSIST=False), dict(PDL=False, TAIL=1)])
def test_a_right_call_on_cpu_gets_the_device_error(kw):
    with pytest.raises(AttentionArgumentError, match="the tensors are on cpu; move them to a CUDA device"):
        tirxpy_kernels.attention(Q.clone().requires_grad_(), KV, KV, **kw)     # requires_grad: read as values


def test_meta_and_mixed_devices_come_last():
    m = torch.zeros(1, 64, 4, 64, dtype=torch.bfloat16, device="meta")
    with pytest.raises(AttentionArgumentError, match="q, k, v are on meta, cpu, cpu"):
        tirxpy_kernels.attention(m, KV, KV)
    with pytest.raises(AttentionArgumentError, match="NC = 7"):
        tirxpy_kernels.attention(m, KV, KV, NC=7)


def test_the_fast_key_tells_option_types_apart():
    """An option equal in Python but of another type (1 and True) gets another key: a call with it runs the full
    checks instead of taking the kernel an earlier call planned."""
    import torch

    from tirxpy_kernels.attention_api import _fast_key

    q = torch.zeros(1, 128, 2, 64, dtype=torch.bfloat16)
    assert _fast_key(q, q, q, False, None, {"NC": 2}) == _fast_key(q, q, q, False, None, {"NC": 2})
    assert _fast_key(q, q, q, False, None, {"PDL": True}) != _fast_key(q, q, q, False, None, {"PDL": 1})
    assert _fast_key(q, q, q, False, 1, {}) != _fast_key(q, q, q, False, 1.0, {})
    flat = torch.zeros(q.numel() + 8, dtype=q.dtype)        # the same shape and strides, 2 bytes off alignment
    assert q.data_ptr() % 16 == 0 and flat[1:].data_ptr() % 16 == 2
    qm = flat[1:1 + q.numel()].view(q.shape)
    assert _fast_key(qm, qm, qm, False, None, {}) != _fast_key(q, q, q, False, None, {})


def _meta(*shape):
    return torch.empty(shape, dtype=torch.bfloat16, device="meta")


@pytest.mark.parametrize("scale", [10 ** 400, 1e300, float("-inf")])
def test_a_scale_past_float32_is_a_typed_error(scale):
    # 10 ** 400 raised OverflowError from math.isfinite; 1e300 passed and became an infinite float32 constant
    with pytest.raises(AttentionArgumentError, match="scale must be a positive finite number or None"):
        tirxpy_kernels.attention_api.check(Q, KV, KV, scale=scale)


def test_numpy_scalars_are_taken_as_numbers():
    import numpy as np

    tirxpy_kernels.attention_api.check(Q, KV, KV, scale=np.float32(0.125), sms=np.int64(100))


@pytest.mark.parametrize("bad", [1, np.int64(1), np.float64(1.0), "True"])
def test_causal_takes_bools_only(bad):
    """A numpy bool is a bool (the next test); an int, even 1, is not."""
    with pytest.raises(AttentionArgumentError, match=r"attention: causal must be True or False, got "):
        tirxpy_kernels.attention(Q, KV, KV, causal=bad)
    with pytest.raises(AttentionArgumentError, match=r"attention: return_lse must be True or False, got "):
        tirxpy_kernels.attention(Q, KV, KV, return_lse=bad)


def test_a_numpy_bool_goes_on_as_a_python_bool(monkeypatch):
    """``causal=np.bool_(True)`` passes the checks (it only fails at the CPU device), and the plan and the kernel
    factory get a Python bool (the factory's cache key tells ``bool_`` from ``bool``)."""
    import contextlib

    from tirxpy_kernels import attention_api

    with pytest.raises(AttentionArgumentError, match="the tensors are on cpu"):
        tirxpy_kernels.attention(Q, KV, KV, causal=np.bool_(True), return_lse=np.bool_(False))
    seen = []

    class Built(Exception):
        pass

    def factory(*args, **kw):
        seen.append(kw["causal"])
        raise Built

    plan = attention_api.plan
    monkeypatch.setattr(attention_api, "plan", lambda *a, **kw: seen.append(kw["causal"]) or plan(*a, **kw))
    monkeypatch.setattr(attention_api, "_device", lambda *a: None)
    monkeypatch.setattr(attention_api.torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(attention_api, "attention_sm90", factory)
    with pytest.raises(Built):
        tirxpy_kernels.attention(Q, KV, KV, causal=np.bool_(True))
    assert seen == [True, True] and all(type(c) is bool for c in seen)


def test_a_batch_past_the_grid_plans_persistent_ctas():
    # 70000 sequences of 8192 keys: one tile per CTA would launch a (tiles, H, 70000) grid, past 65535
    tirxpy_kernels.attention_api.check(_meta(70000, 128, 1, 64), _meta(70000, 8192, 1, 64), _meta(70000, 8192, 1, 64))
    with pytest.raises(AttentionArgumentError, match="pass PERSIST=True"):
        tirxpy_kernels.attention_api.check(_meta(70000, 128, 1, 64), _meta(70000, 8192, 1, 64),
                                           _meta(70000, 8192, 1, 64), PERSIST=False)
