"""Integer ranges of IR expressions: what codegen knows of loop variables, hardware ids and
let-bound values, used to prove operands non-negative (C ``/`` and ``%`` then equal floor
division) and to tighten layout addresses.

    >>> from tirxpy.ir import Var, ScopeId
    >>> r = Ranges(threads=256)
    >>> i = Var("i"); r.bind(i, (0, 63))
    >>> r.of(i * 4 + ScopeId("lane_id")), r.of(ScopeId("warp_id")), r.of(Var("n"))
    ((0, 283), (0, 7), None)
"""
from __future__ import annotations

from tirxpy.ir import expr as E

_INT_MAX = (1 << 31) - 1


class Ranges:
    """Known ``(lo, hi)`` of variables, plus the hardware ids of a CTA of ``threads`` threads."""

    def __init__(self, threads: int = 1024, cluster_size: int = 16):
        self.threads = threads
        self.cluster_size = cluster_size
        self._vars: dict = {}

    def bind(self, var, rng) -> None:
        if rng is not None:
            self._vars[id(var)] = (var, rng)

    def nonneg(self, e) -> bool:
        r = self.of(e)
        return r is not None and r[0] >= 0

    def of(self, e):
        """``(lo, hi)`` or None when unknown."""
        if isinstance(e, E.IntImm):
            return e.value, e.value
        if isinstance(e, E.BoolImm):
            return int(e.value), int(e.value)
        dt = e.dtype
        unsigned = dt is not None and dt.is_uint
        r = self._of(e)
        if r is None and unsigned:
            return 0, dt.max_value()
        return r

    def _of(self, e):
        if isinstance(e, E.Var):
            ent = self._vars.get(id(e))
            return ent[1] if ent is not None and ent[0] is e else None
        if isinstance(e, E.ScopeId):
            t = self.threads
            return {
                "lane_id": (0, min(31, t - 1)), "warp_id": (0, (t - 1) // 32), "warpgroup_id": (0, (t - 1) // 128),
                "warp_id_in_wg": (0, min(3, (t - 1) // 32)), "thread_id": (0, t - 1),
                "thread_id_in_wg": (0, min(127, t - 1)), "cluster_rank": (0, self.cluster_size - 1),
                "cta_id_in_cluster": (0, self.cluster_size - 1),
            }.get(e.kind, (0, _INT_MAX))
        if isinstance(e, E.Cast):
            r = self.of(e.value)
            if r is None or not e.dtype.is_int or e.value.dtype is None or not e.value.dtype.is_int:
                return None
            lo, hi = e.dtype.min_value(), e.dtype.max_value()
            return r if lo <= r[0] and r[1] <= hi else None
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
            a, b = self.of(e.a), self.of(e.b)
            if a is None or b is None:
                return None
            if isinstance(e, E.Add):
                return a[0] + b[0], a[1] + b[1]
            if isinstance(e, E.Sub):
                return a[0] - b[1], a[1] - b[0]
            if isinstance(e, E.Min):
                return min(a[0], b[0]), min(a[1], b[1])
            if isinstance(e, E.Max):
                return max(a[0], b[0]), max(a[1], b[1])
            c = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
            return min(c), max(c)
        if isinstance(e, (E.FloorDiv, E.FloorMod, E.Shr, E.Shl, E.BitAnd, E.BitOr, E.BitXor)):
            a, b = self.of(e.a), self.of(e.b)
            if b is None or b[0] != b[1]:
                if isinstance(e, E.BitAnd) and a is not None and a[0] >= 0:
                    return 0, a[1]
                return None
            k = b[0]
            if isinstance(e, E.FloorMod):
                if k <= 0:
                    return None
                return a if a is not None and 0 <= a[0] and a[1] < k else (0, k - 1)
            if isinstance(e, E.BitAnd):
                if k >= 0:
                    return 0, k if a is None or a[0] < 0 else min(k, a[1])
                return None
            if a is None:
                return None
            if isinstance(e, E.FloorDiv):
                return (a[0] // k, a[1] // k) if k > 0 else None
            if isinstance(e, E.Shr):
                return (a[0] >> k, a[1] >> k) if k >= 0 else None
            if isinstance(e, E.Shl):
                return (a[0] << k, a[1] << k) if 0 <= k < 32 else None
            if a[0] >= 0 and k >= 0:  # or / xor of non-negatives
                return 0, (1 << max(a[1], k, 1).bit_length()) - 1
            return None
        if isinstance(e, E.Select):
            a, b = self.of(e.t), self.of(e.f)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        return None
