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

import itertools
from math import prod

import sympy
from hypothesis import strategies as st

from tirxpy.layout.errors import MAX_ITERS, LayoutError
from tirxpy.layout.iters import bounded_int


@st.composite
def shapes(draw, size, max_rank=3, rank=None):
    """A shape of rank ``rank`` (default: 1 to ``max_rank``) whose product is ``size``; its dimensions need
    not line up with any layout's iterators. ``size`` is an int in ``[1, 2**64)``, ranks in ``[1, MAX_ITERS]``
    (LayoutError otherwise)."""
    size = bounded_int(size, "shapes: size", 1)
    if rank is not None:
        rank = bounded_int(rank, "shapes: rank", 1)
    max_rank = bounded_int(max_rank, "shapes: max_rank", 1)
    if max(rank or 0, max_rank) > MAX_ITERS:
        raise LayoutError(f"shapes: rank {max(rank or 0, max_rank)} is past {MAX_ITERS} (the limit MAX_ITERS)")
    primes = [p for p, k in sorted(sympy.factorint(size).items()) for _ in range(k)]   # fast for any size < 2**64
    primes = draw(st.permutations(primes))
    rank = rank or draw(st.integers(1, max_rank))
    dims = [1] * rank
    for q in primes:
        dims[draw(st.integers(0, rank - 1))] *= q
    return tuple(dims)


@st.composite
def aligned_shapes(draw, L, max_rank=3):
    """A shape made by merging adjacent shard extents of ``L``: ``tirxpy.layout.group(L, shape)`` succeeds."""
    ext = [it.extent for it in L.shard] or [1]
    cuts = sorted(draw(st.sets(st.integers(1, max(len(ext) - 1, 1)), max_size=max_rank - 1)))
    cuts = [c for c in cuts if c < len(ext)]
    bounds = [0] + cuts + [len(ext)]
    return tuple(prod(ext[a:b]) for a, b in zip(bounds, bounds[1:]))


@st.composite
def coords(draw, shape):
    """An in-range coordinate of ``shape``."""
    return tuple(draw(st.integers(0, n - 1)) for n in shape)


@st.composite
def regions(draw, shape):
    """A non-empty region of ``shape``: one ``(start, stop)`` per dimension."""
    out = []
    for n in shape:
        a = draw(st.integers(0, n - 1))
        out.append((a, draw(st.integers(a + 1, n))))
    return tuple(out)


def domain(shape):
    """Every coordinate of ``shape``, row-major."""
    return itertools.product(*(range(n) for n in shape))


def norm(owners):
    """Owner dicts with zero coordinates dropped (a missing axis reads 0), as a list."""
    return [{k: v for k, v in d.items() if v} for d in owners]


def owner_set(owners):
    """Owner dicts as a set of sorted ``(axis, value)`` tuples, zeros dropped: equal sets, equal owners."""
    return {tuple(sorted(d.items())) for d in norm(owners)}
