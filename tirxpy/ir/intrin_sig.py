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
from dataclasses import dataclass, field

from tirxpy.scope import Scope
from tirxpy.errors import shown

from .dtype import DataType
from .errors import IRError


@dataclass(frozen=True)
class IntrinsicSignature:
    """``name``; ``ret_dtype`` (``None``: returns nothing); ``n_args`` (``None``: any); the
    ``scope`` whose whole units must issue it (``thread`` for per-thread instructions); ``params``
    (the arguments' names, when known) and ``doc`` (what ``help(T.ptx.<name>)`` prints)."""

    name: str
    ret_dtype: DataType | None
    n_args: int | None
    scope: Scope
    params: tuple | None = field(default=None, repr=False, compare=False)
    doc: str = field(default="", repr=False, compare=False)

    def arity_message(self, got: int) -> str:
        """Why a call with ``got`` arguments is wrong, naming the arguments when known.

            >>> IntrinsicSignature("f", None, 2, Scope.THREAD, ("bar", "count")).arity_message(1)
            'intrinsic f takes 2 argument(s), got 1: call it as T.ptx.f(bar, count)'
        """
        msg = f"intrinsic {self.name} takes {self.n_args} argument(s), got {got}"
        if self.params is not None:
            msg += f": call it as T.ptx.{self.name}({', '.join(self.params)})"
        return msg


_REGISTRY: dict[str, IntrinsicSignature] = {}


def register_intrinsic_signature(name: str, ret_dtype=None, n_args: int | None = None, scope: str = "thread",
                                 params=None, doc: str = ""):
    """Register (or replace) the signature of intrinsic ``name``; returns it. ``params`` names the
    ``n_args`` arguments (for error messages), ``doc`` is the text ``help(T.ptx.<name>)`` prints."""
    if not isinstance(name, str) or not name:
        raise IRError(f"an intrinsic name is a non-empty str, got {shown(name)}")
    if n_args is not None and (not isinstance(n_args, int) or n_args < 0):
        raise IRError(f"n_args is a non-negative int or None, got {shown(n_args)}")
    if params is not None:
        params = tuple(params)
        if len(params) != n_args or not all(isinstance(x, str) for x in params):
            raise IRError(f"params names the {n_args} argument(s) of {name} as strs, got {shown(params, 80)}")
    if not isinstance(doc, str):
        raise IRError(f"doc is a str, got {type(doc).__name__}")
    sig = IntrinsicSignature(name, None if ret_dtype is None else DataType.get(ret_dtype), n_args, Scope.get(scope),
                             params, doc)
    _REGISTRY[name] = sig
    return sig


_RESOLVERS: list = []


def add_signature_resolver(fn) -> None:
    """Consult ``fn(name)`` whenever ``name`` has no signature yet. ``fn`` registers one when ``name`` is an
    intrinsic made on demand (a member of a shape family such as ``tcgen05_ld_16x64b_x4``) and returns None,
    or returns a str saying why ``name`` cannot be one (the family's rule it breaks), or None."""
    if not callable(fn):
        raise IRError(f"a signature resolver is a callable name -> None | str, got {type(fn).__name__}")
    if fn not in _RESOLVERS:
        _RESOLVERS.append(fn)


def _resolve(name: str) -> str | None:
    """Ask the resolvers for ``name``; the reasons they give when none registered it."""
    why = []
    for fn in _RESOLVERS:
        r = fn(name)
        if name in _REGISTRY:
            return None
        if isinstance(r, str) and r:
            why.append(r)
    return "; ".join(why) or None


def lookup_intrinsic_signature(name: str) -> IntrinsicSignature | None:
    """The signature of ``name``, made on demand by a resolver (:func:`add_signature_resolver`) for
    intrinsics generated from parameters; None when there is none."""
    sig = _REGISTRY.get(name)
    if sig is None and isinstance(name, str) and name:
        _resolve(name)
        sig = _REGISTRY.get(name)
    return sig


def intrinsic_names() -> list[str]:
    return sorted(_REGISTRY)


def unknown_intrinsic_message(name: str) -> tuple[str, str]:
    close = difflib.get_close_matches(name, list(_REGISTRY), n=5, cutoff=0.5)
    msg = f"unknown intrinsic T.ptx.{name}"
    why = _resolve(name) if isinstance(name, str) and name else None
    if why:
        msg += f" ({why})"
    if close:
        msg += f"; close matches: {', '.join(close)}"
    hint = ("register it first: tirxpy.intrinsics.register_intrinsic(...) (or, at the IR level, "
            f"tirxpy.ir.register_intrinsic_signature({name!r}, ret_dtype, n_args))")
    return msg, hint
