"""Stage rings: shared-memory stages handed between producers and consumers through mbarriers.

A ring of ``stages`` stages has two mbarrier arrays of that length: ``full[s]`` (the data of stage
``s`` has landed: the producer's arrivals plus, for TMA, the transaction bytes) and ``empty[s]`` (every
consumer has finished reading stage ``s``). Producer and consumers count the same running position
``g = 0, 1, 2, ...`` over the whole walk (every k-block of every tile a CTA takes, say: ``g = i * KT + k``),
and everything follows from it in closed form:

- position ``g`` uses stage ``g % stages`` in that stage's round ``r = g // stages``;
- a consumer waits for ``full``'s phase ``r`` to complete: parity ``r % 2`` (:meth:`StageRing.wait_full`);
- before refilling the stage in round ``r >= 1`` the producer waits for ``empty``'s phase ``r - 1`` (the
  consumers' release of round ``r - 1``): parity ``(r + 1) % 2``, the same as ``(r - 1) % 2``
  (:meth:`StageRing.wait_empty`); in round 0 every stage is free and it does not wait.

Arrivals. ``full`` completes a phase after ``full_arrivals`` arrivals (and, with
:meth:`~StageRing.expect_bytes`, the announced bytes); ``empty`` after ``empty_arrivals``: one
:meth:`~StageRing.release` per releasing thread (one elected thread per consumer warpgroup, or every consumer
thread: the count is the kernel's choice) times ``cluster``, as each release arrives in every CTA of the cluster.
Each phase must receive exactly its count: one arrival too few and its waiters hang; a thread that releases a
position twice completes the next round's phase early (the simulator reports the deadlock or race that follows).

What a wait guarantees. ``mbarrier.try_wait.parity(p)`` returns once the barrier's current phase has the other
parity, so it tells round ``r`` from round ``r + 1`` only: a wait for round ``r`` returns exactly when phase ``r``
has completed provided the barrier is in phase ``r`` or later when the wait starts (the waiter saw phase ``r - 1``
complete: it waited at position ``g - stages``, or ``r = 0``) and cannot complete phase ``r + 1`` before the waiter
lets it (phase ``r + 1`` of ``full`` needs this consumer's release of round ``r``). So every consumer waits
``full`` at every position it releases, in order; a consumer that skips a wait can pass the next one a phase
early and read a stage that is still being written (a race). After ``wait_full(g)`` returns, the stage's
data (the bytes and the stores before the arrivals of round ``r``) are visible to the waiting thread; after
``wait_empty(g)``, every read of the stage in round ``r - 1`` that came before its releases is done.

Every method is a :func:`T.macro <tirxpy.ir.macro>` or a plain expression builder, so what a kernel
gets is the explicit IR it would have written by hand (``print(kernel)`` shows it).

    >>> from tirxpy import T
    >>> from tirxpy.lang import StageRing
    >>> @T.prim_func
    ... def k(A: T.Tensor((64,), "float32")):
    ...     T.launch(grid=(1,), threads=32)
    ...     full = T.alloc_shared((2,), "uint64")
    ...     empty = T.alloc_shared((2,), "uint64")
    ...     ring = StageRing(full, empty, 2)
    ...     if T.thread_id() == 0:
    ...         ring.init(1, 1)
    ...     for g in T.serial(4):
    ...         ring.wait_full(g)
    >>> print(k)   # doctest: +ELLIPSIS
    @T.prim_func
    ...
        for g in T.serial(4):
            T.ptx.mbarrier_wait_parity(full[g % 2], g // 2 % 2)
"""
from __future__ import annotations

import operator

from tirxpy.ir import T
from tirxpy.ir.buffer import Buffer
from tirxpy.ir.expr import Expr
from tirxpy.target import MAX_CLUSTER
from tirxpy.errors import shown

from .errors import LangError

MAX_ARRIVALS = (1 << 20) - 1    # an mbarrier's expected arrival count is in [1, 2^20 - 1] (PTX ISA, mbarrier)


