"""Signatures of native intrinsics, as the IR and parser see them.

The intrinsics layer (above the IR) registers every table entry here; kernels then write
``T.ptx.<name>(args...)``, or call any object with a ``__tirx_intrinsic__`` name.

    >>> from tirxpy.ir.intrin_sig import register_intrinsic_signature, lookup_intrinsic_signature
    >>> sig = register_intrinsic_signature("doc_demo_add", "uint32", n_args=2)
    >>> lookup_intrinsic_signature("doc_demo_add")
    IntrinsicSignature(name='doc_demo_add', ret_dtype=uint32, n_args=2, scope=<Scope.THREAD: 0>)
    >>> lookup_intrinsic_signature("no_such") is None
    True
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from tirxpy.scope import Scope

from .dtype import DataType
from .errors import IRError


@dataclass(frozen=True)
class IntrinsicSignature:
    """``name``; ``ret_dtype`` (``None``: returns nothing); ``n_args`` (``None``: any); the
    ``scope`` whose whole units must issue it (``thread`` for per-thread instructions)."""

    name: str
    ret_dtype: DataType | None
    n_args: int | None
    scope: Scope


_REGISTRY: dict[str, IntrinsicSignature] = {}


def register_intrinsic_signature(name: str, ret_dtype=None, n_args: int | None = None, scope: str = "thread"):
    """Register (or replace) the signature of intrinsic ``name``; returns it."""
    if not isinstance(name, str) or not name:
        raise IRError(f"an intrinsic name is a non-empty str, got {name!r}")
    if n_args is not None and (not isinstance(n_args, int) or n_args < 0):
        raise IRError(f"n_args is a non-negative int or None, got {n_args!r}")
    sig = IntrinsicSignature(name, None if ret_dtype is None else DataType.get(ret_dtype), n_args, Scope.get(scope))
    _REGISTRY[name] = sig
    return sig


def lookup_intrinsic_signature(name: str) -> IntrinsicSignature | None:
    return _REGISTRY.get(name)


def intrinsic_names() -> list[str]:
    return sorted(_REGISTRY)


def unknown_intrinsic_message(name: str) -> tuple[str, str]:
    close = difflib.get_close_matches(name, list(_REGISTRY), n=5, cutoff=0.5)
    msg = f"unknown intrinsic T.ptx.{name}"
    if close:
        msg += f"; close matches: {', '.join(close)}"
    hint = ("register it first: tirxpy.intrinsics.register_intrinsic(...) (or, at the IR level, "
            f"tirxpy.ir.register_intrinsic_signature({name!r}, ret_dtype, n_args))")
    return msg, hint
