"""Errors raised by the layout library, and the limits every layout query stays within."""
from tirxpy.errors import TirxError


class LayoutError(TirxError, ValueError):
    """A layout, coordinate or layout operation is invalid.

    The message always says what is wrong and how to fix it, e.g.::

        >>> from tirxpy.layout import S, TileLayout
        >>> TileLayout(S[(8, 0) : (1, 1)])
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: iterator extent 0 is not positive; every extent must be a positive integer (drop the iterator or give it extent >= 1)
    """


class LayoutTypeError(LayoutError, TypeError):
    """An argument of a layout call has the wrong kind (a float, bool or string where an int belongs,
    a number where an axis name belongs); catchable as LayoutError or TypeError.

        >>> from tirxpy.layout import S, TileLayout
        >>> TileLayout(S[True : 1])
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutTypeError: S[...] extent must be an integer, got True (bool); write 1 or 0, not True / False
    """


MAX_COORD = 1 << 64
"""Every layout coordinate (offset + reach on any axis), size and shape entry is below 2**64."""
MAX_ITERS = 64
"""At most this many shard iterators, and this many replica iterators, per layout."""
MAX_TABLE = 1 << 22
"""Largest owner table (elements x replicas) a query materializes; bigger layouts are answered in
closed form where one exists, else refused naming this limit."""
MAX_ANSWER = 1 << 18
"""Largest list a query returns (``elements_at`` indices, ``owners`` replicas)."""
MAX_SEARCH = 1 << 18
"""Most steps the closed-form reverse query (:mod:`tirxpy.layout.solve`) takes on overlapping iterators."""
MAX_SWIZZLE_BITS = 64
"""``per_element + atom_len + swizzle_len`` of a swizzle is at most this (it acts on 64-bit addresses)."""
