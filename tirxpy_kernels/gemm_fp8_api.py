"""``tirxpy_kernels.gemm_fp8(a, b, scale_a, scale_b, out=None, ...)``: ``(a * scale_a) @ (b * scale_b) + bias``
for FP8 ``a`` and ``b`` with the Hopper kernel of :mod:`tirxpy_kernels.gemm_sm90` (``scaling=``).

Operands are e4m3 or e5m2 (each its own), read as FP8 wgmma reads them, K-major: ``a`` is ``(M, K)`` row-major and ``b`` is ``(K, N)``
column-major, the ``w.t()`` of a row-major ``(N, K)`` weight (``nn.Linear``'s layout), as
``torch._scaled_mm`` takes them. Scales are float32; their shapes say which scaling applies (or
``scaling=`` names it and the shapes are checked against it):

================ =========================== ==========================================
scaling          ``scale_a``                 ``scale_b``
================ =========================== ==========================================
``"tensor"``     one element                 one element
``"row"``        ``(M, 1)``                  ``(1, N)``
``"block"``      ``(M, ceil(K / 128))``      ``(ceil(K / 128), ceil(N / 128))``
================ =========================== ==========================================

``"block"`` is DeepSeek-V3's: ``a`` scaled per row and 128-deep group of K, ``b`` per 128 x 128 block
(``scale_b`` indexed as ``b`` is, ``(k-block, column block)``: the ``.t()`` of an ``(N / 128, K / 128)``
weight scale). Element ``(i, j)`` of the result is ``sum_k a[i, k] sa(i, k) b[k, j] sb(k, j)``
accumulated in float32 (the block scaling promotes each 128-deep k-block's wgmma result into float32
registers), plus ``bias[j]``, in ``out_dtype`` (bf16 by default; f16 or f32).

    >>> import torch
    >>> a = torch.empty(256, 512, dtype=torch.float8_e4m3fn, device="meta")
    >>> w = torch.empty(384, 512, dtype=torch.float8_e4m3fn, device="meta")
    >>> scales(a, w.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta"))
    'block'
"""
from __future__ import annotations

import torch
from torch import Tensor

from tirxpy.ir.dtype import from_torch
from tirxpy.lang.schedule import cdiv

from .checks import aligned, aligned_input, dense_tensor, misalignment, overlaps
from .errors import KernelConfigError, shown
from .gemm_api import GemmArgumentError, _device, _sm_count, _tile
from .gemm_fp8_plan import BLOCK_SCALE, FP8_DTYPES, choose_block_tile
from .gemm_plan import OUT_DTYPES, TARGET, check_config, check_options
from .gemm_sm90 import gemm_sm90
from .launch_cache import LaunchCache, compiled

TUNING = ("BN", "STAGES", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "PART", "PASS", "sms")
_SCALINGS = ("tensor", "row", "block")
_FAST = LaunchCache("gemm_fp8")
# (_key, the tensors' data pointers) -> the kernel's BoundLaunch, for calls whose tensors go to it as they are
_BOUND = LaunchCache("gemm_fp8 bound launches")
_DUMMY: dict = {}


class Fp8ArgumentError(GemmArgumentError):
    """A bad argument to :func:`gemm_fp8` (operand dtype, layout, scale shape or dtype, option)."""


def _expected(scaling, M, N, K):
    """``(scale_a shape, scale_b shape)`` of ``scaling`` for an ``(M, K) @ (K, N)`` product."""
    kb = cdiv(K, BLOCK_SCALE)
    return {"tensor": ((1,), (1,)), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, cdiv(N, BLOCK_SCALE)))}[scaling]


def _matches(t, shape):
    return t.numel() == 1 if shape == (1,) else tuple(t.shape) == shape


