"""The launch caches of the kernel APIs (:func:`tirxpy_kernels.gemm`, :func:`tirxpy_kernels.attention`): what a checked call
built, found again by an exact key so that a later call like it skips the checks and the planning.

A key must fix everything the cached value depends on. The APIs build it from :func:`tensor_key` of each
tensor argument (shape, strides, dtype, device), the options (:func:`options_key`: plain values only) and,
for a cache of bound launches (arguments packed once, :mod:`tirxpy.lower.bound_launch`), the tensors'
addresses: the same key then means the same kernel with the same arguments, and nothing is checked again.
An argument of any other kind gives no key (None): that call runs the full checks and is never cached.

Each cache is bounded (:attr:`LaunchCache.max_entries`): a new key past the bound evicts the oldest entry.
A cache holds launches and addresses only, never tensors, so a freed tensor's entry is harmless until a
tensor at that address (with the same shape, strides, dtype and device) is passed again, which is then
the same launch.

    >>> cache = LaunchCache("demo", max_entries=2)
    >>> cache.put(("a",), 1); cache.put(("b",), 2); cache.put(("c",), 3)
    >>> cache.get(("a",)), cache.get(("c",)), len(cache)
    (None, 3, 2)
    >>> import torch
    >>> tensor_key(torch.zeros(2, 3))
    ((2, 3), (3, 1), torch.float32, device(type='cpu'))
    >>> options_key({"BN": 192, "SPLIT": (16, 1, 240)}), options_key({"BN": [192]})
    ((('BN', 'int', 192), ('SPLIT', 'tuple', (16, 1, 240))), None)
"""
from __future__ import annotations

from collections import OrderedDict

import torch

from .errors import KernelConfigError, shown

MAX_ENTRIES = 256
"""The default bound of a cache: enough for every shape a model's layers launch with, small enough that a
sweep over shapes cannot grow it without end."""

_PLAIN = (type(None), bool, int, float, str)


CACHES: list = []
"""Every :class:`LaunchCache` made (the APIs' module-level caches), for :func:`clear_all`."""


def clear_all() -> None:
    """Empty every launch cache (a tool that ran the APIs with stand-in kernels drops what they cached)."""
    for cache in CACHES:
        cache.clear()


class LaunchCache:
    """A bounded map from exact call keys to what those calls built (oldest entry evicted first).

    Requires: hashable keys that fix every input the value depends on (module docstring); ``max_entries``
    an int >= 1. Postcondition: at most ``max_entries`` entries; :meth:`get` returns what :meth:`put`
    stored under an equal key, or None."""

    def __init__(self, name: str, max_entries: int = MAX_ENTRIES):
        if type(max_entries) is not int or max_entries < 1:
            raise KernelConfigError(f"LaunchCache {shown(name)}: max_entries must be an int >= 1, got "
                                    f"{shown(max_entries)}")
        self.name, self.max_entries = name, max_entries
        self._entries: OrderedDict = OrderedDict()
        CACHES.append(self)
        # get(key, default=None): the value stored under key; the dict's own method, as every repeated call
        # of a kernel API looks up here (the key None, an uncacheable call, is never stored: get gives default)
        self.get = self._entries.get

    def put(self, key, value) -> None:
        """Store ``value`` under ``key`` (nothing for the key None), evicting the oldest entry past the bound."""
        if key is None:
            return
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self):
        return len(self._entries)

    def __contains__(self, key):
        return key in self._entries

    def __iter__(self):
        return iter(self._entries)

    def __reversed__(self):
        return reversed(self._entries)

    def __getitem__(self, key):
        return self._entries[key]

    def keys(self):
        return self._entries.keys()

    def values(self):
        return self._entries.values()

    def items(self):
        return self._entries.items()

    def __repr__(self):
        return f"LaunchCache({self.name!r}, {len(self)} of {self.max_entries} entries)"


def launch_bound(cache: LaunchCache, key, ck, *tensors, check=None) -> None:
    """``ck(*tensors)`` through a bound launch (arguments packed once, :mod:`tirxpy.lower.bound_launch`) stored in
    ``cache`` under ``key`` and the tensors' addresses. ``key`` must fix every tensor's shape, strides, dtype and
    device (a fresh output's too: it follows from the inputs') and the kernel, so that an equal entry is the same
    launch with the same arguments (module docstring). ``check()``, when given, runs once per new entry, before it
    is bound (a check of the addresses, such as an overlap of outputs with inputs)."""
    bk = (key,) + tuple(t.data_ptr() for t in tensors)
    bl = cache.get(bk)
    if bl is None:
        if check is not None:
            check()
        bl = ck.bind(*tensors)
        cache.put(bk, bl)
    bl()


def tensor_key(t):
    """``(shape, strides, dtype, device)`` of a dense strided tensor, or None for anything else (a nested or
    sparse tensor, a non-tensor)."""
    if not (isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_nested):
        return None
    return (tuple(t.shape), t.stride(), t.dtype, t.device)


def options_key(options: dict):
    """The options as a sorted tuple of ``(name, type name, value)`` (``1`` and ``True`` are equal in Python,
    not as options), or None when a value is not a plain constant (None, bool, int, float, str, or a tuple of
    ints)."""
    for v in options.values():
        if type(v) not in _PLAIN and not (type(v) is tuple and all(type(x) is int for x in v)):
            return None
    return tuple(sorted((k, type(v).__name__, v) for k, v in options.items()))


_COMPILED = LaunchCache("compiled kernels")


def compiled(kernel, arch: str):
    """``tirxpy.compile(kernel, arch=arch)``, once per kernel object and arch (the entry keeps the kernel, so
    its id is not reused while the entry lives)."""
    entry = _COMPILED.get((id(kernel), arch))
    if entry is None or entry[0] is not kernel:
        import tirxpy  # noqa: PLC0415  (the compiler loads on first use)

        entry = (kernel, tirxpy.compile(kernel, arch=arch))
        _COMPILED.put((id(kernel), arch), entry)
    return entry[1]
