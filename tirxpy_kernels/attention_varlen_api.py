"""``tirxpy_kernels.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False,
scale=None)``: attention forward over packed variable-length sequences with the Hopper kernel of
:mod:`tirxpy_kernels.attention_sm90` (``VARLEN``).

``q`` is ``(total_q, H, D)``, ``k`` and ``v`` ``(total_k, HKV, D)``: the sequences one after another.
Sequence ``b`` holds query rows ``cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1`` and key rows
``cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1`` (int32 tensors of ``batch + 1`` entries on ``q``'s device,
starting at 0, non-decreasing); each query row attends to its own sequence's keys only, as
:func:`tirxpy_kernels.attention` on that sequence alone (``causal``: top-left aligned within the sequence, key
``j > i`` masked for query row ``i``). ``max_seqlen_q`` / ``max_seqlen_k`` bound the lengths. Returns ``out``
``(total_q, H, D)`` or, with ``return_lse=True``, ``(out, lse)`` with ``lse`` ``(H, total_q)`` float32. Rows
past ``cu_seqlens_q[-1]`` (a packed buffer longer than its sequences) are left unwritten.

The lengths are checked on the host (one copy of the two ``cu_seqlens`` to pinned memory, queued before the
launches and waited for after them: :func:`host_copy`) except while a CUDA graph is being captured, where they must
already be right; bad values raise :class:`VarlenArgumentError` once the kernel has run on them. The kernel reads
each sequence's offsets clamped to its window and its tensors (:func:`tirxpy_kernels.attention_walk.sequence`), so
on any values it stays inside its tensors and finishes. The kernel is built per packed row counts, number of
sequences and ``max_seqlen_q`` / ``max_seqlen_k`` rounded up to 128
(:func:`tirxpy_kernels.attention_plan.varlen_window`), so a training loop that packs its batches into buffers of a
fixed size reuses one kernel. Strided ``q``, ``k``, ``v`` (such as the slices of a packed ``(total, 3, H, D)``
projection) are read in place where TMA can (:func:`tirxpy_kernels.views.packed_input`); other inputs are copied.

    >>> import torch
    >>> q = torch.empty(1000, 8, 64, dtype=torch.bfloat16, device="meta")
    >>> cu = torch.tensor([0, 300, 1000], dtype=torch.int32)
    >>> check(q, q, q, cu, cu, 700, 700, causal=True)          # (causal, return_lse)
    (True, False)
    >>> check(q, q, q, cu, cu, 0, 700)
    Traceback (most recent call last):
    ...
    tirxpy_kernels.attention_varlen_api.VarlenArgumentError: attention_varlen: max_seqlen_q must be a positive int, got 0
"""
from __future__ import annotations

import torch

from tirxpy.ir.dtype import from_torch

from .attention_api import AttentionArgumentError, _device, _sm_count, check_flags
from .attention_plan import DTYPES, HEAD_DIMS, TARGET, plan, varlen_window
from .attention_sm90 import attention_sm90
from .attention_walk import EMPTY_TILE, varlen_slots
from .checks import dense_tensor, misalignment
from .errors import is_int, shown
from .launch_cache import compiled
from .views import packed_input


MIN_ROWS = 128
"""Packed query tensors with fewer rows than this (one query tile) run on zero-padded copies (a TMA box may not
exceed its tensor)."""


class VarlenArgumentError(AttentionArgumentError):
    """A bad argument to :func:`attention_varlen` (tensors, ``cu_seqlens``, lengths, ``scale``)."""


def positive_int(name, x):
    """``x`` as a positive int (numpy's ints too, not a bool; a ``torch.SymInt``, a bound traced by
    ``torch.compile``, stays one, its sign guarded); :class:`VarlenArgumentError` naming ``name``."""
    symbolic = isinstance(x, torch.SymInt)
    if not symbolic and not is_int(x) or x < 1:
        raise VarlenArgumentError(f"attention_varlen: {name} must be a positive int, got {shown(x, 60)}")
    return x if symbolic else int(x)


