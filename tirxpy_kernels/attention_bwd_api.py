"""``tirxpy_kernels.attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False)``:
the gradients ``(dq, dk, dv)`` of :func:`tirxpy_kernels.attention` on a Hopper GPU, with the kernel of
:mod:`tirxpy_kernels.attention_bwd_sm90`.

Tensors are those of the forward: ``q``, ``out``, ``dout`` ``(B, SQ, H, D)``, ``k``, ``v`` ``(B, SK, HKV, D)``
(``H % HKV == 0``; ``dk``, ``dv`` sum over the query heads of a group), one dtype (bf16 or f16), ``lse``
``(B, H, SQ)`` float32, the natural log-sum-exp ``attention(..., return_lse=True)`` returns. ``causal`` and
``scale`` must be the forward's. Three steps: ``D = rowsum(dout * out)`` in float32 (the preprocessing
kernel :func:`~tirxpy_kernels.attention_bwd_pre.attention_bwd_preprocess`, which also zeroes the float32 ``dQ``
accumulator; torch zeroes the counters of ``deterministic`` and of the conversion in the kernel), the main kernel
(which accumulates ``scale * dS K`` into ``dQacc``), and ``dq`` = ``dQacc`` converted to the input dtype (torch;
into ``grads``' ``dq`` by :func:`~tirxpy_kernels.attention_bwd_post.attention_bwd_dq_store` where its layout
allows). Under a causal mask at head dims 128 and 256 the main kernel converts ``dq`` itself
(:func:`~tirxpy_kernels.attention_bwd_plan.default_fuse_dq`), and no third step runs.
``deterministic=True`` adds each key block's ``dQ`` share in key-block order, so that equal inputs give bit-equal
``dq``; otherwise the order of the float32 adds varies from run to run.

Arguments are checked first (:class:`AttentionBwdArgumentError` names the fault and the fix). Strided ``q``, ``k``,
``v``, ``dout`` (such as the slices of a fused QKV projection) are read in place where TMA can
(:mod:`tirxpy_kernels.views`); other inputs are copied.
"""
from __future__ import annotations

import math

import torch

from tirxpy.errors import ArgumentError
from tirxpy.ir.dtype import from_torch

from .attention_api import _sm_count
from .attention_bwd_plan import DTYPES, HEAD_DIMS, TARGET, fused_by_default, plan
from .attention_plan import check_scale
from .attention_bwd_post import dq_store, dq_strides
from .attention_bwd_pre import attention_bwd_preprocess, attention_bwd_preprocess_packed
from .attention_bwd_sm90 import attention_bwd_sm90
from .attention_varlen_api import (VarlenArgumentError, check_copied, check_cu_device, check_lengths, clipped_view,
                                   cu_values, host_copy, pad_rows, windows)
from .attention_varlen_api import check as check_varlen
from .checks import address, aligned_input, dense_tensor, misalignment, overlaps, self_overlapping
from .errors import KernelConfigError, is_flag, plain_flags, shown
from .launch_cache import LaunchCache, compiled, launch_bound, tensor_key
from .views import kernel_input, packed_input, tma_view


class AttentionBwdArgumentError(ArgumentError):
    """A bad argument to :func:`attention_backward` (type, dtype, shape, device, scale, flags)."""


def _err(msg):
    return AttentionBwdArgumentError("attention_backward: " + msg)