def scales(a, b, scale_a, scale_b, scaling=None) -> str:
    """The scaling of these operands: ``scaling`` checked against the scales' shapes, or (None) the one their
    shapes name (module docstring's table); :class:`Fp8ArgumentError` naming the shapes expected."""
    M, K = a.shape
    N = b.shape[1]
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(s, torch.Tensor) or s.layout != torch.strided or s.is_nested:
            raise Fp8ArgumentError(f"gemm_fp8: {name} must be a dense float32 torch.Tensor, got {type(s).__name__}")
        if s.dtype != torch.float32:
            raise Fp8ArgumentError(f"gemm_fp8: {name} has dtype {s.dtype}; scales are torch.float32 "
                                   f"({name}.float())")
    if scaling is not None and not any(type(scaling) is str and scaling == x for x in _SCALINGS):
        raise Fp8ArgumentError(f"gemm_fp8: scaling must be one of {_SCALINGS} or None (read from the scales' "
                               f"shapes), got {shown(scaling, 60)}")
    table = "; ".join(f"{s!r}: scale_a {_expected(s, M, N, K)[0]}, scale_b {_expected(s, M, N, K)[1]}"
                      for s in _SCALINGS)
    for s in ((scaling,) if scaling is not None else _SCALINGS):
        sa, sb = _expected(s, M, N, K)
        if _matches(scale_a, sa) and _matches(scale_b, sb) and scale_a.dim() <= 2 and scale_b.dim() <= 2:
            return s
    got = f"scale_a {tuple(scale_a.shape)}, scale_b {tuple(scale_b.shape)}"
    if scaling is not None:
        sa, sb = _expected(scaling, M, N, K)
        raise Fp8ArgumentError(f"gemm_fp8: scaling={shown(scaling)} for a ({M}, {K}) @ ({K}, {N}) product takes "
                               f"scale_a of shape {sa} and scale_b {sb} (one element each: 'tensor'); got {got}")
    raise Fp8ArgumentError(f"gemm_fp8: the scales' shapes ({got}) name no scaling of a ({M}, {K}) @ ({K}, {N}) "
                           f"product; one of {table}")


def _check(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning):
    """``(M, N, K, out_dtype, scaling)`` once every argument but the device is right."""
    for name, t in (("a", a), ("b", b)):
        dense_tensor("gemm_fp8", name, t, 2, "(a matrix)", Fp8ArgumentError)
        if from_torch(t.dtype) is None or from_torch(t.dtype).name not in FP8_DTYPES:
            raise Fp8ArgumentError(f"gemm_fp8: {name} has dtype {t.dtype}; it takes torch.float8_e4m3fn or "
                                   f"torch.float8_e5m2 (tirxpy_kernels.quantize_fp8 makes them from bf16)")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise Fp8ArgumentError(f"gemm_fp8: shapes do not chain: a {tuple(a.shape)} @ b {tuple(b.shape)} "
                               f"(a.shape[1] = {K} != b.shape[0] = {K2}); pass the weight w (N, K) as w.t()")
    if min(M, N, K) == 0:
        raise Fp8ArgumentError(f"gemm_fp8: empty problem a {tuple(a.shape)} @ b {tuple(b.shape)}")
    if not a.is_contiguous():
        raise Fp8ArgumentError(f"gemm_fp8: a must be row-major (M, K) (FP8 wgmma reads it K-major); got strides "
                               f"{a.stride()}: pass a.contiguous()")
    if not b.t().is_contiguous():
        raise Fp8ArgumentError(f"gemm_fp8: b must be (K, N) column-major, the .t() of a row-major (N, K) weight "
                               f"(FP8 wgmma reads it K-major); got strides {b.stride()}: pass b.t().contiguous().t()")
    scaling = scales(a, b, scale_a, scale_b, scaling)
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise Fp8ArgumentError(f"gemm_fp8: out_dtype must be a torch.dtype (torch.bfloat16, torch.float16 or "
                               f"torch.float32), got {shown(out_dtype, 60)}")
    if out is not None:
        dense_tensor("gemm_fp8", "out", out, 2, "(a matrix)", Fp8ArgumentError)
        if tuple(out.shape) != (M, N) or not out.is_contiguous():
            raise Fp8ArgumentError(f"gemm_fp8: out must be a contiguous ({M}, {N}) tensor, got shape "
                                   f"{tuple(out.shape)}, strides {out.stride()}")
        if out_dtype is not None and out_dtype != out.dtype:
            raise Fp8ArgumentError(f"gemm_fp8: out_dtype={out_dtype} but out is {out.dtype}; pass one of them")
        out_dtype = out.dtype
    out_dtype = out_dtype or torch.bfloat16
    if from_torch(out_dtype) is None or from_torch(out_dtype).name not in OUT_DTYPES:
        raise Fp8ArgumentError(f"gemm_fp8: out_dtype {out_dtype} must be torch.bfloat16, torch.float16 or torch.float32")
    if bias is not None:
        dense_tensor("gemm_fp8", "bias", bias, 1, f"of shape ({N},), one value per output column", Fp8ArgumentError)
        if tuple(bias.shape) != (N,) or not bias.is_floating_point():
            raise Fp8ArgumentError(f"gemm_fp8: bias must be a floating-point tensor of shape ({N},), got "
                                   f"{tuple(bias.shape)} {bias.dtype}")
    unknown = sorted(map(str, set(tuning) - set(TUNING)))
    if unknown:
        raise Fp8ArgumentError(f"gemm_fp8: unknown tuning argument(s) {unknown}; the kernel takes {TUNING}")
    try:
        check_options(**{k: v for k, v in tuning.items() if not (k == "sms" and v is None)})
    except KernelConfigError as e:
        raise Fp8ArgumentError("gemm_fp8: " + str(e).removeprefix("gemm_sm90: ")) from None
    _addresses(out, a, b, scale_a, scale_b, bias)
    return M, N, K, out_dtype, scaling


