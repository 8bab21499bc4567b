"""``tirxpy_kernels.gemm(a, b, out=None, ...)``: ``act(a @ b + bias)`` on torch tensors with the Hopper
kernel of :mod:`tirxpy_kernels.gemm_sm90`.

Checks its arguments first (typed errors that say what to change), then maps the operands onto
the kernel without copies where it can: a row-major ``a`` is read K-major, a column-major one
(``a.T`` contiguous) MN-major; ``b`` likewise (``w.t()`` of an ``nn.Linear`` weight is the K-major
case). Rows that are not a multiple of 16 bytes (TMA's rule) are padded with zeros along K, or the
operand is made contiguous the other way; the output is computed into a padded buffer when its
rows are misaligned. An input whose data starts off a 16-byte boundary (TMA's other rule; a view at an odd
offset) is copied to one; an ``out`` off it is refused, as the kernel writes the caller's tensor in place.
"""
from __future__ import annotations

import contextlib

import torch
from torch import Tensor

from tirxpy.errors import ArgumentError, TirxError
from tirxpy.ir.dtype import from_torch

from .checks import aligned, aligned_input, dense_tensor, misalignment, overlaps
from .errors import KernelConfigError, shown
from .gemm_plan import (ACTIVATIONS, GROUP, IN_DTYPES, OUT_DTYPES, TARGET, balanced_split, check_config, check_options,
                        choose_tile, splittable)
from .gemm_sm90 import gemm_sm90
from .launch_cache import LaunchCache, compiled

_DUMMY: dict = {}
# _fast_key -> (compiled kernel, how a and b are handed to it): a checked call's launch, for calls like it
_FAST = LaunchCache("gemm")
# (_fast_key, data pointers of a, b, out, bias) -> the kernel's BoundLaunch (tirxpy.lower.bound_launch): the
# arguments packed once (tirxpy_kernels.launch_cache says why the key is exact)
_BOUND = LaunchCache("gemm bound launches")


def _bias_arg(bias, out_dtype, device):
    if bias is not None:
        return bias.to(out_dtype).contiguous().reshape(1, -1)
    key = (device, out_dtype)
    t = _DUMMY.get(key)
    if t is None:
        t = _DUMMY[key] = torch.zeros((1, 1), dtype=out_dtype, device=device)
    return t


class GemmArgumentError(ArgumentError):
    """A bad argument to :func:`gemm` (wrong type, dtype, shape, device or layout)."""


class GemmDeviceError(TirxError, RuntimeError):
    """The GPU cannot run this kernel (it needs Hopper, sm_90)."""


TUNING = ("BN", "STAGES", "CM", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "sms")


def check_dtype(where, name, t):
    """GemmArgumentError unless the tensor ``t`` (the caller's argument ``name`` of ``where``) has a dtype the 16-bit
    kernel takes (:data:`~tirxpy_kernels.gemm_plan.IN_DTYPES`): the one home of that rule for :func:`gemm` and the
    functions built on it (``mlp``), so each names its own argument.

        >>> import torch
        >>> check_dtype("mlp", "x", torch.empty(2, 2, dtype=torch.int32, device="meta"))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.gemm_api.GemmArgumentError: mlp: x has dtype torch.int32; the kernel takes torch.bfloat16 or torch.float16 inputs (convert with x.to(torch.bfloat16))
    """
    if not isinstance(t, torch.Tensor):
        raise GemmArgumentError(f"{where}: {name} must be a tensor, got {shown(t, 60)} ({type(t).__name__})")
    if from_torch(t.dtype) not in IN_DTYPES:
        raise GemmArgumentError(f"{where}: {name} has dtype {t.dtype}; the kernel takes torch.bfloat16 or "
                                f"torch.float16 inputs (convert with {name}.to(torch.bfloat16))")


