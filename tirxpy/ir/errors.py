"""Errors of the IR layer, each pointing at the user's source.

Every IR node carries a :class:`Span` (file, line, column). Errors render as::

    kernel.py:12:5: error: <what is wrong>
        B[i] = A[i] / 2
        ^^^^^^^^^^^^^^^
    hint: <what to write instead>

    >>> from tirxpy.ir.errors import ParseError, Span
    >>> e = ParseError("integer '/' is not defined", Span("<doc>", 1, 0), hint="write a // b")
    >>> print(e)
    <doc>:1:0: error: integer '/' is not defined
    hint: write a // b
"""
from __future__ import annotations

import contextvars
import linecache
from dataclasses import dataclass, field

from tirxpy.scope.errors import ScopeError, TirxError


@dataclass(frozen=True)
class Span:
    """A source location: file, 1-based line, 0-based column (and the end column, if known); ``via``: for a
    construct expanded from a ``@T.macro``, the span of the macro's call (itself with a ``via`` when that call
    sits in another macro). ``via`` takes no part in equality."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None
    via: Span | None = field(default=None, compare=False, repr=False)

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


_current_span: contextvars.ContextVar = contextvars.ContextVar("tirxpy_span", default=None)


def current_span() -> Span | None:
    """The span of the source construct being parsed (nodes built now take it)."""
    return _current_span.get()


class at_span:
    """Context manager: nodes built inside take ``span`` as their source location."""

    def __init__(self, span):
        self.span = span

    def __enter__(self):
        self._tok = _current_span.set(self.span)
        return self.span

    def __exit__(self, *exc):
        _current_span.reset(self._tok)
        return False


def render(msg: str, span: Span | None = None, hint: str | None = None) -> str:
    if span is None:
        text = msg
    else:
        text = f"{span}: error: {msg}"
        src = span.source_line()
        if src.strip():
            text += f"\n    {src}"
            width = max(1, (span.end_col if span.end_col is not None else len(src)) - span.col)
            text += "\n    " + " " * span.col + "^" * width
    if hint:
        text += f"\nhint: {hint}"
    return text


class _Located(TirxError, ValueError):
    """A TirxError with an optional source span and hint."""

    def __init__(self, msg: str, span: Span | None = None, hint: str | None = None):
        self.msg = msg
        self.span = span if span is not None else current_span()
        self.hint = hint
        super().__init__(render(msg, self.span, hint))


class IRError(_Located):
    """IR built wrong: bad operand types, dtype mismatch in an expression, bad buffer access."""


class ParseError(_Located):
    """Kernel source the parser cannot turn into IR."""


class VerifyError(_Located):
    """A well-formed kernel that breaks a rule: scope, storage, dtype, shape, hardware limit."""


__all__ = ["Span", "TirxError", "IRError", "ParseError", "VerifyError", "ScopeError", "at_span", "current_span"]
