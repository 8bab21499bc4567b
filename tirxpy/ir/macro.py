"""``@T.macro``: a named, parameterized piece of kernel body, expanded inline where it is called.

A macro is written like a kernel body (device loops, branches, primitives ``Tx.*``, intrinsics)
and called as a statement inside a ``@T.prim_func`` or another macro. Each call parses the
macro's body again with its parameters bound to the call's arguments, so Python arguments
(tile indices, flags) specialize it at parse time and device arguments (buffers, expressions)
become part of the IR. Expansion is hygienic: the body sees its parameters, its own closure and
module globals, never the caller's local names, and its assignments do not leak to the caller.

    >>> from tirxpy import T
    >>> @T.macro
    ... def add_to(dst, src, i, scale):
    ...     dst[i] = dst[i] + src[i] * T.float32(scale)
    >>> @T.prim_func
    ... def axpy(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
    ...     T.launch(grid=(1,), threads=64)
    ...     add_to(Y, X, T.thread_id(), 2.0)
    >>> print(axpy)
    @T.prim_func
    def axpy(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        T.launch(grid=(1,), threads=64)
        Y[T.thread_id()] = Y[T.thread_id()] + X[T.thread_id()] * T.float32(2.0)
"""
from __future__ import annotations

import inspect

from tirxpy.errors import shown

from . import trust
from .errors import ParseError, Span


class Macro:
    """A function marked ``@T.macro``; call it inside a kernel body as a statement."""

    __tirx_macro__ = True   # how the parser knows it (also across re-imports of this module)

    def __init__(self, fn, outer: dict):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise ParseError(f"@T.macro decorates a function, got {shown(fn)}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.signature = inspect.signature(fn)
        self.outer = outer
        self._parsed = None

    def parsed(self):
        """``(body statements, file, line offset, column offset, closure, globals)``, parsed once."""
        if self._parsed is None:
            from .parser import _closure_of, body_without_docstring, function_source

            fn = self.fn
            fdef, file, line_offset, indent = function_source(fn, f"macro {fn.__name__}", "define macros in a .py file")
            body = body_without_docstring(fdef)
            for s in body:   # what no kernel source may contain (tirxpy.ir.trust), checked once per macro
                trust.check_tree(s, lambda n: Span(file, getattr(n, "lineno", 1) + line_offset,
                                                   getattr(n, "col_offset", 0) + indent))
            closure = dict(self.outer)
            closure.update(_closure_of(fn))
            self._parsed = (body, file, line_offset, indent, closure, fn.__globals__)
        return self._parsed

    def bind(self, args, kwargs) -> dict:
        """The call's arguments by parameter name (defaults applied); TypeError when they do not fit."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def __get__(self, obj, owner=None):
        """A macro defined in a class is a method: ``obj.name(...)`` expands with ``obj`` bound to its
        first parameter (``self``)."""
        return self if obj is None else BoundMacro(self, obj)

    def __call__(self, *args, **kwargs):
        raise ParseError(f"macro {shown(self.__name__)} only expands inside a @T.prim_func body (or another macro)",
                         hint=f"call {self.__name__}(...) as a statement in a kernel")

    def __repr__(self):
        return f"<T.macro {self.__name__}{self.signature}>"


class BoundMacro:
    """A macro method read from an object: expands like the macro with the object as its first argument.

        >>> from tirxpy import T
        >>> class Counter:
        ...     def __init__(self, buf):
        ...         self.buf = buf
        ...     @T.macro
        ...     def bump(self, i):
        ...         self.buf[i] = self.buf[i] + 1
        >>> Counter(None).bump
        <T.macro Counter.bump(i)>
    """

    __tirx_macro__ = True

    def __init__(self, macro: Macro, obj):
        self.macro, self.obj = macro, obj
        self.fn = macro.fn
        self.__name__ = macro.__name__
        params = list(macro.signature.parameters.values())
        if not params:
            raise ParseError(f"macro {shown(macro.__name__)} is read as a method but takes no `self` parameter",
                             hint="give it a first parameter (self), or define it outside the class")
        self.signature = macro.signature.replace(parameters=params[1:])

    def parsed(self):
        return self.macro.parsed()

    def bind(self, args, kwargs) -> dict:
        return self.macro.bind((self.obj, *args), kwargs)

    def __call__(self, *args, **kwargs):
        return self.macro(*args, **kwargs)

    def __repr__(self):
        return f"<T.macro {type(self.obj).__name__}.{self.__name__}{self.signature}>"