def _padded(M, N, K, out_dtype, BN):
    """The kernel's problem: K padded to 16 bytes (TMA rows), N to 16 bytes of output, each at least one tile."""
    per = 16 // torch.empty((), dtype=out_dtype).element_size()     # output elements in 16 bytes
    return max(M, 128), max(cdiv(N, per) * per, BN), max(cdiv(K, 16) * 16, 128)


def _plan(M, N, K, out_dtype, scaling, bias, tuning, sms):
    """The kernel options for this problem: the block scaling's cooperative tile of
    :func:`tirxpy_kernels.gemm_fp8_plan.choose_block_tile`, otherwise the 16-bit kernel's tile choice for the same
    bytes per k-block (``K / 2``)."""
    tuning = dict(tuning)
    if scaling == "block":
        tuning.setdefault("BN", choose_block_tile(M, N, K, sms))
        tuning.setdefault("PINGPONG", False)
        return tuning
    return _tile(tuning, M, N, cdiv(K, 2), sms, "K", bias, None, from_torch(out_dtype).name)


def _pad2(t, rows, cols):
    """``t`` zero-padded to ``(rows, cols)`` (FP8 through its bytes), or ``t`` when it has that shape."""
    if tuple(t.shape) == (rows, cols):
        return t
    p = torch.zeros((rows, cols), dtype=t.dtype, device=t.device)
    p[:t.shape[0], :t.shape[1]] = t
    return p


def _scale_args(scaling, scale_a, scale_b, M, N, K, Mk, Nk, Kk):
    """``(SA, SB)`` as the kernel takes them (:func:`tirxpy_kernels.gemm_sm90.scale_shapes`)."""
    if scaling == "tensor":
        return scale_a.reshape(1, 1), scale_b.reshape(1, 1)
    if scaling == "row":      # the kernel reads them dense: a strided view (a column of a wider tensor) is copied
        return _pad2(scale_a.reshape(M, 1).contiguous(), Mk, 1), _pad2(scale_b.reshape(1, N).contiguous(), 1, Nk)
    kb = cdiv(Kk, 128)
    sa = torch.zeros((kb, cdiv(Mk, 4) * 4), dtype=torch.float32, device=scale_a.device)
    sa[:scale_a.shape[1], :M] = scale_a.t()
    nb = cdiv(Nk, BLOCK_SCALE)
    if tuple(scale_b.shape) == (kb, nb) and scale_b.is_contiguous():
        return sa, scale_b
    sb = torch.zeros((kb, nb), dtype=torch.float32, device=scale_b.device)
    sb[:scale_b.shape[0], :scale_b.shape[1]] = scale_b
    return sa, sb


