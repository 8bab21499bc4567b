"""Happens-before checking of shared memory: vector clocks per agent and a shadow per byte.

Agents are the warps of a cluster plus asynchronous units (the TMA engine per mbarrier it
completes on, the tensor cores per warpgroup / issuing warp, bulk-copy groups per warp).
Synchronization (mbarrier arrive -> wait, named barriers, wgmma / bulk wait_group) joins
clocks. An access races when the last write (or a read, for a write) by another agent is not
ordered before it. Atomic read-modify-writes (``atom.shared``) do not race with each other, but
each is a write to plain reads and writes of the same bytes by other agents: both ways, the two
must be ordered. Async-proxy reads of bytes last written by the generic proxy need a
``fence.proxy.async`` by the writer after the write. Within a warp, a lane's plain load or store of bytes another
lane of the warp stored since the warp's last synchronization of its lanes (``bar.warp.sync``, a barrier, an
mbarrier wait, a ``.sync`` collective) races too (:meth:`Shadow.lane_conflict`): lanes need not run together.
"""
from __future__ import annotations

import numpy as np

GENERIC, ASYNC = 0, 1


class Clocks:
    """Agent registry of a cluster: names and vector-clock width."""

    def __init__(self):
        self.names: list = []
        self.width = 0

    def add(self, name: str) -> int:
        self.names.append(name)
        return len(self.names) - 1

    def fresh(self):
        return np.zeros(max(len(self.names), 1) + 64, np.int64)


def join(a, b):
    if len(a) < len(b):
        a = np.concatenate([a, np.zeros(len(b) - len(a), a.dtype)])
    n = len(b)
    a[:n] = np.maximum(a[:n], b)
    return a


