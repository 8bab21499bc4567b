"""Hypothesis strategies for shapes, coordinates and regions, and helpers to compare owners.

    >>> from math import prod
    >>> from hypothesis import given
    >>> from tirxpy.testing.shapes import shapes, domain
    >>> @given(shapes(24))
    ... def product_is_24(shape):
    ...     assert prod(shape) == 24
    >>> product_is_24()
    >>> list(domain((2, 2)))
    [(0, 0), (0, 1), (1, 0), (1, 1)]
"""
from __future__ import annotations

from math import prod

import sympy
from hypothesis import strategies as st

from tirxpy.layout.coords import unflatten
from tirxpy.layout.errors import MAX_ITERS, LayoutError, LayoutTypeError
from tirxpy.errors import shown

from . import _args


def shapes(size, max_rank=3, rank=None):
    """A shape of rank ``rank`` (default: 1 to ``max_rank``) whose product is ``size``; its dimensions need
    not line up with any layout's iterators. ``size`` is an int in ``[1, 2**64)``, ranks in ``[1, MAX_ITERS]``
    (LayoutError when called otherwise)."""
    size = _args.count(size, "shapes", "size", 1)
    rank = None if rank is None else _args.count(rank, "shapes", "rank", 1, MAX_ITERS)
    max_rank = _args.count(max_rank, "shapes", "max_rank", 1, MAX_ITERS)
    primes = [p for p, k in sorted(sympy.factorint(size).items()) for _ in range(k)]   # fast for any size < 2**64
    return _shapes(primes, max_rank, rank)


@st.composite
def _shapes(draw, primes, max_rank, rank):
    primes = draw(st.permutations(primes))
    rank = rank or draw(st.integers(1, max_rank))
    dims = [1] * rank
    for q in primes:
        dims[draw(st.integers(0, rank - 1))] *= q
    return tuple(dims)


def aligned_shapes(L, max_rank=3):
    """A shape made by merging adjacent shard extents of the TileLayout ``L`` into at most ``max_rank`` (in
    ``[1, MAX_ITERS]``) dimensions: ``tirxpy.layout.group(L, shape)`` succeeds."""
    L = _args.tile_layout(L, "aligned_shapes")
    max_rank = _args.count(max_rank, "aligned_shapes", "max_rank", 1, MAX_ITERS)
    return _aligned_shapes([it.extent for it in L.shard] or [1], max_rank)


@st.composite
def _aligned_shapes(draw, ext, max_rank):
    cuts = sorted(draw(st.sets(st.integers(1, max(len(ext) - 1, 1)), max_size=max_rank - 1)))
    cuts = [c for c in cuts if c < len(ext)]
    bounds = [0] + cuts + [len(ext)]
    return tuple(prod(ext[a:b]) for a, b in zip(bounds, bounds[1:]))


def coords(shape):
    """An in-range coordinate of ``shape`` (a tuple of ints in ``[1, 2**64)``)."""
    shape = _args.shape(shape, "coords")
    return st.tuples(*(st.integers(0, n - 1) for n in shape))


def regions(shape):
    """A non-empty region of ``shape`` (a tuple of ints in ``[1, 2**64)``): one ``(start, stop)`` per dimension."""
    shape = _args.shape(shape, "regions")
    return st.tuples(*(st.integers(0, n - 1).flatmap(lambda a, n=n: st.tuples(st.just(a), st.integers(a + 1, n)))
                       for n in shape))


def domain(shape):
    """Every coordinate of ``shape``, row-major, made one at a time (a huge shape costs no memory up front).

        >>> next(iter(domain((2**40, 3))))
        (0, 0)
    """
    shape = _args.shape(shape, "domain")
    return (tuple(int(x) for x in unflatten(i, shape)) for i in range(prod(shape)))


def _owner_list(owners, fn):
    if not isinstance(owners, (list, tuple)) or not all(isinstance(d, dict) for d in owners):
        raise LayoutTypeError(f"{fn}: owners must be a list of owner dicts (what L.owners(...) returns), got "
                              f"{shown(owners)} ({type(owners).__name__})")
    return owners


def norm(owners):
    """Owner dicts with zero coordinates dropped (a missing axis reads 0), as a list."""
    return [{k: v for k, v in d.items() if v} for d in _owner_list(owners, "norm")]


def owner_set(owners):
    """Owner dicts as a set of sorted ``(axis, value)`` tuples, zeros dropped: equal sets, equal owners."""
    try:
        return {tuple(sorted(d.items())) for d in norm(_owner_list(owners, "owner_set"))}
    except TypeError:       # an owner that is not axis name -> int: unhashable or unsortable
        raise LayoutTypeError("owner_set: owners must map axis names to ints (what L.owners(...) returns), got "
                              f"{shown(owners, 100)}") from None
