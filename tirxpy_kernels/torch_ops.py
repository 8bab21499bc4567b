"""Torch custom operators over the kernel library: ``torch.ops.tirxpy.gemm``, ``torch.ops.tirxpy.attention``,
``torch.ops.tirxpy.attention_varlen`` and their backward operators, each with a fake (meta) implementation and
registered autograd, so that the kernels sit inside a model that trains (``torch.autograd.grad``), that
``torch.compile(fullgraph=True)`` captures (the operators are single nodes of the graph) and that a CUDA graph
records.

The rule of :func:`tirxpy_kernels.gemm` / :func:`tirxpy_kernels.attention` / :func:`tirxpy_kernels.attention_varlen`:
a call goes through these operators when autograd or a compiler needs it (:func:`needs_op`: an input requires
grad with grad mode on, or ``torch.compile`` is tracing); a plain inference call goes straight to the kernel
API (``torch_ops.gemm_api.gemm`` and so on, looked up at each call) and its fast repeated-call path.

Gradients:

- ``gemm``: ``y = act(z)``, ``z = a @ b + bias`` (with ``gate``: ``y`` is 0 where ``gate <= 0``, and so is ``dy``
  before the rest; the gate gets no gradient). ``dz = dy * act'(z)`` (relu: ``y > 0``; silu: ``z``
  recomputed by the GEMM in float32), ``da = dz @ b^T``, ``db = a^T @ dz`` (both through the GEMM, with the
  other operand majors, each computed in its operand's layout: ``db`` of ``b = w.t()`` as ``(dz^T a)^T``, so
  ``w``'s gradient comes out row-major like ``w``), ``dbias = dz.sum(0)``.
- ``attention``: returns ``(out, lse)``; the backward is ``tirxpy_kernels.attention_bwd_api.attention_backward``
  (imported when a backward runs). ``lse`` is not differentiable (it is returned for the backward and for
  inspection; a loss through it gets no gradient from it).
- ``attention_varlen``: as ``attention`` over packed sequences; the backward is
  ``tirxpy_kernels.attention_bwd_api.attention_varlen_backward`` (the backward kernel on the packed rows). Where
  that function is missing (:func:`varlen_backward`), a call that needs the gradient raises
  :class:`AutogradUnsupportedError`.

    >>> import torch
    >>> a = torch.empty(256, 64, dtype=torch.bfloat16, device="meta")
    >>> b = torch.empty(64, 512, dtype=torch.bfloat16, device="meta")
    >>> torch.ops.tirxpy.gemm(a, b, None, "relu", torch.float32).shape      # the fake implementation
    torch.Size([256, 512])
    >>> q = torch.empty(2, 100, 8, 64, dtype=torch.bfloat16, device="meta")
    >>> [tuple(t.shape) for t in torch.ops.tirxpy.attention(q, q, q, True, None)]
    [(2, 100, 8, 64), (2, 8, 100)]
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from tirxpy.errors import ArgumentError, TirxError

from . import attention_api, gemm_api
from . import attention_varlen_api
from . import attention_varlen_api as _varlen
from .attention_api import AttentionArgumentError
from .checks import dense_tensor, no_meta_mix
from .errors import shown
from .gemm_api import GemmArgumentError

_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


class AutogradUnsupportedError(TirxError, NotImplementedError):
    """A gradient the kernel library cannot compute (the message says which, and what to do instead)."""


def needs_op(*tensors) -> bool:
    """Whether a call on ``tensors`` goes through the custom operators: ``torch.compile`` is tracing it, or grad
    mode is on and one of them (None is skipped) requires grad. An argument that is not a tensor gives False:
    the kernel API's checks then name it.

        >>> import torch
        >>> x = torch.zeros(2, requires_grad=True)
        >>> needs_op(x, None), needs_op(x.detach()), torch.no_grad()(needs_op)(x)
        (True, False, False)
    """
    if _is_compiling():
        return True
    if not _grad_enabled():
        return False
    for t in tensors:
        if t is None:
            continue
        if not isinstance(t, torch.Tensor):     # not a tensor (judged by its type, not its attributes): the kernel
            return False                        # API names it
        if t.requires_grad:
            return True
    return False


# --------------------------------------------------------------------------------------------------- gemm
_LITERALS = (type(None), bool, int, float, str)     # the value types encode_tuning writes (and tuples of them)


def _plain(v):
    """A numpy scalar as the Python value it holds (the kernel APIs take ``np.int64(128)`` and ``np.bool_(True)``
    as options), anything else as it is."""
    import numpy as np  # noqa: PLC0415

    return v.item() if isinstance(v, np.generic) and type(v.item()) in _LITERALS else v


@torch.compiler.assume_constant_result     # (torch.compile calls it while tracing: its arguments are constants)
def encode_tuning(tuning: dict, where: str, error) -> str:
    """The tuning options of a kernel API call as the string an operator takes (a Python literal, read back by
    :func:`decode_tuning`): ``""`` for none; ``error`` (a typed ArgumentError) for a value that is not a plain
    literal.

        >>> encode_tuning({"STAGES": 2, "BN": 64}, "gemm", ValueError)
        "(('BN', 64), ('STAGES', 2))"
        >>> decode_tuning(encode_tuning({"SPLIT": (16, 1, 240), "PDL": False}, "gemm", ValueError))
        {'PDL': False, 'SPLIT': (16, 1, 240)}
        >>> import numpy as np
        >>> encode_tuning({"BN": np.int64(128), "PDL": np.bool_(False)}, "gemm", ValueError)    # as the API takes them
        "(('BN', 128), ('PDL', False))"
    """
    import ast  # noqa: PLC0415

    if not tuning:
        return ""
    tuning = {k: tuple(map(_plain, v)) if type(v) is tuple else _plain(v) for k, v in tuning.items()}
    for name, v in tuning.items():      # by type: an object's own repr may pass for a literal, or raise
        if not (type(v) in _LITERALS or type(v) is tuple and all(type(x) in _LITERALS for x in v)):
            raise error(f"{where}: tuning options must be plain values (ints, bools, strings, None, tuples of them) "
                        f"under autograd or torch.compile; {name!s:.40} has type {type(v).__name__:.60}")
    text = repr(tuple(sorted(tuning.items(), key=lambda kv: str(kv[0]))))
    try:
        if ast.literal_eval(text) is None:
            raise ValueError
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise error(f"{where}: tuning options must be plain values (ints, bools, strings, None, tuples of them) "
                    f"under autograd or torch.compile, got {text:.120}") from None
    return text


def decode_tuning(text: str, where: str = "tirxpy", error=ArgumentError) -> dict:
    """The options :func:`encode_tuning` wrote: ``""`` (none) or a Python literal tuple of ``(name, value)`` pairs,
    each name a str given once. Anything else (an operator called directly with another string) is ``error`` from
    ``where`` naming ``tuning``; the values are the kernel API's to check.

        >>> decode_tuning("(('BN', 64),)")
        {'BN': 64}
        >>> decode_tuning("BN=64", "gemm")
        Traceback (most recent call last):
        ...
        tirxpy.errors.ArgumentError: gemm: tuning must be "" or a tuple of (name, value) pairs as ...
    """
    import ast  # noqa: PLC0415

    if not text:
        return {}
    try:
        pairs = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pairs = None
    names = [p[0] for p in pairs] if isinstance(pairs, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs) else None
    if names is None or len(set(names)) != len(names):
        raise error(f'{where}: tuning must be "" or a tuple of (name, value) pairs as encode_tuning writes them, each '
                    f"name a str given once (such as \"(('BN', 128),)\"), got {shown(text, 120)}")
    return dict(pairs)


@torch.library.custom_op("tirxpy::gemm", mutates_args=())
def gemm_op(a: Tensor, b: Tensor, bias: Optional[Tensor], activation: Optional[str],
            out_dtype: Optional[torch.dtype], tuning: str = "", gate: Optional[Tensor] = None) -> Tensor:
    """``act(a @ b + bias)`` by :func:`tirxpy_kernels.gemm_api.gemm` (a fresh output of ``out_dtype``; ``tuning``:
    :func:`encode_tuning`'s string of its options; ``gate``: 0 where ``gate <= 0``)."""
    from .gemm_api import gemm  # noqa: PLC0415

    opts = decode_tuning(tuning, "gemm", GemmArgumentError)
    gemm_api.check_tuning(opts)         # a name such as 'bias' must not reach gemm() as a second keyword
    return gemm(a, b, bias=bias, activation=activation, out_dtype=out_dtype, gate=gate, **opts).contiguous()


@gemm_op.register_fake
def _gemm_fake(a, b, bias, activation, out_dtype, tuning="", gate=None):
    """The operator's output ``(M, N)`` of ``out_dtype or a.dtype`` once the arguments pass the kernel API's
    metadata checks (:func:`tirxpy_kernels.gemm_api._check`: its typed error otherwise), as the operator checks them
    before the device."""
    no_meta_mix("gemm", GemmArgumentError, a=a, b=b, bias=bias, gate=gate)
    gemm_api._check(a, b, None, bias, activation, out_dtype, decode_tuning(tuning, "gemm", GemmArgumentError), gate)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or a.dtype)


