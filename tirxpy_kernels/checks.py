"""Checks the torch entry points (:func:`tirxpy_kernels.gemm`, :func:`tirxpy_kernels.attention`) make of their tensors.

A kernel reads a tensor through its data pointer and strides, so it takes only plain dense tensors:
a ``torch.Tensor`` with the strided layout (not sparse, MKL-DNN or nested) and the expected number of
dimensions (:func:`dense_tensor`), whose data starts on the boundary the kernel's accesses need where it reads the
tensor in place (:func:`aligned`). Anything else is refused with the caller's error class, naming the argument and
the fix. An output that shares memory with an input (:func:`~tirxpy.lower.overlap.overlaps`, the test every launch
makes of the tensors a kernel writes) is refused by each entry point in its own words.
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


def aligned(where: str, name: str, t, error, align: int = 16, fix: str = "") -> None:
    """Raise ``error`` unless dense tensor ``t``'s data starts on an ``align``-byte boundary, as a kernel reading it
    in place needs (TMA, vector loads and stores); the message names ``name``, how far off it is, ``align`` and the
    fix (``fix``, default ``{name}.clone()``: a fresh allocation is aligned, while ``.contiguous()`` of a contiguous
    view is the view itself). A tensor without memory (the meta device: address 0) passes; one without a data
    pointer (a subclass without storage) is refused.

        >>> import torch
        >>> from tirxpy.errors import ArgumentError
        >>> aligned("gemm", "a", torch.zeros(32, dtype=torch.bfloat16)[16:], ArgumentError)
        >>> aligned("gemm", "a", torch.zeros(9, dtype=torch.bfloat16)[1:], ArgumentError)
        Traceback (most recent call last):
        ...
        tirxpy.errors.ArgumentError: gemm: a starts 2 bytes past a 16-byte boundary (a view at an odd offset); ...
        pass a.clone()
    """
    try:
        ptr = t.data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        raise error(f"{where}: {name} has no data pointer (a tensor subclass without storage); pass a plain torch "
                    "tensor") from None
    if ptr % align:
        raise error(f"{where}: {name} starts {ptr % align} bytes past a {align}-byte boundary (a view at an odd "
                    f"offset); the kernel reads it in place with TMA / {align}-byte vector accesses, which need "
                    f"{align}-byte aligned addresses: pass {fix or name + '.clone()'}")


__all__ = ["aligned", "dense_tensor", "overlaps"]
