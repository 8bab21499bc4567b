"""The tirxpy kernel library, written with the public API only.

``tirxpy_kernels.gemm(a, b, out=None, ...)``: Hopper GEMM (:mod:`tirxpy_kernels.gemm_sm90`) on torch tensors.
``tirxpy_kernels.attention(q, k, v, causal=False, scale=None)``: Hopper flash attention forward
(:mod:`tirxpy_kernels.attention_sm90`) on ``(batch, seq, heads, dim)`` torch tensors.
``tirxpy_kernels.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)``: the same over
packed variable-length sequences (:mod:`tirxpy_kernels.attention_varlen_api`); ``attention_backward`` /
``attention_varlen_backward``: their gradients (:mod:`tirxpy_kernels.attention_bwd_api`).
``tirxpy_kernels.mlp(x, b1, b2, activation="relu")``: ``act(x @ b1) @ b2`` by two GEMMs, ReLU's backward fused into
one (:mod:`tirxpy_kernels.mlp_ops`).
``tirxpy_kernels.attention_qkvpacked(qkv, causal=False)``: attention over one packed ``(batch, seq, 3, heads, dim)``
tensor whose gradient comes packed too (:mod:`tirxpy_kernels.attention_qkv_ops`).
``gemm``, ``mlp`` and ``attention`` are torch custom operators when autograd or ``torch.compile`` needs them
(:mod:`tirxpy_kernels.torch_ops`).
``tirxpy_kernels.gemm_fp8(a, b, scale_a, scale_b, ...)``: Hopper FP8 GEMM with per-tensor, row-wise or
block-wise scales (:mod:`tirxpy_kernels.gemm_fp8_api`).
``tirxpy_kernels.all_gather_gemm(a_shard, b, group)`` / ``tirxpy_kernels.gemm_reduce_scatter(a, b_shard, group)``: all-gather +
GEMM and GEMM + reduce-scatter over NVLink peers, one overlapped kernel per rank (:mod:`tirxpy_kernels.dist_api`).
``tirxpy_kernels.quantize_fp8(x, granularity, ...)``: bf16 / f16 -> fp8 with per-token, 1 x 128 or 128 x 128 amax
scales (:mod:`tirxpy_kernels.quantize_sm90`).
"""

import functools

_OPS: list = []     # [tirxpy_kernels.torch_ops] once a call has imported it (and torch)


def _named_arguments(inner=None):
    """Decorator of an entry point: a call with arguments its signature does not take (an unknown keyword, one
    missing or one too many; with ``inner``, a function returning the callee that takes its ``**kw``, that
    callee's signature too) raises :class:`tirxpy.errors.ArgumentError` naming the entry point, the arguments
    and the parameters, as the kernel APIs name a bad option. Every other error passes unchanged, and a good call
    pays nothing: the signature is bound only after a TypeError.

        >>> attention_backward(1, 2, 3, 4, 5, 6, casual=True)
        Traceback (most recent call last):
        ...
        tirxpy.errors.ArgumentError: attention_backward: got an unexpected keyword argument 'casual'; it takes (q, k, v,
        out, dout, lse, causal=False, scale=None, deterministic=False, grads=None)
    """
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except TypeError as e:
                import inspect  # noqa: PLC0415  (imported on an error only, as the error classes)

                from tirxpy.errors import ArgumentError, TirxError  # noqa: PLC0415

                if isinstance(e, TirxError):
                    raise
                for sig in [inspect.signature(fn)] + ([inspect.signature(inner())] if inner is not None else []):
                    try:
                        sig.bind(*args, **kwargs)
                    except TypeError as bad:
                        msg = str(bad).removeprefix(f"{fn.__name__}() ")
                        params = str(sig)[1:-1]
                        raise ArgumentError(f"{fn.__name__}: {msg}; it takes ({params})") from None
                raise
        return call
    return wrap


def _torch_ops():
    """:mod:`tirxpy_kernels.torch_ops`, imported by the first call that needs it (it imports torch)."""
    if not _OPS:
        from . import torch_ops  # noqa: PLC0415

        _OPS.append(torch_ops)
    return _OPS[0]


def gemm(a, b, out=None, **kw):
    """``act(a @ b + bias)`` on a Hopper GPU; see :func:`tirxpy_kernels.gemm_api.gemm`. Differentiable and
    ``torch.compile``-able through ``torch.ops.tirxpy.gemm`` (:mod:`tirxpy_kernels.torch_ops`) when an input
    requires grad or a compiler traces the call."""
    torch_ops = _OPS[0] if _OPS else _torch_ops()
    if torch_ops.needs_op(a, b, kw.get("bias") if kw else None):
        return torch_ops.gemm(a, b, out, **kw)
    return torch_ops.gemm_api.gemm(a, b, out, **kw)


@_named_arguments()
def mlp(x, b1, b2, activation="relu"):
    """``act(x @ b1) @ b2`` on a Hopper GPU (``b1 = w1.t()``, ``b2 = w2.t()``); see :func:`tirxpy_kernels.mlp_ops.mlp`.
    Differentiable and ``torch.compile``-able through ``torch.ops.tirxpy.mlp``, whose backward masks ReLU's
    gradient inside the GEMM that makes it."""
    from .mlp_ops import mlp as _mlp  # noqa: PLC0415  (imports torch lazily)

    return _mlp(x, b1, b2, activation)