def _gemm_setup(ctx, inputs, output):
    a, b, bias, activation, _, _, gate = inputs
    ctx.activation = activation
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.save_for_backward(a, b, bias, output if activation == "relu" else None, gate)


def _gemm_backward(ctx, dy):
    a, b, bias, y, gate = ctx.saved_tensors
    dz = dy
    if gate is not None:
        dz = torch.where(gate <= 0, 0, dz)
    if ctx.activation == "relu":
        dz = dy * (y > 0)
    elif ctx.activation == "silu":
        z = gemm_op(a, b, bias, None, torch.float32)       # z recomputed, not kept: as much memory as y
        s = torch.sigmoid(z)
        dz = dy.float() * (s * (1 + z * (1 - s)))
    dz = dz.to(a.dtype)
    da = _product_like(a, dz, b.t()) if ctx.needs_input_grad[0] else None
    db = _product_like(b, a.t(), dz) if ctx.needs_input_grad[1] else None
    dbias = dz.float().sum(0).to(ctx.bias_dtype) if bias is not None and ctx.needs_input_grad[2] else None
    return da, db, dbias, None, None, None, None


def _product_like(t, x, y):
    """``x @ y`` through the GEMM, laid out like ``t`` (the operand whose gradient it is): a column-major ``t`` (such
    as ``w.t()`` of an ``nn.Linear`` weight) gets ``(y^T @ x^T)^T``, so that the gradient reaching ``w`` is
    row-major like ``w`` and autograd keeps it as ``w.grad`` without a transposing copy."""
    if t.dim() == 2 and t.stride(0) == 1 and t.stride(1) != 1:
        return gemm_op(y.t(), x.t(), None, None, None).t()
    return gemm_op(x, y, None, None, None)


