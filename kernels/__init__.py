"""The tirxpy kernel library, written with the public API only.

``kernels.gemm(a, b, out=None, ...)``: Hopper GEMM (:mod:`kernels.gemm_sm90`) on torch tensors.
"""


def gemm(a, b, out=None, **kw):
    """``act(a @ b + bias)`` on a Hopper GPU; see :func:`kernels.gemm_api.gemm`."""
    from .gemm_api import gemm as _gemm  # noqa: PLC0415  (imports torch lazily)

    return _gemm(a, b, out, **kw)
