"""``tirxpy_kernels.quantize_fp8(x, granularity, *, dtype=torch.float8_e4m3fn, pow2_scales=False)``: bf16 / f16 ->
fp8 with amax scales, on torch tensors, with the kernel of :mod:`tirxpy_kernels.quantize_sm90`.

Returns ``(x_q, scales)``: ``x_q`` the fp8 ``(M, K)`` tensor, ``scales`` float32 of shape ``(M, 1)`` (``"token"``),
``(M, ceil(K/128))`` (``"1x128"``, a view of a group-major ``(ceil(K/128), M')`` tensor, ``M'`` the rows
padded to the kernel's tile: what :func:`tirxpy_kernels.gemm_fp8`'s block scaling reads without a copy where
``M' = M``) or ``(ceil(M/128), ceil(K/128))`` (``"128x128"``), so that
``x ~ x_q * scale`` of each element's group. The rule (:mod:`tirxpy_kernels.quantize_sm90`): ``scale = max(amax /
fp8_max, 2**-126)`` (an all-zero group gets ``2**-126`` and ``x_q = 0``), rounded up to a power of two with
``pow2_scales=True``; ``x_q = satfinite_rn(x / scale)``. :func:`reference` computes the same in torch on any
device.

    >>> import torch
    >>> x = torch.tensor([[1.0, -2.0, 0.5, 0.0]], dtype=torch.bfloat16)
    >>> q, s = reference(x, "token")
    >>> s.tolist(), q.float().tolist()
    ([[0.004464285913854837]], [[224.0, -448.0, 112.0, 0.0]])
    >>> reference(x, "token", pow2_scales=True)[1].tolist()
    [[0.0078125]]
    >>> quantize_fp8(x.float(), "token")
    Traceback (most recent call last):
    ...
    tirxpy_kernels.quantize_api.QuantizeArgumentError: quantize_fp8: x has dtype torch.float32; pass a bfloat16 or float16 tensor (x.to(torch.bfloat16))
"""
from __future__ import annotations

import torch

from tirxpy.errors import ArgumentError

from .checks import aligned_input, dense_tensor
from .errors import KernelConfigError, shown
from .launch_cache import LaunchCache, compiled
from .quantize_sm90 import (FP8_MAX, GRANULARITIES, GROUP, SCALE_FLOOR, padded_shape, plan, quantize_fp8_kernel,
                           scales_shape,
                           scales_storage, scales_view)

_FP8 = {torch.float8_e4m3fn: "float8_e4m3", torch.float8_e5m2: "float8_e5m2"}
_IN = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
_CACHE = LaunchCache("quantize_fp8")


class QuantizeArgumentError(ArgumentError):
    """A bad argument to :func:`quantize_fp8` (type, dtype, shape, granularity, device or layout)."""


def _check(x, granularity, dtype, pow2_scales):
    w = "quantize_fp8"
    if not isinstance(x, torch.Tensor):
        raise QuantizeArgumentError(f"{w}: x must be a torch.Tensor, got {type(x).__name__}")
    if x.is_nested or x.layout != torch.strided:
        dense_tensor(w, "x", x, 2, "(M, K)", QuantizeArgumentError)     # names the kind and the fix
    if x.dtype not in _IN:
        raise QuantizeArgumentError(f"{w}: x has dtype {x.dtype}; pass a bfloat16 or float16 tensor "
                                    f"(x.to(torch.bfloat16))")
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise QuantizeArgumentError(f"{w}: x must be a non-empty 2-D (M, K) tensor, got shape {tuple(x.shape)}; "
                                    f"reshape it (x.reshape(-1, x.shape[-1]))")
    if not isinstance(granularity, str) or granularity not in GRANULARITIES:
        raise QuantizeArgumentError(f"{w}: granularity must be one of {GRANULARITIES} (one scale per row, per 1 x 128 "
                                    f"group along K, per 128 x 128 block), got {shown(granularity, 60)}")
    if not isinstance(dtype, torch.dtype) or dtype not in _FP8:
        raise QuantizeArgumentError(f"{w}: dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got "
                                    f"{shown(dtype, 60)}")
    if not isinstance(pow2_scales, bool):
        raise QuantizeArgumentError(f"{w}: pow2_scales must be True or False, got {shown(pow2_scales, 60)}")
    if not x.is_contiguous():
        raise QuantizeArgumentError(f"{w}: x (shape {tuple(x.shape)}, strides {x.stride()}) must be row-major "
                                    f"contiguous; pass x.contiguous()")
    Mp, Kp = padded_shape(granularity, *x.shape)
    try:
        plan(granularity, Mp, Kp)
    except KernelConfigError as e:
        raise QuantizeArgumentError(str(e)) from None
    if Mp * Kp >= 2 ** 31:
        pad = "" if (Mp, Kp) == tuple(x.shape) else f" (the kernel's input: x padded to one tile, {Mp} x {Kp})"
        raise QuantizeArgumentError(f"{w}: x has {Mp * Kp} elements{pad}; the kernel indexes with 32-bit ints, so "
                                    f"quantize at most 2**31 - 1 elements per call (split x)")
    if x.device.type != "cuda":
        raise QuantizeArgumentError(f"{w}: x is on {x.device}; the kernel runs on a CUDA GPU (x.cuda()); "
                                    f"reference() computes the same on any device")