gemm_op.register_autograd(_gemm_backward, setup_context=_gemm_setup)


def _gemm_kinds(a, b, bias, activation, out_dtype, gate):
    """The kinds ``torch.ops.tirxpy.gemm``'s schema types, each named by :class:`GemmArgumentError` before torch's
    dispatcher sees it (which raises its own error): ``a``, ``b`` dense tensors, ``bias`` / ``gate`` None or
    dense tensors, ``activation`` None or a str, ``out_dtype`` None or a torch.dtype. The values are the kernel
    API's to check."""
    for name, t, none in (("a", a, False), ("b", b, False), ("bias", bias, True), ("gate", gate, True)):
        if t is not None or not none:
            dense_tensor("gemm", name, t, t.dim() if isinstance(t, Tensor) else 0, "", GemmArgumentError)
    if activation is not None and not isinstance(activation, str):
        raise GemmArgumentError(f"gemm: activation must be one of {gemm_api.ACTIVATIONS}, got {shown(activation, 60)}")
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise GemmArgumentError(f"gemm: out_dtype must be a torch.dtype (torch.bfloat16, torch.float16 or "
                                f"torch.float32) or None, got {shown(out_dtype, 60)} ({type(out_dtype).__name__})")


def gemm(a, b, out=None, *, bias=None, activation=None, out_dtype=None, gate=None, **tuning):
    """:func:`tirxpy_kernels.gemm` through ``torch.ops.tirxpy.gemm`` (differentiable in ``a``, ``b`` and ``bias``;
    traceable). The tuning options travel with the call (:func:`encode_tuning`); ``out=`` (checked as the kernel API
    checks it: a contiguous ``(M, N)`` tensor of an output dtype) gets the product computed in its dtype by
    ``out.copy_`` (recorded like any in-place copy)."""
    text = encode_tuning(tuning, "gemm", GemmArgumentError)
    _gemm_kinds(a, b, bias, activation, out_dtype, gate)
    if out is None:
        return gemm_op(a, b, bias, activation, out_dtype, text, gate)
    gemm_api._check(a, b, out, bias, activation, out_dtype, tuning, gate)     # out as the kernel API takes it
    if out.requires_grad and out.is_leaf:
        raise GemmArgumentError("gemm: out is a leaf tensor that requires grad, which an in-place write may not "
                                "change; pass one that does not, or leave out=None and use the result")
    return out.copy_(gemm_op(a, b, bias, activation, out.dtype, text, gate))      # (the product in out's dtype)