def _check(a, b, out, bias, activation, out_dtype, tuning, gate=None):
    """``(M, N, K, out_dtype)`` once every argument is right as far as its metadata tells: the tensors' kinds,
    dtypes and shapes, then the options (:data:`TUNING` names, each option's kind and range: :func:`check_tuning`).
    It reads no device, data pointer or plan, so the fakes of ``torch.ops.tirxpy.gemm`` and ``mlp`` (under
    FakeTensorMode, shapes possibly symbolic) run it as :func:`gemm` does; :func:`_checked` then checks the addresses
    and the plan the options make for this problem, and :func:`_device` the device."""
    for name, t in (("a", a), ("b", b)):
        dense_tensor("gemm", name, t, 2, "(a matrix)", GemmArgumentError)
        check_dtype("gemm", name, t)
    if a.dtype != b.dtype:
        raise GemmArgumentError(f"gemm: a is {a.dtype} and b is {b.dtype}; convert both to one dtype")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise GemmArgumentError(f"gemm: shapes do not chain: a {tuple(a.shape)} @ b {tuple(b.shape)} "
                                f"(a.shape[1] = {K} != b.shape[0] = {K2}); pass b.T if b is stored (N, K)")
    if min(M, N, K) == 0:
        raise GemmArgumentError(f"gemm: empty problem a {tuple(a.shape)} @ b {tuple(b.shape)}")
    if not any(type(activation) is type(x) and activation == x for x in ACTIVATIONS):
        raise GemmArgumentError(f"gemm: activation must be one of {ACTIVATIONS}, got {shown(activation, 60)}")
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise GemmArgumentError(f"gemm: out_dtype must be a torch.dtype (torch.bfloat16, torch.float16 or "
                                f"torch.float32) or None, got {shown(out_dtype, 60)} ({type(out_dtype).__name__})")
    if out is not None:
        dense_tensor("gemm", "out", out, 2, "(a matrix)", GemmArgumentError)
        if tuple(out.shape) != (M, N):
            raise GemmArgumentError(f"gemm: out has shape {tuple(out.shape)}, the product is ({M}, {N})")
        if from_torch(out.dtype) not in OUT_DTYPES:
            raise GemmArgumentError(f"gemm: out has dtype {out.dtype}; it must be bfloat16, float16 or float32")
        if out_dtype is not None and out_dtype != out.dtype:
            raise GemmArgumentError(f"gemm: out_dtype={out_dtype} but out is {out.dtype}; pass one of them")
        if not out.is_contiguous():
            raise GemmArgumentError("gemm: out must be contiguous (row-major); pass a fresh tensor or None")
        out_dtype = out.dtype
    out_dtype = out_dtype or a.dtype
    if from_torch(out_dtype) not in OUT_DTYPES:
        raise GemmArgumentError(f"gemm: out_dtype {out_dtype} must be torch.bfloat16, torch.float16 or torch.float32")
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise GemmArgumentError(f"gemm: bias must be a tensor of shape ({N},) (one value per output column), "
                                    f"got {type(bias).__name__}")
        dense_tensor("gemm", "bias", bias, 1, f"of shape ({N},), one value per output column", GemmArgumentError)
        if tuple(bias.shape) != (N,):
            raise GemmArgumentError(f"gemm: bias must be a tensor of shape ({N},) (one value per output column), "
                                    f"got {tuple(bias.shape)}")
        if not bias.is_floating_point():
            raise GemmArgumentError(f"gemm: bias must be floating point, got {bias.dtype}")
    if gate is not None:
        _check_gate(gate, M, N, out_dtype)
    check_tuning(tuning)
    return M, N, K, out_dtype


def _check_gate(gate, M, N, out_dtype):
    """``gate``: a contiguous ``(M, N)`` tensor of the output's dtype (its values decide which outputs are zero)."""
    if not isinstance(gate, torch.Tensor):
        raise GemmArgumentError(f"gemm: gate must be a tensor of shape ({M}, {N}) (the output's), got "
                                f"{type(gate).__name__}")
    dense_tensor("gemm", "gate", gate, 2, f"of shape ({M}, {N}), the output's", GemmArgumentError)
    if tuple(gate.shape) != (M, N):
        raise GemmArgumentError(f"gemm: gate has shape {tuple(gate.shape)}; it must have the output's shape ({M}, {N})")
    if gate.dtype != out_dtype:
        raise GemmArgumentError(f"gemm: gate is {gate.dtype} and the output {out_dtype}; the kernel reads the gate in "
                                f"the output's dtype: pass gate.to({out_dtype}) (or the matching out_dtype)")
    if not gate.is_contiguous():
        raise GemmArgumentError("gemm: gate must be contiguous (row-major, like the output); pass gate.contiguous()")


