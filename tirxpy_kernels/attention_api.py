"""``tirxpy_kernels.attention(q, k, v, causal=False, scale=None)``: attention forward on torch tensors
with the Hopper kernel of :mod:`tirxpy_kernels.attention_sm90`.

Tensors are ``(batch, seq, heads, dim)``: ``q`` is ``(B, SQ, H, D)``, ``k`` and ``v`` are
``(B, SK, HKV, D)`` with ``H % HKV == 0`` (grouped-query attention). Returns ``out`` ``(B, SQ, H,
D)`` in ``q``'s dtype, or ``(out, lse)`` with ``return_lse=True`` (``lse`` ``(B, H, SQ)`` float32,
natural log). ``causal=True`` masks key ``j > i`` for query row ``i`` (top-left aligned, as
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``). ``scale`` defaults to
``1 / sqrt(D)``.

Arguments are checked first (:class:`AttentionArgumentError` says what to change). Sequences
shorter than one tile are zero-padded (a TMA box may not exceed its tensor). Strided views are read in
place where TMA can (innermost stride 1, other strides multiples of 16 bytes, such as the slices of a
fused ``(B, S, 3, H, D)`` projection: :func:`tirxpy_kernels.views.kernel_input`); other inputs are
copied.
"""
from __future__ import annotations

import contextlib

import torch

from tirxpy.errors import ArgumentError, TirxError
from tirxpy.ir.dtype import from_torch

from .attention_plan import DTYPES, HEAD_DIMS, TARGET, check_options, check_scale, plan
from .checks import address, dense_tensor, misalignment
from .errors import KernelConfigError, flag_option, is_flag, plain_flags, shown
from .attention_sm90 import attention_sm90
from .launch_cache import LaunchCache, compiled, launch_bound
from .views import kernel_input


class AttentionArgumentError(ArgumentError):
    """A bad argument to :func:`attention` (type, dtype, shape, device, scale)."""


class AttentionDeviceError(TirxError, RuntimeError):
    """The GPU cannot run this kernel (it needs Hopper, sm_90)."""


TUNING = ("BN", "STAGES", "NC", "PINGPONG", "PERSIST", "CHAIN", "OSTAGE", "LAZY", "TRIM", "TAIL", "FOLD", "PDL", "sms")
_PLAIN = (type(None), bool, int, str)


def _check(q, k, v, causal, scale, return_lse, tuning):
    """``(B, SQ, H, D, SK, HKV, plan)`` once every argument but the device is right: :func:`_check_meta`, then the
    plan the options make for this problem (:func:`tirxpy_kernels.attention_plan.plan`, for the device's SM count).
    :func:`_device` comes after."""
    B, SQ, H, D, SK, HKV, causal = _check_meta(q, k, v, causal, scale, return_lse, tuning)
    opts = {n: x for n, x in tuning.items() if n != "PDL"}
    if opts.get("sms") is None:
        opts["sms"] = _sm_count(q.device)
    with _as_argument_error():
        p = plan(B, H, HKV, SQ, SK, D, from_torch(q.dtype).name, causal=causal, **opts)
    return B, SQ, H, D, SK, HKV, p


def check_dtype(where, name, t):
    """AttentionArgumentError unless the tensor ``t`` (the caller's argument ``name`` of ``where``) has a dtype the
    kernel takes (:data:`~tirxpy_kernels.attention_plan.DTYPES`): the one home of that rule for :func:`attention` and
    the functions built on it (``attention_qkvpacked``), so each names its own argument.

        >>> import torch
        >>> check_dtype("attention_qkvpacked", "qkv", torch.empty(1, dtype=torch.float32, device="meta"))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_api.AttentionArgumentError: attention_qkvpacked: qkv has dtype torch.float32; the kernel takes torch.bfloat16 or torch.float16 (convert with qkv.to(torch.bfloat16))
    """
    if not isinstance(t, torch.Tensor):
        raise AttentionArgumentError(f"{where}: {name} must be a tensor, got {shown(t, 60)} ({type(t).__name__})")
    if from_torch(t.dtype) not in DTYPES:
        raise AttentionArgumentError(f"{where}: {name} has dtype {t.dtype}; the kernel takes torch.bfloat16 or "
                                     f"torch.float16 (convert with {name}.to(torch.bfloat16))")