# ---------------------------------------------------------------------------------------------- attention
@torch.library.custom_op("tirxpy::attention", mutates_args=())
def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: Optional[float],
                 tuning: str = "") -> tuple[Tensor, Tensor]:
    """``(out, lse)`` of :func:`tirxpy_kernels.attention_api.attention` (``lse`` ``(B, H, SQ)`` float32;
    ``tuning``: :func:`encode_tuning`'s string of its options)."""
    from .attention_api import attention  # noqa: PLC0415

    opts = decode_tuning(tuning, "attention", AttentionArgumentError)
    attention_api.check_tuning(opts)    # a name such as 'causal' must not reach attention() as a second keyword
    out, lse = attention(q, k, v, causal=causal, scale=scale, return_lse=True, **opts)
    return out.contiguous(), lse.contiguous()


@attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, tuning=""):
    """``(out, lse)`` of the operator's shapes and dtypes once the arguments pass the kernel API's metadata checks
    (:func:`tirxpy_kernels.attention_api._check_meta`; the plan, which needs the device's SM count, is not made)."""
    opts = decode_tuning(tuning, "attention", AttentionArgumentError)
    no_meta_mix("attention", AttentionArgumentError, q=q, k=k, v=v)
    attention_api._check_meta(q, k, v, causal, scale, True, opts)
    B, SQ, H, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((B, H, SQ), dtype=torch.float32)


@torch.library.custom_op("tirxpy::attention_backward", mutates_args=())
def attention_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor, causal: bool,
                          scale: Optional[float]) -> tuple[Tensor, Tensor, Tensor]:
    """``(dq, dk, dv)`` by the backward kernel (``tirxpy_kernels.attention_bwd_api.attention_backward``)."""
    dq, dk, dv = _backward_module().attention_backward(q, k, v, out, dout, lse, causal=causal, scale=scale)
    return dq.contiguous(), dk.contiguous(), dv.contiguous()


@attention_backward_op.register_fake
def _attention_backward_fake(q, k, v, out, dout, lse, causal, scale):
    """``(dq, dk, dv)`` of ``q``'s, ``k``'s, ``v``'s shapes once the arguments pass the backward API's metadata
    checks (:func:`tirxpy_kernels.attention_bwd_api._check_meta`; no plan)."""
    no_meta_mix("attention_backward", AttentionArgumentError, q=q, k=k, v=v, out=out, dout=dout, lse=lse)
    _backward_module()._check_meta(q, k, v, out, dout, lse, causal, scale, False)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _backward_module():
    """:mod:`tirxpy_kernels.attention_bwd_api`, imported when a backward is traced or runs;
    :class:`AutogradUnsupportedError` (compute attention under ``torch.no_grad()``) where it is not available."""
    try:
        from . import attention_bwd_api  # noqa: PLC0415
    except ImportError as e:
        raise AutogradUnsupportedError("attention: the backward kernel (tirxpy_kernels.attention_bwd_api) is not "
                                       f"available ({e}); compute attention under torch.no_grad()") from None
    return attention_bwd_api