def _bias_arg(bias, out_dtype, N, Nk, device):
    if bias is None:
        key = (device, out_dtype)
        if key not in _DUMMY:
            _DUMMY[key] = torch.zeros((1, 1), dtype=out_dtype, device=device)
        return _DUMMY[key]
    b = bias.to(out_dtype).reshape(1, N)
    return _pad2(b, 1, Nk) if Nk != N else b.contiguous()


def check(a, b, scale_a, scale_b, out=None, *, bias=None, out_dtype=None, scaling=None, **tuning) -> None:
    """Every check :func:`gemm_fp8` makes of these arguments but the device's (meta tensors work)."""
    M, N, K, out_dtype, scaling = _check(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning)
    sms = tuning.pop("sms", None) or _sm_count(a.device)
    _checked_plan(M, N, K, a, out_dtype, scaling, bias is not None, tuning, sms)


def _checked_plan(M, N, K, a, out_dtype, scaling, bias, tuning, sms):
    """``(options, Mk, Nk, Kk)``: the kernel's options and padded problem, checked by
    :func:`tirxpy_kernels.gemm_plan.check_config` (its errors re-raised as :class:`Fp8ArgumentError`)."""
    try:
        check_options(**tuning, sms=sms)
        planned = _plan(M, N, K, out_dtype, scaling, bias, tuning, sms)
        Mk, Nk, Kk = _padded(M, N, K, out_dtype, planned["BN"])
        check_config(Mk, Nk, Kk, dtype=from_torch(a.dtype).name, out_dtype=from_torch(out_dtype).name, bias=bias,
                     sms=sms, scaling=scaling, **planned)
    except KernelConfigError as e:
        raise Fp8ArgumentError("gemm_fp8: " + str(e).removeprefix("gemm_sm90: ")) from None
    return planned, Mk, Nk, Kk


def kernel_for(M, N, K, scaling, dtype=None, out_dtype=None, bias=False, sms=TARGET.sm_count, b_dtype=None,
               **tuning):
    """``(kernel, Mk, Nk, Kk)``: the :func:`tirxpy_kernels.gemm_sm90.gemm_sm90` kernel :func:`gemm_fp8` launches
    for an ``M x N x K`` product of ``dtype`` operands (default e4m3; ``b_dtype``: B's, default ``dtype``) into
    ``out_dtype`` (default bf16), and the padded problem it is built for."""
    a = torch.empty(0, dtype=dtype or torch.float8_e4m3fn, device="meta")
    out_dtype = out_dtype or torch.bfloat16
    planned, Mk, Nk, Kk = _checked_plan(M, N, K, a, out_dtype, scaling, bias, tuning, sms)
    k = gemm_sm90(Mk, Nk, Kk, dtype=from_torch(a.dtype).name, out_dtype=from_torch(out_dtype).name, bias=bias,
                  sms=sms, scaling=scaling, b_dtype=from_torch(b_dtype or a.dtype).name, **planned)
    return k, Mk, Nk, Kk


def _direct(sc, scale_a, scale_b, bias, odt, M, N, K, Mk, Nk, Kk):
    """Whether a call with these (checked) arguments hands every tensor to the kernel as it is (no padding, no
    copy of a scale or the bias), where its inputs start on 16-byte boundaries (:func:`_in_place`, a property of
    each call's addresses): then a call like it with the same addresses launches a bound launch. The
    block scaling's ``scale_a`` must be an ``(M, KB)`` view of a row-major ``(KB, M)`` tensor (``M`` a multiple
    of 4), ``scale_b`` a row-major ``(KB, NB)`` one."""
    if (Mk, Nk, Kk) != (M, N, K) or (bias is not None and (bias.dtype != odt or not bias.is_contiguous())):
        return False
    if sc == "tensor":
        return True
    if sc == "row":
        return scale_a.is_contiguous() and scale_b.is_contiguous()
    return (scale_a.t().is_contiguous() and M % 4 == 0 and scale_b.is_contiguous()
            and tuple(scale_b.shape) == (cdiv(K, BLOCK_SCALE), cdiv(N, BLOCK_SCALE)))


