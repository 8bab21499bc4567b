"""Stage rings: shared-memory stages handed between producers and consumers through mbarriers.

A ring of ``stages`` stages has two mbarrier arrays of that length: ``full[s]`` (the data of stage
``s`` has landed: the producer's arrival plus, for TMA, the transaction bytes) and ``empty[s]`` (every
consumer has finished reading stage ``s``). Producer and consumers count the same running position
``g`` over the whole walk (every k-block of every tile a CTA takes, say), and everything follows from
it in closed form:

- stage ``g % stages``, round ``g // stages``;
- a consumer waits ``full`` of its stage for the round's phase: parity ``(g // stages) % 2``;
- the producer refills a stage once its previous round was read: it waits ``empty`` with parity
  ``(g // stages + 1) % 2`` (round ``r - 1``), from the second round on.

A consumer that reads a stage with ``tcgen05.mma`` hands it back with a commit instead of an arrival
(:meth:`StageRing.commit_empty`: the barrier fires once the tensor cores have read it); a ring whose
producer is the MMA thread (tensor-memory accumulators) announces a filled stage the same way
(:meth:`StageRing.commit_full`); where only one CTA of a cluster refills a stage its consumers release it
there alone (:meth:`StageRing.release_to`).

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

from tirxpy.ir import T
from tirxpy.ir.buffer import Buffer
from tirxpy.target import MAX_CLUSTER

from .errors import LangError


def _check_barriers(name, bar, stages):
    if not isinstance(bar, Buffer):
        raise LangError(f"StageRing: {name} must be a shared uint64 buffer of mbarriers (T.alloc_shared((stages,), "
                        f"\"uint64\")), got {type(bar).__name__}")
    if bar.dtype.name != "uint64" or bar.storage not in ("shared", "shared::cluster") or len(bar.shape) != 1:
        raise LangError(f"StageRing: {name} {bar.name!r} is a {bar.storage} {bar.dtype.name} buffer of shape "
                        f"{tuple(bar.shape)}; mbarriers are a 1-D shared uint64 buffer: T.alloc_shared(({stages},), \"uint64\")")
    if isinstance(bar.shape[0], int) and bar.shape[0] < stages:
        raise LangError(f"StageRing: {name} {bar.name!r} holds {bar.shape[0]} barriers, fewer than the ring's {stages} stages")


class StageRing:
    """``stages`` stages guarded by ``full`` / ``empty`` mbarrier arrays; ``cluster`` CTAs read each stage
    (their consumers release it in every CTA of the cluster, as multicast loads fill it in all of them).

    Requires: ``full`` and ``empty`` 1-D shared ``uint64`` buffers of at least ``stages`` barriers;
    ``stages >= 1`` and ``1 <= cluster <= 16`` Python ints (``cluster`` the kernel's cluster size).
    Postcondition: the methods emit, for position ``g``, waits and arrivals on barrier ``g % stages`` with the
    parities of the module docstring."""

    def __init__(self, full, empty, stages: int, cluster: int = 1):
        for name, v, lo in (("stages", stages, 1), ("cluster", cluster, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise LangError(f"StageRing: {name} must be an int >= {lo}, got {v!r:.60}")
        if cluster > MAX_CLUSTER:
            raise LangError(f"StageRing: cluster = {cluster} CTAs; a thread-block cluster has at most {MAX_CLUSTER} "
                            "(8 portable): pass the kernel's cluster size")
        _check_barriers("full", full, stages)
        _check_barriers("empty", empty, stages)
        self.full, self.empty, self.stages, self.cluster = full, empty, stages, cluster

    def stage(self, g):
        """The stage of position ``g``: ``g % stages``."""
        return g % self.stages

    def parity(self, g):
        """The phase parity a wait on ``full`` at position ``g`` waits for: ``(g // stages) % 2``."""
        return (g // self.stages) % 2

    @T.macro
    def init(self, full_arrivals, empty_arrivals):
        """One thread: initialise every stage's barriers (``full`` expects ``full_arrivals`` arrivals a phase,
        ``empty`` ``empty_arrivals``). Follow with ``T.ptx.fence_mbarrier_init()`` and a CTA / cluster sync
        (:func:`tirxpy.lang.setup_barriers` does all three)."""
        for s in T.serial(self.stages):
            T.ptx.mbarrier_init(self.full[s], full_arrivals)
            T.ptx.mbarrier_init(self.empty[s], empty_arrivals)

    @T.macro
    def wait_full(self, g):
        """Consumer: wait until the data of position ``g`` has landed."""
        T.ptx.mbarrier_wait_parity(self.full[g % self.stages], (g // self.stages) % 2)

    @T.macro
    def wait_empty(self, g):
        """Producer: wait until the stage of position ``g`` was read in its previous round (no wait in the
        first round, when every stage is free)."""
        if g >= self.stages:
            T.ptx.mbarrier_wait_parity(self.empty[g % self.stages], (g // self.stages + 1) % 2)

    @T.macro
    def expect_bytes(self, g, nbytes):
        """Producer: arrive on ``full`` of position ``g`` announcing ``nbytes`` transaction bytes (the TMA
        loads into the stage then complete them)."""
        T.ptx.mbarrier_arrive_expect_tx(self.full[g % self.stages], nbytes)

    @T.macro
    def arrive_full(self, g):
        """Producer: a plain arrival on ``full`` of position ``g`` (data written by ordinary stores)."""
        T.ptx.mbarrier_arrive(self.full[g % self.stages])

    @T.macro
    def release(self, g):
        """Consumer (one thread per arriving group): stage of position ``g`` is read; arrive on its ``empty``
        barrier in every CTA of the cluster (``mapa`` + a cluster-scope arrival when ``cluster > 1``)."""
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
        other CTA's producer."""
        T.ptx.mbarrier_arrive_remote(T.ptx.mapa_shared(self.empty[g % self.stages], rank))

    @T.macro
    def commit_empty(self, g, cta_group):
        """Consumer that reads stages with ``tcgen05.mma`` (its one issuing thread): ``tcgen05.commit`` onto
        ``empty`` of position ``g``, which arrives once every ``tcgen05`` operation this thread issued so far
        has completed, so the producer refills the stage only after the tensor cores have read it.
        ``cta_group`` (1 or 2) is that of the MMAs; with ``cluster > 1`` the commit multicasts to ``empty``
        in every CTA of the cluster (their producers each refill their own part of the stage)."""
        self.commit(self.empty[g % self.stages], cta_group)

    @T.macro
    def commit_full(self, g, cta_group):
        """Producer that fills stages with ``tcgen05.mma`` (its one issuing thread; a tensor-memory
        accumulator ring, say): ``tcgen05.commit`` onto ``full`` of position ``g``, which arrives once the
        MMAs this thread issued so far have completed; with ``cluster > 1`` it multicasts to ``full`` in
        every CTA of the cluster (each CTA's consumers read their own lanes)."""
        self.commit(self.full[g % self.stages], cta_group)

    @T.macro
    def commit(self, bar, cta_group):
        """``tcgen05.commit`` (``.cta_group::`` ``cta_group``) onto ``bar``, one of this ring's barriers; with
        ``cluster > 1`` multicast to the same barrier in every CTA of the cluster (mask ``2^cluster - 1``).
        :meth:`commit_empty` and :meth:`commit_full` name the two uses."""
        assert cta_group in (1, 2), "StageRing commit: cta_group must be 1 or 2 (that of the tcgen05.mma)"
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