def gemm_fp8(a, b, scale_a, scale_b, out=None, **kw):
    """``(a * scale_a) @ (b * scale_b) + bias`` for FP8 operands on a Hopper GPU; see
    :func:`tirxpy_kernels.gemm_fp8_api.gemm_fp8`."""
    from .gemm_fp8_api import gemm_fp8 as _gemm_fp8  # noqa: PLC0415  (imports torch lazily)

    return _gemm_fp8(a, b, scale_a, scale_b, out, **kw)


def attention(q, k, v, causal=False, scale=None, **kw):
    """Attention forward on a Hopper GPU; see :func:`tirxpy_kernels.attention_api.attention`. Differentiable
    (backward: :func:`attention_backward`) and ``torch.compile``-able through ``torch.ops.tirxpy.attention``
    (:mod:`tirxpy_kernels.torch_ops`) when an input requires grad or a compiler traces the call."""
    torch_ops = _OPS[0] if _OPS else _torch_ops()
    if torch_ops.needs_op(q, k, v):
        return torch_ops.attention(q, k, v, causal=causal, scale=scale, **kw)
    return torch_ops.attention_api.attention(q, k, v, causal=causal, scale=scale, **kw)


@_named_arguments()
def attention_qkvpacked(qkv, causal=False, scale=None):
    """Attention over ``q, k, v = qkv.unbind(2)`` of one ``(batch, seq, 3, heads, dim)`` tensor on a Hopper GPU, whose
    backward writes one packed ``dqkv``; see :func:`tirxpy_kernels.attention_qkv_ops.attention_qkvpacked`."""
    from .attention_qkv_ops import attention_qkvpacked as _packed  # noqa: PLC0415  (imports torch lazily)

    return _packed(qkv, causal, scale)


@_named_arguments()
def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                     return_lse=False):
    """Attention forward over packed variable-length sequences ``(total_tokens, heads, dim)`` on a Hopper GPU; see
    :func:`tirxpy_kernels.attention_varlen_api.attention_varlen`. ``torch.compile``-able through
    ``torch.ops.tirxpy.attention_varlen``; differentiable (backward:
    :func:`tirxpy_kernels.attention_bwd_api.attention_varlen_backward`, the backward kernel on the packed rows)."""
    torch_ops = _OPS[0] if _OPS else _torch_ops()
    if torch_ops.needs_op(q, k, v):
        return torch_ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                          causal=causal, scale=scale, return_lse=return_lse)
    return torch_ops.attention_varlen_api.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                           max_seqlen_k, causal=causal, scale=scale, return_lse=return_lse)


@_named_arguments()
def attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False, grads=None):
    """``(dq, dk, dv)`` of :func:`attention` on a Hopper GPU, from the forward's output and log-sum-exp (into
    ``grads``, when given); see :func:`tirxpy_kernels.attention_bwd_api.attention_backward`."""
    from .attention_bwd_api import attention_backward as _bwd  # noqa: PLC0415  (imports torch lazily)

    return _bwd(q, k, v, out, dout, lse, causal=causal, scale=scale, deterministic=deterministic, grads=grads)


@_named_arguments()
def attention_varlen_backward(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal=False, scale=None, deterministic=False):
    """``(dq, dk, dv)`` of :func:`attention_varlen` over packed sequences, from the forward's output and ``lse``
    ``(heads, total_q)``; see :func:`tirxpy_kernels.attention_bwd_api.attention_varlen_backward`."""
    from .attention_bwd_api import attention_varlen_backward as _bwd  # noqa: PLC0415  (imports torch lazily)

    return _bwd(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                scale=scale, deterministic=deterministic)


def _quantize_callee():
    """:func:`tirxpy_kernels.quantize_api.quantize_fp8`, the callee of :func:`quantize_fp8`'s ``**kw``."""
    from .quantize_api import quantize_fp8 as callee  # noqa: PLC0415  (imports torch lazily)

    return callee


@_named_arguments(_quantize_callee)
def quantize_fp8(x, granularity, **kw):
    """``(x_q, scales)``: fp8 quantization with amax scales; see :func:`tirxpy_kernels.quantize_api.quantize_fp8`."""
    from .quantize_api import quantize_fp8 as _quantize_fp8  # noqa: PLC0415  (imports torch lazily)

    return _quantize_fp8(x, granularity, **kw)


def all_gather_gemm(a_shard, b, group=None, **kw):
    """``A_full @ b`` with ``A_full`` the ranks' row shards, gathered inside the GEMM; see
    :func:`tirxpy_kernels.dist_api.all_gather_gemm`."""
    from .dist_api import all_gather_gemm as _ag  # noqa: PLC0415  (imports torch lazily)

    return _ag(a_shard, b, group, **kw)


def gemm_reduce_scatter(a, b_shard, group=None, **kw):
    """This rank's rows of ``sum_r a_r @ b_shard_r``, reduced inside the GEMM; see
    :func:`tirxpy_kernels.dist_api.gemm_reduce_scatter`."""
    from .dist_api import gemm_reduce_scatter as _rs  # noqa: PLC0415  (imports torch lazily)

    return _rs(a, b_shard, group, **kw)
