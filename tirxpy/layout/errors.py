"""Errors raised by the layout library."""
from tirxpy.errors import TirxError


class LayoutError(TirxError, ValueError):
    """A layout, coordinate or layout operation is invalid.

    The message always says what is wrong and how to fix it, e.g.::

        >>> from tirxpy.layout import S, TileLayout
        >>> TileLayout(S[(8, 0) : (1, 1)])
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: shard iterator 1 has extent 0; every extent must be a positive integer (drop the iterator or give it extent >= 1)
    """