def windows(max_seqlen_q, max_seqlen_k, total_q, total_k):
    """``(SQ, SK)``: the longest query / key sequence a kernel is built for, :func:`varlen_window` of
    ``max_seqlen_q`` / ``max_seqlen_k`` each capped at the packed rows (no sequence is longer than its tensor, so a
    larger bound would only enlarge the output buffers' window).

        >>> windows(10 ** 12, 700, 1000, 1000)
        (1024, 768)
    """
    return varlen_window(min(max_seqlen_q, total_q)), varlen_window(min(max_seqlen_k, total_k))


def check(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
          return_lse=False) -> tuple:
    """Every check of :func:`attention_varlen` that needs no device values (:class:`VarlenArgumentError` naming
    the first fault): tensor kinds, dtypes, shapes; ``cu_seqlens`` dtype, shape and layout; the bounds and flags.
    Metadata only (no device, data or plan): the operator's fake runs it too, on symbolic shapes under torch.compile.
    :func:`check_lengths` checks the ``cu_seqlens`` values. Returns ``(causal, return_lse)`` as Python bools (numpy
    bools are taken)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        dense_tensor("attention_varlen", name, t, 3, "(total_tokens, heads, dim)", VarlenArgumentError)
        if from_torch(t.dtype) is None or from_torch(t.dtype).name not in DTYPES:
            raise VarlenArgumentError(f"attention_varlen: {name} has dtype {t.dtype}; the kernel takes torch.bfloat16 "
                                      f"or torch.float16 (convert with {name}.to(torch.bfloat16))")
    if not (q.dtype == k.dtype == v.dtype):
        raise VarlenArgumentError(f"attention_varlen: q, k, v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; use one")
    if k.shape != v.shape:
        raise VarlenArgumentError(f"attention_varlen: k {tuple(k.shape)} and v {tuple(v.shape)} must have one shape")
    (_, H, D), (_, HKV, Dk) = q.shape, k.shape
    if Dk != D:
        raise VarlenArgumentError(f"attention_varlen: q has head dim {D} but k / v have {Dk}; they must match")
    if D not in HEAD_DIMS:
        raise VarlenArgumentError(f"attention_varlen: head dim {D} is not supported; use one of {HEAD_DIMS}")
    if min(q.shape[0], k.shape[0], H, HKV) == 0:
        raise VarlenArgumentError(f"attention_varlen: empty input q {tuple(q.shape)}, k {tuple(k.shape)}")
    if H % HKV:
        raise VarlenArgumentError(f"attention_varlen: {H} query heads do not split into {HKV} key / value heads "
                                  "(grouped-query attention needs heads(q) % heads(k) == 0)")
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if isinstance(cu, torch.Tensor):
            dense_tensor("attention_varlen", name, cu, cu.dim(), "", VarlenArgumentError)
        if not isinstance(cu, torch.Tensor) or cu.dim() != 1 or cu.dtype != torch.int32 or cu.numel() < 2:
            what = f"{cu.dtype} {tuple(cu.shape)}" if isinstance(cu, torch.Tensor) else type(cu).__name__
            raise VarlenArgumentError(f"attention_varlen: {name} must be a 1-D torch.int32 tensor of batch + 1 >= 2 "
                                      f"offsets (torch.tensor([0, len0, len0 + len1, ...], dtype=torch.int32)), "
                                      f"got {what}")
        if cu.stride(0) != 1:       # the kernel reads the offsets one after another
            raise VarlenArgumentError(f"attention_varlen: {name} is a strided view (stride {cu.stride(0)}); the "
                                      f"kernel reads consecutive offsets: pass {name}.contiguous()")
    if cu_seqlens_q.numel() != cu_seqlens_k.numel():
        raise VarlenArgumentError(f"attention_varlen: cu_seqlens_q has {cu_seqlens_q.numel()} offsets and "
                                  f"cu_seqlens_k {cu_seqlens_k.numel()}; both hold batch + 1")
    positive_int("max_seqlen_q", max_seqlen_q)
    positive_int("max_seqlen_k", max_seqlen_k)
    return check_flags("attention_varlen", causal, scale, return_lse, VarlenArgumentError)


def check_lengths(cu_q, cu_k, total_q, total_k, max_seqlen_q, max_seqlen_k) -> None:
    """The ``cu_seqlens`` values (lists of ints): both start at 0 and never decrease, end within the packed
    tensors' ``total_q`` / ``total_k`` rows, no query length above ``max_seqlen_q`` nor key length above
    ``max_seqlen_k``, and a sequence with queries has at least one key; :class:`VarlenArgumentError` naming the
    first fault.

        >>> check_lengths([0, 3, 5], [0, 4, 4], 5, 4, 3, 4)
        Traceback (most recent call last):
        ...
        tirxpy_kernels.attention_varlen_api.VarlenArgumentError: attention_varlen: sequence 1 has 2 queries in cu_seqlens_q but no keys in cu_seqlens_k (4 -> 4); give every sequence with queries at least one key
    """
    for name, cu, total, mx in (("cu_seqlens_q", cu_q, total_q, max_seqlen_q),
                                ("cu_seqlens_k", cu_k, total_k, max_seqlen_k)):
        if not (isinstance(cu, (list, tuple)) and cu and all(type(x) is int for x in cu)):
            raise VarlenArgumentError(f"attention_varlen: {name} must be a non-empty list of ints here (the offsets' "
                                      f"values), got {shown(cu, 60)}")
        if not is_int(mx):
            raise VarlenArgumentError(f"attention_varlen: max_seqlen_{name[-1]} must be an int, got {shown(mx, 60)}")
        mx = int(mx)
        if cu[0] != 0:
            raise VarlenArgumentError(f"attention_varlen: {name}[0] is {cu[0]}; the offsets start at 0")
        for b in range(len(cu) - 1):
            n = cu[b + 1] - cu[b]
            if n < 0:
                raise VarlenArgumentError(f"attention_varlen: {name} decreases at {b + 1} ({cu[b]} -> {cu[b + 1]}); "
                                          "offsets are cumulative lengths")
            if n > mx:
                raise VarlenArgumentError(f"attention_varlen: sequence {b} has length {shown(n, 60)} in {name}, over "
                                          f"max_seqlen_{name[-1]} = {shown(mx, 60)}; pass the longest length")
        if cu[-1] > total:
            raise VarlenArgumentError(f"attention_varlen: {name}[-1] = {cu[-1]} is past the {total} packed rows")
    for b in range(len(cu_q) - 1):
        if cu_q[b + 1] > cu_q[b] and cu_k[b + 1] == cu_k[b]:
            raise VarlenArgumentError(f"attention_varlen: sequence {b} has {cu_q[b + 1] - cu_q[b]} queries in "
                                      f"cu_seqlens_q but no keys in cu_seqlens_k ({cu_k[b]} -> {cu_k[b + 1]}); give "
                                      "every sequence with queries at least one key")


def check_cu_device(api, cu_q, cu_k, device):
    """Both ``cu_seqlens`` tensors on ``device``, the packed tensors' (:class:`VarlenArgumentError` from ``api``
    naming the one that is not)."""
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if cu.device != device:
            raise VarlenArgumentError(f"{api}: {name} is on {cu.device}; move it to {device}")


def host_copy(cu_q, cu_k):
    """``(host, event)``: the two ``cu_seqlens`` tensors copied into pinned host memory behind the work queued so far
    on the current stream, and the event that marks the copy done. A varlen API queues this before its launches and
    checks the values (:func:`check_copied`) after them, so the host waits for the work queued before the call while
    the call's kernels are queued behind it, never between the launches."""
    host = torch.empty((2, cu_q.numel()), dtype=torch.int32, pin_memory=True)
    host.copy_(torch.stack([cu_q, cu_k]), non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    return host, done


def check_copied(copied, total_q, total_k, max_seqlen_q, max_seqlen_k):
    """Waits for :func:`host_copy`'s copy and checks the values (:func:`check_lengths`); returns them as lists
    ``(cu_q, cu_k)``."""
    host, done = copied
    done.synchronize()
    cq, ck = host.tolist()
    check_lengths(cq, ck, total_q, total_k, max_seqlen_q, max_seqlen_k)
    return cq, ck


def empty_outputs(q, max_seqlen_q):
    """``(out, lse)``, uninitialized, as the kernel writes them: ``out`` ``(total_q, H, D)`` and ``lse``
    ``(H, total_q)`` float32, each the tail of a buffer with ``XQ = varlen_window(max_seqlen_q)`` more rows in
    front (the overlapping views of :func:`output_views` reach back into them); plain contiguous tensors below
    :data:`MIN_ROWS` packed rows, where :func:`attention_varlen` computes on padded copies.

        >>> import torch
        >>> o, l = empty_outputs(torch.empty(300, 2, 64, device="meta"), 100)
        >>> o.shape, o.storage_offset(), l.shape, l.stride()
        (torch.Size([300, 2, 64]), 16384, torch.Size([2, 300]), (428, 1))
    """
    NQ, H, D = q.shape
    if NQ < MIN_ROWS:           # (the kernel ran on padded copies: the result was copied out contiguous)
        return q.new_empty(q.shape), q.new_empty((H, NQ), dtype=torch.float32)
    XQ = varlen_window(max_seqlen_q)
    ob = q.new_empty((XQ + NQ, H, D))
    lb = q.new_empty((H, XQ + NQ), dtype=torch.float32)
    return ob[XQ:], lb[:, XQ:]


def clipped_view(rows, X):
    """The ``(total + 1, X, heads, dim)`` overlapping view through which a varlen kernel stores the packed ``rows``
    ``(total, heads, dim)``, the tail of a buffer with ``X`` more rows in front: element ``(e, x)`` is packed row
    ``e + x - X``, so a sequence ending at packed row ``e`` stores its rows at ``x < X`` and nothing past its end
    (the box's rows at ``x >= X`` are outside the view). Used for the forward's ``O`` and the backward's ``dK``,
    ``dV``, ``dQ``.

        >>> import torch
        >>> buf = torch.arange(5.).view(5, 1, 1)
        >>> v = clipped_view(buf[2:], 2)
        >>> v.shape, v[1, 1, 0, 0].item(), v[3, 0, 0, 0].item()
        (torch.Size([4, 2, 1, 1]), 2.0, 3.0)
    """
    n, h, d = rows.shape
    return torch.as_strided(rows, (n + 1, X, h, d), (h * d, h * d, d, 1), rows.storage_offset() - X * h * d)


def output_views(out, lse, max_seqlen_q):
    """The kernel's overlapping views ``(O, LSE)`` of :func:`empty_outputs`' tensors (see
    :func:`tirxpy_kernels.attention_sm90.attention_sm90`'s ``VARLEN``)."""
    NQ, H, D = out.shape
    XQ = varlen_window(max_seqlen_q)
    O = clipped_view(out, XQ)
    L = torch.as_strided(lse, (NQ + 1, H, XQ, 1), (1, XQ + NQ, 1, 1), lse.storage_offset() - XQ)
    return O, L


def launch_order(cu_q, cu_k):
    """The sequences in the order the kernel's tile map lists them (:func:`tile_map`): most work first (query length
    times key length, ties by index), so the longest tiles start first and short ones fill the end of the run.
    Device ops only (no host copy).

        >>> import torch
        >>> launch_order(torch.tensor([0, 3, 10, 12], dtype=torch.int32), torch.tensor([0, 3, 10, 12])).tolist()
        [1, 0, 2]
    """
    work = (cu_q[1:] - cu_q[:-1]).long().clamp(min=0) * (cu_k[1:] - cu_k[:-1]).long().clamp(min=0)
    return torch.argsort(-work, stable=True).to(torch.int32)


def tile_map(cu_q, cu_k, BM, slots, per=1):
    """The ``VARLEN`` kernel's tile map, ``(1 + per, slots)`` int32: the query tiles (``BM`` rows: the kernel's) of
    every sequence, sequences in :func:`launch_order` (most work first). With ``per = 1`` each slot holds one tile,
    each sequence's from its last (under a causal mask the heaviest) to its first; with ``per = 2`` (the kernel's
    ``PAIRS``) slot ``j`` of a sequence of ``n`` tiles holds its tiles ``n - 1 - j`` and ``j`` (about equal work
    under a causal mask together), the middle one of an odd ``n`` alone. Slot ``s`` holds sequence ``map[0, s]``'s
    tiles ``map[1 .. per, s]``; an empty place, and every slot past the last, names tile
    :data:`~tirxpy_kernels.attention_walk.EMPTY_TILE` (past the end of any sequence, so the CTA stores nothing).
    Device ops only; negative lengths count as 0.

        >>> import torch
        >>> cu = torch.tensor([0, 3, 300, 430], dtype=torch.int32)
        >>> m = tile_map(cu, cu, 128, 6)
        >>> m[0].tolist(), m[1, :4].tolist()
        ([1, 1, 1, 2, 2, 0], [2, 1, 0, 1])
        >>> m = tile_map(cu, cu, 128, 5, per=2)
        >>> m[0, :4].tolist(), m[1, :4].tolist(), (m[2, :4] == EMPTY_TILE).tolist()
        ([1, 1, 2, 0], [2, 1, 1, 0], [False, True, False, True])
    """
    order = launch_order(cu_q, cu_k).long()
    n = ((cu_q[1:] - cu_q[:-1]).long().clamp(min=0) + BM - 1).div(BM, rounding_mode="floor")[order]
    used = (n + per - 1).div(per, rounding_mode="floor")        # slots of each sequence
    end = torch.cumsum(used, 0)
    s = torch.arange(slots, device=cu_q.device)
    pos = torch.searchsorted(end, s, right=True).clamp(max=n.numel() - 1)
    real = s < end[-1]
    j = s - (end[pos] - used[pos])       # the slot's place in its sequence
    first = n[pos] - 1 - j               # the sequence's tiles from its last down
    rows = [torch.where(real, order[pos], 0), torch.where(real, first, EMPTY_TILE)]
    if per == 2:
        rows.append(torch.where(real & (j < first), j, EMPTY_TILE))
    return torch.stack(rows).to(torch.int32)


def batch_strides(*inputs):
    """The ``strides=`` of the ``VARLEN`` kernel for packed inputs ``(tensor, strides)``
    (:func:`~tirxpy_kernels.views.packed_input`), which it reads as ``(1, total, heads, dim)`` (:func:`kernel_args`'
    ``unsqueeze(0)``, whose leading stride is ``total`` times the row stride); None when every input is dense."""
    if all(st is None for _, st in inputs):
        return None
    return tuple(None if st is None else (t.shape[0] * st[0],) + st for t, st in inputs)


def kernel_args(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, out, lse, BM, tiles=None, per=1):
    """The launch arguments ``(Q, K, V, O, LSE, CUQ, CUK, MAP)`` of the ``VARLEN`` kernel of query tiles of ``BM``
    rows, ``per`` a slot, for these packed tensors (``q``'s rows padded as the kernel was built for; ``tiles``:
    :func:`tile_map`'s, computed on the device when not given)."""
    O, L = output_views(out, lse, max_seqlen_q)
    if tiles is None:
        tiles = tile_map(cu_seqlens_q, cu_seqlens_k, BM,
                         varlen_slots(q.shape[0], BM, cu_seqlens_q.numel() - 1, per), per=per)
    return (q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), O, L, cu_seqlens_q, cu_seqlens_k, tiles)


