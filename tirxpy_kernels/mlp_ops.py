"""``tirxpy_kernels.mlp(x, b1, b2, activation="relu")``: the two products of a transformer MLP,
``act(x @ b1) @ b2``, through :func:`tirxpy_kernels.gemm_api.gemm`, with ReLU's backward fused into a GEMM.

``b1`` and ``b2`` are ``(K, N)`` operands like :func:`tirxpy_kernels.gemm`'s ``b``: ``w1.t()`` and ``w2.t()`` of
``nn.Linear`` weights. ``x`` is ``(..., dim)``; the leading dimensions are kept.

The backward of ``y = r @ b2``, ``r = relu(x @ b1)``, computes the gradient of ``x @ b1`` in one GEMM whose
epilogue applies ReLU's mask: ``dz = gemm(dy, b2^T, gate=r)``, ``torch.where(r <= 0, 0, dy @ b2^T)``. Two separate
operators (:func:`tirxpy_kernels.gemm` twice) would write ``dy @ b2^T`` and then read it again with ``r`` to
mask it. The other three products are ``db2 = r^T dy``, ``db1 = x^T dz``, ``dx = dz b1^T``, each computed in its
operand's layout (:func:`tirxpy_kernels.torch_ops._product_like`). ``activation="silu"`` or ``None`` compose two
:func:`tirxpy_kernels.gemm` calls (their backward is the GEMM operator's).

    >>> import torch
    >>> x = torch.empty(4, 100, 64, dtype=torch.bfloat16, device="meta")
    >>> w1 = torch.empty(256, 64, dtype=torch.bfloat16, device="meta")
    >>> w2 = torch.empty(64, 256, dtype=torch.bfloat16, device="meta")
    >>> [tuple(t.shape) for t in torch.ops.tirxpy.mlp(x.reshape(-1, 64), w1.t(), w2.t())]     # the fake: (y, r)
    [(400, 64), (400, 256)]
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import gemm_api
from .checks import dense_tensor, no_meta_mix
from .errors import shown
from .gemm_api import GemmArgumentError
from .gemm_plan import ACTIVATIONS
from .torch_ops import _product_like, gemm_op, needs_op


def _check(x, b1, b2, activation):
    """The MLP's own checks (the products' operands then get :func:`tirxpy_kernels.gemm_api.gemm`'s)."""
    for name, t, dims in (("x", x, None), ("b1", b1, 2), ("b2", b2, 2)):
        if not isinstance(t, Tensor):
            raise GemmArgumentError(f"mlp: {name} must be a tensor, got {type(t).__name__}")
        if t.is_nested or t.layout != torch.strided:
            dense_tensor("mlp", name, t, 2, "", GemmArgumentError)      # names the kind and the fix
        if dims is not None and t.dim() != dims:
            raise GemmArgumentError(f"mlp: {name} must be a (K, N) matrix (w.t() of an nn.Linear weight w), got "
                                    f"shape {tuple(t.shape)}")
        gemm_api.check_dtype("mlp", name, t)
    if not x.dtype == b1.dtype == b2.dtype:
        raise GemmArgumentError(f"mlp: x, b1 and b2 must share one dtype (bfloat16 or float16); got {x.dtype}, "
                                f"{b1.dtype}, {b2.dtype} (convert with .to(torch.bfloat16))")
    if x.dim() < 2:
        raise GemmArgumentError(f"mlp: x must be (..., dim) with at least one leading dimension, got {tuple(x.shape)}")
    if x.shape[-1] != b1.shape[0] or b1.shape[1] != b2.shape[0]:
        raise GemmArgumentError(f"mlp: shapes do not chain: x {tuple(x.shape)} @ b1 {tuple(b1.shape)} @ b2 "
                                f"{tuple(b2.shape)} (pass b1 = w1.t() and b2 = w2.t() of nn.Linear weights)")
    if not any(type(activation) is type(a) and activation == a for a in ACTIVATIONS):
        raise GemmArgumentError(f"mlp: activation must be one of {ACTIVATIONS}, got {shown(activation, 60)}")
    if min(x.numel(), b1.numel(), b2.numel()) == 0:
        raise GemmArgumentError(f"mlp: empty problem x {tuple(x.shape)} @ b1 {tuple(b1.shape)} @ b2 {tuple(b2.shape)}")