def _direct_scales(sc, scale_a, scale_b):
    if sc == "tensor":
        return scale_a.reshape(1, 1), scale_b.reshape(1, 1)
    if sc == "row":
        return scale_a, scale_b
    return scale_a.t(), scale_b


def _key(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning):
    """The exact key of a checked call like this one (every tensor's layout kind, shape, strides, dtype and device;
    the options with their types), or None when an argument is not a tensor or an option is unhashable (then the
    full checks run). Keys are stored only for calls the full checks accepted. Written out flat: every repeated
    call computes it."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and isinstance(scale_a, Tensor)
            and isinstance(scale_b, Tensor) and (out is None or isinstance(out, Tensor))
            and (bias is None or isinstance(bias, Tensor))):
        return None
    try:
        key = (a.layout, a.shape, a.stride(), a.dtype, a.device, b.layout, b.shape, b.stride(), b.dtype, b.device,
               scale_a.layout, scale_a.shape, scale_a.stride(), scale_a.dtype, scale_a.device,
               scale_b.layout, scale_b.shape, scale_b.stride(), scale_b.dtype, scale_b.device, out_dtype, scaling,
               None if out is None else (out.layout, out.shape, out.stride(), out.dtype, out.device),
               None if bias is None else (bias.layout, bias.shape, bias.stride(), bias.dtype, bias.device),
               tuple(sorted((k, type(v), v) for k, v in tuning.items())) if tuning else ())
        hash(key)
    except Exception:    # a tensor without sizes / strides (nested, sparse), an option that does not hash: full checks
        return None
    return key


def _bound_key(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning):
    """The exact key of a call with these tensors at these addresses (each tensor's address, shape, strides, dtype
    and device index; the options with their types), or None when an argument is not a tensor or has no address
    or strides. Under CUDA's unified address space an address belongs to one device, and a tensor of another
    layout than strided has no strides. Written out flat and hashed once: every repeated call computes it."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and isinstance(scale_a, Tensor)
            and isinstance(scale_b, Tensor) and isinstance(out, Tensor) and (bias is None or isinstance(bias, Tensor))):
        return None
    try:
        return (a.data_ptr(), a.shape, a.stride(), a.dtype, a.get_device(),
                b.data_ptr(), b.shape, b.stride(), b.dtype, b.get_device(),
                scale_a.data_ptr(), scale_a.shape, scale_a.stride(), scale_a.dtype, scale_a.get_device(),
                scale_b.data_ptr(), scale_b.shape, scale_b.stride(), scale_b.dtype, scale_b.get_device(),
                out.data_ptr(), out.shape, out.stride(), out.dtype, out.get_device(),
                None if bias is None else (bias.data_ptr(), bias.shape, bias.stride(), bias.dtype, bias.get_device()),
                out_dtype, scaling, tuple(sorted((k, type(v), v) for k, v in tuning.items())) if tuning else ())
    except (RuntimeError, TypeError):    # no storage or strides (fake, nested, sparse), options that do not sort
        return None


def _bound(bk):
    """The bound launch stored under ``bk``, or None (also for a key holding an unhashable option)."""
    if bk is None:
        return None
    try:
        return _BOUND.get(bk)
    except TypeError:
        return None


