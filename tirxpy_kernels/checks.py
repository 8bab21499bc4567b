"""Checks the torch entry points (:func:`tirxpy_kernels.gemm`, :func:`tirxpy_kernels.attention`) make of their tensors.

A kernel reads a tensor through its data pointer and strides, so it takes only plain dense tensors:
a ``torch.Tensor`` with the strided layout (not sparse, MKL-DNN or nested) and the expected number of
dimensions (:func:`dense_tensor`). Anything else is refused with the caller's error class, naming the argument and
the fix. Where a kernel reads or writes a tensor in place with TMA or 16-byte vector accesses, its data must start
on a 16-byte boundary (:func:`misalignment`), which a view at an odd offset may not: an input off it is copied
(:func:`aligned_input`), an output the caller gave is refused (:func:`aligned`), as a copy would not be the
caller's tensor. An output that shares memory with an input (:func:`~tirxpy.lower.overlap.overlaps`, the test every
launch makes of the tensors a kernel writes) is refused by each entry point in its own words.
Inputs that require grad are read as values: the kernels are forward-only and record no autograd graph.

    >>> import torch
    >>> from tirxpy.errors import ArgumentError
    >>> dense_tensor("gemm", "a", torch.zeros(2, 3).to_sparse(), 2, "(a matrix)", ArgumentError)
    Traceback (most recent call last):
    ...
    tirxpy.errors.ArgumentError: gemm: a is a sparse tensor (layout torch.sparse_coo); pass a dense one (a.to_dense())
"""
from __future__ import annotations

import torch

from tirxpy.lower.overlap import overlaps   # whether an out may share memory with an input: the launch path's test


def no_meta_mix(where: str, error, **tensors) -> None:
    """Raise ``error`` when some of the tensors given by name (None skipped) are on ``meta`` and others are not. An
    operator's fake implementation runs whenever one input is on ``meta`` and makes its outputs on an input's
    device, so a call that mixed ``meta`` and real tensors would return memory nothing wrote; all ``meta`` (shapes
    only) or all real is the caller's choice.

        >>> no_meta_mix("gemm", ValueError, a=torch.zeros(1), b=torch.zeros(1, device="meta"), bias=None)
        Traceback (most recent call last):
        ...
        ValueError: gemm: a is on cpu and b on meta; pass real tensors on one device (or only meta ones, for shapes)
    """
    devs = [(name, t.device) for name, t in tensors.items() if t is not None]
    meta = [name for name, d in devs if d.type == "meta"]
    if meta and len(meta) < len(devs):
        real = next((name, d) for name, d in devs if d.type != "meta")
        raise error(f"{where}: {real[0]} is on {real[1]} and {meta[0]} on meta; pass real tensors on one device (or "
                    "only meta ones, for shapes)")


def self_overlapping(t) -> bool:
    """Whether dense tensor ``t`` may hold one memory location at two indices (a stride 0 of ``expand``, or strides
    that interleave), which an output must not: False when each dimension's stride, smallest first, steps past all
    the elements the smaller ones reach.

        >>> self_overlapping(torch.zeros(3, 4).t()), self_overlapping(torch.zeros(3, 1).expand(3, 4))
        (False, True)
    """
    reach = 1
    for s, n in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if s < reach:
            return True
        reach += s * (n - 1)
    return False