def _check_tensors(q, k, v, out, dout, lse):
    """Kinds, dtypes and shapes of the six tensors; returns ``(B, SQ, H, D, SK, HKV)``."""
    for name, t, nd, what in (("q", q, 4, "(batch, seq, heads, dim)"), ("k", k, 4, "(batch, seq, heads, dim)"),
                              ("v", v, 4, "(batch, seq, heads, dim)"), ("out", out, 4, "(batch, seq, heads, dim)"),
                              ("dout", dout, 4, "(batch, seq, heads, dim)"), ("lse", lse, 3, "(batch, heads, seq)")):
        dense_tensor("attention_backward", name, t, nd, what, AttentionBwdArgumentError)
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)):
        if from_torch(t.dtype) not in DTYPES:
            raise _err(f"{name} has dtype {t.dtype}; the kernel takes torch.bfloat16 or torch.float16")
        if t.dtype != q.dtype:
            raise _err(f"{name} has dtype {t.dtype} but q has {q.dtype}; use one dtype for q, k, v, out, dout")
    if lse.dtype != torch.float32:
        raise _err(f"lse has dtype {lse.dtype}; pass the float32 log-sum-exp of attention(..., return_lse=True)")
    B, SQ, H, D = q.shape
    if k.shape != v.shape:
        raise _err(f"k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape (batch, seq_k, kv_heads, dim)")
    Bk, SK, HKV, Dk = k.shape
    for name, t in (("out", out), ("dout", dout)):
        if t.shape != q.shape:
            raise _err(f"{name} has shape {tuple(t.shape)}; it must be q's {tuple(q.shape)}")
    if Bk != B or Dk != D:
        raise _err(f"k / v {tuple(k.shape)} do not match q {tuple(q.shape)} in batch and head dim")
    if tuple(lse.shape) != (B, H, SQ):
        raise _err(f"lse has shape {tuple(lse.shape)}; it must be (batch, heads, seq_q) = {(B, H, SQ)}")
    if D not in HEAD_DIMS:
        raise _err(f"head dim {D} is not supported by the backward kernel; use one of {HEAD_DIMS}")
    if min(B, SQ, H, SK, HKV) == 0:
        raise _err(f"empty input q {tuple(q.shape)}, k {tuple(k.shape)}")
    if H % HKV:
        raise _err(f"{H} query heads do not split into {HKV} key / value heads (heads(q) % heads(k) == 0)")
    return B, SQ, H, D, SK, HKV


def _check_meta(q, k, v, out, dout, lse, causal, scale, deterministic):
    """``(B, SQ, H, D, SK, HKV, causal, deterministic)`` (the flags as Python bools) once every argument is right as
    far as its metadata tells: the six tensors (:func:`_check_tensors`), the flags, ``scale``. It reads no device,
    data or plan, so the backward operators' fakes (under FakeTensorMode, shapes possibly symbolic) run it as
    :func:`check` does.

        >>> import torch
        >>> q = torch.empty(1, 100, 2, 64, dtype=torch.bfloat16, device="meta")
        >>> _check_meta(q, q, q, q, q.float(), torch.empty(1, 2, 100, device="meta"), False, None, False)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_bwd_api.AttentionBwdArgumentError: attention_backward: dout has dtype ...
    """
    shapes = _check_tensors(q, k, v, out, dout, lse)
    for name, f in (("causal", causal), ("deterministic", deterministic)):
        if not is_flag(f):      # a Python or numpy bool (not an int)
            raise _err(f"{name} must be True or False, got {shown(f, 60)}")
    causal, deterministic = plain_flags(causal, deterministic)
    check_scale("attention_backward", scale, AttentionBwdArgumentError)     # the forward's rule
    return shapes + (causal, deterministic)


def check(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False):
    """Every check :func:`attention_backward` makes but the device's; returns the kernel's plan.

        >>> import torch
        >>> q = torch.empty(2, 1000, 8, 128, dtype=torch.bfloat16, device="meta")
        >>> k = torch.empty(2, 1000, 2, 128, dtype=torch.bfloat16, device="meta")
        >>> lse = torch.empty(2, 8, 1000, device="meta")
        >>> check(q, k, k, q, q, lse, causal=True).grid
        (8, 2, 2)
        >>> check(q, k, k, q, q, lse[:, :4])
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_bwd_api.AttentionBwdArgumentError: attention_backward: lse has shape (2, 4, 1000); it must be (batch, heads, seq_q) = (2, 8, 1000)
    """
    B, SQ, H, D, SK, HKV, causal, deterministic = _check_meta(q, k, v, out, dout, lse, causal, scale, deterministic)
    try:
        return plan(B, H, HKV, SQ, SK, D, causal, from_torch(q.dtype).name, deterministic)
    except KernelConfigError as e:
        raise _err(str(e).removeprefix("attention_bwd_sm90: ")) from None


