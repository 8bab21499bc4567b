"""Layout algebra on the memory axis: packing elements into wider ones, and composition.

    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> L = TileLayout(S[(8, 4, 2) : (1@laneid, 2, 1)])        # 8 lanes x 8 bf16 registers
    >>> pack(L, 2)                                               # 8 lanes x 4 32-bit registers
    TileLayout(S[(8, 4) : (1@laneid, 1@m)])
    >>> unpack(pack(L, 2), 2).equivalent(L)
    True
"""
from __future__ import annotations
from tirxpy.errors import shown

from .axis import Axis
from .canonical import fuse_shard, pinned_offset
from .errors import LayoutError, LayoutTypeError
from .iters import Iter, bounded_int
from .tile import TileLayout

_M = Axis.get("m")


def _factor(factor) -> int:
    return bounded_int(factor, "pack/unpack factor", 1)


def _plain_tile(L, op) -> TileLayout:
    if not isinstance(L, TileLayout):
        raise LayoutTypeError(
            f"{op} takes a TileLayout, got {type(L).__name__}; a swizzled layout is packed by packing its tile "
            "and choosing the swizzle for the wider element"
        )
    return L


def pack(L: TileLayout, factor: int) -> TileLayout:
    """Pack ``factor`` consecutive logical elements into one wider element on ``m``.

    *Requires*: the innermost shard iterators walk ``factor``-divisible elements contiguously on
    ``m`` (stride 1), and every other ``m`` stride and the ``m`` offset divide by ``factor``
    (iterators of extent 1 are ignored: they move nothing), so layouts that differ only by iterator
    splits or extent-1 iterators pack alike.
    *Postcondition*: ``packed.size() == L.size() // factor`` and ``packed.apply(i) ==
    L.apply(i * factor)`` with ``m`` divided by ``factor`` (replicas likewise).

        >>> from tirxpy.layout import S, TileLayout
        >>> pack(TileLayout(S[(4, 8) : (16, 1)]), 4)
        TileLayout(S[(4, 2) : (4@m, 1@m)])
        >>> pack(TileLayout(S[(4, 2) : (1, 4)]), 2)
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: pack(2) needs the innermost elements contiguous on m (stride 1), but the innermost shard iterator is Iter(2, 4, m); make the packed elements the fastest-varying stride-1 m digit
    """
    L, f = _plain_tile(L, "pack"), _factor(factor)
    if f == 1:
        return L
    shard = list(fuse_shard(L.shard))
    last = shard[-1] if shard else None
    if last is None or last.axis is not _M or last.stride != 1:
        raise LayoutError(
            f"pack({f}) needs the innermost elements contiguous on m (stride 1), but the innermost shard iterator is "
            f"{shown(last)}; make the packed elements the fastest-varying stride-1 m digit"
        )
    if last.extent % f:
        raise LayoutError(
            f"pack({f}): the innermost contiguous run on m has {last.extent} elements, which {f} does not divide; "
            f"pack by a divisor of {last.extent}"
        )
    shard[-1] = Iter(last.extent // f, f, _M)

    def div(its, what):
        out = []
        for k, it in enumerate(its):
            if it.axis is _M:
                if it.stride % f:
                    raise LayoutError(
                        f"pack({f}): m stride {it.stride} of {what} iterator {k} ({shown(it)}) is not divisible by "
                        f"{f}; packed elements would straddle two wide elements"
                    )
                it = Iter(it.extent, it.stride // f, _M)
            out.append(it)
        return out

    off = L.offset
    if off.get("m", 0) % f:
        raise LayoutError(f"pack({f}): the m offset {off['m']} is not divisible by {f}; align the tile to {f} elements")
    if "m" in off:
        off["m"] //= f
    # an extent-1 replica places no copy (its stride is never used): dropped like extent-1 shard iterators,
    # its axis kept named by pinned_offset
    replica = [it for it in L.replica if it.extent > 1]
    return TileLayout.from_iters(div(shard, "shard"), div(replica, "replica"), pinned_offset(L, off))


def unpack(L: TileLayout, factor: int) -> TileLayout:
    """Split each element into ``factor`` consecutive narrower elements on ``m`` (inverse of pack).

    *Postcondition*: ``unpack(L, f).size() == L.size() * f``, element ``i * f + r`` sits at
    ``m = f * L.apply(i)['m'] + r``; ``unpack(pack(L, f), f)`` is equivalent to ``L``.

        >>> from tirxpy.layout import S, TileLayout, laneid
        >>> unpack(TileLayout(S[(8, 4) : (1@laneid, 1)]), 2)
        TileLayout(S[(8, 8) : (1@laneid, 1@m)])
    """
    L, f = _plain_tile(L, "unpack"), _factor(factor)
    if f == 1:
        return L

    def mul(its):
        return [Iter(it.extent, it.stride * f, _M) if it.axis is _M else it for it in its]

    off = L.offset
    if "m" in off:
        off["m"] *= f
    return TileLayout.from_iters(fuse_shard(mul(L.shard) + [Iter(f, 1, _M)]), mul(L.replica), pinned_offset(L, off))


COMPOSE_LIMIT = 1 << 16
"""Largest inner layout whose composition is decided by evaluating it element by element (when the
closed-form digit walk does not apply)."""


def _outer_digits(outer):
    """Outer's fused shard digits, fastest first: (extent, stride, axis, place value)."""
    out, place = [], 1
    for it in reversed(fuse_shard(outer.shard)):
        out.append((it.extent, it.stride, it.axis, place))
        place *= it.extent
    return out


def _walk(digits, e, t, use):
    """Iterators of ``j -> outer(j * t)`` for ``j < e`` (slowest first), adding each digit's largest
    contribution to ``use``; None when the walk does not split into whole or truncated digits."""
    if e == 1:
        return []
    if t == 0:
        return [Iter(e, 0, _M)]
    out, rs, re = [], t, e
    for k, (E, s, ax, _) in enumerate(digits):
        if re == 1:
            break
        if rs % E == 0:                  # the walk steps over this digit entirely
            rs //= E
            continue
        if E % rs == 0:                  # the walk starts inside this digit, rs apart
            avail = E // rs
            take = re if re <= avail else avail
            if re > avail and re % avail:
                return None
        elif (re - 1) * rs < E:          # the whole rest of the walk fits inside this digit
            take = re
        else:
            return None
        out.insert(0, Iter(take, s * rs, ax))
        use[k] += (take - 1) * rs
        re //= take
        rs = 1
    return out if re == 1 else None


def _closed_form(outer, inner):
    """The composition built digit by digit, when no inner walk carries across an outer digit."""
    digits = _outer_digits(outer)
    use = [0] * len(digits)
    shard = []
    for it in fuse_shard(inner.shard):
        part = _walk(digits, it.extent, it.stride, use)
        if part is None:
            return None
        shard += part
    c = inner.offset.get("m", 0)
    for k, (E, _, _, place) in enumerate(digits):
        if (c // place) % E + use[k] >= E:   # offset digit plus the walks would carry
            return None
    return TileLayout.from_iters(shard, outer.replica, outer.apply(c))


def _by_steps(outer, inner):
    """The composition read off its values: the fastest digit is the longest run of equal steps
    from element 0, the next one runs over multiples of it, and so on; then checked everywhere."""
    axes = outer.axes()
    n = inner.size()
    vals = [tuple(outer.apply(inner.apply(i).get("m", 0))[a] for a in axes) for i in range(n)]
    base, place, left, digits = vals[0], 1, n, []
    while left > 1:
        v = tuple(x - b for x, b in zip(vals[place], base))
        run = 1
        while run < left and vals[run * place] == tuple(b + run * x for b, x in zip(base, v)):
            run += 1
        moved = [a for a, x in zip(axes, v) if x]
        if left % run or any(x < 0 for x in v) or len(moved) > 1:
            return None, (f"the composite steps by {dict(zip(axes, v))} from element 0 to {place}, a step no "
                          "single non-negative iterator on one axis makes for a whole digit")
        digits.insert(0, Iter(run, v[axes.index(moved[0])] if moved else 0, moved[0] if moved else "m"))
        place *= run
        left //= run
    try:
        cand = TileLayout.from_iters(digits, outer.replica, dict(zip(axes, base)))
    except LayoutError as e:
        # every value of the composite lies in outer's (valid) image, so digits that leave an axis's
        # bound cannot reproduce it: the walk carries across outer's digits
        return None, (f"the digits found from the steps ({list(digits)}) do not form a layout ({e.msg if hasattr(e, 'msg') else e}): "
                      "inner's walk carries across outer's digits")
    for i in range(n):
        got = cand.apply(i)
        if tuple(got.get(a, 0) for a in axes) != vals[i]:
            return None, (f"element {i} goes to {dict(zip(axes, vals[i]))}, but the digits found from the steps "
                          f"({list(digits)}) put it at {got}: inner's walk carries across outer's digits")
    return cand, None


def _compose(outer, inner):
    if not isinstance(outer, TileLayout):
        raise LayoutTypeError(f"compose: outer must be a TileLayout (a swizzle is not affine), got {type(outer).__name__}")
    if not isinstance(inner, TileLayout):
        raise LayoutTypeError(f"compose: inner must be a TileLayout on m, got {type(inner).__name__}")
    bad = [a for a in inner.axes() if a != "m"]
    if bad:
        raise LayoutError(
            f"compose: inner must place elements only on m (a memory layout), but it uses {', '.join(bad)}"
        )
    if any(it.extent > 1 and it.stride > 0 for it in inner.replica):
        raise LayoutError("compose: inner must map each index to one m (a function); drop its replicas")
    hi = inner.offset.get("m", 0) + sum((it.extent - 1) * it.stride for it in inner.shard)
    if hi >= outer.size():
        raise LayoutError(
            f"compose: inner reaches m = {hi} but outer has only {outer.size()} logical elements; "
            f"keep inner's m inside [0, {outer.size()})"
        )
    got = _closed_form(outer, inner)
    if got is not None:
        return got, None
    if inner.size() > COMPOSE_LIMIT:
        raise LayoutError(
            f"compose: inner's iterators do not walk outer's digits without carrying, and deciding whether the "
            f"composition is affine anyway means evaluating all {inner.size()} elements, past the limit of "
            f"{COMPOSE_LIMIT} (COMPOSE_LIMIT); compose a smaller inner layout"
        )
    cand, why = _by_steps(outer, inner)
    return cand, (None if cand is not None else f"the composition is not affine: {why}")


def compose(outer: TileLayout, inner: TileLayout) -> TileLayout | None:
    """Functional composition ``(outer o inner)(i) = outer.owners(inner.apply(i)['m'])``.

    *Requires*: ``inner`` places elements only on ``m``, without replicas, inside
    ``[0, outer.size())`` (else :class:`LayoutError`). *Postcondition*: the composition is
    *affine* when some TileLayout ``C`` with ``inner.size()`` elements and ``outer``'s replicas has
    ``C.apply(i) == outer.apply(inner.apply(i)['m'])`` for every ``i``; ``compose`` returns such a
    ``C`` exactly when one exists, and ``None`` otherwise (the ``Layout.compose`` method raises
    with the reason instead). Decided in closed form when each inner iterator walks whole or
    truncated digits of ``outer`` and no walk (plus inner's offset) carries into the next digit;
    otherwise by reading the composite's steps off its values, which is refused with
    :class:`LayoutError` past ``COMPOSE_LIMIT`` (2**16) inner elements.

        >>> from tirxpy.layout import S, TileLayout, laneid, warpid
        >>> outer = TileLayout(S[(4, 32) : (1@warpid, 1@laneid)])
        >>> compose(outer, TileLayout(S[(32, 4) : (1, 32)]))     # transpose the index space
        TileLayout(S[(32, 4) : (1@laneid, 1@warpid)])
        >>> compose(TileLayout(S[8 : 1]), TileLayout(S[3 : 1]))  # a truncated digit
        TileLayout(S[3 : 1@m])
        >>> compose(outer, TileLayout(S[4 : 31])) is None        # lanes 0, 31, then warp 1 lane 30
        True
    """
    return _compose(outer, inner)[0]