def _py_int(v):
    """``v`` as a Python int when it is an integer other than a bool (``int``, ``numpy.int64``...), else None."""
    if isinstance(v, (bool, Expr)):
        return None
    try:
        return operator.index(v)
    except Exception:   # noqa: BLE001  (no __index__, or one of its own that raises)
        return None


def _show(v):
    """``v`` and its type for an error message: ``1.5 (float)``."""
    return f"{shown(v, 60)} ({type(v).__name__})"


def check_count(where, name, v):
    """Refuse an mbarrier arrival count that is neither an int in ``[1, 2^20 - 1]`` nor an integer device
    expression; return it (a Python int as ``int``)."""
    n = _py_int(v)
    if n is None and isinstance(v, Expr) and v.dtype.is_int:
        return v
    if n is None or not 1 <= n <= MAX_ARRIVALS:
        raise LangError(f"{where}: {name} = {_show(v)}; an mbarrier expects 1 to {MAX_ARRIVALS} arrivals a phase: "
                        f"pass the number of arrivals that complete one (the arriving threads or groups)")
    return n


def check_position(where, g):
    """Refuse a ring position that is neither an int >= 0 nor an integer device expression (nothing emitted)."""
    n = _py_int(g)
    if n is None:
        if isinstance(g, Expr) and g.dtype.is_int:
            return
        raise LangError(f"StageRing.{where}: position {_show(g)} must be an int or an integer device expression "
                        "(the running count of the walk: g = i * KT + k)")
    if n < 0:
        raise LangError(f"StageRing.{where}: position {n}: positions count from 0 (the first position of the walk is "
                        "0); for the position before g write g + stages - 1 where only the stage matters (release)")


def _check_rank(rank, cluster):
    n = _py_int(rank)
    if n is None and not (isinstance(rank, Expr) and rank.dtype.is_int):
        raise LangError(f"StageRing.release_to: rank {_show(rank)} must be an int or an integer device expression")
    if n is not None and not 0 <= n < cluster:
        raise LangError(f"StageRing.release_to: rank {n} is not a CTA of the ring's cluster of {cluster} "
                        f"(ranks 0..{cluster - 1}): pass the rank of the CTA whose producer refills the stage")


def _check_cta_group(cta_group):
    if _py_int(cta_group) not in (1, 2):
        raise LangError(f"StageRing commit: cta_group must be 1 or 2 (that of the tcgen05.mma), got {_show(cta_group)}")


def _launch_cluster():
    """The cluster size of the kernel being parsed (1 without a cluster), or None outside a parse."""
    from tirxpy.ir.parser import current_launch

    launch = current_launch()
    return None if launch is None else launch.cluster_size


def _check_barriers(name, bar, stages):
    if not isinstance(bar, Buffer):
        raise LangError(f"StageRing: {name} must be a shared uint64 buffer of mbarriers (T.alloc_shared((stages,), "
                        f"\"uint64\")), got {type(bar).__name__}")
    if bar.dtype.name != "uint64" or bar.storage not in ("shared", "shared::cluster") or len(bar.shape) != 1:
        raise LangError(f"StageRing: {name} {shown(bar.name)} is a {bar.storage} {bar.dtype.name} buffer of shape "
                        f"{tuple(bar.shape)}; mbarriers are a 1-D shared uint64 buffer: "
                        f"T.alloc_shared(({stages},), \"uint64\")")
    if isinstance(bar.shape[0], int) and bar.shape[0] < stages:
        raise LangError(f"StageRing: {name} {shown(bar.name)} holds {bar.shape[0]} barriers, fewer than the ring's "
                        f"{stages} stages")