def check_tuning(tuning: dict) -> None:
    """The tuning options of :func:`gemm` on their own: known names (:data:`TUNING`) and each option's kind
    and range (:func:`tirxpy_kernels.gemm_plan.check_options`); :class:`GemmArgumentError` naming the first bad one.

        >>> check_tuning({"BN": 192, "PINGPONG": True})
        >>> check_tuning({"BM": 128})
        Traceback (most recent call last):
        ...
        tirxpy_kernels.gemm_api.GemmArgumentError: gemm: unknown tuning argument(s) ['BM']; the kernel takes ('BN', 'STAGES', 'CM', 'group', 'DEFER', 'PINGPONG', 'PDL', 'SPLIT', 'sms')
    """
    if not isinstance(tuning, dict):
        raise GemmArgumentError(f"gemm: tuning must be a dict of option names to values, got {shown(tuning, 60)}")
    unknown = sorted(k if type(k) is str else shown(k, 40) for k in set(tuning) - set(TUNING))
    if unknown:
        raise GemmArgumentError(f"gemm: unknown tuning argument(s) {unknown}; the kernel takes {TUNING}")
    opts = dict(tuning)
    if opts.get("sms", 1) is None:
        opts.pop("sms")                     # None: the device's SM count
    with _as_argument_error():
        check_options(**opts)


@contextlib.contextmanager
def _as_argument_error():
    """Re-raise the kernel's :class:`~tirxpy_kernels.errors.KernelConfigError` (an option or plan :func:`gemm` was given
    cannot build) as :class:`GemmArgumentError` with the same message."""
    try:
        yield
    except KernelConfigError as e:
        raise GemmArgumentError("gemm: " + str(e).removeprefix("gemm_sm90: ")) from None


def _device(a, b, out, bias, gate=None):
    """The device all the (checked) tensors are on, when it can run the kernel: one CUDA device, a Hopper GPU."""
    devs = {t.device for t in (a, b, out, bias, gate) if t is not None}
    if len(devs) != 1:
        raise GemmArgumentError(f"gemm: all tensors must be on one device, got {sorted(map(str, devs))}")
    dev = devs.pop()
    if dev.type != "cuda":
        raise GemmArgumentError(f"gemm: tensors are on {dev}; the kernel runs on a CUDA GPU (move them with .cuda())")
    cap = torch.cuda.get_device_capability(dev)
    if not TARGET.runs_on(cap):
        raise GemmDeviceError(f"gemm: this kernel needs a Hopper GPU ({TARGET}: wgmma, setmaxnreg); {dev} is "
                              f"sm_{cap[0]}{cap[1]} ({torch.cuda.get_device_name(dev)})")
    return dev


def _aligned(n, dtype):
    return n * torch.empty((), dtype=dtype).element_size() % 16 == 0


def _orientation(t, kdim):
    """How :func:`gemm` hands operand ``t`` (K dimension ``kdim``: 1 for ``a`` ``(M, K)``, 0 for ``b`` ``(K, N)``)
    to the kernel: ``(major, transposed, copied)``. A view whose contiguous dimension has 16-byte rows goes
    as it is (K-major first); otherwise a contiguous copy, K-major unless only the other dimension is aligned."""
    row = t.stride(1) == 1 and _aligned(t.size(1), t.dtype) and t.is_contiguous()         # K-major for a
    col = t.stride(0) == 1 and _aligned(t.size(0), t.dtype) and t.t().is_contiguous()     # K-major for b
    if kdim == 1 and row:
        return "K", False, False
    if kdim == 0 and col:
        return "K", True, False
    if kdim == 1 and col:
        return "MN", True, False
    if kdim == 0 and row:
        return "MN", False, False
    if _aligned(t.size(1 - kdim), t.dtype) and not _aligned(t.size(kdim), t.dtype):
        return "MN", kdim == 1, True
    return "K", kdim == 0, True


def _major(t, kdim):
    return _orientation(t, kdim)[0]


def _operand(t, kdim):
    """(tensor handed to the kernel, major) for operand ``t`` whose K dimension is ``kdim``."""
    major, transposed, copied = _orientation(t, kdim)
    v = t.t() if transposed else t
    return (v.contiguous() if copied else v), major


