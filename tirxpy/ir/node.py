"""The base of every IR node: named fields plus a source span.

Nodes compare by identity (``is``); use :func:`tirxpy.ir.structural_equal` to compare
structure. ``node.fields()`` lists ``(name, value)`` pairs in declaration order, which the
printer, the structural comparison and the visitors walk.
"""
from __future__ import annotations

from .errors import current_span


class Node:
    """Base IR node. Subclasses list their structural fields in ``_fields``."""

    _fields: tuple = ()

    def __init__(self, span=None):
        self.span = span if span is not None else current_span()

    def fields(self):
        return [(f, getattr(self, f)) for f in self._fields]

    def __repr__(self) -> str:
        from .printer import node_text

        return node_text(self)

    __str__ = __repr__
