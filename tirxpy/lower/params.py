"""What a kernel parameter accepts (:class:`ParamSpec`) and the dtype tables of the launch path.

    >>> ParamSpec("alpha", "scalar", "float32").kind
    'scalar'
    >>> _fmt_dims((128, None))
    '(128, *)'
"""
from __future__ import annotations

import ctypes
import operator
from dataclasses import dataclass
from typing import Any

from tirxpy.ir.dtype import TORCH_NAMES, from_torch, to_torch
from tirxpy.ir.errors import IRError
from tirxpy.layout.coords import is_int
from tirxpy.errors import shown

from .errors import LaunchError

_SCALAR_FMT = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d"}
_SCALAR_RANGE = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _int_range(dtype: str) -> tuple:
    """``(lo, hi)`` of an integer scalar dtype ('int32', 'uint8', ...)."""
    bits = _SCALAR_RANGE.get(dtype)
    return (-(1 << bits), (1 << bits) - 1) if bits else (0, (1 << int(dtype[4:])) - 1)


def torch_dtype_name(dt, param: str = "tensor") -> str:
    """torch.dtype -> canonical dtype string ('bfloat16', 'float8_e4m3', ...): :func:`tirxpy.ir.dtype.from_torch`."""
    d = from_torch(dt)
    if d is None:
        raise LaunchError(param, f"torch dtype {dt} has no tirxpy dtype; supported: {sorted(TORCH_NAMES.values())}")
    return d.name


KINDS = ("tensor", "scalar", "tensormap")


@dataclass(frozen=True)
class ParamSpec:
    """What a kernel parameter accepts.

    - ``tensor``: a torch tensor passed as a device pointer. ``dtype`` (None: any), ``shape`` /
      ``strides`` (element strides; None or None entries: any), ``align`` (bytes of data_ptr), ``written``
      (the kernel writes it: a launch refuses it when it shares memory with another tensor argument,
      :func:`tirxpy.lower.overlap.overlaps`), ``may_alias`` (names of the parameters it may share memory with
      all the same: the kernel's ``T.launch(may_alias=...)``).
    - ``scalar``: a Python number of ``dtype``.
    - ``tensormap``: a torch tensor turned into a TMA map for the shared tile ``box`` with
      ``layout`` (or explicit ``swizzle``); or a ready 128-byte encoded map.
    """

    name: str
    kind: str = "tensor"
    dtype: str | None = None
    shape: tuple | None = None
    strides: tuple | None = None
    align: int = 16
    box: tuple | None = None
    layout: Any = None
    swizzle: int | None = None
    written: bool = False
    may_alias: frozenset = frozenset()

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise LaunchError(repr(self.name), f"a parameter's name is a str, got {type(self.name).__name__}")
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise LaunchError(self.name, f"kind must be one of {KINDS}, got {shown(self.kind, 60)}")
        if self.dtype is not None and not isinstance(self.dtype, str):
            raise LaunchError(self.name, f"dtype must be a dtype name such as 'float32' (or None), got "
                                         f"{type(self.dtype).__name__} {shown(self.dtype, 60)}")
        if self.kind == "scalar" and self.dtype not in _SCALAR_FMT:
            raise LaunchError(self.name, f"a scalar parameter needs a dtype among {sorted(_SCALAR_FMT)}, got "
                                         f"{shown(self.dtype)}")
        if self.kind == "tensormap" and self.box is None:
            raise LaunchError(self.name, "a tensormap parameter needs box=(shared tile shape, outermost first)")
        for field, lo in (("shape", 0), ("strides", 0), ("box", 1)):
            object.__setattr__(self, field, _dims(self.name, field, getattr(self, field), lo, field != "box"))
        align = self.align
        if not is_int(align) or align < 1 or align & (align - 1):
            raise LaunchError(self.name, f"align must be a power of two (an int of bytes), got {shown(align, 60)}")
        object.__setattr__(self, "align", operator.index(align))
        if not isinstance(self.written, bool) or (self.written and self.kind != "tensor"):
            raise LaunchError(self.name, f"written= says a tensor parameter is written: True or False (only for kind "
                                         f"'tensor'), got {shown(self.written, 60)} for kind {shown(self.kind)}")
        if not isinstance(self.may_alias, (frozenset, set, tuple, list)) or not all(
                isinstance(n, str) for n in self.may_alias):
            raise LaunchError(self.name, f"may_alias= is a set of parameter names, got {shown(self.may_alias, 60)}")
        object.__setattr__(self, "may_alias", frozenset(self.may_alias))


def _dims(param: str, field: str, v, lo: int, wild: bool):
    """``v`` (None, or a tuple / list of ints >= ``lo``; None entries where ``wild``) as a tuple of Python ints."""
    if v is None:
        return None
    if not isinstance(v, (tuple, list)) or not all(
            (d is None and wild) or (is_int(d) and lo <= operator.index(d) < 1 << 63) for d in v):
        what = f"ints >= {lo}" + (" or None (any)" if wild else "")
        raise LaunchError(param, f"{field} must be a tuple of {what}, got {type(v).__name__} {shown(v, 80)}")
    return tuple(None if d is None else operator.index(d) for d in v)


def _fmt_dims(dims) -> str:
    return "(" + ", ".join("*" if d is None else str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _torch_dtype(name: str, param: str):
    """The torch dtype of tirxpy dtype ``name``: :func:`tirxpy.ir.dtype.to_torch`, LaunchError where torch has none."""
    try:
        return to_torch(name)
    except IRError:
        raise LaunchError(param, f"dtype {shown(name)} has no torch dtype; use one of "
                                 f"{sorted(TORCH_NAMES.values())}") from None


def _infer_specs(args) -> tuple:
    import torch  # noqa: PLC0415

    specs = []
    ctypes_dt = {ctypes.c_int32: "int32", ctypes.c_uint32: "uint32", ctypes.c_int64: "int64",
                 ctypes.c_uint64: "uint64", ctypes.c_float: "float32", ctypes.c_double: "float64",
                 ctypes.c_bool: "bool", ctypes.c_int8: "int8", ctypes.c_uint8: "uint8",
                 ctypes.c_int16: "int16", ctypes.c_uint16: "uint16"}
    for i, a in enumerate(args):
        name = f"arg{i}"
        if isinstance(a, torch.Tensor):
            specs.append(ParamSpec(name, "tensor", align=1))
        elif type(a) in ctypes_dt:
            specs.append(ParamSpec(name, "scalar", ctypes_dt[type(a)]))
        elif isinstance(a, (bytes, bytearray)) and len(a) == 128:
            specs.append(ParamSpec(name, "tensormap", box=(1,)))
        else:
            raise LaunchError(name, f"cannot tell the C type of {type(a).__name__} {shown(a)} without specs; pass "
                                    f"specs=[ParamSpec(...)] or a ctypes scalar such as ctypes.c_int32(5)")
    return tuple(specs)