def _key(x, granularity, dtype, pow2_scales):
    """The cache key of a call like this one that the checks accepted: ``x``'s shape, dtype and device, and the
    options with their types (``1 == True``, but ``pow2_scales=1`` is refused); None (the full checks run) when
    ``x`` is not a contiguous dense tensor. The key holds no address: the entry is the compiled kernel, and
    every launch hands it ``x`` on a 16-byte boundary (:func:`_launch`).

        >>> x = torch.zeros(2, 16, dtype=torch.bfloat16)
        >>> odd = torch.zeros(33, dtype=torch.bfloat16)[1:].view(2, 16)      # 2 bytes off a 16-byte boundary
        >>> _key(odd, "token", torch.float8_e4m3fn, False) == _key(x, "token", torch.float8_e4m3fn, False)
        True
    """
    if not isinstance(x, torch.Tensor):
        return None
    try:
        if not x.is_contiguous():
            return None
        return (tuple(x.shape), x.dtype, x.device, type(granularity), granularity, dtype, type(pow2_scales),
                pow2_scales)
    except (TypeError, RuntimeError):     # a tensor without sizes or storage (nested, sparse): the checks name it
        return None


def quantize_fp8(x, granularity, *, dtype=torch.float8_e4m3fn, pow2_scales=False):
    """``(x_q, scales)`` for a bf16 / f16 ``(M, K)`` CUDA tensor ``x`` (module docstring: the rule and the shapes).

    Every argument is checked before the device (:class:`QuantizeArgumentError` naming it and the fix). ``x`` may
    start at any address: the kernel reads its rows with 16-byte vector loads, so an ``x`` off a 16-byte boundary
    (a view at an odd offset) is quantized from an aligned copy, on every call. An input smaller than one CTA tile
    (:func:`tirxpy_kernels.quantize_sm90.padded_shape`) is quantized from a zero-padded copy (zeros change no
    amax), the outputs sliced back."""
    key = _key(x, granularity, dtype, pow2_scales)
    try:
        hit = _CACHE.get(key)
    except Exception:       # an option that does not hash: the checks name it
        key = hit = None
    if hit is None:
        _check(x, granularity, dtype, pow2_scales)
        Mp, Kp = padded_shape(granularity, *x.shape)
        ck = compiled(quantize_fp8_kernel(granularity, Mp, Kp, _IN[x.dtype], _FP8[dtype], pow2_scales), "sm_90a")
        hit = (ck, Mp, Kp)
        _CACHE.put(key, hit)
    ck, Mp, Kp = hit
    M, K = x.shape
    if (Mp, Kp) != (M, K):
        xp = torch.zeros((Mp, Kp), dtype=x.dtype, device=x.device)
        xp[:M, :K] = x
        q, s = quantize_fp8(xp, granularity, dtype=dtype, pow2_scales=pow2_scales)
        sm, sk = scales_shape(granularity, M, K)
        return q[:M, :K].contiguous(), (s[:sm, :sk] if granularity == "1x128" else s[:sm, :sk].contiguous())
    return _launch(ck, x, granularity, dtype)


def _launch(ck, x, granularity, dtype):
    """``(x_q, scales)`` of compiled kernel ``ck`` on ``x`` of the kernel's shape: ``x`` itself when it starts on a
    16-byte boundary, else an aligned copy (:func:`~tirxpy_kernels.checks.aligned_input`), as the kernel's 16-byte
    vector loads need; the outputs fresh (aligned) tensors."""
    M, K = x.shape
    q = torch.empty((M, K), dtype=dtype, device=x.device)
    s = torch.empty(scales_storage(granularity, M, K), dtype=torch.float32, device=x.device)
    ck(aligned_input("quantize_fp8", "x", x, QuantizeArgumentError), q, s)
    return q, scales_view(s, granularity)


def _pow2_ceil(s):
    """The least power of two >= each positive normal float32 of ``s`` (the kernel's bit rule)."""
    b = s.view(torch.int32).to(torch.int64)
    return ((b + 0x7FFFFF) & 0xFF800000).to(torch.int32).view(torch.float32)


def _check_granularity(where, granularity):
    """:class:`QuantizeArgumentError` from ``where`` unless ``granularity`` is one of
    :data:`~tirxpy_kernels.quantize_sm90.GRANULARITIES`."""
    if not isinstance(granularity, str) or granularity not in GRANULARITIES:
        raise QuantizeArgumentError(f"{where}: granularity must be one of {GRANULARITIES}, got "
                                    f"{shown(granularity, 60)}")