def _attention_setup(ctx, inputs, output):
    q, k, v, causal, scale, _ = inputs
    out, lse = output
    ctx.causal, ctx.scale = causal, scale
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, out, lse)


def _attention_backward(ctx, dout, _dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward_op(q, k, v, out, dout.contiguous(), lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None, None


attention_op.register_autograd(_attention_backward, setup_context=_attention_setup)


def attention(q, k, v, causal=False, scale=None, return_lse=False, **tuning):
    """:func:`tirxpy_kernels.attention` through ``torch.ops.tirxpy.attention`` (differentiable, traceable): ``out``,
    or ``(out, lse)`` with ``return_lse=True``; the tuning options travel with the call (:func:`encode_tuning`)."""
    causal, scale = op_args("attention", ((q, "q"), (k, "k"), (v, "v")), 4, "(batch, seq, heads, dim)", causal,
                            scale, return_lse, AttentionArgumentError)
    out, lse = attention_op(q, k, v, causal, scale, encode_tuning(tuning, "attention", AttentionArgumentError))
    return (out, lse) if return_lse else out


def op_args(where, tensors, ndim, what, causal, scale, return_lse, error):
    """``(causal, scale)`` as an attention operator's schema takes them (a Python bool; a float or None), once the
    arguments it types are of those types: each of ``tensors`` (``(tensor, name)``) a dense tensor of ``ndim``
    dimensions (``what``), and the flags and ``scale`` as :func:`~tirxpy_kernels.attention_api.check_flags` wants
    them (``np.bool_(True)`` goes on as ``True``). ``error`` from ``where`` names the first bad one (torch's
    dispatcher would raise its own error on a wrong type)."""
    from .attention_plan import check_scale  # noqa: PLC0415

    for t, name in tensors:
        dense_tensor(where, name, t, ndim, what, error)
    causal, _ = attention_api.check_flags(where, causal, scale, return_lse, error)
    return causal, check_scale(where, scale, error)


# ------------------------------------------------------------------------------------- variable-length attention
@torch.library.custom_op("tirxpy::attention_varlen", mutates_args=())
def attention_varlen_op(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                        max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                        scale: Optional[float]) -> tuple[Tensor, Tensor]:
    """``(out, lse)`` of :func:`tirxpy_kernels.attention_varlen_api.attention_varlen` (``lse`` ``(H, total_q)``)."""
    return _varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                    scale=scale, return_lse=True)


@attention_varlen_op.register_fake
def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale):
    """``(out, lse)`` as the kernel API allocates them (:func:`~tirxpy_kernels.attention_varlen_api.empty_outputs`)
    once the arguments pass its metadata checks (:func:`~tirxpy_kernels.attention_varlen_api.check`; the
    ``cu_seqlens`` values are device data, checked when the operator runs)."""
    _varlen_meta_mix("attention_varlen", dict(q=q, k=k, v=v), cu_seqlens_q, cu_seqlens_k)
    _varlen.check(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, True)
    return _varlen.empty_outputs(q, _varlen.windows(max_seqlen_q, max_seqlen_k, q.shape[0], k.shape[0])[0])


def _varlen_meta_mix(where, tensors, cu_seqlens_q, cu_seqlens_k):
    """:func:`~tirxpy_kernels.checks.no_meta_mix` for a packed operator's fake: its ``tensors`` all on ``meta`` or
    none, and ``cu_seqlens`` on ``meta`` only with them (the kernel API takes ``cu_seqlens`` on the CPU with
    tensors on the GPU, and with ``meta`` ones for shapes)."""
    no_meta_mix(where, AttentionArgumentError, **tensors)
    if tensors["q"].device.type != "meta":
        no_meta_mix(where, AttentionArgumentError, q=tensors["q"], cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)


@torch.library.custom_op("tirxpy::attention_varlen_backward", mutates_args=())
def attention_varlen_backward_op(q: Tensor, k: Tensor, v: Tensor, out: Tensor, dout: Tensor, lse: Tensor,
                                 cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                                 causal: bool, scale: Optional[float]) -> tuple[Tensor, Tensor, Tensor]:
    """``(dq, dk, dv)`` of packed sequences by the backward kernel, where it takes ``cu_seqlens``."""
    fn = varlen_backward()
    dq, dk, dv = fn(q, k, v, out, dout, lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                    max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, causal=causal, scale=scale)
    return dq.contiguous(), dk.contiguous(), dv.contiguous()