def _planned_call(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning):
    """Every check of the arguments, then the kernel: the cache entry of calls like this one."""
    M, N, K, odt, sc = _check(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning)
    opts = dict(tuning)
    sms = opts.pop("sms", None) or _sm_count(a.device)
    # the plan for this problem, checked on any device (an H100's SM count off a GPU), then the device
    k, Mk, Nk, Kk = kernel_for(M, N, K, sc, a.dtype, odt, bias is not None, sms, b.dtype, **opts)
    try:
        dev = _device(a, b, out, bias)
    except GemmArgumentError as e:
        raise Fp8ArgumentError("gemm_fp8: " + str(e).removeprefix("gemm: ")) from None
    if scale_a.device != dev or scale_b.device != dev:
        raise Fp8ArgumentError(f"gemm_fp8: scale_a and scale_b must be on {dev} with the operands, got "
                               f"{scale_a.device} and {scale_b.device}")
    direct = _direct(sc, scale_a, scale_b, bias, odt, M, N, K, Mk, Nk, Kk)
    return compiled(k, TARGET), M, N, K, Mk, Nk, Kk, odt, sc, direct


def _in_place(a, b, scale_a, scaling):
    """Whether the kernel can read (checked) inputs in place with TMA: ``a``, ``b`` and the block scaling's
    ``scale_a`` each start on a 16-byte boundary (:func:`~tirxpy_kernels.checks.misalignment`). The other scales
    are read by plain loads, which take any float32 address."""
    return not (misalignment("gemm_fp8", "a", a, Fp8ArgumentError) or misalignment("gemm_fp8", "b", b, Fp8ArgumentError)
                or (scaling == "block" and misalignment("gemm_fp8", "scale_a", scale_a, Fp8ArgumentError)))


def _addresses(out, a, b, scale_a, scale_b, bias):
    """Refuse a (checked) ``out`` the kernel cannot write in place: off a 16-byte boundary
    (:func:`~tirxpy_kernels.checks.aligned`: its TMA stores write the caller's tensor, so no copy can stand in), or
    sharing memory with an input (the kernel would read what it already wrote)."""
    if out is None:
        return
    aligned("gemm_fp8", "out", out, Fp8ArgumentError, 16, "a freshly allocated out (or out=None)")
    for name, t in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias)):
        if t is not None and overlaps(out, t):
            raise Fp8ArgumentError(f"gemm_fp8: out shares memory with {name}, which the kernel reads while it writes "
                                   "out; pass a separate out tensor (or out=None)")


def _operands(a, b, M, N, K, Mk, Nk, Kk):
    """``(A, B)``: ``a`` and ``b`` as the kernel reads them, ``(Mk, Kk)`` and ``(Nk, Kk)`` row-major (``B`` is
    ``b.t()``): zero-padded copies where the kernel's problem is larger, else the tensors themselves, each an
    aligned copy where it starts off a 16-byte boundary (:func:`~tirxpy_kernels.checks.aligned_input`).

        >>> x = torch.zeros(2 * 128 * 128 + 16).to(torch.float8_e4m3fn)
        >>> a, w = x[1:1 + 128 * 128].view(128, 128), x[16:16 + 128 * 128].view(128, 128)
        >>> A, B = _operands(a, w.t(), 128, 128, 128, 128, 128, 128)
        >>> A.data_ptr() % 16, A.stride(), B.data_ptr() == w.data_ptr()
        (0, (128, 1), True)
    """
    if (Mk, Kk) != (M, K):
        A = _pad2(a.view(torch.uint8), Mk, Kk).view(a.dtype)
    else:
        A = aligned_input("gemm_fp8", "a", a, Fp8ArgumentError)
    if (Nk, Kk) != (N, K):
        return A, _pad2(b.t().view(torch.uint8), Nk, Kk).view(b.dtype)
    return A, aligned_input("gemm_fp8", "b", b, Fp8ArgumentError).t()


