"""``tirxpy_kernels.attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False)``:
the gradients ``(dq, dk, dv)`` of :func:`tirxpy_kernels.attention` on a Hopper GPU, with the kernel of
:mod:`tirxpy_kernels.attention_bwd_sm90`.

Tensors are those of the forward: ``q``, ``out``, ``dout`` ``(B, SQ, H, D)``, ``k``, ``v`` ``(B, SK, HKV, D)``
(``H % HKV == 0``; ``dk``, ``dv`` sum over the query heads of a group), one dtype (bf16 or f16), ``lse``
``(B, H, SQ)`` float32, the natural log-sum-exp ``attention(..., return_lse=True)`` returns. ``causal`` and
``scale`` must be the forward's. Three steps: ``D = rowsum(dout * out)`` in float32 (the preprocessing
kernel :func:`~tirxpy_kernels.attention_bwd_sm90.attention_bwd_preprocess`; the float32 ``dQ`` accumulator and
the turn counters of ``deterministic`` are zeroed by torch), the main kernel (which accumulates
``scale * dS K`` into ``dQacc``), and ``dq`` = ``dQacc`` converted to the input dtype (torch). ``deterministic=True`` adds each key block's ``dQ`` share in
key-block order, so that equal inputs give bit-equal ``dq``; otherwise the order of the float32 adds varies
from run to run.

Arguments are checked first (:class:`AttentionBwdArgumentError` names the fault and the fix).
"""
from __future__ import annotations

import math

import torch

from tirxpy.errors import ArgumentError
from tirxpy.ir.dtype import from_torch

from .attention_bwd_plan import DTYPES, HEAD_DIMS, TARGET, plan
from .attention_bwd_sm90 import attention_bwd_preprocess, attention_bwd_sm90
from .attention_varlen_api import VarlenArgumentError, check_lengths, check as check_varlen
from .checks import dense_tensor
from .errors import KernelConfigError
from .launch_cache import compiled


class AttentionBwdArgumentError(ArgumentError):
    """A bad argument to :func:`attention_backward` (type, dtype, shape, device, scale, flags)."""


def _err(msg):
    return AttentionBwdArgumentError("attention_backward: " + msg)


