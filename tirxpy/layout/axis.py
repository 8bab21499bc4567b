"""Named hardware axes that layouts place elements on.

An :class:`Axis` names one physical coordinate: a memory slot (``m``), a thread index
(``laneid``, ``warpid``, ...), a CTA index inside the grid or cluster (``bx``, ``cbx``) or a
tensor-memory coordinate (``TLane``, ``TCol``). Each thread / CTA axis records the pair of
execution scopes it spans: ``laneid`` numbers threads inside a warp, so its scope pair is
``("warp", "thread")``.

    >>> from tirxpy.layout import Axis, laneid
    >>> Axis.get("laneid") is laneid
    True
    >>> laneid.scope, laneid.bound
    (('warp', 'thread'), 32)
    >>> 4 @ laneid                      # a stride on an axis, used inside S[...] / R[...]
    4@laneid
    >>> dma = Axis.register("dmaq", kind="memory")   # new hardware: one call
    >>> Axis.get("dmaq") is dma
    True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tirxpy.errors import shown

from .coords import as_int
from .errors import MAX_COORD, LayoutError, LayoutTypeError

KINDS = ("memory", "thread", "cta", "tmem", "rank")
SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster", "kernel")


@dataclass(frozen=True)
class Axis:
    """A named physical axis.

    ``kind`` is one of ``memory``, ``thread``, ``cta``, ``tmem``, ``rank`` (the GPU of a process group). ``scope`` is the
    ``(outer, inner)`` execution-scope pair a thread or CTA axis spans (``None`` for memory
    axes). ``bound`` is the hardware limit of the coordinate (``None`` when unbounded).
    """

    name: str
    kind: str
    scope: tuple[str, str] | None = None
    bound: int | None = None

    _registry: ClassVar[dict[str, "Axis"]] = {}

    def __repr__(self) -> str:
        return self.name

    def __rmatmul__(self, stride):
        from .iters import AxisStride

        return AxisStride(stride, self)

    @property
    def is_memory(self) -> bool:
        """True for axes that address storage (``m``, ``P``, ``F``, ``Bank``, TMEM)."""
        return self.kind in ("memory", "tmem")

    @property
    def is_thread(self) -> bool:
        return self.kind == "thread"

    @classmethod
    def get(cls, name) -> "Axis":
        """Look an axis up by name (an :class:`Axis` is returned as is)."""
        if isinstance(name, Axis):
            return name
        if not isinstance(name, str):
            raise LayoutTypeError(f"an axis is named by a string or an Axis, got {shown(name)} "
                                  f"({type(name).__name__}); write e.g. 'laneid' or laneid")
        try:
            return cls._registry[name]
        except KeyError:
            known = ", ".join(sorted(cls._registry))
            raise LayoutError(
                f"unknown axis {shown(name)}; known axes: {known}. "
                f"Register new hardware axes with Axis.register({shown(name)}, kind=...)"
            ) from None

    @classmethod
    def register(cls, name: str, kind: str, scope: tuple[str, str] | None = None, bound: int | None = None) -> "Axis":
        """Register a new axis (or return the identical one already registered). ``scope`` is an
        ``(outer, inner)`` pair of :data:`SCOPES`, ``bound`` a positive int or ``None``.

            >>> Axis.register("lane2", "thread", ("warp", "thread"), 32).bound
            32
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise LayoutError(f"axis name must be a Python identifier, got {shown(name)}")
        if type(kind) is not str or kind not in KINDS:
            raise LayoutError(f"axis kind must be one of {KINDS}, got {shown(kind)}")
        if scope is not None:
            if not isinstance(scope, (tuple, list)) or not all(isinstance(s, str) for s in scope):
                raise LayoutTypeError(f"axis scope must be an (outer, inner) pair of names from {SCOPES}, got "
                                      f"{shown(scope)} ({type(scope).__name__}); e.g. scope=('warp', 'thread')")
            if (len(scope) != 2 or any(s not in SCOPES for s in scope)
                    or SCOPES.index(scope[0]) <= SCOPES.index(scope[1])):
                raise LayoutError(
                    f"axis scope must be an (outer, inner) pair of {SCOPES} with outer wider than inner, got "
                    f"{shown(scope)}"
                )
            scope = tuple(scope)
        if bound is not None:
            bound = as_int(bound, "axis bound (None for an unbounded axis)")
            if not 1 <= bound < MAX_COORD:
                raise LayoutError(f"axis bound must be a positive int below 2**64 or None, got {shown(bound)}")
        ax = cls(name, kind, scope, bound)
        old = cls._registry.get(name)
        if old is not None:
            if old != ax:
                raise LayoutError(f"axis {shown(name)} is already registered as {old.kind} {old.scope} "
                                  f"bound={old.bound}; pick another name")
            return old
        cls._registry[name] = ax
        return ax

    @classmethod
    def all(cls) -> dict[str, "Axis"]:
        """Every registered axis by name."""
        return dict(cls._registry)


# Memory axes.
m = Axis.register("m", "memory")
P = Axis.register("P", "memory")
F = Axis.register("F", "memory")
Bank = Axis.register("Bank", "memory", bound=32)
# Tensor memory (Blackwell): 128 lanes x 512 32-bit columns per CTA.
TLane = Axis.register("TLane", "tmem", bound=128)
TCol = Axis.register("TCol", "tmem", bound=512)
# Thread axes.
laneid = Axis.register("laneid", "thread", ("warp", "thread"), 32)
warpid = Axis.register("warpid", "thread", ("cta", "warp"), 32)
wgid = Axis.register("wgid", "thread", ("cta", "warpgroup"), 8)
wid_in_wg = Axis.register("wid_in_wg", "thread", ("warpgroup", "warp"), 4)
tid_in_wg = Axis.register("tid_in_wg", "thread", ("warpgroup", "thread"), 128)
tx = Axis.register("tx", "thread", ("cta", "thread"), 1024)
# CTA axes: grid position and position inside the cluster.
pid = Axis.register("pid", "cta", ("kernel", "cta"))
bx = Axis.register("bx", "cta", ("kernel", "cta"))
by = Axis.register("by", "cta", ("kernel", "cta"))
bz = Axis.register("bz", "cta", ("kernel", "cta"))
cbx = Axis.register("cbx", "cta", ("cluster", "cta"), 16)
cby = Axis.register("cby", "cta", ("cluster", "cta"), 16)
cbz = Axis.register("cbz", "cta", ("cluster", "cta"), 16)
# The GPU (process-group rank) that holds an element: see tirxpy.layout.ranks.
rank = Axis.register("rank", "rank")