def gemm(a, b, out=None, *, bias=None, activation=None, out_dtype=None, gate=None, **tuning):
    """``act(a @ b + bias)`` for ``a`` ``(M, K)`` and ``b`` ``(K, N)`` (bf16 or f16, row- or
    column-major), float32 accumulation, output ``out_dtype`` (default ``a.dtype``; bf16, f16 or
    f32) written to ``out`` when given. ``activation``: None, ``"relu"`` or ``"silu"``.
    ``gate``: a contiguous ``(M, N)`` tensor of the output's dtype; the output is 0 where ``gate <= 0`` and the
    result above elsewhere, ReLU's backward fused into the product that makes its incoming gradient:
    ``gemm(dy, w2, gate=r)`` is ``torch.where(r <= 0, 0, dy @ w2)`` (a NaN in ``gate`` passes the product).
    ``tuning`` goes to :func:`tirxpy_kernels.gemm_sm90.gemm_sm90` (``BN``, ``STAGES``, ``CM``, ``group``, ``DEFER``,
    ``PINGPONG``, ``PDL``, ``SPLIT``, ``sms``; its docstring says what each does and when the defaults choose
    it); without ``BN`` the tile width and the schedule are :func:`tirxpy_kernels.gemm_plan.choose_tile`'s (ping-pong
    at N = 2112, for example; no wider than :func:`tirxpy_kernels.gemm_plan.widest_bn` allows for the epilogue), a
    cooperative 256 with :func:`tirxpy_kernels.gemm_plan.balanced_split`'s ``SPLIT`` where that deals the tiles more
    evenly (4096^3, 8192^3).

    ``a``, ``b`` and ``gate`` may start at any address: one off a 16-byte boundary (a view at an odd offset,
    ``x[1:].view(M, K)``) is copied to an aligned tensor first, as the kernel's TMA loads need one.

    A call like an earlier checked one (the same shapes, strides, dtypes, device and options) whose inputs the
    kernel reads in place skips the checks and the planning, and with the same tensor addresses too it launches
    the arguments packed then (:mod:`tirxpy_kernels.launch_cache`); an input off the 16-byte boundary takes the
    full path, which copies it.

    Every argument is checked before the device (:class:`GemmArgumentError` naming it): the tensors (dense,
    2-D, dtypes, shapes; ``out`` contiguous, starting on a 16-byte boundary as the kernel's TMA stores write it in
    place (pass a freshly allocated ``out``, or None), and sharing no memory with an input), the options and the
    plan they make for this problem; only then must the tensors be on one Hopper GPU. Forward only: inputs that
    require grad are read as values and the result records no autograd graph."""
    key = _fast_key(a, b, out, bias, activation, out_dtype, tuning, gate)
    fast = _FAST.get(key)
    if fast is not None and (bias is None or bias.device == a.device) and (gate is None or gate.device == a.device):
        res = _fast_call(fast, key, a, b, out, bias, out_dtype, gate)
        if res is not None:
            return res
    ka, kb, kg, plan = _checked(a, b, out, bias, activation, out_dtype, tuning, gate)
    _device(a, b, out, bias, gate)
    return _full_call(a, b, out, bias, activation, tuning, gate, key, ka, kb, kg, plan)


def _fast_call(fast, key, a, b, out, bias, out_dtype, gate):
    """The launch of a call whose key (:func:`_fast_key`) an earlier checked call stored (``fast``: its kernel and
    how ``a`` and ``b`` go to it), or None when an input is off a 16-byte boundary (:func:`_in_place`): the full
    path copies it. With the addresses of an earlier such call too it launches the arguments packed then (no
    checks, the driver call alone); new addresses are checked once (:func:`_in_place`, :func:`_addresses`) before
    they are bound."""
    ck, fa, fb = fast      # same shapes, layouts and dtypes as an earlier call: checked then
    if out is None:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype or a.dtype, device=a.device)
    g = () if gate is None else (gate,)
    if bias is not None and (bias.dtype != out.dtype or not bias.is_contiguous()):
        if not _in_place(a, b, gate):
            return None
        _addresses(out, a, b, bias, gate)
        ck(fa(a), fb(b), _bias_arg(bias, out.dtype, a.device), *g, out)     # a converted copy: not bindable
        return out
    bk = (key, a.data_ptr(), b.data_ptr(), out.data_ptr(),
          None if bias is None else (bias.data_ptr(), bias.shape), None if gate is None else gate.data_ptr())
    bl = _BOUND.get(bk)
    if bl is None:
        if not _in_place(a, b, gate):
            return None
        _addresses(out, a, b, bias, gate)       # once per addresses: the bound entry fixes them
        bl = ck.bind(fa(a), fb(b), _bias_arg(bias, out.dtype, a.device), *g, out)
        _BOUND.put(bk, bl)
    bl()
    return out


