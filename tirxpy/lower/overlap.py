"""Whether two tensors share memory: the launch path's test that a tensor a kernel writes is no other argument.

Two dense strided tensors share memory when some byte belongs to an element of each. Element ``i`` of a tensor
starts at ``data_ptr() + sum(i_k * stride_k) * element_size`` and spans ``element_size`` bytes. Tensors whose
byte spans (first element to the end of the last) do not intersect share nothing (different allocations never
do, whatever their storages); for those whose spans intersect the element offsets are searched exactly, so the
interleaved views of one buffer (the ``k`` and ``v`` slices of a packed ``(B, S, 3, H, D)`` tensor, alternate
columns) do not share memory while two views of one row do. A search that would take more than ``budget`` steps
answers True (may share): the test errs on the side of refusing. Tensors on different devices, on the meta
device, or without elements share nothing.

    >>> import torch
    >>> w = torch.zeros(8, 8)
    >>> overlaps(w[:4], w[3:]), overlaps(w[:4], w[4:]), overlaps(w[:, ::2], w[:, 1::2]), overlaps(w[:, 0], w[5])
    (True, False, False, True)
    >>> qkv = torch.zeros(2, 16, 3, 4, 64, dtype=torch.bfloat16)
    >>> overlaps(qkv[:, :, 1], qkv[:, :, 2]), overlaps(qkv[:, :, 1], qkv[:, :, 1, :2])
    (False, True)
"""
from __future__ import annotations

BUDGET = 100_000
"""The search steps :func:`overlaps` takes before it answers "may share" (True); views of one buffer whose strides
nest (each at least the extent of the smaller ones: the views torch's slicing and ``unbind`` make) take a few steps
per dimension."""


def span(t) -> tuple:
    """``(first byte, one past the last byte)`` of dense tensor ``t``'s elements (strides are not negative in
    torch); ``(p, p)`` for a tensor without elements.

        >>> import torch
        >>> x = torch.zeros(4, 4, dtype=torch.float16)
        >>> b0, b1 = span(x[:, 1]); b0 - x.data_ptr(), b1 - b0
        (2, 26)
    """
    p = t.data_ptr()
    if t.numel() == 0:
        return p, p
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return p, p + (last + 1) * t.element_size()


def overlaps(x, y, budget: int = BUDGET) -> bool:
    """Whether dense tensors ``x`` and ``y`` may share a byte of memory (module docstring: the exact test, and True
    where it takes more than ``budget`` steps)."""
    if x.device != y.device or x.device.type == "meta" or x.numel() == 0 or y.numel() == 0:
        return False
    (x0, x1), (y0, y1) = span(x), span(y)
    if not (x0 < y1 and y0 < x1):
        return False
    ex, ey = x.element_size(), y.element_size()
    # a byte of both: y's element at y0 + sum(j Y) and x's at x0 + sum(i X) intersect when their offset d = (y0 +
    # sum(j Y)) - (x0 + sum(i X)) lies in [-(ey - 1), ex - 1]; the terms are the byte strides with their
    # coefficient ranges, equal strides merged (j in [0, n - 1], -i in [-(n - 1), 0])
    terms: dict = {}
    for t, sign in ((x, -1), (y, 1)):
        for n, s in zip(t.shape, t.stride()):
            if n > 1 and s != 0:
                lo, hi = terms.get(s * t.element_size(), (0, 0))
                terms[s * t.element_size()] = (lo + min(0, sign * (n - 1)), hi + max(0, sign * (n - 1)))
    return _solvable(y0 - x0, sorted(terms.items(), reverse=True), -(ey - 1), ex - 1, budget)


def _solvable(d: int, terms: list, lo: int, hi: int, budget: int) -> bool:
    """Whether ``d + sum(c_k w_k)`` lies in ``[lo, hi]`` for integers ``c_k`` in the ranges of ``terms``
    (``[(w_k, (c_lo, c_hi))]``, largest weight first): a depth-first search, each coefficient limited to the values
    the remaining terms can still bring into range; True past ``budget`` steps."""
    rest_lo, rest_hi = [0] * (len(terms) + 1), [0] * (len(terms) + 1)
    for k in range(len(terms) - 1, -1, -1):
        w, (c0, c1) = terms[k]
        rest_lo[k], rest_hi[k] = rest_lo[k + 1] + c0 * w, rest_hi[k + 1] + c1 * w
    steps = 0
    stack = [(0, d)]
    while stack:
        k, v = stack.pop()
        if k == len(terms):
            if lo <= v <= hi:
                return True
            continue
        w, (c0, c1) = terms[k]
        first = max(c0, -((v + rest_hi[k + 1] - lo) // w))      # ceil((lo - rest_hi - v) / w)
        last = min(c1, (hi - rest_lo[k + 1] - v) // w)
        steps += max(0, last - first + 1)
        if steps > budget:
            return True
        stack.extend((k + 1, v + c * w) for c in range(first, last + 1))
    return False


__all__ = ["BUDGET", "overlaps", "span"]
