"""Symmetric memory of the multi-rank simulator (:mod:`tirxpy.sim.ranks`): :class:`Symmetric` allocations, one
buffer per rank, whose bytes remember their last writer (a warp of some rank, an asynchronous store on behalf of
the warp that issued it, or the host before the owner's launch), and the watch that reports a read no
release / acquire chain orders after that write as a race.

    >>> s = Symmetric("x", (2,), "float32", world=2); s.set(1, np.ones(2, np.float32)); s.get(1)
    array([1., 1.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from tirxpy.errors import shown

from .args import ArgumentError
from .memory import Bytes
from .values import from_bits, nbytes, storage_dtype, to_bits


class _Tracked(np.ndarray):
    """The bytes of a symmetric buffer: indexing reports the byte offsets read / written to the watch."""

    def __getitem__(self, key):
        out = np.asarray(super().__getitem__(key))
        w = getattr(self, "_watch", None)
        if w is not None and w.on:
            w.access(self, key, False)
        return out

    def __setitem__(self, key, value):
        w = getattr(self, "_watch", None)
        if w is not None and w.on:
            w.access(self, key, True)
        np.asarray(self).__setitem__(key, value)


class _Watch:
    """Per byte of each symmetric buffer: the last writer (global agent, its clock) or none."""

    def __init__(self):
        self.on = False
        self.current = None        # the warp running now (None: an asynchronous event fires)
        self.issuer = None         # the warp that issued the event firing now
        self.mems: dict = {}       # id(array) -> (Symmetric, owner rank, writer agent array, writer clock array)
        self.local: dict = {}      # id(array) -> (writer's machine id, its CTA-local agent, CTA-local clock) per byte
        self.init: dict = {}       # id(array) -> bytes written at least once (by the host or the kernel)
        self.problems = []

    def add(self, arr, sym, owner):
        arr._watch = self
        n = arr.size
        self.mems[id(arr)] = (sym, owner, np.full(n, -1, np.int64), np.zeros(n, np.int64))
        self.local[id(arr)] = (np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64))
        self.init[id(arr)] = np.zeros(n, bool)

    def _ordered_locally(self, w, arr, idx):
        """Bytes whose write is ordered before ``w`` by a CTA's own barriers (the writer's CTA clock)."""
        mid, lag, lclk = (a[idx] for a in self.local[id(arr)])
        ok = np.zeros(idx.size, bool)
        for m in np.unique(mid[mid >= 0]):
            vc = w.vc if id(w.cta.machine) == m else w._lvc.get(int(m))
            if vc is None:
                continue
            sel = mid == m
            ok[sel] = lclk[sel] <= vc[np.minimum(lag[sel], len(vc) - 1)] * (lag[sel] < len(vc))
        return ok

    def access(self, arr, key, write):
        sym, owner, wag, wclk = self.mems[id(arr)]
        idx = np.arange(arr.size)[key].ravel() if not isinstance(key, np.ndarray) or key.dtype == bool \
            else np.asarray(key, np.int64).ravel()
        idx = idx[(idx >= 0) & (idx < arr.size)]
        w = self.current
        mid, lag, lclk = self.local[id(arr)]
        if write:
            self.init[id(arr)][idx] = True
        if w is None:
            w = self.issuer                # an asynchronous unit (TMA store...) writes for the warp that issued it,
            if w is None:                  # as of now: a signal that warp sent before this ordered nothing of it;
                if write:                  # and it reads (TMA load, reduce) what that warp's acquires ordered
                    wag[idx] = -1
                    mid[idx] = -1
                return
            if write:
                w.tick()
        me = w._gagent
        if write:
            w._gvc[me] += 1
            wag[idx] = me
            wclk[idx] = w._gvc[me]
            mid[idx], lag[idx], lclk[idx] = id(w.cta.machine), w.agent, w.vc[w.agent]
            return
        a = wag[idx]
        fresh = ~self.init[id(arr)][idx]
        if fresh.any():                    # nothing wrote these bytes yet: the write this read waits for is to come
            self._report(w, sym, owner, int(idx[int(np.argmax(fresh))]), "nothing (it is still to come)")
            return
        other = (a >= 0) & (a != me)
        if not other.any():
            return
        late = other & (wclk[idx] > w._gvc[np.maximum(a, 0)])
        if late.any():
            late &= ~self._ordered_locally(w, arr, idx)
        if late.any():
            j = int(np.argmax(late))
            self._report(w, sym, owner, int(idx[j]), w._world.agent_names[int(a[j])])

    def _report(self, w, sym, owner, byte, writer):
        span = getattr(w.where, "span", None)
        w.cta.machine.report(
            "race", f"rank {w._rank} reads {sym.name} of rank {owner} (byte {byte}) before any signal orders "
            f"the write by {writer} before this read", span, f"rank {w._rank} {w.describe()}",
            ["the writer signals after its stores (st.release.sys / red.release.sys on a flag) and the reader "
             "waits for that value (wait_geq_sys_u32 / ld.acquire.sys) before it reads"],
            key=("race", sym.name, owner, getattr(span, "line", None)))


class Symmetric:
    """One symmetric allocation: a ``shape`` tensor of ``dtype`` on each of ``world`` ranks (its bytes are
    undefined until written: a read of a byte nothing wrote is reported as a race). ``set(rank, values)`` writes rank's buffer as its host does before the launch; ``get(rank)``
    reads it back (bfloat16 / float8 as float32); ``on(rank)`` is the kernel argument for that buffer.

        >>> s = Symmetric("x", (2,), "float32", world=2); s.set(1, np.ones(2, np.float32)); s.get(1)
        array([1., 1.], dtype=float32)
    """

    def __init__(self, name: str, shape, dtype: str, world: int):
        from tirxpy.ir.dtype import DataType

        if not isinstance(name, str):
            raise ArgumentError(f"Symmetric: name must be a str, got {shown(name, 60)} ({type(name).__name__})")
        if not isinstance(world, int) or isinstance(world, bool) or world < 1:
            raise ArgumentError(f"Symmetric {shown(name)}: world must be a positive int, got {shown(world)}")
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise ArgumentError(f"Symmetric {shown(name)}: shape must be a tuple of non-negative ints, got "
                                f"{shown(shape, 80)}")
        self.name, self.shape, self.dtype, self.world = name, tuple(int(n) for n in shape), str(DataType.get(dtype)), world
        n = int(np.prod(self.shape)) * nbytes(self.dtype)
        self.mems = [Bytes(n, f"{name}@rank{r}") for r in range(world)]
        for mem in self.mems:
            mem.data = mem.data.view(_Tracked)
        self.host = [False] * world     # written by the host before the launch

    def _rank(self, r):
        if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < self.world:
            raise ArgumentError(f"Symmetric {shown(self.name)} has ranks 0 .. {self.world - 1}, got {shown(r)}")
        return r

    def set(self, rank: int, values) -> None:
        rank = self._rank(rank)
        try:
            arr = np.asarray(values)
        except Exception:   # noqa: BLE001  (ragged, or an object whose own array protocol raises)
            raise ArgumentError(f"Symmetric {shown(self.name)}: values must be an array of shape {self.shape}, got "
                                f"{shown(values, 80)}") from None
        if arr.shape != self.shape:
            raise ArgumentError(f"Symmetric {shown(self.name)}: values of shape {arr.shape}, the buffer is "
                                f"{self.shape}")
        raw = to_bits(arr.reshape(-1), self.dtype) if arr.dtype != storage_dtype(self.dtype) else arr.reshape(-1)
        np.asarray(self.mems[rank].data)[:] = np.ascontiguousarray(raw).view(np.uint8)
        self.host[rank] = True

    def get(self, rank: int):
        rank = self._rank(rank)
        raw = np.asarray(self.mems[rank].data).view(storage_dtype(self.dtype)).reshape(self.shape)
        return np.array(from_bits(raw, self.dtype))

    def on(self, rank: int) -> "_On":
        return _On(self, self._rank(rank))

    def __repr__(self):
        return f"Symmetric({self.name!r}, {self.shape}, {self.dtype!r}, world={self.world})"


class _On:
    __slots__ = ("sym", "rank")

    def __init__(self, sym, rank):
        self.sym, self.rank = sym, rank