def _device(*ts):
    """Refuse tensors that are not all on one Hopper GPU, or that have no storage for the kernels to read."""
    dev = ts[0].device
    if any(t.device != dev for t in ts):
        raise _err(f"the tensors are on {sorted({str(t.device) for t in ts})}; move them to one CUDA device")
    for name, t in zip(("q", "k", "v", "out", "dout", "lse"), ts):
        misalignment("attention_backward", name, t, AttentionBwdArgumentError)
    if dev.type != "cuda":
        raise _err(f"the tensors are on {dev}; move them to a CUDA device (q.cuda())")
    cap = torch.cuda.get_device_capability(dev)
    if not TARGET.runs_on(cap):
        raise _err(f"the kernel is for Hopper ({TARGET}); {torch.cuda.get_device_name(dev)} is sm_{cap[0]}{cap[1]}")


def _check_grads(grads, q, k, v, out, dout, lse):
    """``grads=``: None, or three tensors of ``q``'s, ``k``'s and ``v``'s shapes in ``q``'s dtype on its device that
    share no memory with an input, with each other or within themselves (any strides otherwise)."""
    if grads is None:
        return
    if not isinstance(grads, (tuple, list)) or len(grads) != 3:
        raise _err(f"grads must be None or a tuple (dq, dk, dv) of three tensors, got {type(grads).__name__}")
    for name, g, t in zip(("dq", "dk", "dv"), grads, (q, k, v)):
        dense_tensor("attention_backward", f"grads' {name}", g, 4, f"of shape {tuple(t.shape)}",
                     AttentionBwdArgumentError)
        if g.shape != t.shape or g.dtype != q.dtype or g.device != q.device:
            raise _err(f"grads' {name} is {g.dtype} {tuple(g.shape)} on {g.device}; it must be {q.dtype} "
                       f"{tuple(t.shape)} on {q.device}")
        for iname, x in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("lse", lse)):
            if overlaps(g, x):
                raise _err(f"grads' {name} shares memory with {iname}, which the kernels read while they write it; "
                           "pass separate tensors")
        if self_overlapping(g):
            raise _err(f"grads' {name} (strides {g.stride()}) holds one memory location at several indices (an "
                       f"expanded or stride-0 view); pass a tensor of its own, such as torch.empty_like({name[1:]})")
    for (n1, g1), (n2, g2) in ((("dq", grads[0]), ("dk", grads[1])), (("dq", grads[0]), ("dv", grads[2])),
                               (("dk", grads[1]), ("dv", grads[2]))):
        if overlaps(g1, g2):
            raise _err(f"grads' {n1} and {n2} share memory, so one gradient would overwrite the other; pass three "
                       "separate tensors")


def _counters(deterministic, fused=False):
    """How the kernel's counters ``SEM`` are made: zeroed where the kernel reads them (``deterministic``'s turns, or
    the counts of adds of a kernel that converts ``dQ`` itself, ``fused``), else left unset (the kernel never touches
    them), which saves a fill kernel."""
    return torch.zeros if deterministic or fused else torch.empty