@attention_varlen_backward_op.register_fake
def _attention_varlen_backward_fake(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    causal, scale):
    """``(dq, dk, dv)`` of ``q``'s, ``k``'s, ``v``'s shapes once the backward takes packed sequences
    (:func:`varlen_backward`) and the arguments pass its metadata checks
    (:func:`tirxpy_kernels.attention_bwd_api._check_varlen`; the ``cu_seqlens`` values are checked when it runs)."""
    varlen_backward()
    _varlen_meta_mix("attention_varlen_backward", dict(q=q, k=k, v=v, out=out, dout=dout, lse=lse), cu_seqlens_q,
                     cu_seqlens_k)
    _backward_module()._check_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     causal, scale)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def varlen_backward():
    """The backward of packed sequences: ``attention_bwd_api.attention_varlen_backward``, or
    ``attention_backward`` where it takes ``cu_seqlens_q``; :class:`AutogradUnsupportedError` when neither is
    there (the message says to compute the forward under ``torch.no_grad()``)."""
    import inspect  # noqa: PLC0415

    try:
        from . import attention_bwd_api as bwd  # noqa: PLC0415
    except ImportError:
        bwd = None
    fn = getattr(bwd, "attention_varlen_backward", None)
    if fn is None and bwd is not None and hasattr(bwd, "attention_backward"):
        if "cu_seqlens_q" in inspect.signature(bwd.attention_backward).parameters:
            fn = bwd.attention_backward
    if fn is None:
        raise AutogradUnsupportedError("attention_varlen: the backward kernel does not take packed sequences "
                                       "(cu_seqlens) yet, so attention_varlen is forward only: call it under "
                                       "torch.no_grad() or with inputs that do not require grad, or pad the batch "
                                       "and use tirxpy_kernels.attention, which has a backward")
    return fn


def _varlen_setup(ctx, inputs, output):
    q, k, v, cu_q, cu_k, max_q, max_k, causal, scale = inputs
    out, lse = output
    ctx.args = (max_q, max_k, causal, scale)
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)


def _varlen_backward(ctx, dout, _dlse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = attention_varlen_backward_op(q, k, v, out, dout.contiguous(), lse, cu_q, cu_k, *ctx.args)
    return dq, dk, dv, None, None, None, None, None, None


attention_varlen_op.register_autograd(_varlen_backward, setup_context=_varlen_setup)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                     return_lse=False):
    """:func:`tirxpy_kernels.attention_varlen` through ``torch.ops.tirxpy.attention_varlen``. A call whose inputs
    require grad checks first that the backward takes packed sequences (:func:`varlen_backward`)."""
    causal, scale = op_args("attention_varlen", ((q, "q"), (k, "k"), (v, "v")), 3, "(total_tokens, heads, dim)",
                            causal, scale, return_lse, _varlen.VarlenArgumentError)
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        dense_tensor("attention_varlen", name, cu, 1, "(batch + 1 int32 offsets)", _varlen.VarlenArgumentError)
    bounds = []
    for name, x, rows in (("max_seqlen_q", max_seqlen_q, q.shape[0]), ("max_seqlen_k", max_seqlen_k, k.shape[0])):
        # the schema's ints are 64-bit: a bound past the packed rows is taken as the rows (no sequence is longer)
        bounds.append(min(x if isinstance(x, torch.SymInt) else _varlen.positive_int(name, x), rows))
    max_seqlen_q, max_seqlen_k = bounds
    if not _is_compiling() and _grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in (q, k, v)):
        varlen_backward()       # (a compiled graph's backward checks it when it is traced: the fake below)
    out, lse = attention_varlen_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale)
    return (out, lse) if return_lse else out


__all__ = ["AutogradUnsupportedError", "needs_op", "encode_tuning", "decode_tuning", "gemm", "attention", "attention_varlen", "gemm_op", "attention_op",
           "attention_backward_op", "attention_varlen_op", "attention_varlen_backward_op", "varlen_backward"]
