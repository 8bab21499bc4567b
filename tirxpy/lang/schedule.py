"""Persistent tile schedulers, written as plain Python that builds device expressions.

A persistent kernel launches about one CTA (or cluster) per SM and walks a list of output tiles:
unit ``u`` of ``G`` takes tiles ``u, u + G, u + 2 G, ...``. The order of that list decides how
well the operand tiles are reused from L2: going row-major over a wide ``N`` streams the whole of
``B`` through L2 for every band of ``A``. :func:`grouped_tile` walks ``group`` rows of tiles
column by column instead (the "grouped" / "swizzled" order of Triton and CUTLASS), so the
``G`` tiles in flight at one time touch ``group`` bands of ``A`` and ``~G / group`` bands of
``B``.

The functions take and return Python ints or tirxpy expressions alike (they only use ``//``,
``%``, ``*``, ``+`` and ``T.min``), so a kernel calls them inside ``@T.prim_func``:

    >>> from tirxpy.lang.schedule import grouped_tile

    >>> grouped_tile(0, 4, 3, 2), grouped_tile(1, 4, 3, 2), grouped_tile(2, 4, 3, 2)
    ((0, 0), (1, 0), (0, 1))
    >>> sorted(grouped_tile(t, 5, 3, 2) for t in range(15)) == [(m, n) for m in range(5) for n in range(3)]
    True
"""
from __future__ import annotations

from tirxpy.ir import T


def cdiv(a: int, b: int) -> int:
    """``ceil(a / b)`` for positive ``b``: tiles of ``b`` that cover ``a``.

        >>> cdiv(4096, 128), cdiv(4097, 128), cdiv(1, 128)
        (32, 33, 1)
    """
    return -(-a // b)


def _min(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return T.min(a, b)


def _select(cond, a, b):
    if isinstance(cond, bool):
        return a if cond else b
    return T.select(cond, a, b)


def grouped_tile(t, num_m: int, num_n: int, group: int):
    """``(tile_m, tile_n)`` of linear tile ``t`` in the grouped order over a ``num_m x num_n``
    grid of tiles: bands of ``group`` tile rows, each walked column by column (the last band
    may be shorter). A bijection of ``[0, num_m * num_n)``. When ``group`` divides ``num_m`` every
    band is ``group`` rows high, and the divisions are by constants."""
    per_group = group * num_n
    first_m = (t // per_group) * group
    size = group if num_m % group == 0 else _min(num_m - first_m, group)
    r = t % per_group
    return first_m + r % size, r // size


def split_tile(t, num_m: int, num_n: int, group: int, split: tuple, bn: int):
    """``(tile_m, n0, wide)`` of linear tile ``t`` over a ``num_m x num_n`` grid of ``bn``-wide tiles whose
    first ``rows`` tile rows are split differently (``split = (rows, wide, narrow, bn2)``): ``wide`` tiles of
    ``bn`` columns, then ``narrow`` tiles of ``bn2``. The split rows come first in the list, each part in the
    grouped order of :func:`grouped_tile`; ``n0`` is the tile's first column and ``wide`` whether it is ``bn``
    wide. Narrower tiles in some rows let a persistent kernel deal its tiles evenly where the plain grid
    leaves a partial last round (:func:`tirxpy_kernels.gemm_sm90.balanced_split`).

        >>> [split_tile(t, 2, 2, 1, (1, 1, 2, 64), 128) for t in range(5)]     # N = 256: 128 + 64 + 64
        [(0, 0, True), (0, 128, False), (0, 192, False), (1, 0, True), (1, 128, True)]
    """
    rows, wide, narrow, bn2 = split
    per_row = wide + narrow
    first = rows * per_row
    ys = t < first
    ym, yn = grouped_tile(_min(t, first - 1), rows, per_row, group)
    xm, xn = grouped_tile(_select(ys, 0, t - first), max(num_m - rows, 1), num_n, group)
    n0 = _select(ys, _select(yn < wide, yn * bn, wide * bn + (yn - wide) * bn2), xn * bn)
    return _select(ys, ym, rows + xm), n0, _select(ys, yn < wide, True)


def tiles_of_unit(unit, units: int, total: int):
    """How many tiles unit ``unit`` of ``units`` takes from ``total`` (``ceil((total - unit) / units)``,
    0 when ``unit >= total``)."""
    return (total - unit + units - 1) // units


def persistent_units(total: int, sms: int, cluster: int = 1) -> int:
    """Units (clusters) to launch: at most one CTA per SM, no more than there are tiles."""
    return max(1, min(total, sms // cluster))