def sorted_unique(a):
    """``np.unique`` of an int array (sorted, distinct), by a sort and a neighbour comparison: several times
    faster than numpy's hash-based ``np.unique`` on the index arrays of memory accesses."""
    s = np.sort(np.asarray(a).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def fit(vc, n):
    return vc if len(vc) >= n else np.concatenate([vc, np.zeros(n - len(vc) + 64, vc.dtype)])


class Shadow:
    """Per-byte last-write epoch, proxy, fence state and per-agent read and atomic clocks of one CTA's smem.

    The read clocks are one column of bytes per agent that has read (``cols``, made at its first read); an agent
    without a column has read nothing (all clocks 0). The atomic clocks (``acols``) are the same for atomic
    read-modify-writes, which plain accesses of other agents must be ordered with, but other atomics need not.
    Clock vectors are padded to ``width``, which covers every
    clock vector seen so far plus 8 (:func:`fit`)."""

    def __init__(self, size: int):
        self.size = size
        self.w_agent = np.full(size, -1, np.int32)
        self.w_clock = np.zeros(size, np.int64)
        self.w_proxy = np.zeros(size, np.int8)
        self.fenced = np.ones(size, bool)
        self.w_site = np.full(size, -1, np.int32)
        self.cols: dict = {}               # agent -> int64[size]: its clock at its last read of each byte
        self.acols: dict = {}              # agent -> int64[size]: its clock at its last atomic on each byte
        self.width = 8
        self.init = np.zeros(size, bool)   # written at least once (by any proxy)
        self.w_lane = np.full(size, -1, np.int8)   # the lane of the last write when a warp's own store made it
        self.w_wsync = np.zeros(size, np.int64)    # that warp's warp-sync epoch at the write (Warp.wsync)
        self.uninit_at = -1                # the last read's first byte never written (-1: none)

    def _grow(self, n):
        if self.width < n:
            self.width = n + 8

    @staticmethod
    def _unordered(cols, idx, agent, vcl):
        """``(byte position, agent)`` of the first access recorded in ``cols`` (agent -> clock column) by
        another agent that is not ordered before an access at clocks ``vcl``; None if all are."""
        first = None
        for a in sorted(cols):
            if a == agent:
                continue
            r = cols[a][idx] > vcl[a]
            if r.any():
                j = int(np.argmax(r))
                if first is None or j < first[0]:
                    first = (j, a)
        return first

    def access(self, idx, agent, vc, write, proxy, site, atomic=False):
        """Record an access to byte indices ``idx``; returns (kind, other_agent, other_site) of the
        first conflict (the lowest byte, then the lowest agent) or None; kind is the other access's:
        ``"write"``, ``"read"``, ``"atomic"`` or ``"fence"``. A read (an atomic too) also sets ``uninit_at``.
        An ``atomic`` access (pass ``write=True``) conflicts with unordered plain writes and reads of other
        agents, and plain accesses with unordered atomics of other agents; atomics never with each other."""
        self.uninit_at = -1
        idx = sorted_unique(np.asarray(idx, np.int64))
        idx = idx[(idx >= 0) & (idx < self.size)]
        if idx.size == 0:
            return None
        self._grow(len(vc))
        vcl = fit(vc, self.width)
        found = None
        wa = self.w_agent[idx]
        other = (wa >= 0) & (wa != agent)
        if other.any():
            bad = other & (self.w_clock[idx] > vcl[np.maximum(wa, 0)])
            if bad.any():
                j = int(np.argmax(bad))
                found = ("write", int(wa[j]), int(self.w_site[idx[j]]))
        if found is None and proxy == ASYNC and not write:
            nf = (self.w_proxy[idx] == GENERIC) & (~self.fenced[idx]) & (wa >= 0)
            if nf.any():
                j = int(np.argmax(nf))
                found = ("fence", int(wa[j]), int(self.w_site[idx[j]]))
        if not write or atomic:
            ini = self.init[idx]
            self.uninit_at = -1 if ini.all() else int(idx[int(np.argmin(ini))])
        if found is None and not atomic:
            first = self._unordered(self.acols, idx, agent, vcl)
            if first is not None:
                found = ("atomic", first[1], -1)
        if write:
            self.init[idx] = True
            if found is None:
                first = self._unordered(self.cols, idx, agent, vcl)   # a read not ordered before this write
                if first is not None:
                    found = ("read", first[1], -1)
            if atomic:
                col = self.acols.get(agent)
                if col is None:
                    col = self.acols[agent] = np.zeros(self.size, np.int64)
                col[idx] = vcl[agent]
                return found
            self.w_agent[idx] = agent
            self.w_lane[idx] = -1
            self.w_clock[idx] = vcl[agent]
            self.w_proxy[idx] = proxy
            self.fenced[idx] = proxy == ASYNC
            self.w_site[idx] = site
            for cols in (self.cols, self.acols):
                for col in cols.values():
                    col[idx] = 0
        else:
            col = self.cols.get(agent)
            if col is None:
                col = self.cols[agent] = np.zeros(self.size, np.int64)
            col[idx] = vcl[agent]
        return found

    def lane_conflict(self, rows, lanes, agent, wsync, write):
        """Within one warp: ``rows`` (one row of byte indices per lane in ``lanes``) read or written by warp
        ``agent`` at its warp-sync epoch ``wsync``. Returns ``(lane, other lane)`` of the first byte another lane of
        the same warp wrote in this epoch (with no warp synchronization since: lanes of a warp need not run
        together), or None; a write records its lanes."""
        ok = (rows >= 0) & (rows < self.size)
        r = np.where(ok, rows, 0)
        prior = self.w_lane[r]
        hit = ok & (self.w_agent[r] == agent) & (prior >= 0) & (prior != lanes[:, None]) & (self.w_wsync[r] == wsync)
        found = None
        if hit.any():
            i, j = np.unravel_index(int(np.argmax(hit)), hit.shape)
            found = (int(lanes[i]), int(prior[i, j]))
        if write:
            self.w_lane[r[ok]] = np.broadcast_to(lanes[:, None], r.shape)[ok]
            self.w_wsync[r[ok]] = wsync
        return found

    def fence_proxy(self, agent, vc):
        """fence.proxy.async by ``agent``: generic writes ordered before it (its own, or others'
        it has synchronized with) become visible to the async proxy."""
        vcl = fit(vc, int(self.w_agent.max()) + 1)
        wa = self.w_agent
        m = (wa >= 0) & (self.w_proxy == GENERIC) & ~self.fenced
        if m.any():
            idx = np.nonzero(m)[0]
            ok = (wa[idx] == agent) | (self.w_clock[idx] <= vcl[wa[idx]])
            self.fenced[idx[ok]] = True