class StageRing:
    """``stages`` stages guarded by ``full`` / ``empty`` mbarrier arrays; ``cluster`` CTAs read each stage
    (their consumers release it in every CTA of the cluster, as multicast loads fill it in all of them).

    Requires: ``full`` and ``empty`` two distinct 1-D shared ``uint64`` buffers of at least ``stages`` barriers;
    ``stages >= 1`` and ``1 <= cluster <= 16`` integers; ``cluster`` is 1 (a CTA-local ring) or, inside a kernel,
    the launch's cluster size. Positions ``g`` are ints >= 0 or integer device expressions (valued >= 0).
    Postcondition: the methods emit, for position ``g``, waits and arrivals on barrier ``g % stages`` with the
    parities of the module docstring.

        >>> StageRing(None, None, 0)
        Traceback (most recent call last):
        ...
        tirxpy.lang.errors.LangError: StageRing: stages must be an int >= 1, got 0 (int)"""

    def __init__(self, full, empty, stages: int, cluster: int = 1):
        for name, v in (("stages", stages), ("cluster", cluster)):
            n = _py_int(v)
            if n is None or n < 1:
                raise LangError(f"StageRing: {name} must be an int >= 1, got {_show(v)}")
        stages, cluster = _py_int(stages), _py_int(cluster)
        if cluster > MAX_CLUSTER:
            raise LangError(f"StageRing: cluster = {cluster} CTAs; a thread-block cluster has at most {MAX_CLUSTER} "
                            "(8 portable): pass the kernel's cluster size")
        _check_barriers("full", full, stages)
        _check_barriers("empty", empty, stages)
        if full is empty:
            raise LangError(f"StageRing: full and empty are the same buffer {shown(full.name)}; allocate two: "
                            f"T.alloc_shared(({stages},), \"uint64\") each")
        launched = _launch_cluster()
        if cluster > 1 and launched is not None and launched != cluster:
            raise LangError(f"StageRing: cluster = {cluster} CTAs, but the kernel is launched with clusters of "
                            f"{launched} CTA(s): pass the launch's cluster size (or 1 for a ring of one CTA)")
        self.full, self.empty, self.stages, self.cluster = full, empty, stages, cluster

    def stage(self, g):
        """The stage of position ``g``: ``g % stages`` (an int for an int ``g``, else a device expression)."""
        check_position("stage", g)
        return g % self.stages

    def parity(self, g):
        """The phase parity a wait on ``full`` at position ``g`` waits for: ``(g // stages) % 2``, the parity of
        round ``g // stages``."""
        check_position("parity", g)
        return (g // self.stages) % 2

    @T.macro
    def init(self, full_arrivals, empty_arrivals):
        """One thread: initialise every stage's barriers (``full`` expects ``full_arrivals`` arrivals a phase,
        ``empty`` ``empty_arrivals``). Follow with ``T.ptx.fence_mbarrier_init()`` and a CTA / cluster sync
        (:func:`tirxpy.lang.setup_barriers` does all three). Each count is an int in ``[1, 2^20 - 1]`` or an
        integer device expression (module docstring: who arrives how often)."""
        check_count("StageRing.init", "full_arrivals", full_arrivals)
        check_count("StageRing.init", "empty_arrivals", empty_arrivals)
        for s in T.serial(self.stages):
            T.ptx.mbarrier_init(self.full[s], full_arrivals)
            T.ptx.mbarrier_init(self.empty[s], empty_arrivals)

    @T.macro
    def wait_full(self, g):
        """Consumer: wait for ``full[g % stages]`` to complete phase ``g // stages`` (parity ``(g // stages) % 2``):
        the data of position ``g`` has landed. Exact when the caller waited at ``g - stages`` too (module
        docstring)."""
        check_position("wait_full", g)
        T.ptx.mbarrier_wait_parity(self.full[g % self.stages], (g // self.stages) % 2)

    @T.macro
    def wait_empty(self, g):
        """Producer: wait until the stage of position ``g`` was released in its previous round: for
        ``g >= stages`` wait for ``empty[g % stages]`` to complete phase ``g // stages - 1`` (parity
        ``(g // stages + 1) % 2``); for ``g < stages`` (the first round, every stage free) emit nothing, or, for a
        device ``g``, ``if g >= stages:`` around the wait."""
        check_position("wait_empty", g)
        if g >= self.stages:
            T.ptx.mbarrier_wait_parity(self.empty[g % self.stages], (g // self.stages + 1) % 2)

    @T.macro
    def expect_bytes(self, g, nbytes):
        """Producer: one arrival on ``full[g % stages]`` announcing ``nbytes`` transaction bytes
        (``mbarrier.arrive.expect_tx``); the phase completes once its arrivals are in and the TMA loads into the
        stage have completed those bytes."""
        check_position("expect_bytes", g)
        T.ptx.mbarrier_arrive_expect_tx(self.full[g % self.stages], nbytes)

    @T.macro
    def arrive_full(self, g):
        """Producer: one plain arrival on ``full[g % stages]`` by each calling thread (data written by ordinary
        stores; each arrival releases the calling thread's earlier stores to the waiters)."""
        check_position("arrive_full", g)
        T.ptx.mbarrier_arrive(self.full[g % self.stages])

    @T.macro
    def release(self, g):
        """Consumer: the stage of position ``g`` is read. Each calling thread arrives once on
        ``empty[g % stages]`` in every CTA of the cluster (``mapa`` + a cluster-scope arrival when
        ``cluster > 1``), so ``empty`` expects (releasing threads per CTA) x ``cluster`` arrivals. Only the stage
        of ``g`` matters: ``release(g + stages - 1)`` releases the stage of position ``g - 1``."""
        check_position("release", g)
        if self.cluster == 1:
            T.ptx.mbarrier_arrive(self.empty[g % self.stages])
        else:
            for r in range(self.cluster):
                T.ptx.mbarrier_arrive_cluster(T.ptx.mapa_shared(self.empty[g % self.stages], r))

    @T.macro
    def release_to(self, g, rank):
        """Consumer (one thread per arriving group): stage of position ``g`` is read; arrive on its ``empty``
        barrier in CTA ``rank`` of the cluster only, the CTA whose producer refills it (the leader of a
        ``cta_group::2`` pair issues the MMAs into both CTAs' tensor memory). The arrival is a
        ``.release.cluster`` one (``mbarrier_arrive_remote``): it orders this thread's earlier accesses for the
        other CTA's producer. ``rank`` is a CTA of the cluster: ``0 <= rank < cluster``."""
        check_position("release_to", g)
        _check_rank(rank, self.cluster)
        T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(self.empty[g % self.stages], rank))

    @T.macro
    def commit_empty(self, g, cta_group):
        """Consumer that reads stages with ``tcgen05.mma`` (its one issuing thread): ``tcgen05.commit`` onto
        ``empty`` of position ``g``, which arrives once every ``tcgen05`` operation this thread issued so far
        has completed, so the producer refills the stage only after the tensor cores have read it.
        ``cta_group`` (1 or 2) is that of the MMAs; with ``cluster > 1`` the commit multicasts to ``empty``
        in every CTA of the cluster (their producers each refill their own part of the stage)."""
        check_position("commit_empty", g)
        self.commit(self.empty[g % self.stages], cta_group)

    @T.macro
    def commit_full(self, g, cta_group):
        """Producer that fills stages with ``tcgen05.mma`` (its one issuing thread; a tensor-memory
        accumulator ring, say): ``tcgen05.commit`` onto ``full`` of position ``g``, which arrives once the
        MMAs this thread issued so far have completed; with ``cluster > 1`` it multicasts to ``full`` in
        every CTA of the cluster (each CTA's consumers read their own lanes)."""
        check_position("commit_full", g)
        self.commit(self.full[g % self.stages], cta_group)

    @T.macro
    def commit(self, bar, cta_group):
        """``tcgen05.commit`` (``.cta_group::`` ``cta_group``) onto ``bar``, one of this ring's barriers; with
        ``cluster > 1`` multicast to the same barrier in every CTA of the cluster (mask ``2^cluster - 1``).
        :meth:`commit_empty` and :meth:`commit_full` name the two uses."""
        _check_cta_group(cta_group)
        if self.cluster == 1:
            if cta_group == 1:
                T.ptx.tcgen05_commit_cg1(bar)
            else:
                T.ptx.tcgen05_commit_cg2(bar)
        else:
            if cta_group == 1:
                T.ptx.tcgen05_commit_cg1_multicast(bar, T.uint16((1 << self.cluster) - 1))
            else:
                T.ptx.tcgen05_commit_cg2_multicast(bar, T.uint16((1 << self.cluster) - 1))

    def __repr__(self):
        return f"StageRing({self.full.name}, {self.empty.name}, stages={self.stages}, cluster={self.cluster})"