def _check_rule_args(where, x, granularity, dtype, flags=()):
    """The arguments of the torch functions of the rule (:func:`reference`, :func:`group_scales`), on any device:
    ``x`` a non-empty dense 2-D floating-point tensor, ``granularity`` one of
    :data:`~tirxpy_kernels.quantize_sm90.GRANULARITIES`, ``dtype`` an fp8 dtype the kernel writes, and each
    ``(name, value)`` of ``flags`` True or False; :class:`QuantizeArgumentError` from ``where`` naming the first bad
    one."""
    dense_tensor(where, "x", x, 2, "(M, K)", QuantizeArgumentError)
    if not x.is_floating_point() or min(x.shape) == 0:
        raise QuantizeArgumentError(f"{where}: x must be a non-empty floating-point (M, K) tensor, got {x.dtype} "
                                    f"{tuple(x.shape)}")
    _check_granularity(where, granularity)
    if not isinstance(dtype, torch.dtype) or dtype not in _FP8:
        raise QuantizeArgumentError(f"{where}: dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got "
                                    f"{shown(dtype, 60)}")
    for name, v in flags:
        if not isinstance(v, bool):
            raise QuantizeArgumentError(f"{where}: {name} must be True or False, got {shown(v, 60)}")


def group_scales(x, granularity, dtype=torch.float8_e4m3fn, pow2_scales=False):
    """The scales of the rule, in torch on ``x``'s device (float32 amax, one correctly rounded float32 division).
    Bad arguments raise :class:`QuantizeArgumentError` naming them."""
    _check_rule_args("group_scales", x, granularity, dtype, (("pow2_scales", pow2_scales),))
    M, K = x.shape
    gr = {"token": 1, "1x128": 1, "128x128": GROUP}[granularity]
    gc = K if granularity == "token" else GROUP
    sm, sk = scales_shape(granularity, M, K)
    xa = torch.zeros((sm * gr, sk * gc), dtype=torch.float32, device=x.device)
    xa[:M, :K] = x.float().abs()
    amax = xa.reshape(sm, gr, sk, gc).amax(dim=(1, 3))
    # a tensor divisor: torch on CUDA multiplies by the reciprocal of a scalar divisor, which is not the rule
    s = torch.clamp(amax / torch.full_like(amax, FP8_MAX[_FP8[dtype]]), min=SCALE_FLOOR)
    return _pow2_ceil(s) if pow2_scales else s


def expand_scales(s, granularity, M, K):
    """Each element's scale, ``(M, K)``, from the scales ``s`` :func:`quantize_fp8` returns for an ``(M, K)`` input
    (:func:`~tirxpy_kernels.quantize_sm90.scales_shape`); other shapes are :class:`QuantizeArgumentError` naming the
    expected one.

        >>> expand_scales(torch.tensor([[2.0], [3.0]]), "token", 2, 3).tolist()
        [[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]
    """
    _check_granularity("expand_scales", granularity)
    for name, n in (("M", M), ("K", K)):
        if type(n) is not int or n < 1:
            raise QuantizeArgumentError(f"expand_scales: {name} must be a positive int (the input's shape), got "
                                        f"{shown(n, 40)}")
    gr = {"token": 1, "1x128": 1, "128x128": GROUP}[granularity]
    want = scales_shape(granularity, M, K)
    if not isinstance(s, torch.Tensor) or tuple(s.shape) != want:
        got = tuple(s.shape) if isinstance(s, torch.Tensor) else type(s).__name__
        raise QuantizeArgumentError(f"expand_scales: s must be the {want} scales of a {shown(granularity)} "
                                    f"quantization of an ({M}, {K}) input, got {got}")
    gc = K if granularity == "token" else GROUP
    return s.repeat_interleave(gr, 0)[:M].repeat_interleave(gc, 1)[:, :K]


def reference(x, granularity, *, dtype=torch.float8_e4m3fn, pow2_scales=False, rcp=False):
    """``(x_q, scales)`` by the rule in torch: float32 quotients ``x / scale`` (``x * (1 / scale)`` with ``rcp``),
    saturated to ``+-fp8_max``, then torch's own round-to-nearest-even cast. Bad arguments raise
    :class:`QuantizeArgumentError` naming them."""
    _check_rule_args("reference", x, granularity, dtype, (("pow2_scales", pow2_scales), ("rcp", rcp)))
    s = group_scales(x, granularity, dtype, pow2_scales)
    se = expand_scales(s, granularity, *x.shape)
    y = x.float() * (torch.ones_like(se) / se) if rcp else x.float() / se
    fmax = FP8_MAX[_FP8[dtype]]
    return y.clamp(-fmax, fmax).to(dtype), s


__all__ = ["QuantizeArgumentError", "quantize_fp8", "reference", "group_scales", "expand_scales"]