def _check_meta(q, k, v, causal, scale, return_lse, tuning):
    """``(B, SQ, H, D, SK, HKV, causal)`` (``causal`` a Python bool) once every argument is right as far as its
    metadata tells: the tensors' kinds, dtypes and shapes, ``causal``, ``scale``, ``return_lse``, the options'
    names and kinds (:func:`check_tuning`). It reads no device, data or plan, so the operator's fake
    (``torch.ops.tirxpy.attention`` under FakeTensorMode, shapes possibly symbolic) runs it as the kernel API does.

        >>> import torch
        >>> q = torch.empty(2, 100, 8, 96, dtype=torch.bfloat16, device="meta")
        >>> _check_meta(q, q, q, False, None, False, {})
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_api.AttentionArgumentError: attention: head dim 96 is not supported; use one of ...
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        dense_tensor("attention", name, t, 4, "(batch, seq, heads, dim)", AttentionArgumentError)
        check_dtype("attention", name, t)
    if not (q.dtype == k.dtype == v.dtype):
        raise AttentionArgumentError(f"attention: q, k, v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; use one dtype")
    if k.shape != v.shape:
        raise AttentionArgumentError(f"attention: k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape "
                                     "(batch, seq_k, kv_heads, dim)")
    B, SQ, H, D = q.shape
    Bk, SK, HKV, Dk = k.shape
    if Bk != B:
        raise AttentionArgumentError(f"attention: q has batch {B} but k / v have batch {Bk}")
    if Dk != D:
        raise AttentionArgumentError(f"attention: q has head dim {D} but k / v have {Dk}; they must match")
    if D not in HEAD_DIMS:
        raise AttentionArgumentError(f"attention: head dim {D} is not supported; use one of {HEAD_DIMS}")
    if min(B, SQ, H, SK, HKV) == 0:
        raise AttentionArgumentError(f"attention: empty input q {tuple(q.shape)}, k {tuple(k.shape)}")
    if H % HKV:
        raise AttentionArgumentError(f"attention: {H} query heads do not split into {HKV} key / value heads "
                                     "(grouped-query attention needs heads(q) % heads(k) == 0)")
    causal, _ = check_flags("attention", causal, scale, return_lse)
    check_tuning(tuning)
    return B, SQ, H, D, SK, HKV, causal


def check_flags(where, causal, scale, return_lse, error=AttentionArgumentError) -> tuple:
    """``(causal, return_lse)`` as Python bools when each is True or False (Python's or numpy's bool; not an int)
    and ``scale`` is None or a positive number the kernel takes (:func:`~tirxpy_kernels.attention_plan.check_scale`);
    ``error`` from ``where`` naming the first bad one otherwise.

        >>> import numpy as np
        >>> check_flags("attention", np.bool_(True), 0.125, False)
        (True, False)
        >>> check_flags("attention", 1, None, False)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_api.AttentionArgumentError: attention: causal must be True or False, got 1
    """
    if not is_flag(causal):
        raise error(f"{where}: causal must be True or False, got {shown(causal, 60)}")
    check_scale(where, scale, error)
    if not is_flag(return_lse):
        raise error(f"{where}: return_lse must be True or False, got {shown(return_lse, 60)}")
    return plain_flags(causal, return_lse)


def check(q, k, v, causal=False, scale=None, return_lse=False, **tuning) -> None:
    """Every check :func:`attention` makes of these arguments but the device's (:class:`AttentionArgumentError`
    naming the first fault): a benchmark checks its options on meta tensors before it touches a GPU.

        >>> import torch
        >>> q = torch.empty(8, 4096, 16, 128, dtype=torch.bfloat16, device="meta")
        >>> check(q, q, q, causal=True, BN=64)
        >>> check(q, q, q, NC=4)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_api.AttentionArgumentError: attention: NC = 4 consumer warpgroups; use 1 or 2
    """
    _check(q, k, v, causal, scale, return_lse, tuning)


def check_tuning(tuning: dict) -> None:
    """The tuning options of :func:`attention` on their own: known names (:data:`TUNING`) and each option's
    kind (:func:`tirxpy_kernels.attention_plan.check_options`; ``PDL`` True or False); :class:`AttentionArgumentError`
    naming the first bad one.

        >>> check_tuning({"BN": 64, "PDL": False})
        >>> check_tuning({"STAGES": "3"})
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_api.AttentionArgumentError: attention: STAGES must be an int or None, got '3' (str)
    """
    if not isinstance(tuning, dict):
        raise AttentionArgumentError(f"attention: tuning must be a dict of option names to values, got "
                                     f"{shown(tuning, 60)}")
    unknown = sorted(k if type(k) is str else shown(k, 40) for k in set(tuning) - set(TUNING))
    if unknown:
        raise AttentionArgumentError(f"attention: unknown tuning argument(s) {unknown}; the kernel takes {TUNING}")
    opts = {n: x for n, x in tuning.items() if n != "PDL" and not (n == "sms" and x is None)}
    with _as_argument_error():
        check_options(**opts)
        flag_option("attention_sm90", "PDL", tuning.get("PDL", True))


@contextlib.contextmanager
def _as_argument_error():
    """Re-raise the kernel's :class:`~tirxpy_kernels.errors.KernelConfigError` (an option or plan :func:`attention` was
    given cannot build) as :class:`AttentionArgumentError` with the same message."""
    try:
        yield
    except KernelConfigError as e:
        raise AttentionArgumentError("attention: " + str(e).removeprefix("attention_sm90: ")) from None


def _sm_count(device):
    """SMs of ``device`` (the persistent grid's size) on a GPU; the target's (an H100's) elsewhere, where it only
    plans."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return TARGET.sm_count


def _device(q, k, v, where="attention", error=AttentionArgumentError):
    """Refuse tensors that are not all on one Hopper GPU (after every other check): ``error`` from entry point
    ``where`` for the tensors' devices, :class:`AttentionDeviceError` for a GPU that is not a Hopper."""
    if not (q.device == k.device == v.device):
        raise error(f"{where}: q, k, v are on {q.device}, {k.device}, {v.device}; move them to one CUDA device")
    for name, t in (("q", q), ("k", k), ("v", v)):     # the kernel reads each through its data pointer
        misalignment(where, name, t, error)
    if q.device.type != "cuda":
        raise error(f"{where}: the tensors are on {q.device}; move them to a CUDA device (q.cuda())")
    cap = torch.cuda.get_device_capability(q.device)
    if not TARGET.runs_on(cap):
        raise AttentionDeviceError(f"{where}: the kernel is for Hopper ({TARGET}); "
                                   f"{torch.cuda.get_device_name(q.device)} is sm_{cap[0]}{cap[1]}")


def attention(q, k, v, causal=False, scale=None, return_lse=False, **tuning):
    """Attention forward on a Hopper GPU; see the module docstring. ``tuning`` passes ``BN``,
    ``STAGES``, ``NC``, ``PINGPONG``, ``PERSIST``, ``CHAIN``, ``OSTAGE``, ``LAZY``, ``TRIM``, ``TAIL``,
    ``FOLD``, ``PDL`` and ``sms`` (default: the device's SM count) to :func:`tirxpy_kernels.attention_sm90.attention_sm90`
    (defaults: :func:`~tirxpy_kernels.attention_plan.default_config`,
    :func:`~tirxpy_kernels.attention_plan.default_pingpong`, :func:`~tirxpy_kernels.attention_plan.default_lazy`,
    :func:`~tirxpy_kernels.attention_plan.default_trim`, :func:`~tirxpy_kernels.attention_plan.default_tail`,
    :func:`~tirxpy_kernels.attention_plan.default_fold`;
    persistent and chained where it fits, see
    :func:`~tirxpy_kernels.attention_plan.plan`)."""
    key = _fast_key(q, k, v, causal, scale, tuning)
    ck = _FAST.get(key)
    if ck is not None and isinstance(return_lse, bool):
        # contiguous, unpadded and checked by an earlier call with these shapes and layouts
        B, SQ, H, D = q.shape
        out = torch.empty_like(q)
        lse = torch.empty((B, H, SQ, 1), dtype=torch.float32, device=q.device)
        launch_bound(_BOUND, key, ck, q, k, v, out, lse)
        return (out, lse[:, :, :, 0]) if return_lse else out
    B, SQ, H, D, SK, HKV, p = _check(q, k, v, causal, scale, return_lse, tuning)
    causal, return_lse = plain_flags(causal, return_lse)      # (checked) numpy bools as the kernel's Python bools
    _device(q, k, v)
    tuning = dict(tuning)
    pdl = tuning.pop("PDL", True)            # a launch setting, not part of the plan
    if tuning.get("sms") is None:
        tuning["sms"] = _sm_count(q.device)
    SQT, SKT = max(SQ, p["BM"]), max(SK, p["BN"])
    with torch.cuda.device(q.device):
        (qp, qs), (kp, ks), (vp, vs) = kernel_input(q, SQT), kernel_input(k, SKT), kernel_input(v, SKT)
        strides = None if qs is ks is vs is None else (qs, ks, vs)
        kern = attention_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=None if scale is None else float(scale),
                              dtype=from_torch(q.dtype).name, SQT=SQT, SKT=SKT, PDL=pdl, strides=strides, **tuning)
        out = torch.empty((B, SQT, H, D), dtype=q.dtype, device=q.device)
        lse = torch.empty((B, H, SQT, 1), dtype=torch.float32, device=q.device)
        ck = compiled(kern, TARGET)
        ck(qp, kp, vp, out, lse)
    if key is not None and qp is q and kp is k and vp is v:
        _FAST.put(key, ck)    # later calls like this one (read in place) skip the checks, the plan and the copies
    out = out[:, :SQ].contiguous() if SQT != SQ else out
    return (out, lse[:, :, :SQ, 0]) if return_lse else out


def _fast_key(q, k, v, causal, scale, tuning):
    """The key of an earlier checked call like this one (shapes, strides, dtypes, devices, the inputs' 16-byte
    alignment, options), or None when an argument is not of a plain kind (then the full checks run, and the call is
    never a fast one). A misaligned input is copied by the full path, so alignment is part of the key."""
    for t in (q, k, v):
        if not (isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_nested):
            return None
    if not isinstance(causal, bool) or type(scale) not in (type(None), int, float) \
            or not all(type(x) in _PLAIN for x in tuning.values()):
        return None
    ptrs = (address(q), address(k), address(v))
    if None in ptrs:        # no storage (torch.vmap, a subclass): the checks name it
        return None
    aligns = tuple(p % 16 for p in ptrs)
    return (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype, v.dtype, q.device,
            k.device, v.device) + aligns + (causal, type(scale), scale,
                                            tuple(sorted((name, type(x), x) for name, x in tuning.items())))
    # (1 == True, as options they differ: the types are part of the key)


# _fast_key -> the compiled kernel of a checked call with no padding (tirxpy_kernels.launch_cache)
_FAST = LaunchCache("attention")
# (_fast_key, addresses of q, k, v, out, lse) -> that kernel's bound launch (tirxpy_kernels.launch_cache.launch_bound)
_BOUND = LaunchCache("attention bound launches")
