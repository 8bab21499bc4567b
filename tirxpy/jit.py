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

Arguments key the cache by value and type (floats bit for bit); a torch tensor by its shape, strides, dtype and
device, never by its values: a factory that reads a tensor's contents must take them as plain values instead.
"""
from __future__ import annotations

import functools
import inspect
import numbers
import threading

from tirxpy.scope.errors import TirxError
from tirxpy.errors import shown


class JitError(TirxError, ValueError):
    """A @tirxpy.jit factory was called with arguments that cannot key its cache."""


_KEY_DEPTH = 32
_KEY_ITEMS = 100_000
_MISS = object()        # no cached kernel under a key
_PLAIN = frozenset({int, bool, str, type(None)})   # scalars whose equality and hash are exact


def _argument(name: str) -> str:
    """How an error names the factory's parameter ``name``: ``@tirxpy.jit argument n``."""
    return f"@tirxpy.jit argument {name}" if name else "@tirxpy.jit argument"


def _key(v, depth: int = 0, budget: list | None = None, name: str = ""):
    """A hashable, type-tagged cache key for one argument: two arguments share a key only if they are equal and
    of one type, floats and complex numbers bit for bit (-0.0 and 0.0 differ; NaN keys itself). Lists / tuples /
    dicts nest at most 32 deep and hold at most 100,000 items in all (shared parts counted each time they occur).
    ``name``: the factory's parameter the value was passed to (or is part of), named by the errors."""
    budget = [_KEY_ITEMS] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        raise JitError(f"{_argument(name)} holds more than {_KEY_ITEMS} items (lists / tuples / dicts, shared parts "
                       "counted each time), so it cannot key the kernel cache: pass the few values the kernel depends "
                       "on")
    if type(v) in _PLAIN:               # the common case, keyed as the general path below keys it
        return (type(v).__name__, v)
    if depth > _KEY_DEPTH and isinstance(v, (list, tuple, dict)):
        raise JitError(f"{_argument(name)} nests lists / tuples / dicts more than {_KEY_DEPTH} deep (or contains "
                       "itself), so it cannot key the kernel cache")
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x, depth + 1, budget, name) for x in v))
    if isinstance(v, dict):
        return ("dict", frozenset((_key(k, depth + 1, budget, name), _key(x, depth + 1, budget, name))
                                  for k, x in v.items()))
    if type(v).__name__ == "Tensor":      # a torch tensor: its signature (what a factory may read but its values)
        sig = _tensor_signature(v)
        if sig is not None:
            return sig
    try:
        hash(v)
        if isinstance(v, numbers.Complex) and not isinstance(v, numbers.Rational):   # float / complex, numpy's too
            c = complex(v)
            return (type(v).__name__, c.real.hex(), c.imag.hex()) + ((v,) if v == v else ())
    except Exception as e:      # unhashable, or a __hash__ of its own that raises: named by type, not by its repr
        raise JitError(f"{_argument(name)} of type {type(v).__name__:.60} does not hash ({type(e).__name__}), so it "
                       "cannot key the kernel cache: pass a plain value (an int, a str, a tuple of them)") from None
    return (type(v).__name__, v)


def _tensor_signature(t):
    """``("tensor", shape, strides, dtype, device)`` of a torch tensor, or None when it has no such attributes. A
    factory given a tensor is keyed by its layout, not its values: two tensors of one shape, strides, dtype and
    device get one kernel."""
    try:
        return ("tensor", tuple(int(n) for n in t.shape), tuple(int(n) for n in t.stride()), str(t.dtype),
                str(t.device))
    except Exception:       # a tensor-like without strides (or whose attributes raise): keyed as any other value
        return None


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
        return tuple((name, _key(v, 0, None, name)) for name, v in bound.arguments.items())

    def _lookup(self, k, put=_MISS):
        """The cached kernel of key ``k`` (``_MISS`` if absent), or ``put`` stored under it; JitError when an
        argument's own ``__eq__`` / ``__hash__`` raises while the cache compares keys."""
        try:
            with self._lock:
                if put is _MISS:
                    return self.cache.get(k, _MISS)
                self.builds += 1
                return self.cache.setdefault(k, put)
        except Exception as e:      # noqa: BLE001  (an argument's own __eq__ or __hash__)
            raise JitError(f"{self.factory.__name__}: comparing the arguments with a cached call raised "
                           f"{type(e).__name__} (an argument's __eq__ or __hash__), so they cannot key the kernel "
                           "cache: pass plain values (ints, strs, tuples of them)") from None

    def __call__(self, *args, **kwargs):
        k = self.key(*args, **kwargs)
        hit = self._lookup(k)
        if hit is not _MISS:
            return hit
        return self._lookup(k, self.factory(*args, **kwargs))

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
        raise JitError(f"@tirxpy.jit decorates a function, got {shown(factory)}")
    return JitFunction(factory)