def _fused_dq(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, q, grads):
    """``(dq, (sb, ss))``: the tensor the backward kernel writes ``dQ`` into and its batch and token strides, when
    the kernel converts ``dQ`` itself by default (:func:`~tirxpy_kernels.attention_bwd_plan.fused_by_default`) and
    can write it there
    (``grads``' ``dq`` where :func:`~tirxpy_kernels.attention_bwd_post.dq_strides` takes its layout, else a fresh
    ``(B, SQ, H, D)`` tensor); ``(None, None)`` where ``dQacc`` is converted after the kernel."""
    if not fused_by_default(B, H, HKV, SQ, SK, D, causal, dtype, deterministic):
        return None, None
    if grads is None:
        dq = torch.empty((B, SQ, H, D), dtype=q.dtype, device=q.device)
    else:
        dq = grads[0]
    st = dq_strides(dq, rows=1)
    return (None, None) if st is None else (dq, st)


def prepare(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False, grads=None):
    """The three steps of :func:`attention_backward` apart: ``(kernel, args, finish)``, where ``kernel(*args)``
    launches the compiled kernel on the prepared tensors (``D``, the zeroed accumulator, the counters, padded
    inputs) and ``finish()`` returns ``(dq, dk, dv)`` from them; a benchmark times the kernel alone with it.
    Checks every argument first."""
    p = check(q, k, v, out, dout, lse, causal, scale, deterministic)
    causal, deterministic = p.causal, p.deterministic        # Python bools (numpy bools are taken)
    _check_grads(grads, q, k, v, out, dout, lse)
    _device(q, k, v, out, dout, lse)
    B, SQ, H, D = q.shape
    SK, HKV = k.shape[1], k.shape[2]
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    SQT, SKT, SQP = max(SQ, p.BM), max(SK, p.BN), p.q_blocks * p.BM
    with torch.cuda.device(q.device):
        ins = [kernel_input(t, n) for t, n in ((q, SQT), (k, SKT), (v, SKT), (dout, SQT))]
        (qp, _), (kp, _), (vp, _), (dop, _) = ins
        strides = None if all(st is None for _, st in ins) else tuple(st for _, st in ins)
        dk = dv = dks = dvs = None
        if grads is not None and SKT == SK:     # written in place where TMA can store them
            (dk, dks), (dv, dvs) = tma_view(grads[1]), tma_view(grads[2])
        if dk is None or dv is None:        # the kernel writes fresh buffers (then copied into grads, if given)
            dk, dv = (torch.empty((B, SKT, HKV, D), dtype=q.dtype, device=q.device) for _ in range(2))
            dks = dvs = None
        dq, dqs = _fused_dq(B, H, HKV, SQ, SK, D, causal, p.dtype, deterministic, q, grads)
        kern = attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=sc, dtype=p.dtype,
                                  deterministic=deterministic, SQT=SQT, SKT=SKT, strides=strides,
                                  grad_strides=None if dks is None and dvs is None else (dks, dvs),
                                  sms=_sm_count(q.device), FUSE_DQ=dq is not None, dq_strides=dqs)
        if SQ == SQP and lse.is_contiguous() and not misalignment("attention_backward", "lse", lse,
                                                                   AttentionBwdArgumentError):
            lp = lse                        # already whole 64-row blocks: the kernel reads it as it is
        else:
            lp = torch.zeros((B, H, SQP), dtype=torch.float32, device=q.device)
            lp[:, :, :SQ] = lse
        sem = _counters(deterministic, dq is not None)((B, H, p.q_blocks, 2), dtype=torch.int32, device=q.device)
        dl = torch.empty((B, H, SQP), dtype=torch.float32, device=q.device)
        dqa = torch.empty((B, SQT, H, D), dtype=torch.float32, device=q.device)     # zeroed by the preprocessing
        pre = compiled(attention_bwd_preprocess(B, H, SQ, D, p.dtype, SQT), TARGET)
        pre(kernel_input(out, SQT)[0].contiguous(), dop.contiguous(), dl, dqa)     # (it reads O and dO dense)
        ck = compiled(kern, TARGET)

    def finish():
        with torch.cuda.device(q.device):
            if grads is not None:
                if dq is None:              # (else the kernel wrote grads' dq)
                    st = dq_store(grads[0], p.dtype) if SQT == SQ else None
                    if st is None:
                        grads[0].copy_(dqa[:, :SQ])
                    else:
                        st(dqa, grads[0])
                for g, t in zip(grads[1:], (dk, dv)):
                    if t.data_ptr() != g.data_ptr():
                        g.copy_(t[:, :SK])
                return tuple(grads)
            dqo = dqa[:, :SQ].to(q.dtype) if dq is None else dq
        if SKT != SK:
            return dqo, dk[:, :SK].contiguous(), dv[:, :SK].contiguous()
        return dqo, dk, dv

    return ck, (qp, kp, vp, dop, lp, dl, dk, dv, dqa, sem) + (() if dq is None else (dq,)), finish


