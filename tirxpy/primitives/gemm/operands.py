"""What every gemm implementation reads first: ``C (+)= A @ B`` with its shapes, orientation
and attributes, parsed once per call (cached on the context).

``Tx.<scope>.gemm(C, A, B, transpose_a=False, transpose_b=False, accumulate=True, ...)``:
C is ``(M, N)``; A is ``(M, K)`` (``(K, M)`` with ``transpose_a``); B is ``(K, N)`` (``(N, K)``
with ``transpose_b``). ``accumulate`` (a bool or a boolean expression) False makes the call
overwrite C instead of adding to it.
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.ir.expr import BoolImm, Expr, IntImm

from ..context import Tile

_COMMON_ATTRS = ("transpose_a", "transpose_b", "accumulate")


@dataclass(frozen=True)
class Gemm:
    C: Tile
    A: Tile
    B: Tile
    ta: bool
    tb: bool
    M: int
    N: int
    K: int
    accumulate: object  # True / False / boolean Expr

    @property
    def a_kdim(self) -> int:
        """Which dimension of A (as the user wrote it) is K."""
        return 0 if self.ta else 1

    @property
    def b_kdim(self) -> int:
        return 1 if self.tb else 0


def static_bool(v):
    """A Python bool for literal flags (bool, 0/1, BoolImm / IntImm), else None."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, (BoolImm, IntImm)) and int(v.value) in (0, 1):
        return bool(v.value)
    return None


def static_int(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, IntImm):
        return int(v.value)
    return None


def parse(ctx, extra_attrs=(), b_split: int = 1) -> Gemm | str:
    """The call as a :class:`Gemm`, or the reason it is not a well-formed gemm call.

    ``b_split``: B holds ``N / b_split`` of C's columns (a CTA pair splits B in halves)."""
    key = ("_tx_gemm_parse", tuple(extra_attrs), b_split)
    cache = ctx.__dict__.setdefault("_tx_gemm_cache", {})
    if key not in cache:
        cache[key] = _parse(ctx, extra_attrs, b_split)
    return cache[key]


def _parse(ctx, extra_attrs, b_split):
    ops = ctx.operands
    if len(ops) != 3:
        return (f"gemm takes three tensors (C, A, B) and accumulates into C; got {len(ops)} operands"
                + (" (a separate D output is not supported: C is read and written)" if len(ops) == 4 else ""))
    for k, name in enumerate("CAB"):
        if not isinstance(ops[k], Tile):
            return f"operand {k} ({name}) is the scalar `{ops[k]}`, not a tensor"
        if ops[k].ndim != 2:
            return f"{name} ({ops[k].name}) must be a 2-d tile, its shape is {ops[k].shape}"
    allowed = set(_COMMON_ATTRS) | set(extra_attrs)
    unknown = sorted(set(ctx.attrs) - allowed)
    if unknown:
        return f"unknown attribute(s) {unknown} for this gemm; it takes {sorted(allowed)}"
    flags = {}
    for f in ("transpose_a", "transpose_b"):
        v = static_bool(ctx.attr(f, False))
        if v is None:
            return f"{f}= must be a Python bool, got {ctx.attr(f)!r}"
        flags[f] = v
    acc = ctx.attr("accumulate", True)
    sb = static_bool(acc)
    if sb is not None:
        acc = sb
    elif not (isinstance(acc, Expr) and acc.dtype is not None and (acc.dtype.is_bool or acc.dtype.is_int)):
        return f"accumulate= must be a bool or a boolean expression, got {acc!r}"
    C, A, B = ops[:3]
    ta, tb = flags["transpose_a"], flags["transpose_b"]
    M, N = C.shape
    am, ak = (A.shape[1], A.shape[0]) if ta else A.shape
    bk, bn = (B.shape[1], B.shape[0]) if tb else B.shape
    a_txt = "A (K, M)" if ta else "A (M, K)"
    b_txt = "B (N, K)" if tb else "B (K, N)"
    if am != M or bn * b_split != N or ak != bk:
        split = f" (B holds N / {b_split} columns per CTA)" if b_split > 1 else ""
        return (f"shapes do not chain: C {C.shape} = {a_txt} {A.shape} @ {b_txt} {B.shape}{split}"
                + ("" if tb or bn * b_split == N else "; pass transpose_b=True if B is stored as (N, K)"))
    return Gemm(C, A, B, ta, tb, M, N, ak, acc)


def need(ctx, extra_attrs=()):
    """Predicate form of :func:`parse`."""
    g = parse(ctx, extra_attrs)
    return g if isinstance(g, str) else None


def dtype_name(tile) -> str:
    """The canonical dtype name (``float32`` for tf32 storage; tf32-ness is the input type)."""
    return tile.dtype.name