def _check_tensors(q, k, v, out, dout, lse):
    """Kinds, dtypes and shapes of the six tensors; returns ``(B, SQ, H, D, SK, HKV)``."""
    for name, t, nd, what in (("q", q, 4, "(batch, seq, heads, dim)"), ("k", k, 4, "(batch, seq, heads, dim)"),
                              ("v", v, 4, "(batch, seq, heads, dim)"), ("out", out, 4, "(batch, seq, heads, dim)"),
                              ("dout", dout, 4, "(batch, seq, heads, dim)"), ("lse", lse, 3, "(batch, heads, seq)")):
        dense_tensor("attention_backward", name, t, nd, what, AttentionBwdArgumentError)
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)):
        if from_torch(t.dtype) not in DTYPES:
            raise _err(f"{name} has dtype {t.dtype}; the kernel takes torch.bfloat16 or torch.float16")
        if t.dtype != q.dtype:
            raise _err(f"{name} has dtype {t.dtype} but q has {q.dtype}; use one dtype for q, k, v, out, dout")
    if lse.dtype != torch.float32:
        raise _err(f"lse has dtype {lse.dtype}; pass the float32 log-sum-exp of attention(..., return_lse=True)")
    B, SQ, H, D = q.shape
    if k.shape != v.shape:
        raise _err(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape (batch, seq_k, kv_heads, dim)")
    Bk, SK, HKV, Dk = k.shape
    for name, t in (("out", out), ("dout", dout)):
        if t.shape != q.shape:
            raise _err(f"{name} has shape {tuple(t.shape)}; it must be q's {tuple(q.shape)}")
    if Bk != B or Dk != D:
        raise _err(f"k / v {tuple(k.shape)} do not match q {tuple(q.shape)} in batch and head dim")
    if tuple(lse.shape) != (B, H, SQ):
        raise _err(f"lse has shape {tuple(lse.shape)}; it must be (batch, heads, seq_q) = {(B, H, SQ)}")
    if D not in HEAD_DIMS:
        raise _err(f"head dim {D} is not supported by the backward kernel; use one of {HEAD_DIMS}")
    if min(B, SQ, H, SK, HKV) == 0:
        raise _err(f"empty input q {tuple(q.shape)}, k {tuple(k.shape)}")
    if H % HKV:
        raise _err(f"{H} query heads do not split into {HKV} key / value heads (heads(q) % heads(k) == 0)")
    return B, SQ, H, D, SK, HKV


def check(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False):
    """Every check :func:`attention_backward` makes but the device's; returns the kernel's plan.

        >>> import torch
        >>> q = torch.empty(2, 1000, 8, 128, dtype=torch.bfloat16, device="meta")
        >>> k = torch.empty(2, 1000, 2, 128, dtype=torch.bfloat16, device="meta")
        >>> lse = torch.empty(2, 8, 1000, device="meta")
        >>> check(q, k, k, q, q, lse, causal=True).grid
        (8, 2, 2)
        >>> check(q, k, k, q, q, lse[:, :4])
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_bwd_api.AttentionBwdArgumentError: attention_backward: lse has shape (2, 4, 1000); it must be (batch, heads, seq_q) = (2, 8, 1000)
    """
    B, SQ, H, D, SK, HKV = _check_tensors(q, k, v, out, dout, lse)
    for name, f in (("causal", causal), ("deterministic", deterministic)):
        if not isinstance(f, bool):
            raise _err(f"{name} must be True or False, got {f!r:.60}")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
            raise _err(f"scale must be a positive finite number or None (1 / sqrt(head dim)), got {scale!r:.60}")
    try:
        return plan(B, H, HKV, SQ, SK, D, causal, from_torch(q.dtype).name, deterministic)
    except KernelConfigError as e:
        raise _err(str(e).removeprefix("attention_bwd_sm90: ")) from None


def _device(*ts):
    dev = ts[0].device
    if any(t.device != dev for t in ts):
        raise _err(f"the tensors are on {sorted({str(t.device) for t in ts})}; move them to one CUDA device")
    if dev.type != "cuda":
        raise _err(f"the tensors are on {dev}; move them to a CUDA device (q.cuda())")
    cap = torch.cuda.get_device_capability(dev)
    if not TARGET.runs_on(cap):
        raise _err(f"the kernel is for Hopper ({TARGET}); {torch.cuda.get_device_name(dev)} is sm_{cap[0]}{cap[1]}")


def _rows(t, rows):
    """``t`` contiguous with at least ``rows`` rows on dim 1 (zero rows appended)."""
    if t.shape[1] >= rows:
        return t.contiguous()
    o = t.new_zeros((t.shape[0], rows) + tuple(t.shape[2:]))
    o[:, :t.shape[1]] = t
    return o


def prepare(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False, lens=None):
    """The three steps of :func:`attention_backward` apart: ``(kernel, args, finish)``, where ``kernel(*args)``
    launches the compiled kernel on the prepared tensors (``D``, the zeroed accumulator and counters, padded
    inputs) and ``finish()`` returns ``(dq, dk, dv)`` from them; a benchmark times the kernel alone with it.
    Checks every argument first. ``lens``: a ``(2, batch)`` int32 tensor on q's device, batch element ``b``'s real
    query rows ``lens[0, b] <= SQ`` and key rows ``lens[1, b] <= SK`` (its other rows zero): the kernel skips the
    blocks past them (``LENS`` of :func:`~tirxpy_kernels.attention_bwd_sm90.attention_bwd_sm90`; the padded batch of
    :func:`attention_varlen_backward`)."""
    p = check(q, k, v, out, dout, lse, causal, scale, deterministic)
    B, SQ, H, D = q.shape
    if lens is not None and not (isinstance(lens, torch.Tensor) and lens.dtype == torch.int32
                                 and tuple(lens.shape) == (2, B) and lens.device == q.device):
        what = f"{lens.dtype} {tuple(lens.shape)} on {lens.device}" if isinstance(lens, torch.Tensor) else type(lens).__name__
        raise _err(f"lens is {what}; it must be a (2, batch) = {(2, B)} torch.int32 tensor on {q.device} (each batch "
                   "element's real query and key rows)")
    _device(q, k, v, out, dout, lse)
    SK, HKV = k.shape[1], k.shape[2]
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    SQT, SKT, SQP = max(SQ, p.BM), max(SK, p.BN), p.q_blocks * p.BM
    kern = attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=sc, dtype=p.dtype,
                              deterministic=deterministic, SQT=SQT, SKT=SKT, LENS=lens is not None)
    with torch.cuda.device(q.device):
        if lens is not None:
            lens = lens.contiguous()
        qp, kp, vp, dop = _rows(q, SQT), _rows(k, SKT), _rows(v, SKT), _rows(dout, SQT)
        dl = torch.empty((B, H, SQP), dtype=torch.float32, device=q.device)
        compiled(attention_bwd_preprocess(B, H, SQ, D, p.dtype, SQT), TARGET)(_rows(out, SQT), dop, dl)
        if SQ == SQP and lse.is_contiguous() and lse.data_ptr() % 16 == 0:
            lp = lse                        # already whole 64-row blocks: the kernel reads it as it is
        else:
            lp = torch.zeros((B, H, SQP), dtype=torch.float32, device=q.device)
            lp[:, :, :SQ] = lse
        dk = torch.empty((B, SKT, HKV, D), dtype=q.dtype, device=q.device)
        dv = torch.empty_like(dk)
        dqa = torch.zeros((B, SQT, H, D), dtype=torch.float32, device=q.device)
        sem = torch.zeros((B, H, p.q_blocks, 2), dtype=torch.int32, device=q.device)
        ck = compiled(kern, TARGET)

    def finish():
        with torch.cuda.device(q.device):
            dq = dqa[:, :SQ].to(q.dtype)
        if SKT != SK:
            return dq, dk[:, :SK].contiguous(), dv[:, :SK].contiguous()
        return dq, dk, dv

    return ck, (qp, kp, vp, dop, lp, dl, dk, dv, dqa, sem) + ((lens,) if lens is not None else ()), finish


def attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False):
    """``(dq, dk, dv)`` of attention on a Hopper GPU; see the module docstring."""
    return _backward(q, k, v, out, dout, lse, causal, scale, deterministic)


def _backward(q, k, v, out, dout, lse, causal, scale, deterministic, lens=None):
    ck, args, finish = prepare(q, k, v, out, dout, lse, causal, scale, deterministic, lens)
    with torch.cuda.device(q.device):
        ck(*args)
    return finish()


# ------------------------------------------------------------------------------------- variable-length batches
def padded_rows(t, cu, S):
    """The packed rows ``t`` ``(total, ...)`` of the sequences ``cu`` (int32 offsets, ``batch + 1``) as a
    ``(batch, S, ...)`` batch: row ``s`` of sequence ``b`` is ``t[cu[b] + s]`` where ``s`` is below its length, zero
    past it (``S``: at least the longest length). Device ops only, no host copy.

        >>> import torch
        >>> padded_rows(torch.arange(1., 6.), torch.tensor([0, 2, 2, 5], dtype=torch.int32), 3).tolist()
        [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [3.0, 4.0, 5.0]]
    """
    B = cu.numel() - 1
    s = torch.arange(S, device=t.device)
    start = cu[:-1].long()[:, None]
    keep = s < (cu[1:] - cu[:-1]).long()[:, None]
    rows = t.index_select(0, (start + s).clamp(0, t.shape[0] - 1).flatten()).view((B, S) + tuple(t.shape[1:]))
    return rows.masked_fill_(~keep.view((B, S) + (1,) * (t.dim() - 1)), 0)


def packed_rows(tp, cu, total):
    """:func:`padded_rows` undone: ``(total, ...)`` whose row ``r`` of sequence ``b`` is ``tp[b, r - cu[b]]``; rows past
    ``cu[-1]`` are zero.

        >>> import torch
        >>> cu = torch.tensor([0, 2, 2, 5], dtype=torch.int32)
        >>> packed_rows(padded_rows(torch.arange(1., 7.), cu, 3), cu, 6).tolist()
        [1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
    """
    r = torch.arange(total, device=tp.device)
    cl = cu.long()
    b = (torch.searchsorted(cl, r, right=True) - 1).clamp(0, cu.numel() - 2)
    S = tp.shape[1]
    flat = tp.reshape((-1,) + tuple(tp.shape[2:]))
    rows = flat.index_select(0, b * S + (r - cl[b]).clamp(0, S - 1))
    return rows.masked_fill_(~(r < cl[-1]).view((total,) + (1,) * (tp.dim() - 2)), 0)


