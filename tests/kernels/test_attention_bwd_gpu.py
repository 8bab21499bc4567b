"""GPU tests (marker gpu) of tirxpy_kernels.attention_backward / attention_bwd_sm90 on Hopper: dq, dk, dv against
float64 autograd through a math attention on fresh random inputs, at head dims 64 / 128 / 256, causal and not,
GQA / MQA, ragged lengths, SQ != SK, sequences shorter than one block, bf16 and f16; dk / dv NaN-poisoned
before a direct launch; deterministic mode bit-equal across runs.

    python -m pytest -q -m gpu tests/kernels/test_attention_bwd_gpu.py
"""
import pytest
import torch

import tirxpy_kernels
from tirxpy_kernels import attention_bwd_api

from tests.kernels.attention_bwd_reference import reference_grads

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                 reason="the sm_90a kernel needs a Hopper GPU")]


def _inputs(B, SQ, SK, H, HKV, D, dtype, causal, scale=None):
    q, do = (torch.randn(B, SQ, H, D, device="cuda").to(dtype) for _ in range(2))
    k, v = (torch.randn(B, SK, HKV, D, device="cuda").to(dtype) for _ in range(2))
    out, lse = tirxpy_kernels.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    return q, k, v, out, do, lse


def _check(grads, q, k, v, do, causal, scale):
    ref = reference_grads(q, k, v, do, causal, scale)
    # P and dS are rounded to 16 bits before their products (and O, LSE come from the 16-bit forward)
    tol = 2e-2 if q.dtype == torch.bfloat16 else 4e-3
    for name, a, r, t in zip(("dq", "dk", "dv"), grads, ref, (q, k, v)):
        assert a.shape == t.shape and a.dtype == t.dtype, name
        assert not torch.isnan(a).any(), f"{name}: unwritten (NaN-poisoned) or NaN elements"
        err = ((a.double() - r).norm() / r.norm()).item()
        assert err < tol, (name, tuple(q.shape), tuple(k.shape), causal, err)


SHAPES = [  # B, SQ, SK, H, HKV
    (2, 1024, 1024, 4, 4),
    (1, 1000, 1000, 4, 2),      # ragged, GQA 2:1
    (2, 333, 517, 4, 1),        # SQ != SK, ragged both, multi-query
    (1, 40, 24, 2, 2),          # shorter than one block (padded by the wrapper)
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
@pytest.mark.parametrize("B,SQ,SK,H,HKV", SHAPES)
def test_backward_bf16_matches_float64(B, SQ, SK, H, HKV, D, causal):
    q, k, v, out, do, lse = _inputs(B, SQ, SK, H, HKV, D, torch.bfloat16, causal)
    grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal)
    torch.cuda.synchronize()
    _check(grads, q, k, v, do, causal, D ** -0.5)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_backward_f16_and_scale(D, causal):
    sc = 0.3 / D ** 0.5
    q, k, v, out, do, lse = _inputs(1, 777, 777, 4, 2, D, torch.float16, causal, scale=sc)
    grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal, scale=sc)
    torch.cuda.synchronize()
    _check(grads, q, k, v, do, causal, sc)


@pytest.mark.parametrize("D,causal", [(64, True), (128, False), (128, True), (256, False), (256, True)])
def test_direct_launch_writes_every_output(D, causal):
    """dk / dv poisoned with NaN before the kernel writes them (the wrapper allocates them uninitialised)."""
    q, k, v, out, do, lse = _inputs(2, 700, 900, 8, 2, D, torch.bfloat16, causal)
    ck, args, finish = attention_bwd_api.prepare(q, k, v, out, do, lse, causal=causal)
    args[6].fill_(float("nan"))
    args[7].fill_(float("nan"))
    ck(*args)
    torch.cuda.synchronize()
    _check(finish(), q, k, v, do, causal, D ** -0.5)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_deterministic_is_bit_equal_across_runs(D):
    q, k, v, out, do, lse = _inputs(2, 1500, 1500, 8, 2, D, torch.bfloat16, True)
    a = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=True, deterministic=True)
    b = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=True, deterministic=True)
    torch.cuda.synchronize()
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    _check(a, q, k, v, do, True, D ** -0.5)


def test_matches_cudnn_backward():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for causal in (False, True):
        q, k, v, out, do, lse = _inputs(2, 2048, 2048, 8, 8, 128, torch.bfloat16, causal)
        qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_(True) for x in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        ref = torch.autograd.grad(o, (qt, kt, vt), do.transpose(1, 2))
        got = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal)
        for a, r in zip(got, ref):
            r = r.transpose(1, 2).float()
            assert ((a.float() - r).norm() / r.norm()).item() < 2e-2


