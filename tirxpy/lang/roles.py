"""Warp roles: a producer warpgroup and consumer warpgroups, the registers ``setmaxnreg`` moves
between them, and the barrier set-up every warp-specialized kernel starts with.

Warpgroup 0 is the producer (it issues TMA loads from one thread and needs few registers); warpgroups
1 .. ``consumers`` compute. ``setmaxnreg.dec`` / ``.inc`` only move registers inside the CTA's launch
allocation: ``threads`` times the per-thread count of ``__launch_bounds__(threads, 1)`` (65536 / threads,
rounded down to a multiple of 8, at most 248). An ``inc`` that the ``dec`` does not pay for waits for
registers that never come and the GPU hangs, so :class:`WarpRoles` refuses such a split up front.

    >>> from tirxpy.lang import WarpRoles
    >>> WarpRoles(384, 40, 232)          # 40 * 128 + 2 * 232 * 128 = 64512 = 384 * 168
    WarpRoles(threads=384, producer_regs=40, consumer_regs=232)
    >>> WarpRoles(384, 48, 232)
    Traceback (most recent call last):
    ...
    tirxpy.lang.errors.LangError: kernel: setmaxnreg 48 / 232 needs 65536 registers, over the CTA's 64512 (384 threads x 168): lower one of them
"""
from __future__ import annotations

from tirxpy.ir import T
from tirxpy.target import MAX_CLUSTER
from tirxpy.errors import shown

from .errors import LangError
from .pipeline import _launch_cluster, _py_int, _show, check_count


