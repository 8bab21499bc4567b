"""The tirxpy kernel library, written with the public API only.

``tirxpy_kernels.gemm(a, b, out=None, ...)``: Hopper GEMM (:mod:`tirxpy_kernels.gemm_sm90`) on torch tensors.
``tirxpy_kernels.attention(q, k, v, causal=False, scale=None)``: Hopper flash attention forward
(:mod:`tirxpy_kernels.attention_sm90`) on ``(batch, seq, heads, dim)`` torch tensors.
``tirxpy_kernels.quantize_fp8(x, granularity, ...)``: bf16 / f16 -> fp8 with per-token, 1 x 128 or 128 x 128 amax
scales (:mod:`tirxpy_kernels.quantize_fp8`).
"""


def gemm(a, b, out=None, **kw):
    """``act(a @ b + bias)`` on a Hopper GPU; see :func:`tirxpy_kernels.gemm_api.gemm`."""
    from .gemm_api import gemm as _gemm  # noqa: PLC0415  (imports torch lazily)

    return _gemm(a, b, out, **kw)


def attention(q, k, v, causal=False, scale=None, **kw):
    """Attention forward on a Hopper GPU; see :func:`tirxpy_kernels.attention_api.attention`."""
    from .attention_api import attention as _attention  # noqa: PLC0415  (imports torch lazily)

    return _attention(q, k, v, causal=causal, scale=scale, **kw)


def attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False):
    """``(dq, dk, dv)`` of :func:`attention` on a Hopper GPU, from the forward's output and log-sum-exp; see
    :func:`tirxpy_kernels.attention_bwd_api.attention_backward`."""
    from .attention_bwd_api import attention_backward as _bwd  # noqa: PLC0415  (imports torch lazily)

    return _bwd(q, k, v, out, dout, lse, causal=causal, scale=scale, deterministic=deterministic)


def quantize_fp8(x, granularity, **kw):
    """``(x_q, scales)``: fp8 quantization with amax scales; see :func:`tirxpy_kernels.quantize_api.quantize_fp8`."""
    from .quantize_api import quantize_fp8 as _quantize_fp8  # noqa: PLC0415  (imports torch lazily)

    return _quantize_fp8(x, granularity, **kw)