def _full_call(a, b, out, bias, activation, tuning, gate, key, ka, kb, kg, plan):
    """The launch of a checked call (:func:`_checked`: ``ka``, ``kb``, ``kg`` are ``a``, ``b``, ``gate`` as the
    kernel reads them, aligned copies of misaligned ones; ``plan`` its problem) on padded copies where the problem
    or its rows need them. A call whose tensors went to the kernel as they are stores its launch under ``key`` for
    calls like it (:func:`_fast_call`)."""
    M, N, K, out_dtype, Mk, Nk, Kk, a_major, b_major, psms, planned = plan
    if gate is not None and not _gate_in_kernel(M, N, K, Mk, Nk):
        # a problem computed padded (smaller than a tile, or misaligned output rows): the plain product, then the mask
        res = gemm(ka, kb, None, bias=bias, activation=activation, out_dtype=out_dtype, **tuning)
        res = torch.where(gate <= 0, torch.zeros((), dtype=res.dtype, device=res.device), res)
        return out.copy_(res) if out is not None else res
    tuning = dict(tuning)
    sms = tuning.pop("sms", None)
    if M < 128 or N < 256 or K < 64:
        # a problem smaller than one tile: the TMA boxes must fit inside the tensors, so compute it
        # on zero-padded K-major copies (small, so the copies are cheap) and slice the result
        ap = torch.zeros((Mk, Kk), dtype=a.dtype, device=a.device)
        ap[:M, :K] = a
        bp = torch.zeros((Nk, Kk), dtype=b.dtype, device=b.device)
        bp[:N, :K] = b.t()
        bias_p = None
        if bias is not None:
            bias_p = torch.zeros(Nk, dtype=bias.dtype, device=bias.device)
            bias_p[:N] = bias
        if sms is not None:
            tuning["sms"] = sms
        res = gemm(ap, bp.t(), None, bias=bias_p, activation=activation, out_dtype=out_dtype, **tuning)[:M, :N]
        if out is not None:
            out.copy_(res)
            return out
        return res.contiguous()
    A, _ = _operand(ka, 1)
    B, _ = _operand(kb, 0)
    Kp, Np = Kk, Nk
    if Kp != K:
        A = torch.nn.functional.pad(A, (0, Kp - K)) if a_major == "K" else torch.nn.functional.pad(A, (0, 0, 0, Kp - K))
        B = torch.nn.functional.pad(B, (0, Kp - K)) if b_major == "K" else torch.nn.functional.pad(B, (0, 0, 0, Kp - K))
    if Np != N:     # the kernel's N is Np: zero rows of B^T give zero columns, sliced off below
        B = torch.nn.functional.pad(B, (0, 0, 0, Np - N)) if b_major == "K" else torch.nn.functional.pad(B, (0, Np - N))
    dst = out if out is not None and Np == N else torch.empty((M, Np), dtype=out_dtype, device=a.device)
    bias_t = _bias_arg(bias, out_dtype, a.device)
    if bias is not None and Np != N:
        bias_t = torch.nn.functional.pad(bias_t, (0, Np - N))
    k = gemm_sm90(M, Np, Kp, a_major=a_major, b_major=b_major, dtype=from_torch(a.dtype).name,
                  out_dtype=from_torch(out_dtype).name, bias=bias is not None, activation=activation, sms=psms,
                  gate=gate is not None, **planned)
    ck = compiled(k, TARGET)
    ck(A, B, bias_t, *(() if gate is None else (kg,)), dst)
    if Kp == K and Np == N and (out is None or dst is out) and kg is gate:
        # no padding or copies were needed: later calls like this one skip the checks and planning
        same_a, same_b = A.data_ptr() == a.data_ptr(), B.data_ptr() == b.data_ptr()
        fa = (lambda t: t) if A is a else (lambda t: t.t()) if a_major == "MN" and same_a else None
        fb = (lambda t: t) if B is b else (lambda t: t.t()) if b_major == "K" and same_b else None
        if fa is not None and fb is not None and key is not None:
            _FAST.put(key, (ck, fa, fb))
    if dst is out:
        return out
    res = dst[:, :N]
    if out is not None:
        out.copy_(res)
        return out
    return res if Np == N else res.contiguous()