def gemm_fp8(a, b, scale_a, scale_b, out=None, *, bias=None, out_dtype=None, scaling=None, **tuning):
    """``(a * scale_a) @ (b * scale_b) + bias`` in ``out_dtype`` (default bf16) on a Hopper GPU; the module
    docstring gives the operand layouts and the scalings. ``tuning`` goes to
    :func:`tirxpy_kernels.gemm_sm90.gemm_sm90` (``BN``, ``STAGES``, ``group``, ``DEFER``, ``PINGPONG``,
    ``PDL``, ``SPLIT``, ``sms``; for the block scaling also ``PART`` and ``PASS``,
    :func:`tirxpy_kernels.gemm_fp8_plan.block_part` and :func:`tirxpy_kernels.gemm_fp8_plan.check_pass`); by default the
    per-tensor and row-wise scalings take the 16-bit GEMM's tile choice and the block scaling
    :func:`tirxpy_kernels.gemm_fp8_plan.choose_block_tile`'s width (128 or 192).

    A call like an earlier checked one (shapes, strides, dtypes, device, options) skips the checks and the
    planning; where every tensor goes to the kernel as it is (:func:`_direct`: no padding, scales in the
    kernel's layout; :func:`_in_place`: ``a``, ``b`` and the block scaling's ``scale_a`` on 16-byte boundaries)
    and the addresses are those of an earlier call too, it launches the arguments packed then
    (:mod:`tirxpy_kernels.launch_cache`). The block scaling reads ``scale_a`` group-major: an ``(M, KB)`` view
    of a row-major ``(KB, M)`` tensor (``t.t()``) goes to the kernel as it is, any other is copied; the row
    scaling's scales are copied unless they are dense.

    The inputs may start at any address: ``a``, ``b`` or the block scaling's ``scale_a`` off a 16-byte boundary
    (a view at an odd offset) is copied to an aligned tensor, as the kernel's TMA loads need one (the other scales
    are read by plain loads, at any address). ``out`` is written in place, so it must start on a 16-byte boundary
    (:class:`Fp8ArgumentError` names it before the device: pass a freshly allocated ``out``, or None). Forward
    only: inputs that require grad are read as values and the result records no autograd graph."""
    if out is not None:      # the same call, addresses included: its bound launch, if any
        bl = _bound(_bound_key(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning))
        if bl is not None:
            bl()
            return out
    key = _key(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning)
    hit = _FAST.get(key)
    if hit is None:
        hit = _planned_call(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning)
        _FAST.put(key, hit)
    ck, M, N, K, Mk, Nk, Kk, odt, sc, direct = hit
    # forward only: inputs that require grad (a bias that is a Parameter) are read as values
    a, b, scale_a, scale_b, bias = (t.detach() if t is not None and t.requires_grad else t
                                    for t in (a, b, scale_a, scale_b, bias))
    if direct and key is not None:
        if out is None:
            out = torch.empty((M, N), dtype=odt, device=a.device)
        bk = _bound_key(a, b, scale_a, scale_b, out, bias, out_dtype, scaling, tuning)
        bl = _bound(bk)
        if bl is None and _in_place(a, b, scale_a, sc):        # new addresses: checked once, then bound
            _addresses(out, a, b, scale_a, scale_b, bias)
            SA, SB = _direct_scales(sc, scale_a, scale_b)
            bl = ck.bind(a, b.t(), SA, SB, _bias_arg(bias, odt, N, Nk, a.device), out)
            if bk is not None:
                _BOUND.put(bk, bl)
        if bl is not None:
            bl()
            return out
        # an input off a 16-byte boundary: launched below on an aligned copy
    _addresses(out, a, b, scale_a, scale_b, bias)
    A, B = _operands(a, b, M, N, K, Mk, Nk, Kk)
    SA, SB = _scale_args(sc, scale_a, scale_b, M, N, K, Mk, Nk, Kk)
    fits = out is not None and (Mk, Nk) == (M, N)
    dst = out if fits else torch.empty((Mk, Nk), dtype=odt, device=a.device)
    ck(A, B, SA, SB, _bias_arg(bias, odt, N, Nk, a.device), dst)
    if fits or (Mk, Nk) == (M, N):
        return dst
    res = dst[:M, :N]
    if out is not None:
        out.copy_(res)
        return out
    return res.contiguous()