def mlp(x, b1, b2, activation="relu"):
    """``act(x @ b1) @ b2`` (module docstring): through ``torch.ops.tirxpy.mlp`` when autograd or a compiler needs
    it and ``activation`` is ReLU, else two :func:`tirxpy_kernels.gemm` calls. Returns ``(..., b2.shape[1])``."""
    from . import gemm  # noqa: PLC0415  (the differentiable dispatcher)

    _check(x, b1, b2, activation)
    x2 = x.reshape(-1, x.shape[-1])
    if activation == "relu" and needs_op(x, b1, b2):
        y = mlp_op(x2, b1, b2)[0]
    else:
        y = gemm(gemm(x2, b1, activation=activation), b2)
    return y.reshape(*x.shape[:-1], b2.shape[1])


def _check_op(x, b1, b2):
    """The operator's own checks, before the products' (``x``, ``b1``, ``b2`` named as the caller passed them):
    :func:`_check` with ReLU, on a matrix ``x`` (:func:`mlp` reshapes ``(..., dim)`` to one)."""
    _check(x, b1, b2, "relu")
    if x.dim() != 2:
        raise GemmArgumentError(f"mlp: the operator takes a matrix x, got shape {tuple(x.shape)}")


@torch.library.custom_op("tirxpy::mlp", mutates_args=())
def mlp_op(x: Tensor, b1: Tensor, b2: Tensor) -> tuple[Tensor, Tensor]:
    """``(relu(x @ b1) @ b2, relu(x @ b1))`` for a matrix ``x``; the hidden activation is returned for the
    backward (not differentiable). Checked first (:func:`_check_op`), as the operator may be called directly."""
    _check_op(x, b1, b2)
    r = gemm_api.gemm(x, b1, activation="relu")
    return gemm_api.gemm(r, b2).contiguous(), r.contiguous()


@mlp_op.register_fake
def _mlp_fake(x, b1, b2):
    """``(y, r)`` of the operator's shapes and dtype once the arguments pass its checks: :func:`_check_op`, then
    the kernel API's metadata checks of both products (:func:`tirxpy_kernels.gemm_api._check`), as the operator's
    two :func:`tirxpy_kernels.gemm_api.gemm` calls make them."""
    _check_op(x, b1, b2)
    no_meta_mix("mlp", GemmArgumentError, x=x, b1=b1, b2=b2)
    r = x.new_empty((x.shape[0], b1.shape[1]))
    gemm_api._check(x, b1, None, None, "relu", None, {})
    gemm_api._check(r, b2, None, None, None, None, {})
    return x.new_empty((x.shape[0], b2.shape[1])), r


def _mlp_setup(ctx, inputs, output):
    x, b1, b2 = inputs
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(x, b1, b2, output[1])


def _mlp_backward(ctx, dy, _dr):
    x, b1, b2, r = ctx.saved_tensors
    need_x, need_b1, need_b2 = ctx.needs_input_grad
    dz = gemm_op(dy, b2.t(), None, None, None, "", r)       # where(r <= 0, 0, dy @ b2^T): ReLU's mask fused
    db2 = _product_like(b2, r.t(), dy) if need_b2 else None
    dx = _product_like(x, dz, b1.t()) if need_x else None
    db1 = _product_like(b1, x.t(), dz) if need_b1 else None
    return dx, db1, db2


mlp_op.register_autograd(_mlp_backward, setup_context=_mlp_setup)

__all__ = ["mlp", "mlp_op"]