def attention_backward(q, k, v, out, dout, lse, causal=False, scale=None, deterministic=False, grads=None):
    """``(dq, dk, dv)`` of attention on a Hopper GPU; see the module docstring. ``grads=(dq, dk, dv)``: tensors
    (any strides, such as the slices of one packed ``dqkv``) that receive the gradients and are returned; the kernel
    writes ``dk`` and ``dv`` in place where TMA can store them.

    A call like an earlier checked one that needed no padding or copies (the same shapes, strides, dtypes, device,
    16-byte alignments and options) skips the checks and the planning, and with the same addresses too launches
    the arguments packed then (:mod:`tirxpy_kernels.launch_cache`)."""
    key = _fast_key(q, k, v, out, dout, lse, causal, scale, deterministic, grads)
    hit = _FAST.get(key)
    if hit is not None:
        return _fast_backward(key, hit, q, k, v, out, dout, lse, grads)
    ck, args, finish = prepare(q, k, v, out, dout, lse, causal, scale, deterministic, grads)
    with torch.cuda.device(q.device):
        ck(*args)
    qp, kp, vp, dop, lp, dl, dk, dv, dqa, sem = args[:10]
    fused = len(args) == 11
    in_place = all(a is b for a, b in zip((qp, kp, vp, dop, lp), (q, k, v, dout, lse)))
    # the fast path hands the preprocessing out.contiguous(), which is out itself where out is contiguous: that must
    # be on the 16-byte boundary its vector loads need (prepare read a copy of a misaligned out)
    in_place = in_place and not (out.is_contiguous() and misalignment("attention_backward", "out", out,
                                                                      AttentionBwdArgumentError))
    if grads is not None:
        in_place = in_place and dk.data_ptr() == grads[1].data_ptr() and dv.data_ptr() == grads[2].data_ptr()
    if key is not None and in_place and dk.shape == k.shape and dqa.shape[1] == q.shape[1]:
        B, H = q.shape[0], q.shape[2]
        pre = compiled(attention_bwd_preprocess(B, H, q.shape[1], q.shape[3], from_torch(q.dtype).name, q.shape[1]),
                       TARGET)
        st = None if grads is None or fused else dq_store(grads[0], from_torch(q.dtype).name)
        _FAST.put(key, (ck, pre, st, dl.shape, sem.shape, _counters(deterministic, fused), fused))
    return finish()


def _fast_key(q, k, v, out, dout, lse, causal, scale, deterministic, grads=None):
    """The key of an earlier checked call like this one: every tensor's :func:`~tirxpy_kernels.launch_cache.tensor_key`
    and 16-byte alignment (a misaligned input is copied) and the options; None when an argument is not of a plain
    kind (then the full path runs)."""
    if grads is not None and not (isinstance(grads, tuple) and len(grads) == 3):
        return None
    ts = (q, k, v, out, dout, lse) + (grads or ())
    keys = tuple(tensor_key(t) for t in ts)
    if None in keys or not isinstance(causal, bool) or not isinstance(deterministic, bool) \
            or type(scale) not in (type(None), int, float):
        return None
    ptrs = tuple(address(t) for t in ts)
    if None in ptrs:        # no storage (torch.vmap, a subclass): the checks name it
        return None
    return keys + tuple(p % 16 for p in ptrs) + (causal, deterministic, type(scale), scale)