def padded_length(cu, max_seqlen):
    """The padded batch's sequence length for offsets ``cu`` (a list): the longest length rounded up to a multiple
    of 128 (so that batches of similar lengths share a kernel), at least 1, at most ``max_seqlen``.

        >>> padded_length([0, 300, 1000], 4096), padded_length([0, 300, 1000], 750), padded_length([0, 0], 8)
        (768, 750, 1)
    """
    longest = max(b - a for a, b in zip(cu, cu[1:]))
    return max(1, min(max_seqlen, -(-longest // 128) * 128))


def _check_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale):
    """:func:`attention_varlen_backward`'s checks but the device's and the ``cu_seqlens`` values'."""
    check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale)
    for name, t in (("out", out), ("dout", dout)):
        dense_tensor("attention_varlen_backward", name, t, 3, "(total_tokens, heads, dim)", VarlenArgumentError)
        if t.shape != q.shape or t.dtype != q.dtype:
            raise VarlenArgumentError(f"attention_varlen_backward: {name} is {t.dtype} {tuple(t.shape)}; it must be "
                                      f"q's {q.dtype} {tuple(q.shape)}")
    dense_tensor("attention_varlen_backward", "lse", lse, 2, "(heads, total_tokens)", VarlenArgumentError)
    if lse.dtype != torch.float32 or tuple(lse.shape) != (q.shape[1], q.shape[0]):
        raise VarlenArgumentError(f"attention_varlen_backward: lse is {lse.dtype} {tuple(lse.shape)}; it must be the "
                                  f"float32 (heads, total_tokens) = {(q.shape[1], q.shape[0])} of "
                                  "attention_varlen(..., return_lse=True)")


def attention_varlen_backward(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal=False, scale=None, deterministic=False):
    """``(dq, dk, dv)`` of :func:`tirxpy_kernels.attention_varlen` over packed sequences (its tensors: ``q``, ``out``,
    ``dout`` ``(total_q, H, D)``, ``k``, ``v`` ``(total_k, HKV, D)``, ``lse`` ``(H, total_q)``), computed by
    :func:`attention_backward` on the batch padded to the longest sequence (:func:`padded_length`; ``max_seqlen_q`` /
    ``max_seqlen_k`` while a CUDA graph is being captured) (:func:`padded_rows`).

    The kernel gets each sequence's lengths (``prepare``'s ``lens``): it masks the keys past a sequence's end and
    skips the key and query blocks past it, so its work is each sequence's own, rounded up to whole blocks (the
    gathers move the padded batch's bytes). The padded gradients are exact for the real rows: padding rows of
    ``q``, ``dout`` and ``lse`` are zero, so their ``dS = P (dP - D)`` is 0 and they add nothing to ``dk`` and
    ``dv``. Rows past ``cu_seqlens[-1]`` get zero gradients. The ``cu_seqlens`` values are checked on the
    host (one copy) except while a CUDA graph is being captured."""
    _check_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale)
    on_cpu = cu_seqlens_q.device.type == "cpu" and cu_seqlens_k.device.type == "cpu"
    if on_cpu:      # values known without a copy: checked before the device
        check_lengths(cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), q.shape[0], k.shape[0], max_seqlen_q, max_seqlen_k)
    try:
        _device(q, k, v, out, dout, lse)
    except AttentionBwdArgumentError as e:
        raise AttentionBwdArgumentError("attention_varlen_backward: " + str(e).removeprefix("attention_backward: ")) \
            from None
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if cu.device != q.device:
            raise VarlenArgumentError(f"attention_varlen_backward: {name} is on {cu.device}; move it to {q.device}")
    SQ, SK = int(max_seqlen_q), int(max_seqlen_k)
    if not torch.cuda.is_current_stream_capturing():
        cq, ck = torch.stack([cu_seqlens_q, cu_seqlens_k]).tolist()
        check_lengths(cq, ck, q.shape[0], k.shape[0], max_seqlen_q, max_seqlen_k)
        SQ, SK = padded_length(cq, SQ), padded_length(ck, SK)
    with torch.cuda.device(q.device):
        qp, op, dop = (padded_rows(t, cu_seqlens_q, SQ) for t in (q, out, dout))
        kp, vp = (padded_rows(t, cu_seqlens_k, SK) for t in (k, v))
        lp = padded_rows(lse.t(), cu_seqlens_q, SQ).transpose(1, 2).contiguous()
        lens = torch.stack([cu_seqlens_q[1:] - cu_seqlens_q[:-1], cu_seqlens_k[1:] - cu_seqlens_k[:-1]]).int()
        dq, dk, dv = _backward(qp, kp, vp, op, dop, lp, causal, scale, deterministic, lens)
        return (packed_rows(dq, cu_seqlens_q, q.shape[0]), packed_rows(dk, cu_seqlens_k, k.shape[0]),
                packed_rows(dv, cu_seqlens_k, k.shape[0]))