def check(a, b, out=None, *, bias=None, activation=None, out_dtype=None, gate=None, **tuning) -> None:
    """Every check :func:`gemm` makes of these arguments but the device's (:class:`GemmArgumentError` naming the
    first fault): a benchmark checks its options on meta tensors before it touches a GPU.

        >>> import torch
        >>> a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
        >>> check(a, a, BN=192)
        >>> check(a, a, BN=100)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.gemm_api.GemmArgumentError: gemm: BN = 100 must be a multiple of 16 in [64, 256] (the wgmma N)
    """
    _checked(a, b, out, bias, activation, out_dtype, tuning, gate)


def _checked(a, b, out, bias, activation, out_dtype, tuning, gate=None):
    """The arguments checked (all but the device) and the kernel's problem planned for the inputs as it reads them:
    ``(a, b, gate, (M, N, K, out_dtype, Mk, Nk, Kk, a_major, b_major, sms, tuning))``. ``a``, ``b``, ``gate``: the
    inputs, each an aligned copy where it is off a 16-byte boundary (:func:`~tirxpy_kernels.checks.aligned_input`;
    the plan follows the copy's layout); ``Mk, Nk, Kk``: the padded problem the kernel is built for; ``tuning``:
    :func:`_tile`'s, without ``sms``."""
    M, N, K, out_dtype = _check(a, b, out, bias, activation, out_dtype, tuning, gate)
    _addresses(out, a, b, bias, gate)
    a, b = aligned_input("gemm", "a", a, GemmArgumentError), aligned_input("gemm", "b", b, GemmArgumentError)
    gate = None if gate is None else aligned_input("gemm", "gate", gate, GemmArgumentError)
    tuning = dict(tuning)
    sms = tuning.pop("sms", None)
    Mk, Nk, Kk, a_major, b_major = _problem(a, b, M, N, K, out_dtype)
    with _as_argument_error():      # the plan for this problem, checked on any device
        sms = sms or _sm_count(a.device)
        fused = gate is not None and _gate_in_kernel(M, N, K, Mk, Nk)
        planned = _tile(tuning, Mk, Nk, Kk, sms, b_major, bias is not None, activation, from_torch(out_dtype).name,
                        fused)
        check_config(Mk, Nk, Kk, a_major=a_major, b_major=b_major, dtype=from_torch(a.dtype).name,
                     out_dtype=from_torch(out_dtype).name,
                     bias=bias is not None, activation=activation, sms=sms, gate=fused, **planned)
    return a, b, gate, (M, N, K, out_dtype, Mk, Nk, Kk, a_major, b_major, sms, planned)


def _gate_in_kernel(M, N, K, Mk, Nk):
    """Whether the kernel applies a gate itself: not for a problem it computes padded (smaller than one tile, or
    with misaligned output rows), which :func:`gemm` masks after the product instead."""
    return (Mk, Nk) == (M, N) and not (M < 128 or N < 256 or K < 64)