def _fast_backward(key, hit, q, k, v, out, dout, lse, grads=None):
    """:func:`attention_backward` for a call like a checked one that read every input (and wrote ``grads``' ``dk``,
    ``dv``) in place: the same three steps, each kernel through its bound launch. The key fixed every layout; an
    overlap of ``grads`` with an input is refused once per addresses, before the bound launch is made."""
    ck, pre, st, dl_shape, sem_shape, new_sem, fused = hit
    with torch.cuda.device(q.device):
        sem = new_sem(sem_shape, dtype=torch.int32, device=q.device)
        dl = torch.empty(dl_shape, dtype=torch.float32, device=q.device)
        dqa = torch.empty(q.shape, dtype=torch.float32, device=q.device)        # zeroed by the preprocessing
        launch_bound(_BOUND, (key, "pre"), pre, out.contiguous(), dout.contiguous(), dl, dqa)
        if grads is None:
            dk = torch.empty(k.shape, dtype=q.dtype, device=q.device)
            dv = torch.empty_like(dk)
        else:
            dk, dv = tma_view(grads[1])[0], tma_view(grads[2])[0]
        # a fresh dq is dense, as prepare() made it for the kernel (empty_like would keep a permuted q's order)
        fresh = grads is None and fused
        dq = (torch.empty(q.shape, dtype=q.dtype, device=q.device),) if fresh else (grads[0],) if fused else ()
        launch_bound(_BOUND, key, ck, q, k, v, dout, lse, dl, dk, dv, dqa, sem, *dq,
                     check=None if grads is None else lambda: _check_grads(grads, q, k, v, out, dout, lse))
        if fused:
            return (dq[0], dk, dv) if grads is None else grads
        if grads is None:
            return dqa.to(q.dtype), dk, dv
        if st is None:
            grads[0].copy_(dqa)
        else:
            launch_bound(_BOUND, (key, "dq"), st, dqa, grads[0])
        return grads


# _fast_key -> (main kernel, preprocessing kernel, grads' dq store or None, D's and the counters' shapes, the counters'
# allocator, whether the main kernel writes dq) of a checked call read in place
_FAST = LaunchCache("attention_backward")
# (_fast_key, addresses) -> bound launches of those kernels (tirxpy_kernels.launch_cache.launch_bound)
_BOUND = LaunchCache("attention_backward bound launches")


# ------------------------------------------------------------------------------------- variable-length batches
def _check_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                  deterministic=False):
    """:func:`attention_varlen_backward`'s checks but the device's and the ``cu_seqlens`` values'; ``deterministic``
    is True or False (a Python or numpy bool, not an int), as :func:`attention_backward` takes it. Metadata only (no
    device, data or plan): the varlen backward operator's fake runs it too."""
    check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale)
    if not is_flag(deterministic):
        raise VarlenArgumentError(f"attention_varlen_backward: deterministic must be True or False, got "
                                  f"{shown(deterministic, 60)}")
    for name, t in (("out", out), ("dout", dout)):
        dense_tensor("attention_varlen_backward", name, t, 3, "(total_tokens, heads, dim)", VarlenArgumentError)
        if t.shape != q.shape or t.dtype != q.dtype:
            raise VarlenArgumentError(f"attention_varlen_backward: {name} is {t.dtype} {tuple(t.shape)}; it must be "
                                      f"q's {q.dtype} {tuple(q.shape)}")
    dense_tensor("attention_varlen_backward", "lse", lse, 2, "(heads, total_tokens)", VarlenArgumentError)
    if lse.dtype != torch.float32 or tuple(lse.shape) != (q.shape[1], q.shape[0]):
        raise VarlenArgumentError(f"attention_varlen_backward: lse is {lse.dtype} {tuple(lse.shape)}; it must be the "
                                  f"float32 (heads, total_tokens) = {(q.shape[1], q.shape[0])} of "
                                  "attention_varlen(..., return_lse=True)")


