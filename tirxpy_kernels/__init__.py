"""The tirxpy kernel library, written with the public API only.

``tirxpy_kernels.gemm(a, b, out=None, ...)``: Hopper GEMM (:mod:`tirxpy_kernels.gemm_sm90`) on torch tensors.
``tirxpy_kernels.attention(q, k, v, causal=False, scale=None)``: Hopper flash attention forward
(:mod:`tirxpy_kernels.attention_sm90`) on ``(batch, seq, heads, dim)`` torch tensors.
"""


def gemm(a, b, out=None, **kw):
    """``act(a @ b + bias)`` on a Hopper GPU; see :func:`tirxpy_kernels.gemm_api.gemm`."""
    from .gemm_api import gemm as _gemm  # noqa: PLC0415  (imports torch lazily)

    return _gemm(a, b, out, **kw)


def attention(q, k, v, causal=False, scale=None, **kw):
    """Attention forward on a Hopper GPU; see :func:`tirxpy_kernels.attention_api.attention`."""
    from .attention_api import attention as _attention  # noqa: PLC0415  (imports torch lazily)

    return _attention(q, k, v, causal=causal, scale=scale, **kw)
