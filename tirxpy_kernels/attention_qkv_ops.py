"""``tirxpy_kernels.attention_qkvpacked(qkv, causal=False, scale=None)``: attention over one packed ``(batch, seq, 3,
heads, dim)`` tensor (a fused QKV projection's output viewed so), whose gradient is one packed ``dqkv``.

With ``q, k, v = qkv.unbind(2)`` passed to :func:`tirxpy_kernels.attention` separately, autograd assembles the
projection's gradient with ``torch.stack(dq, dk, dv)``: a copy of the whole ``dqkv`` after the backward. Here the
operator takes ``qkv`` itself, and its backward writes ``dk`` and ``dv`` from the kernel straight into their slices
of a fresh ``dqkv`` (:func:`tirxpy_kernels.attention_bwd_api.attention_backward`'s ``grads=``) and converts ``dq``
into the third. The forward reads the three slices in place (strided TMA views).

    >>> import torch
    >>> qkv = torch.empty(2, 100, 3, 8, 64, dtype=torch.bfloat16, device="meta")
    >>> [tuple(t.shape) for t in torch.ops.tirxpy.attention_qkvpacked(qkv, True, None)]      # the fake: (out, lse)
    [(2, 100, 8, 64), (2, 8, 100)]
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import attention_api, attention_bwd_api
from .attention_api import AttentionArgumentError
from .checks import dense_tensor, no_meta_mix
from .torch_ops import needs_op, op_args


def _check(qkv):
    dense_tensor("attention_qkvpacked", "qkv", qkv, 5, "(batch, seq, 3, heads, dim)", AttentionArgumentError)
    attention_api.check_dtype("attention_qkvpacked", "qkv", qkv)
    if qkv.shape[2] != 3:
        raise AttentionArgumentError(f"attention_qkvpacked: qkv must be (batch, seq, 3, heads, dim), got shape "
                                     f"{tuple(qkv.shape)} (for other layouts pass q, k, v to attention)")


def attention_qkvpacked(qkv, causal=False, scale=None):
    """Attention of ``q, k, v = qkv.unbind(2)`` (module docstring): ``(batch, seq, heads, dim)``. Through
    ``torch.ops.tirxpy.attention_qkvpacked`` when autograd or a compiler needs it, else
    :func:`tirxpy_kernels.attention_api.attention` on the three slices."""
    _check(qkv)
    if needs_op(qkv):
        causal, scale = op_args("attention_qkvpacked", (), 5, "", causal, scale, False, AttentionArgumentError)
        return attention_qkvpacked_op(qkv, causal, scale)[0]
    q, k, v = qkv.unbind(2)
    return attention_api.attention(q, k, v, causal=causal, scale=scale)


@torch.library.custom_op("tirxpy::attention_qkvpacked", mutates_args=())
def attention_qkvpacked_op(qkv: Tensor, causal: bool, scale: Optional[float]) -> tuple[Tensor, Tensor]:
    """``(out, lse)`` of attention over ``qkv.unbind(2)`` (``qkv`` checked first, as the operator may be called
    directly)."""
    _check(qkv)
    q, k, v = qkv.unbind(2)
    out, lse = attention_api.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    return out.contiguous(), lse.contiguous()


@attention_qkvpacked_op.register_fake
def _fake(qkv, causal, scale):
    """``(out, lse)`` of the operator's shapes and dtypes once ``qkv`` passes :func:`_check` and its three slices the
    attention API's metadata checks (:func:`tirxpy_kernels.attention_api._check_meta`), as the operator checks them."""
    _check(qkv)
    attention_api._check_meta(*qkv.unbind(2), causal, scale, True, {})
    B, S, _, H, D = qkv.shape
    return qkv.new_empty((B, S, H, D)), qkv.new_empty((B, H, S), dtype=torch.float32)


@torch.library.custom_op("tirxpy::attention_qkvpacked_backward", mutates_args=())
def attention_qkvpacked_backward_op(qkv: Tensor, out: Tensor, dout: Tensor, lse: Tensor, causal: bool,
                                    scale: Optional[float]) -> Tensor:
    """``dqkv``: the backward kernel's ``dk``, ``dv`` written into their slices, ``dq`` converted into its own
    (``qkv`` checked first, as the operator may be called directly)."""
    _check(qkv)
    dqkv = torch.empty(qkv.shape, dtype=qkv.dtype, device=qkv.device)
    q, k, v = qkv.unbind(2)
    attention_bwd_api.attention_backward(q, k, v, out, dout, lse, causal=causal, scale=scale,
                                         grads=tuple(dqkv.unbind(2)))
    return dqkv


@attention_qkvpacked_backward_op.register_fake
def _backward_fake(qkv, out, dout, lse, causal, scale):
    """``dqkv`` of ``qkv``'s shape once ``qkv`` passes :func:`_check` and the arguments the backward API's metadata
    checks (:func:`tirxpy_kernels.attention_bwd_api._check_meta`), as the operator checks them."""
    _check(qkv)
    no_meta_mix("attention_qkvpacked", AttentionArgumentError, qkv=qkv, out=out, dout=dout, lse=lse)
    attention_bwd_api._check_meta(*qkv.unbind(2), out, dout, lse, causal, scale, False)
    return qkv.new_empty(qkv.shape)


def _setup(ctx, inputs, output):
    qkv, causal, scale = inputs
    out, lse = output
    ctx.causal, ctx.scale = causal, scale
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(qkv, out, lse)


def _backward(ctx, dout, _dlse):
    qkv, out, lse = ctx.saved_tensors
    return attention_qkvpacked_backward_op(qkv, out, dout.contiguous(), lse, ctx.causal, ctx.scale), None, None


attention_qkvpacked_op.register_autograd(_backward, setup_context=_setup)

__all__ = ["attention_qkvpacked", "attention_qkvpacked_op", "attention_qkvpacked_backward_op"]