def dense_tensor(where: str, name: str, t, ndim: int, what: str, error) -> None:
    """Raise ``error`` unless ``t`` is a dense strided ``torch.Tensor`` with ``ndim`` dimensions (``what`` says
    what those are, for the message)."""
    if not isinstance(t, torch.Tensor):
        raise error(f"{where}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_nested:
        raise error(f"{where}: {name} is a nested tensor; pass a dense one ({name}.to_padded_tensor(0))")
    if t.layout != torch.strided:
        kind = "sparse" if "sparse" in str(t.layout) else "non-strided"
        raise error(f"{where}: {name} is a {kind} tensor (layout {t.layout}); pass a dense one ({name}.to_dense())")
    if t.dim() != ndim:
        raise error(f"{where}: {name} must be {ndim}-D {what}, got shape {tuple(t.shape)}")


def misalignment(where: str, name: str, t, error, align: int = 16) -> int:
    """How many bytes past an ``align``-byte boundary dense tensor ``t``'s data starts: 0 on one, as a kernel reading
    or writing it in place with TMA or ``align``-byte vector accesses needs. A tensor without memory (the meta
    device: address 0) is on one; ``error`` names ``name`` for a tensor without a data pointer (a subclass without
    storage).

        >>> import torch
        >>> from tirxpy.errors import ArgumentError
        >>> x = torch.zeros(32, dtype=torch.bfloat16)
        >>> misalignment("gemm", "a", x[8:], ArgumentError), misalignment("gemm", "a", x[1:], ArgumentError)
        (0, 2)
    """
    ptr = address(t)
    if ptr is None:
        raise error(f"{where}: {name} has no data pointer (a tensor subclass without storage, or a torch.vmap batched "
                    "tensor); pass a plain torch tensor")
    return ptr % align


def address(t):
    """``t.data_ptr()``, or None for a tensor without one (a wrapper subclass with no storage, a ``torch.vmap``
    batched tensor).

        >>> address(torch.zeros(2, device="meta"))
        0
        >>> torch.vmap(lambda x: torch.tensor(address(x) is None))(torch.zeros(2, 3)).tolist()
        [True, True]
    """
    try:
        return t.data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def aligned(where: str, name: str, t, error, align: int = 16, fix: str = "") -> None:
    """Raise ``error`` unless dense tensor ``t``'s data starts on an ``align``-byte boundary (:func:`misalignment`):
    the rule for a tensor the caller gave for the kernel to write in place (an ``out``), which a copy cannot
    replace. The message names ``name``, how far off it is, ``align`` and the fix (``fix``, default
    ``{name}.clone()``: a fresh allocation is aligned, while ``.contiguous()`` of a contiguous view is the view
    itself). An input is copied instead (:func:`aligned_input`).

        >>> import torch
        >>> from tirxpy.errors import ArgumentError
        >>> aligned("gemm", "out", torch.zeros(32, dtype=torch.bfloat16)[16:], ArgumentError)
        >>> aligned("gemm", "out", torch.zeros(9, dtype=torch.bfloat16)[1:], ArgumentError, fix="a fresh out")
        Traceback (most recent call last):
        ...
        tirxpy.errors.ArgumentError: gemm: out starts 2 bytes past a 16-byte boundary (a view at an odd offset); ...
        pass a fresh out
    """
    off = misalignment(where, name, t, error, align)
    if off:
        raise error(f"{where}: {name} starts {off} bytes past a {align}-byte boundary (a view at an odd offset); "
                    f"the kernel reads or writes it in place with TMA / {align}-byte vector accesses, which need "
                    f"{align}-byte aligned addresses: pass {fix or name + '.clone()'}")


def aligned_input(where: str, name: str, t, error, align: int = 16):
    """Input ``t`` as a kernel that reads it in place takes it: ``t`` itself when its data starts on an
    ``align``-byte boundary (:func:`misalignment`), else a dense copy holding the same values
    (``t.clone(memory_format=torch.preserve_format)``: the same strides where ``t`` is dense; a fresh allocation
    starts on the boundary). ``error`` names ``name`` for a tensor without a data pointer.

        >>> import torch
        >>> from tirxpy.errors import ArgumentError
        >>> x = torch.arange(40, dtype=torch.bfloat16)
        >>> aligned_input("gemm", "a", x[8:40].view(4, 8), ArgumentError)._base is x           # aligned: itself
        True
        >>> b = aligned_input("gemm", "b", x[1:33].view(8, 4).t(), ArgumentError)               # 2 bytes off: a copy
        >>> b.data_ptr() % 16, b.stride(), torch.equal(b, x[1:33].view(8, 4).t())
        (0, (1, 4), True)
    """
    if not misalignment(where, name, t, error, align):
        return t
    return t.clone(memory_format=torch.preserve_format)


__all__ = ["aligned", "aligned_input", "dense_tensor", "misalignment", "overlaps"]