@pytest.mark.parametrize("D,causal", [(64, True), (128, False), (128, True), (256, True)])
def test_fused_projection_views_are_read_in_place(D, causal, monkeypatch):
    """``q``, ``k``, ``v`` sliced out of one ``(B, S, H + 2 HKV, D)`` projection and ``dout`` as the first half of
    wider rows go to the backward kernel as they are (its ``strides`` are theirs); the gradients match float64."""
    B, S, H, HKV = 2, 700, 4, 2
    qkv = torch.randn(B, S, H + 2 * HKV, D, device="cuda").to(torch.bfloat16)
    q, k, v = qkv[:, :, :H], qkv[:, :, H:H + HKV], qkv[:, :, H + HKV:]
    do = torch.randn(B, S, H, 2 * D, device="cuda").to(torch.bfloat16)[..., :D]
    out, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
    attention_bwd_api._FAST.clear()     # a call like this one would skip the build
    built = []
    real = attention_bwd_api.attention_bwd_sm90
    monkeypatch.setattr(attention_bwd_api, "attention_bwd_sm90",
                        lambda *a, **kw: built.append(kw["strides"]) or real(*a, **kw))
    grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal)
    assert built == [(q.stride(), k.stride(), v.stride(), do.stride())]
    _check(grads, q, k, v, do, causal, D ** -0.5)


@pytest.mark.parametrize("deterministic", [False, True])
def test_repeated_calls_take_the_checked_fast_path(deterministic):
    """A call like a checked one that read its inputs in place (the same shapes, strides, dtypes, alignments and
    options) skips the checks and the planning and launches through bound launches; it still computes on its own
    fresh inputs into fresh, NaN-poisoned memory, and a call with other strides or options goes the checked way."""
    attention_bwd_api._FAST.clear()
    B, S, H, HKV, D = 2, 512, 4, 2, 128
    for i in range(3):
        q, k, v, out, do, lse = _inputs(B, S, S, H, HKV, D, torch.bfloat16, True)
        torch.full((64 << 20,), float("nan"), device="cuda")       # poison what the fresh buffers get
        grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=True, deterministic=deterministic)
        assert len(attention_bwd_api._FAST) == 1
        _check(grads, q, k, v, do, True, D ** -0.5)
    assert len(attention_bwd_api._BOUND) >= 2          # the preprocessing and the main kernel
    q, k, v, out, do, lse = _inputs(B, S, S, H, HKV, D, torch.bfloat16, False)
    grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=False, deterministic=deterministic)
    _check(grads, q, k, v, do, False, D ** -0.5)
    assert len(attention_bwd_api._FAST) == 2
    with pytest.raises(attention_bwd_api.AttentionBwdArgumentError, match="causal must be True or False"):
        tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=1)


def test_fast_path_of_permuted_inputs_gives_their_gradients():
    """Inputs that are ``(B, H, S, D)`` tensors viewed as ``(B, S, H, D)`` (read in place) on the repeated (fast) call
    of a kernel that converts ``dq`` itself (causal, head dim 128): the fresh ``dq`` it writes has the layout the
    kernel was built for, whatever the order of ``q``'s strides."""
    attention_bwd_api._FAST.clear()
    B, S, H, D = 2, 384, 4, 128
    for _ in range(3):
        q, k, v, do = (torch.randn(B, H, S, D, device="cuda").to(torch.bfloat16).transpose(1, 2) for _ in range(4))
        out, lse = tirxpy_kernels.attention(q, k, v, causal=True, return_lse=True)
        torch.full((64 << 20,), float("nan"), device="cuda")       # poison what the fresh buffers get
        grads = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=True)
        _check(grads, q, k, v, do, True, D ** -0.5)
    assert len(attention_bwd_api._FAST) == 1


@pytest.mark.parametrize("S,causal", [(700, True), (40, False)])
def test_grads_fill_given_tensors(S, causal):
    """``grads=(dq, dk, dv)``: the slices of one NaN-poisoned packed buffer receive the gradients (``dk``, ``dv``
    written by the kernel in place; at S = 40, shorter than a block, computed padded and copied), on the first and
    the repeated (fast) call; a gradient tensor that overlaps an input is refused."""
    B, H, D = 2, 4, 128
    for _ in range(2):
        q, k, v, out, do, lse = _inputs(B, S, S, H, H, D, torch.bfloat16, causal)
        dqkv = torch.full((B, S, 3, H, D), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal, grads=tuple(dqkv.unbind(2)))
        assert all(a.data_ptr() == b.data_ptr() for a, b in zip(got, dqkv.unbind(2)))
        _check(tuple(dqkv.unbind(2)), q, k, v, do, causal, D ** -0.5)
    with pytest.raises(attention_bwd_api.AttentionBwdArgumentError, match="grads' dk shares memory with k"):
        tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal, grads=(torch.empty_like(q), k,
                                                                                      torch.empty_like(v)))