def _fast_key(a, b, out, bias, activation, out_dtype, tuning, gate=None):
    """The key of an earlier checked call like this one (every tensor's layout kind, shape, strides, dtype and
    device; the options with their types, as ``1`` and ``True`` are equal in Python but not as options), or
    None when an argument is not a tensor or an option is unhashable (then the full checks run). Keys are
    stored only for calls the full checks accepted, so an equal key is such a call. Written out flat: every
    repeated call computes it."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor) and (out is None or isinstance(out, Tensor))
            and (bias is None or isinstance(bias, Tensor)) and (gate is None or isinstance(gate, Tensor))):
        return None
    try:
        key = (a.layout, a.shape, a.stride(), a.dtype, a.device, b.layout, b.shape, b.stride(), b.dtype, b.device,
               out_dtype, activation,
               None if out is None else (out.layout, out.shape, out.stride(), out.dtype, out.device),
               None if bias is None else (bias.layout, bias.shape, bias.stride(), bias.dtype, bias.device),
               None if gate is None else (gate.layout, gate.shape, gate.stride(), gate.dtype, gate.device),
               tuple(sorted((k, type(v), v) for k, v in tuning.items())) if tuning else ())
        hash(key)
    except Exception:    # a tensor without sizes / strides (nested, sparse), an option that does not hash: full checks
        return None
    return key


def _in_place(a, b, gate=None):
    """Whether the kernel can read (checked) inputs ``a``, ``b`` and ``gate`` in place: each starts on a 16-byte
    boundary (:func:`~tirxpy_kernels.checks.misalignment`), as its TMA loads need; otherwise the full path copies
    the one that does not."""
    return not (misalignment("gemm", "a", a, GemmArgumentError) or misalignment("gemm", "b", b, GemmArgumentError)
                or (gate is not None and misalignment("gemm", "gate", gate, GemmArgumentError)))


def _addresses(out, a, b, bias, gate=None):
    """Refuse a (checked) ``out`` at an address the kernel cannot write: off a 16-byte boundary
    (:func:`~tirxpy_kernels.checks.aligned`: the kernel's TMA stores write the caller's tensor in place, so no copy
    can stand in), or sharing memory with an input (the kernel would read what it already wrote)."""
    if out is None:
        return
    aligned("gemm", "out", out, GemmArgumentError, 16, "a freshly allocated out (or out=None)")
    for name, t in (("a", a), ("b", b), ("bias", bias), ("gate", gate)):
        if t is not None and overlaps(out, t):
            raise GemmArgumentError(f"gemm: out shares memory with {name}, which the kernel reads while it writes "
                                    f"out; pass a separate out tensor (or out=None)")


def _sm_count(device):
    """SMs of ``device`` (the persistent grid's size) on a GPU; the target's (an H100's) elsewhere, where it only
    plans."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return TARGET.sm_count


def _problem(a, b, M, N, K, out_dtype):
    """``(M, N, K, a_major, b_major)`` of the kernel :func:`gemm` launches for ``a @ b``: a problem smaller than
    one tile runs on zero-padded K-major copies at least one tile large; otherwise K is padded to 16 bytes when
    a K-major operand needs it, and N when the output's rows do."""
    if M < 128 or N < 256 or K < 64:
        return max(M, 128), max(-(-N // 8) * 8, 256), max(-(-K // 8) * 8, 64), "K", "K"
    a_major, b_major = _major(a, 1), _major(b, 0)
    Kp = K
    if (a_major == "K" and not _aligned(K, a.dtype)) or (b_major == "K" and not _aligned(K, b.dtype)):
        Kp = -(-K // 8) * 8
    Np = N if _aligned(N, out_dtype) else -(-N // 8) * 8
    return M, Np, Kp, a_major, b_major


def _tile(tuning, M, N, K, sms, b_major="K", bias=False, activation=None, out_dtype="bfloat16", gate=False):
    """``tuning`` with ``BN`` (and ``PINGPONG``) filled in as :func:`tirxpy_kernels.gemm` runs it: both from
    :func:`tirxpy_kernels.gemm_plan.choose_tile` when neither is given (the cooperative schedule when ``DEFER`` asks
    for it), ``BN`` for the given schedule otherwise; a given ``BN`` alone keeps the
    cooperative schedule. The epilogue (``bias``, ``activation``, ``out_dtype``, ``gate``) caps the width
    (:func:`tirxpy_kernels.gemm_plan.widest_bn`); a ``SPLIT`` asks for the cooperative schedule too. A chosen
    cooperative deferred tile also gets :func:`tirxpy_kernels.gemm_plan.balanced_split`'s ``SPLIT`` where that deals
    the tiles more evenly (4096^3, for example); ``SPLIT=None`` keeps the plain grid."""
    if "BN" in tuning:       # PINGPONG=None next to a given BN: the cooperative schedule, as BN alone
        return {k: v for k, v in tuning.items() if not (k == "PINGPONG" and v is None)}
    pp = tuning.get("PINGPONG")
    if pp is None and ("DEFER" in tuning or tuning.get("SPLIT")):
        pp = False          # options of the cooperative schedule
    bias = bias or gate     # a gate, like a bias, is read in the epilogue: no deferred tile, so no split
    bn, pp = choose_tile(M, N, K, sms, tuning.get("CM", 1), b_major, pp, bias, activation, out_dtype)
    tuning = dict(tuning, BN=bn, PINGPONG=pp)
    if "SPLIT" not in tuning and splittable(pp, tuning.get("CM", 1), b_major, bias, out_dtype, tuning.get("DEFER")):
        split = balanced_split(M, N, K, bn, sms, tuning.get("group", GROUP), out_dtype)
        if split is not None:
            tuning["SPLIT"] = split
    return tuning
