"""Structural equality of IR (spans ignored).

Variables and buffers compare by position: the first time two variables meet they are
paired, and every later use must respect the pairing (so names may differ). With
``map_free_vars=False`` variables must be the same objects.

    >>> from tirxpy.ir import Var, structural_equal
    >>> i, j = Var("i"), Var("j")
    >>> structural_equal(i * 4 + 1, j * 4 + 1)
    True
    >>> structural_equal(i * 4 + 1, j * 4 + 1, map_free_vars=False)
    False
    >>> structural_equal(i + i, i + j)
    False
"""
from __future__ import annotations

from tirxpy.layout import Layout

from .expr import Var
from .node import Node


def structural_equal(a, b, map_free_vars: bool = True) -> bool:
    """True when ``a`` and ``b`` have the same structure (see the module docstring)."""
    return _Cmp(map_free_vars).eq(a, b)


class _Cmp:
    def __init__(self, map_free):
        self.map_free = map_free
        self.amap: dict = {}
        self.bmap: dict = {}

    def _pair(self, a, b) -> bool:
        if a in self.amap or b in self.bmap:
            return self.amap.get(a) is b and self.bmap.get(b) is a
        self.amap[a] = b
        self.bmap[b] = a
        return True

    def eq(self, a, b) -> bool:
        from .buffer import Buffer

        if a is b and not isinstance(a, (Var, Buffer)):
            return True
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                return False
            if isinstance(a, Var):
                if a.dtype != b.dtype:
                    return False
                if not self.map_free:
                    return a is b
                return self._pair(a, b)
            if isinstance(a, Buffer):
                if a in self.amap or b in self.bmap:
                    return self._pair(a, b)
                if not (a.shape == b.shape and a.dtype == b.dtype and a.storage == b.storage and self.eq(a.layout, b.layout)):
                    return False
                if (a.base is None) != (b.base is None) or (a.base is not None and not self.eq(a.base, b.base)):
                    return False   # an alias (Buffer.alias) equals only an alias of the corresponding root
                if not self.map_free:
                    return a is b
                return self._pair(a, b)
            for (_, x), (_, y) in zip(a.fields(), b.fields()):
                if not self.eq(x, y):
                    return False
            return True
        if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
            return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)
                    and all(self.eq(x, y) for x, y in zip(a, b)))
        if isinstance(a, dict) or isinstance(b, dict):
            return (isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b)
                    and all(self.eq(a[k], b[k]) for k in a))
        if isinstance(a, Layout) or isinstance(b, Layout):
            return type(a) is type(b) and a.identical(b)
        if isinstance(a, float) and isinstance(b, float):
            return a == b or (a != a and b != b)
        if type(a) is not type(b) and not (isinstance(a, str) or isinstance(b, str)):
            return False
        return a == b