def prepare_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
                   scale=None, deterministic=False):
    """The steps of :func:`attention_varlen_backward` apart, as :func:`prepare` gives :func:`attention_backward`'s:
    ``(kernel, args, finish)``. Checks every argument but the ``cu_seqlens`` values first; those are copied to the
    host ahead of the launches (:func:`~tirxpy_kernels.attention_varlen_api.host_copy`) and checked by ``finish()``,
    which raises :class:`~tirxpy_kernels.attention_varlen_api.VarlenArgumentError` instead of returning gradients.
    So no host wait stands between the launches, and the kernels are safe on any values: they clamp each sequence
    to the window and the packed rows (:func:`~tirxpy_kernels.attention_walk.sequence`)."""
    _check_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                  deterministic)
    causal, deterministic = plain_flags(causal, deterministic)     # numpy bools as Python bools (plan checks them)
    on_cpu = cu_seqlens_q.device.type == "cpu" and cu_seqlens_k.device.type == "cpu"
    if on_cpu:      # values known without a copy: checked before the device
        cu_values("attention_varlen_backward", cu_seqlens_q, cu_seqlens_k, VarlenArgumentError)
        check_lengths(cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), q.shape[0], k.shape[0], max_seqlen_q, max_seqlen_k)
    try:
        _device(q, k, v, out, dout, lse)
    except AttentionBwdArgumentError as e:
        raise AttentionBwdArgumentError("attention_varlen_backward: " + str(e).removeprefix("attention_backward: ")) \
            from None
    check_cu_device("attention_varlen_backward", cu_seqlens_q, cu_seqlens_k, q.device)
    NQ, H, D = q.shape
    NK, HKV = k.shape[0], k.shape[1]
    B = cu_seqlens_q.numel() - 1
    SQ, SK = windows(int(max_seqlen_q), int(max_seqlen_k), NQ, NK)     # the kernel's, at most the packed rows
    dtype = from_torch(q.dtype).name
    p = plan(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, PACKED=True)
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    capturing = torch.cuda.is_current_stream_capturing()
    with torch.cuda.device(q.device):
        copied = None if capturing else host_copy(cu_seqlens_q, cu_seqlens_k)     # waited for by finish()
        ins = [packed_input(t, n) for t, n in ((q, p.BM), (k, p.BN), (v, p.BN), (dout, p.BM))]
        (qp, _), (kp, _), (vp, _), (dop, _) = ins
        strides = None if all(st is None for _, st in ins) else tuple(st for _, st in ins)
        # the preprocessing reads O with 16-byte loads: a misaligned out is read from an aligned copy
        op = aligned_input("attention_varlen_backward", "out", pad_rows(out, p.BM), VarlenArgumentError)
        TQ, TK = qp.shape[0], kp.shape[0]
        XQ, XK = p.q_blocks * p.BM, p.kv_blocks * p.BN
        lsp = lse.contiguous()                  # (H, TQ): every row the kernel may address
        if TQ != NQ:
            lsp = torch.nn.functional.pad(lsp, (0, TQ - NQ))
        lp, dlp = (torch.empty((H, B, XQ), dtype=torch.float32, device=q.device) for _ in range(2))
        # the reduce-adds' rows of dQ (the XQ in front of them are never written or read): each sequence's are
        # zeroed by the preprocessing, the rows past the last sequence by finish() in dq (as for dK / dV below)
        dqb = (torch.zeros if capturing else torch.empty)((XQ + TQ, H, D), dtype=torch.float32, device=q.device)
        compiled(attention_bwd_preprocess_packed(B, H, TQ, D, SQ, XQ, dtype), TARGET)(op, dop.contiguous(), lsp,
                                                                                      cu_seqlens_q, dlp, lp,
                                                                                      dqb[XQ:])
        # dK / dV: the key rows past the last sequence, which no CTA stores, are zeroed by finish() (it knows where
        # that is), or here while a graph is captured; the XK rows in front are never read
        dkb, dvb = ((torch.zeros if capturing else torch.empty)((XK + TK, HKV, D), dtype=q.dtype, device=q.device)
                    for _ in range(2))
        fuse = fused_by_default(B, H, HKV, SQ, SK, D, causal, dtype, deterministic, packed=True)
        sem = _counters(deterministic, fuse)((B, H, p.q_blocks, 2), dtype=torch.int32, device=q.device)
        kern = attention_bwd_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=sc, dtype=dtype,
                                  deterministic=deterministic, SQT=TQ, SKT=TK, PACKED=True, strides=strides,
                                  sms=_sm_count(q.device), FUSE_DQ=fuse)
        # the kernel that converts dQ writes each sequence's rows (clipped as dQacc's); the rows of a sequence
        # without keys, which no CTA visits, and past the last sequence are zeroed by finish() (or here, capturing)
        dqo = (torch.zeros if capturing else torch.empty)((XQ + TQ, H, D), dtype=q.dtype, device=q.device) \
            if fuse else None
        args = (qp, kp, vp, dop, lp, dlp, clipped_view(dkb[XK:], XK), clipped_view(dvb[XK:], XK),
                clipped_view(dqb[XQ:], XQ), sem) + ((clipped_view(dqo[XQ:], XQ),) if fuse else ()) \
            + (cu_seqlens_q, cu_seqlens_k)
        kfn = compiled(kern, TARGET)

    def finish():
        with torch.cuda.device(q.device):
            dq = dqb[XQ:XQ + NQ].to(q.dtype) if dqo is None else dqo[XQ:XQ + NQ]
            if copied is not None:
                cq, ck = check_copied(copied, NQ, NK, max_seqlen_q, max_seqlen_k)
                dq[cq[-1]:].zero_()
                if dqo is not None:
                    for i in range(B):
                        if ck[i + 1] == ck[i] and cq[i + 1] > cq[i]:
                            dq[cq[i]:cq[i + 1]].zero_()
                dkb[XK + ck[-1]:].zero_()
                dvb[XK + ck[-1]:].zero_()
            return dq, dkb[XK:XK + NK], dvb[XK:XK + NK]

    return kfn, args, finish


