"""``@tirxpy.jit``: specialize a kernel factory on its Python arguments, with a cache.

The decorated function takes compile-time values (shapes, dtypes, tile sizes, layouts) and
returns a kernel (usually a ``@T.prim_func`` defined inside it, closing over the values).
Calling it twice with the same arguments builds once:

    >>> import tirxpy
    >>> from tirxpy import T
    >>> @tirxpy.jit
    ... def make_scale(n, dtype="float32", block=128):
    ...     @T.prim_func
    ...     def scale(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
    ...         T.launch(grid=(n // block,), threads=block)
    ...         i = T.cta_id(0) * block + T.thread_id()
    ...         B[i] = A[i] * T.cast(2, dtype)
    ...     return scale
    >>> k1 = make_scale(1024)
    >>> k2 = make_scale(n=1024, dtype="float32")
    >>> k1 is k2, make_scale.builds
    (True, 1)
    >>> make_scale(2048, "float16").params[0].dtype, make_scale.builds
    (float16, 2)
"""
from __future__ import annotations

import functools
import inspect
import threading

from tirxpy.scope.errors import TirxError


class JitError(TirxError, ValueError):
    """A @tirxpy.jit factory was called with arguments that cannot key its cache."""


_KEY_DEPTH = 32


def _key(v, depth: int = 0):
    """A hashable, type-tagged cache key for one argument (lists / tuples / dicts nest at most 32 deep)."""
    if depth > _KEY_DEPTH and isinstance(v, (list, tuple, dict)):
        raise JitError(f"@tirxpy.jit argument nests lists / tuples / dicts more than {_KEY_DEPTH} deep "
                       "(or contains itself), so it cannot key the kernel cache")
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x, depth + 1) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((repr(k), _key(x, depth + 1)) for k, x in v.items())))
    shape = getattr(v, "shape", None)
    dtype = getattr(v, "dtype", None)
    if shape is not None and dtype is not None and type(v).__name__ == "Tensor":  # a torch tensor: its signature
        return ("tensor", tuple(shape), str(dtype))
    try:
        hash(v)
    except Exception as e:      # unhashable, or a __hash__ of its own that raises: named by type, not by its repr
        raise JitError(f"@tirxpy.jit argument of type {type(v).__name__:.60} does not hash ({type(e).__name__}), so "
                       "it cannot key the kernel cache: pass a plain value (an int, a str, a tuple of them)") from None
    return (type(v).__name__, v)


class JitFunction:
    """A cached kernel factory: ``f(*args)`` builds (once per distinct arguments) and returns the kernel."""

    def __init__(self, factory):
        self.factory = factory
        self.signature = inspect.signature(factory)
        self.cache: dict = {}
        self.builds = 0
        self._lock = threading.Lock()
        functools.update_wrapper(self, factory)

    def key(self, *args, **kwargs):
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise JitError(f"{self.factory.__name__}{self.signature}: {e}") from None
        bound.apply_defaults()
        return tuple((name, _key(v)) for name, v in bound.arguments.items())

    def __call__(self, *args, **kwargs):
        k = self.key(*args, **kwargs)
        with self._lock:
            if k in self.cache:
                return self.cache[k]
        result = self.factory(*args, **kwargs)
        with self._lock:
            self.builds += 1
            return self.cache.setdefault(k, result)

    def cache_clear(self):
        with self._lock:
            self.cache.clear()

    def __repr__(self):
        return f"<tirxpy.jit {self.factory.__name__} ({len(self.cache)} cached)>"


def jit(factory=None):
    """Decorator: ``@tirxpy.jit`` on a function returning a kernel."""
    if factory is None:
        return jit
    if not callable(factory):
        raise JitError(f"@tirxpy.jit decorates a function, got {factory!r}")
    return JitFunction(factory)