def pad_rows(t, rows):
    """``t`` contiguous with at least ``rows`` rows on dim 0 (zero rows appended: a TMA box may not be larger than
    its tensor).

        >>> import torch
        >>> pad_rows(torch.ones(2, 1), 3).tolist()
        [[1.0], [1.0], [0.0]]
    """
    if t.shape[0] >= rows:
        return t.contiguous()
    p = t.new_zeros((rows,) + tuple(t.shape[1:]))
    p[:t.shape[0]] = t
    return p


def cu_values(where, cu_seqlens_q, cu_seqlens_k, error):
    """Refuse ``cu_seqlens`` whose values cannot be read (no storage: a ``torch.vmap`` batched tensor, a wrapper
    subclass) with ``error`` naming it, before ``.tolist()`` or a copy reads them."""
    misalignment(where, "cu_seqlens_q", cu_seqlens_q, error)
    misalignment(where, "cu_seqlens_k", cu_seqlens_k, error)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                     return_lse=False):
    """Attention forward over packed variable-length sequences on a Hopper GPU; see the module docstring."""
    causal, return_lse = check(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                               return_lse)
    if cu_seqlens_q.device.type == "cpu" and cu_seqlens_k.device.type == "cpu":      # values known without a copy
        cu_values("attention_varlen", cu_seqlens_q, cu_seqlens_k, VarlenArgumentError)
        check_lengths(cu_seqlens_q.tolist(), cu_seqlens_k.tolist(), q.shape[0], k.shape[0], max_seqlen_q,
                      max_seqlen_k)
    _device(q, k, v, "attention_varlen", VarlenArgumentError)
    check_cu_device("attention_varlen", cu_seqlens_q, cu_seqlens_k, q.device)
    NQ, H, D = q.shape
    NK, HKV, _ = k.shape
    B = cu_seqlens_q.numel() - 1
    copied = None if torch.cuda.is_current_stream_capturing() else host_copy(cu_seqlens_q, cu_seqlens_k)
    SQ, SK = windows(int(max_seqlen_q), int(max_seqlen_k), NQ, NK)
    with torch.cuda.device(q.device):
        (qp, qs), (kp, ks), (vp, vs) = packed_input(q, MIN_ROWS), packed_input(k, 256), packed_input(v, 256)
        kern = attention_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=None if scale is None else float(scale),
                              dtype=from_torch(q.dtype).name, SQT=qp.shape[0], SKT=kp.shape[0],
                              sms=_sm_count(q.device), VARLEN=True, strides=batch_strides((qp, qs), (kp, ks), (vp, vs)))
        out, lse = empty_outputs(qp, SQ)
        kp_ = plan(B, H, HKV, SQ, SK, D, causal=causal, dtype=from_torch(q.dtype).name, sms=_sm_count(q.device),
                   VARLEN=True)
        BM, per = kp_.BM, kp_.per_cta
        tiles = tile_map(cu_seqlens_q, cu_seqlens_k, BM, varlen_slots(qp.shape[0], BM, B, per), per)
        compiled(kern, TARGET)(*kernel_args(qp, kp, vp, cu_seqlens_q, cu_seqlens_k, SQ, out, lse, BM, tiles, per))
        if copied is not None:
            check_copied(copied, NQ, NK, max_seqlen_q, max_seqlen_k)
    if qp.shape[0] != NQ:
        out, lse = out[:NQ].contiguous(), lse[:, :NQ].contiguous()
    return (out, lse) if return_lse else out


__all__ = ["VarlenArgumentError", "attention_varlen", "batch_strides", "check", "check_copied", "check_cu_device",
           "check_lengths", "clipped_view", "empty_outputs", "host_copy", "kernel_args", "launch_order", "output_views",
           "pad_rows", "positive_int", "tile_map", "windows"]