def attention_varlen_backward(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              causal=False, scale=None, deterministic=False):
    """``(dq, dk, dv)`` of :func:`tirxpy_kernels.attention_varlen` over packed sequences (its tensors: ``q``, ``out``,
    ``dout`` ``(total_q, H, D)``, ``k``, ``v`` ``(total_k, HKV, D)``, ``lse`` ``(H, total_q)``), computed by the
    backward kernel on the packed rows (``PACKED`` of :func:`~tirxpy_kernels.attention_bwd_sm90.attention_bwd_sm90`):
    a CTA per key block of a sequence (``cu_seqlens``) and key / value head walks that sequence's query blocks; a
    block loaded past a sequence's end is zeroed in shared memory past it, and the stores clip at the end
    (:func:`clipped_view`), so each sequence's gradients are those of the sequence alone. The kernel is built for
    ``max_seqlen_q`` / ``max_seqlen_k`` rounded up to 128 (:func:`~tirxpy_kernels.attention_varlen_api.windows`, at
    most the packed rows) and the packed row counts. Rows past ``cu_seqlens[-1]`` get zero gradients. The
    ``cu_seqlens`` values are checked on the host (one copy, waited for after the launches: :func:`prepare_varlen`)
    except while a CUDA graph is being captured, where they must already be right."""
    kfn, args, finish = prepare_varlen(q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                       max_seqlen_k, causal, scale, deterministic)
    with torch.cuda.device(q.device):
        kfn(*args)
    return finish()