def register_split(threads: int, dec: int, inc: int, kernel: str = "kernel") -> tuple:
    """Check a ``setmaxnreg`` split of one producer warpgroup (``dec``) and ``threads / 128 - 1`` consumer
    warpgroups (``inc``); return ``(dec, inc)``. Requires whole warpgroups (at least two) and counts that
    are multiples of 8 in [24, 256]; the split must fit the CTA's launch allocation (module docstring)."""
    for name, v in (("threads", threads), ("dec", dec), ("inc", inc)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise LangError(f"{kernel}: setmaxnreg {name} must be an int, got {shown(v)}")
    if threads % 128 or threads < 256 or threads > 1024:
        raise LangError(f"{kernel}: a producer / consumer register split needs whole warpgroups, two to eight; "
                        f"got {threads} threads")
    for name, v in (("dec", dec), ("inc", inc)):
        if not (24 <= v <= 256 and v % 8 == 0):
            raise LangError(f"{kernel}: setmaxnreg {name} = {v} must be a multiple of 8 in [24, 256]")
    per_thread = min(65536 // threads // 8 * 8, 255 // 8 * 8)
    need = 128 * dec + (threads - 128) * inc
    if need > threads * per_thread:
        raise LangError(f"{kernel}: setmaxnreg {dec} / {inc} needs {need} registers, over the CTA's "
                        f"{threads * per_thread} ({threads} threads x {per_thread}): lower one of them")
    return dec, inc


class WarpRoles:
    """One producer warpgroup (warpgroup 0) and ``threads // 128 - 1`` consumer warpgroups, with the
    producer giving registers to the consumers (``producer_regs`` / ``consumer_regs`` per thread).

    In a kernel: ``wg = T.warpgroup_id()``; ``if wg == 0:`` ``roles.enter_producer()`` and the producer's
    work; ``else:`` ``roles.enter_consumer()`` and consumer ``wg - 1``'s work. Each role must be one branch
    of that if / else, so that every warpgroup runs exactly one ``setmaxnreg``, warpgroup-uniformly (a
    warpgroup that runs both asks for registers the split does not pay for). The kernel must launch ``threads``
    threads: :meth:`enter_producer` / :meth:`enter_consumer` refuse another launch while the kernel is built."""

    def __init__(self, threads: int, producer_regs: int, consumer_regs: int, kernel: str = "kernel"):
        register_split(threads, producer_regs, consumer_regs, kernel)
        self.threads, self.producer_regs, self.consumer_regs = threads, producer_regs, consumer_regs
        self.consumers = threads // 128 - 1

    def check_launch(self):
        """Refuse a kernel being built whose launch has another thread count than these roles (more or fewer
        warpgroups than the split pays for); nothing outside a kernel."""
        from tirxpy.ir.parser import current_launch

        launch = current_launch()
        if launch is not None and launch.threads != self.threads:
            raise LangError(f"{shown(self)} in a kernel launched with {launch.threads} threads: the roles are one "
                            f"producer and {self.consumers} consumer warpgroups ({self.threads} threads); build them "
                            f"for the launch (WarpRoles({launch.threads}, ...)) or launch {self.threads} threads")

    @T.macro
    def enter_producer(self):
        """The producer warpgroup gives up registers: ``setmaxnreg.dec``."""
        self.check_launch()
        T.ptx.setmaxnreg_dec(self.producer_regs)

    @T.macro
    def enter_consumer(self):
        """A consumer warpgroup takes the registers the producer gave up: ``setmaxnreg.inc``."""
        self.check_launch()
        T.ptx.setmaxnreg_inc(self.consumer_regs)

    def __repr__(self):
        return (f"WarpRoles(threads={self.threads}, producer_regs={self.producer_regs}, "
                f"consumer_regs={self.consumer_regs})")


def _init_groups(rings, cluster):
    """``[(stages, [(ring, full_arrivals, empty_arrivals), ...]), ...]``: each item of ``rings`` is one triple
    (a loop of its own) or a list of triples whose rings have one stage count (one shared loop). Refuses counts
    an mbarrier cannot take, a barrier buffer listed twice and a cluster ring that ``cluster`` does not sync."""
    if not isinstance(rings, (list, tuple)):
        raise LangError(f"setup_barriers: rings is a list of (ring, full_arrivals, empty_arrivals) triples (or lists "
                        f"of such triples sharing one init loop); got {shown(rings, 80)}: write [(ring, 1, 2)]")
    groups, seen = [], set()
    for item in rings:
        members = list(item) if isinstance(item, list) else [item]
        for m in members:
            if not (isinstance(m, tuple) and len(m) == 3 and hasattr(m[0], "stages")):
                raise LangError(f"setup_barriers: each ring is given as (ring, full_arrivals, empty_arrivals), or a "
                                f"list of such triples sharing one init loop; got {shown(m)}")
            ring = m[0]
            check_count(f"setup_barriers: ring {ring!r}", "full_arrivals", m[1])
            check_count(f"setup_barriers: ring {ring!r}", "empty_arrivals", m[2])
            for bar in (ring.full, ring.empty):
                if id(bar) in seen:
                    raise LangError(f"setup_barriers: barrier buffer {shown(bar.name)} is listed twice (a ring given "
                                    "twice, or two rings sharing a buffer); each mbarrier is initialised once")
                seen.add(id(bar))
            if ring.cluster > 1 and ring.cluster != cluster:
                raise LangError(f"setup_barriers: ring {shown(ring)} is released across a cluster of {ring.cluster} "
                                f"CTAs; pass cluster={ring.cluster}, so the cluster syncs before any CTA arrives on "
                                "another's barriers")
        counts = {m[0].stages for m in members}
        if len(counts) != 1:
            raise LangError(f"setup_barriers: rings initialised in one loop must have one stage count, got "
                            f"{sorted(counts)}; list them separately")
        groups.append((counts.pop(), members))
    return groups


def _check_setup(cluster, pdl):
    """Refuse a ``cluster`` outside ``[1, 16]`` or unlike the launch's (when above 1), and a non-bool ``pdl``."""
    n = _py_int(cluster)
    if n is None or not 1 <= n <= MAX_CLUSTER:
        raise LangError(f"setup_barriers: cluster must be an int in [1, {MAX_CLUSTER}], got {_show(cluster)}: pass "
                        "the kernel's cluster size (1 without clusters)")
    launched = _launch_cluster()
    if n > 1 and launched is not None and launched != n:
        raise LangError(f"setup_barriers: cluster = {n}, but the kernel is launched with clusters of {launched} "
                        f"CTA(s): pass {launched}, or 1 to sync the CTA alone where no ring is released across CTAs")
    if not isinstance(pdl, bool):
        raise LangError(f"setup_barriers: pdl must be True or False, got {_show(pdl)}")


@T.macro
def setup_barriers(rings, cluster, pdl):
    """Thread 0 initialises every ring's barriers and fences them: ``rings`` holds ``(ring, full_arrivals,
    empty_arrivals)`` triples, each initialised in a loop of its own, or lists of such triples (rings of one
    stage count) initialised together in one loop, the ``full`` barriers before the ``empty`` ones;
    then the CTA (or with ``cluster > 1`` the cluster) syncs, so no thread waits on an uninitialised
    barrier; with ``pdl`` every thread then waits for the previous kernel in the stream
    (``griddepcontrol.wait``) before touching global memory it may still write.

    Requires: each count an int in ``[1, 2^20 - 1]`` (or an integer device expression), each barrier buffer listed
    once, ``cluster`` an int in ``[1, 16]`` that is 1 or the launch's cluster size and equals the ``cluster`` of
    every ring released across CTAs, ``pdl`` a bool (True when the kernel launches with ``pdl=True``)."""
    _check_setup(cluster, pdl)
    if T.thread_id() == 0:
        for stages, members in _init_groups(rings, cluster):
            for s in T.serial(stages):
                for ring, nf, ne in members:
                    T.ptx.mbarrier_init(ring.full[s], nf)
                for ring, nf, ne in members:
                    T.ptx.mbarrier_init(ring.empty[s], ne)
        T.ptx.fence_mbarrier_init()
    if cluster > 1:
        T.ptx.cluster_sync()
    else:
        T.ptx.syncthreads()
    if pdl:
        T.ptx.griddepcontrol_wait()
