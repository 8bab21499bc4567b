"""The reverse query of a TileLayout without a table: which logical elements sit at a coordinate.

Each iterator places on one axis, so the axes are solved one at a time. On a queried axis ``a``
with target ``v``, the digits of the shard and replica iterators on ``a`` (stride > 0, extent > 1)
must satisfy ``O_a + sum d_k * s_k == v``; a depth-first search over those digits, largest
stride first, keeps only digit values inside the reach of the remaining digits and in the right
residue class of their strides' gcd, so a mixed-radix axis costs one step per digit. Digits on
axes the query leaves out (and stride-0 digits) are free: every value matches. The number of
answers is computed before any is listed, and both it and the search work are bounded
(:data:`~tirxpy.layout.errors.MAX_ANSWER`, :data:`~tirxpy.layout.errors.MAX_SEARCH`); every
coordinate is a Python int, so answers past 2**63 are exact.

    >>> from tirxpy.layout import S, TileLayout
    >>> elements_at(TileLayout(S[2**40 : 1]), {"m": 12345})
    [12345]
    >>> elements_at(TileLayout(S[(4, 8) : (1, 4)]), {"m": 9})   # 9 = 1 * 1 + 2 * 4: element (1, 2)
    [10]
"""
from __future__ import annotations

from math import gcd, prod

from .errors import MAX_ANSWER, MAX_SEARCH, LayoutError


def _axis_solutions(digits, target, op):
    """Distinct assignments of the shard digits among ``digits`` [(index, extent, stride, is_shard)]
    for which some assignment of the replica digits gives ``sum d * stride == target``."""
    digits = sorted(digits, key=lambda d: -d[2])
    n = len(digits)
    reach = [0] * (n + 1)          # largest sum of digits k.. (all strides >= 0)
    g = [0] * (n + 1)              # gcd of strides of digits k..
    for k in range(n - 1, -1, -1):
        reach[k] = reach[k + 1] + (digits[k][1] - 1) * digits[k][2]
        g[k] = gcd(g[k + 1], digits[k][2])
    found, steps = set(), 0
    chosen = [0] * n

    def walk(k, rest):
        nonlocal steps
        steps += 1
        if steps > MAX_SEARCH:
            raise LayoutError(f"{op}: the search for the coordinate took more than {MAX_SEARCH} steps (the limit "
                              "MAX_SEARCH); the layout's iterators on one axis overlap too much to invert")
        if k == n:
            if rest == 0:
                found.add(tuple(chosen[j] for j in range(n) if digits[j][3]))
                if len(found) > MAX_ANSWER:
                    raise LayoutError(f"{op}: more than {MAX_ANSWER} elements sit there (the limit MAX_ANSWER); "
                                      "query more axes to narrow it")
            return
        _, e, s, _ = digits[k]
        lo = max(0, -(-(rest - reach[k + 1]) // s))
        hi = min(e - 1, rest // s)
        if lo > hi:
            return
        gr = g[k + 1]
        if gr == 0:                # last digit: exactly one value can work
            if rest % s == 0 and lo <= rest // s <= hi:
                chosen[k] = rest // s
                walk(k + 1, 0)
            return
        # d * s == rest (mod gr): solvable iff gcd(s, gr) | rest; then d runs over one residue class
        g2 = gcd(s, gr)
        if rest % g2:
            return
        mod = gr // g2
        d0 = (rest // g2) * pow(s // g2, -1, mod) % mod if mod > 1 else 0
        d = lo + (d0 - lo) % mod
        while d <= hi:
            chosen[k] = d
            walk(k + 1, rest - d * s)
            d += mod

    walk(0, target)
    order = [j for j in range(n) if digits[j][3]]
    return [digits[j][0] for j in order], found


def elements_at(L, want: dict, op: str = "elements_at") -> list:
    """Sorted linear indices of ``L`` (a TileLayout) with an owner whose coordinate on each axis of
    ``want`` equals the given value (``want`` holds only axes ``L`` names, values >= 0)."""
    ext = [it.extent for it in L.shard]
    place = [prod(ext[k + 1:]) for k in range(len(ext))]
    off = L.offset
    fixed_parts = []                  # per queried axis: (shard iterator indices, set of digit tuples)
    bound = set()
    for a, v in want.items():
        rest = v - off.get(a, 0)
        if rest < 0:
            return []
        digits = [(k, it.extent, it.stride, True) for k, it in enumerate(L.shard)
                  if it.axis.name == a and it.extent > 1 and it.stride > 0]
        digits += [(None, it.extent, it.stride, False) for it in L.replica
                   if it.axis.name == a and it.extent > 1 and it.stride > 0]
        idx, sols = _axis_solutions(digits, rest, op)
        if not sols:
            return []
        fixed_parts.append((idx, sols))
        bound.update(idx)
    free = [k for k in range(len(ext)) if k not in bound and ext[k] > 1]
    count = prod(len(s) for _, s in fixed_parts) * prod(ext[k] for k in free)
    if count > MAX_ANSWER:
        raise LayoutError(f"{op}: {count} elements sit there, more than the limit of {MAX_ANSWER} (MAX_ANSWER); "
                          "query more axes to narrow it")
    bases = [0]
    for idx, sols in fixed_parts:
        vals = [sum(d * place[k] for k, d in zip(idx, s)) for s in sols]
        bases = [b + x for b in bases for x in vals]
    for k in free:
        bases = [b + d * place[k] for b in bases for d in range(ext[k])]
    return sorted(set(bases))
