"""Execution scopes, ordered from narrowest to widest.

``thread < warp < warpgroup < cta < cluster < kernel``. A primitive called at a scope is
issued collectively by every thread of each active unit of that scope.

    >>> from tirxpy.scope import Scope
    >>> Scope.get("wg") is Scope.WARPGROUP
    True
    >>> Scope.WARP < Scope.CTA, Scope.CTA.threads(threads_per_cta=256)
    (True, 256)
    >>> Scope.WARPGROUP.short
    'wg'
"""
from __future__ import annotations

import enum

from tirxpy.errors import shown

from .errors import ScopeError


class Scope(enum.IntEnum):
    """One execution scope; compares by width (``Scope.WARP < Scope.CTA``)."""

    THREAD = 0
    WARP = 1
    WARPGROUP = 2
    CTA = 3
    CLUSTER = 4
    KERNEL = 5

    @property
    def name_(self) -> str:
        return self.name.lower()

    @property
    def short(self) -> str:
        """The spelling used in ``Tx.<short>.op``: thread, warp, wg, cta, cluster, kernel."""
        return _SHORT[self]

    @classmethod
    def get(cls, name) -> "Scope":
        """Look a scope up by name (``"warpgroup"``, ``"wg"``, ``"cta"``, ...) or pass one through."""
        if isinstance(name, Scope):
            return name
        key = str(name).lower()
        if key in _ALIASES:
            return _ALIASES[key]
        raise ScopeError(
            f"unknown execution scope {shown(name)}; use one of thread, warp, warpgroup (wg), cta, cluster, kernel"
        )

    def threads(self, threads_per_cta: int | None = None) -> int | None:
        """Threads in one unit of this scope (``None`` for cluster/kernel, whose size depends on the launch)."""
        if self is Scope.THREAD:
            return 1
        if self is Scope.WARP:
            return 32
        if self is Scope.WARPGROUP:
            return 128
        if self is Scope.CTA:
            return threads_per_cta
        return None

    def __str__(self) -> str:
        return self.name_


_SHORT = {
    Scope.THREAD: "thread", Scope.WARP: "warp", Scope.WARPGROUP: "wg",
    Scope.CTA: "cta", Scope.CLUSTER: "cluster", Scope.KERNEL: "kernel",
}
_ALIASES = {s.name.lower(): s for s in Scope}
_ALIASES.update({"wg": Scope.WARPGROUP, "block": Scope.CTA})
