"""Inputs read in place: the attention kernels' ``q``, ``k``, ``v`` as strided views.

A kernel declares each input with a layout; by default the dense row-major one of its shape. A view such as the
query / key / value slices of a fused projection (``qkv.view(B, S, 3, H, D).unbind(2)``: rows ``3 H D`` elements
apart) is read by the same TMA loads when it is declared with its own strides, so the entry points pass those
strides (``strides=`` of :func:`~tirxpy_kernels.attention_sm90.attention_sm90` and
:func:`~tirxpy_kernels.attention_bwd_sm90.attention_bwd_sm90`) instead of copying the view. TMA reads a view in place
when its innermost stride is 1, every other stride is a positive multiple of 16 bytes, and its address is 16-byte
aligned (:func:`tma_view`); a dimension of size 1 may carry any stride, and is given the dense one.

    >>> import torch
    >>> qkv = torch.zeros(2, 10, 3, 4, 64, dtype=torch.bfloat16)
    >>> tma_view(qkv[:, :, 1])[1]
    (7680, 768, 64, 1)
    >>> tma_view(qkv[:, :, 1].contiguous())[1] is None       # dense: the kernel's default layout
    True
    >>> tma_view(qkv[..., ::2])                              # innermost stride 2: copy it
    (None, None)
    >>> check_strides("k", ("q",), ((2, 10, 4, 64),), ((7680, 768, 64, 1),))
    ((7680, 768, 64, 1),)
"""
from __future__ import annotations

import torch

from tirxpy import T
from tirxpy.errors import ArgumentError
from tirxpy.layout import S, TileLayout

from .checks import misalignment
from .errors import KernelConfigError, shown


def dense_strides(shape):
    """The element strides of a contiguous (row-major) tensor of ``shape``.

        >>> dense_strides((2, 3, 4))
        (12, 4, 1)
    """
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def tma_view(t):
    """``(view, strides)``: ``t`` as a kernel's TMA loads read it without a copy. ``strides`` is None when ``t`` is
    dense (the kernel's default layout), else its element strides; dimensions of size 1 get the dense stride, and
    ``view`` is ``t`` restrided so (the same elements). ``(None, None)`` when TMA cannot read ``t`` in place (an
    address off 16 bytes, :func:`~tirxpy_kernels.checks.misalignment`, or a strided ``t`` with an innermost stride
    other than 1 or another stride not a positive multiple of 16 bytes): the caller copies it. A tensor without a
    data pointer (a subclass without storage) is an :class:`~tirxpy.errors.ArgumentError`."""
    shape, dense = tuple(t.shape), dense_strides(t.shape)
    st = tuple(d if n == 1 else s for n, s, d in zip(shape, t.stride(), dense))
    es = t.element_size()
    if misalignment("tma_view", "t", t, ArgumentError) or (
            st != dense and (st[-1] != 1 or any(s <= 0 or s * es % 16 for s in st[:-1]))):
        return None, None
    view = t if st == tuple(t.stride()) else t.as_strided(shape, st)
    return view, (None if st == dense else st)


def kernel_input(t, rows):
    """``(tensor, strides)``: ``(batch, seq, ...)`` input ``t`` as a kernel reads it, with at least ``rows`` rows on
    dim 1. ``t`` itself (restrided where :func:`tma_view` says) when it has the rows and TMA reads it in place, else a
    contiguous copy, with zero rows appended when it is shorter (a TMA box may not be larger than its tensor);
    ``strides`` None for a dense tensor.

        >>> import torch
        >>> x = torch.ones(1, 3, 2, 8)
        >>> [(tuple(t.shape), st) for t, st in (kernel_input(x, 2), kernel_input(x, 4))]
        [((1, 3, 2, 8), None), ((1, 4, 2, 8), None)]
    """
    if t.shape[1] >= rows:
        view, st = tma_view(t)
        return (t.clone(memory_format=torch.contiguous_format), None) if view is None else (view, st)
    out = t.new_zeros((t.shape[0], rows) + tuple(t.shape[2:]))
    out[:, :t.shape[1]] = t
    return out, None


def packed_input(t, rows):
    """:func:`kernel_input` for packed rows ``(total, ...)`` (the rows on dim 0, as the ``VARLEN`` / ``PACKED``
    kernels take them): ``(tensor, strides)`` with ``tensor`` of at least ``rows`` rows, ``t`` itself where TMA reads
    it in place (``strides`` its element strides) or a dense copy (``strides`` None).

        >>> import torch
        >>> qkv = torch.zeros(300, 3, 4, 64, dtype=torch.bfloat16)
        >>> packed_input(qkv[:, 1], 128)[1], packed_input(qkv[:100, 1], 128)[1]
        ((768, 64, 1), None)
    """
    view, st = kernel_input(t[None], rows)
    return view[0], (None if st is None else st[1:])


def check_strides(where, names, shapes, strides, elem_bytes=2, option="strides"):
    """The ``strides=`` option of a kernel whose inputs ``names`` have ``shapes``: None (every input dense) or one
    entry per input, None (dense) or its element strides, innermost 1 and the others positive multiples of 16
    bytes below 2**40 bytes (``elem_bytes`` per element). Returns it with dense entries as None (None when all
    are), so equal layouts key one kernel; :class:`~tirxpy_kernels.errors.KernelConfigError` names ``option`` (the
    keyword the caller passed) and a bad entry.

        >>> check_strides("k", ("q", "k"), ((1, 8, 2, 64), (1, 8, 2, 64)), ((1024, 128, 64, 1), None)) is None
        True
        >>> check_strides("k", ("q",), ((1, 8, 2, 64),), ((1024, 128, 2, 1),))
        Traceback (most recent call last):
        ...
        tirxpy_kernels.errors.KernelConfigError: k: strides of q (1024, 128, 2, 1): TMA reads a view whose innermost stride is 1 and whose other strides are positive multiples of 8 elements (16 bytes) below 2**40 bytes; pass a contiguous copy
    """
    if strides is None:
        return None
    if not isinstance(strides, tuple) or len(strides) != len(names):
        raise KernelConfigError(f"{where}: {option} must be None or a tuple of {len(names)} entries (one per input: "
                                f"{', '.join(names)}), got {shown(strides, 120)}")
    out = []
    for name, shape, st in zip(names, shapes, strides):
        if st is None:
            out.append(None)
            continue
        if not isinstance(st, tuple) or len(st) != len(shape) or not all(type(x) is int for x in st):
            raise KernelConfigError(f"{where}: {option} of {name} must be None or {len(shape)} ints (the element "
                                    f"strides of its {tuple(shape)}), got {shown(st, 120)}")
        if st[-1] != 1 or any(x <= 0 or x * elem_bytes % 16 or x * elem_bytes >= 1 << 40 for x in st[:-1]):
            raise KernelConfigError(f"{where}: {option} of {name} {st}: TMA reads a view whose innermost stride is 1 "
                                    f"and whose other strides are positive multiples of {16 // elem_bytes} elements "
                                    "(16 bytes) below 2**40 bytes; pass a contiguous copy")
        out.append(None if st == dense_strides(shape) else st)
    return None if all(x is None for x in out) else tuple(out)


def tensor(shape, dtype, strides=None):
    """The kernel parameter type of an input of ``shape``: dense, or with element ``strides``
    (:func:`check_strides`)."""
    if strides is None:
        return T.Tensor(shape, dtype)
    return T.Tensor(shape, dtype, layout=TileLayout(S[tuple(shape) : tuple(strides)]))


__all__ = ["check_strides", "dense_strides", "kernel_input", "packed_input", "tensor", "tma_view"]
