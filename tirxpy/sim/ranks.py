"""Several ranks (GPUs) in one process: the signal protocols of multi-GPU kernels, on the CPU.

``run_ranks(kernel, args_per_rank)`` runs one launch of a kernel on every rank at once: every CTA of
every rank is live together (a persistent kernel's CTAs and the ranks wait on each other's flags), and
one seeded scheduler interleaves all their warps. Memory the ranks share is a :class:`Symmetric`
allocation (one buffer per rank, like ``torch.distributed._symmetric_memory.empty``): pass
``sym.on(p)`` as a kernel argument to bind rank ``p``'s buffer, on any rank (a peer's buffer is how a
kernel reads or writes another GPU). Everything else is private to its rank.

Checks, besides every single-GPU check of :func:`tirxpy.sim.run`:

- **deadlock**: a rank waits for a signal nobody will send (``wait_geq_sys_u32`` blocks; a polling loop
  that cannot exit counts too). The report names every waiting warp with its rank.
- **race (read before its signal)**: every symmetric buffer records who wrote each byte. Happens-before
  across warps and ranks comes only from release / acquire on flags (:mod:`tirxpy.intrinsics.peer`: a
  release carries the writer's clock to the flag, an acquire that reads it joins it) and, within a CTA,
  from its barriers. A read of bytes written by another warp (or by the host before the owner rank's
  launch) that no such chain orders first is reported as ``race``.
- ``late={rank: steps}`` holds a rank's warps back for that many scheduling steps (a rank that reaches
  the kernel late).
- ``side=[(kernel, args) per rank]`` runs a second launch on each rank at the same time as the first (a
  second stream: a copy engine's transfer and its flag writes can be modelled as a small kernel there).

    >>> import numpy as np
    >>> from tirxpy import T
    >>> from tirxpy.sim.ranks import Symmetric, run_ranks
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def ping(Mine: T.Tensor((32,), "uint32"), Peer: T.Tensor((32,), "uint32"),
    ...          Flag: T.Tensor((1,), "uint32"), PeerFlag: T.Tensor((1,), "uint32"), Out: T.Tensor((32,), "uint32")):
    ...     T.launch(grid=(1,), threads=32)
    ...     T.ptx.st_release_sys_u32(PeerFlag[0], T.uint32(1))
    ...     T.ptx.wait_geq_sys_u32(Flag[0], T.uint32(1))
    ...     Out[T.thread_id()] = Peer[T.thread_id()]
    ... ''')
    >>> data, flag = Symmetric("data", (32,), "uint32", 2), Symmetric("flag", (1,), "uint32", 2)
    >>> for r in range(2): data.set(r, np.full(32, 10 + r, np.uint32))
    >>> outs = [np.zeros(32, np.uint32) for _ in range(2)]
    >>> _ = run_ranks(k, [(data.on(r), data.on(1 - r), flag.on(r), flag.on(1 - r), outs[r]) for r in range(2)])
    >>> int(outs[0][0]), int(outs[1][0])
    (11, 10)
"""
from __future__ import annotations

import numpy as np

from tirxpy.ir.buffer import Buffer
from tirxpy.errors import shown

from . import rank_flags  # noqa: F401  (registers the peer signal models)
from .access import GPTR_SHIFT
from .args import ArgumentError, check_launch, check_options, check_scalar, to_array
from .errors import SimReportError, UnsupportedError
from .expr import compile_expr
from .finish import finish_cluster
from .interp import BudgetExceeded, exec_seq
from .machine import CTA, WARP, Machine, Warp, plan_shared
from .memory import Bytes
from .rank_memory import Symmetric, _On, _Watch
from .run import SimResult, _elected, _write_back
from .target import choose_arch
from .values import compute_dtype, from_bits, storage_dtype, to_bits

__all__ = ["Symmetric", "run_ranks"]


# ---- the run ---------------------------------------------------------------------------------------------

class _World:
    def __init__(self):
        self.agent_names: list = []

    def agent(self, name):
        self.agent_names.append(name)
        return len(self.agent_names) - 1


def _bind_rank(kernel, args, rank, watch):
    """(globals, gtag, gtag_buf, scalars, private views) of one rank's arguments."""
    if len(args) != len(kernel.params):
        raise ArgumentError(f"rank {rank}: {kernel.name} takes {len(kernel.params)} arguments "
                            f"({', '.join(p.name for p in kernel.params)}), got {len(args)}")
    glob, gtag, gbuf, scal, views = {}, {}, {}, {}, []
    for tag, (p, a) in enumerate(zip(kernel.params, args), start=1):
        if not isinstance(p, Buffer):
            if isinstance(a, _On):
                raise ArgumentError(f"rank {rank}: parameter {p.name} is a scalar; a Symmetric buffer binds tensors")
            scal[p] = np.full(WARP, check_scalar(p, a), compute_dtype(p.dtype))
            continue
        if isinstance(a, _On):
            s = a.sym
            if tuple(p.shape) != s.shape or str(p.dtype) != s.dtype:
                raise ArgumentError(f"rank {rank}: parameter {p.name} is {tuple(p.shape)} {p.dtype}, the symmetric "
                                    f"buffer {shown(s.name)} is {s.shape} {s.dtype}")
            mem = s.mems[a.rank]
            if id(mem.data) not in watch.mems:
                watch.add(mem.data, s, a.rank)
        else:
            arr, how = to_array(p, a)
            st = storage_dtype(p.dtype)
            flat = arr.reshape(-1)
            same = arr.dtype == st or how == "bits" or arr.dtype == np.bool_
            raw = flat.view(st) if same else to_bits(flat, p.dtype)
            mem = Bytes(raw.nbytes, p.name)
            mem.data[:] = np.ascontiguousarray(raw).view(np.uint8)
            views.append((p, a, arr, how))
        glob[p] = mem
        gtag[p] = tag << GPTR_SHIFT
        gbuf[tag] = p
    return glob, gtag, gbuf, scal, views


def _machines(kernel, arch, args, rank, watch, world, seed, max_steps, label=""):
    """One Machine per CTA of the rank's grid, all sharing the rank's global memory."""
    from tirxpy.target import as_target

    glob, gtag, gbuf, scal, views = _bind_rank(kernel, args, rank, watch)
    plan, size = plan_shared(kernel)
    first = Machine(kernel, arch, np.random.default_rng(seed), max_steps)
    first.globals, first.gtag, first.gtag_buf, first.scalars = glob, gtag, gbuf, scal
    grid = [int(compile_expr(g)(_Env(first), np.ones(WARP, bool))[0]) for g in kernel.launch.grid]
    grid += [1] * (3 - len(grid))
    if any(c != 1 for c in first.cluster_dims):
        raise UnsupportedError(f"run_ranks runs kernels without clusters; {kernel.name} has cluster "
                               f"{kernel.launch.cluster} (simulate one rank's clusters with tirxpy.sim.run)")
    check_launch(kernel, grid, first.cluster_dims, as_target(arch))
    elected = _elected(kernel)
    nthreads = kernel.launch.threads
    out = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                m = first if not out else Machine(kernel, arch, first.rng, max_steps)
                m.globals, m.gtag, m.gtag_buf, m.scalars, m.elected = glob, gtag, gbuf, scal, elected
                cta = CTA(m, (x, y, z), 0, plan, size)
                for wi in range(-(-nthreads // WARP)):
                    a = m.clocks.add(f"{cta.describe()} warp {wi}")
                    w = Warp(cta, wi, a, nthreads)
                    w._rank, w._world = rank, world
                    w._gagent = world.agent(f"rank {rank}{label} {cta.describe()} warp {wi}")
                    cta.warps.append(w)
                m.cluster = [cta]
                out.append(m)
    return out, views


class _Env:
    def __init__(self, m):
        self.env = {}
        self.cta = type("C", (), {"machine": m})()


def run_ranks(kernel, args_per_rank, *, arch: str | None = None, seed: int = 0, check: bool = True,
              max_steps: int = 2_000_000, late=None, side=None):
    """Run ``kernel`` (or one kernel per rank, a list) on ``len(args_per_rank)`` ranks at once; returns one
    :class:`~tirxpy.sim.SimResult` per rank (its private tensors; symmetric buffers are read with
    :meth:`Symmetric.get`). ``late={rank: steps}`` starts that rank's warps after ``steps`` scheduling
    steps. ``side``: one ``(kernel, args)`` per rank (or None for none), launched on that rank together with
    the first, as on a second stream (its private tensors are its own copies). Raises :class:`~tirxpy.sim.SimReportError` listing every problem (deadlock, race, and the
    single-GPU checks) when ``check``; otherwise each result's ``.problems`` lists them (all ranks')."""
    from tirxpy.ir.kernel import Kernel
    from tirxpy.ir.stmt import PrimitiveCall
    from tirxpy.ir.visitor import first

    if not isinstance(args_per_rank, (list, tuple)) or not args_per_rank:
        raise ArgumentError("run_ranks takes a non-empty list with one argument tuple per rank")
    for r, args in enumerate(args_per_rank):
        if not isinstance(args, (list, tuple)):
            raise ArgumentError(f"run_ranks takes a non-empty list with one argument tuple per rank; rank {r}'s is "
                                f"{shown(args, 60)}")
    n = len(args_per_rank)
    kernels = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel] * n
    if len(kernels) != n or not all(isinstance(k, Kernel) for k in kernels):
        raise ArgumentError(f"run_ranks takes one kernel or a list of {n} kernels (one per rank)")
    check_options(seed, check, max_steps)
    if late is not None and not isinstance(late, dict):
        raise ArgumentError(f"late= takes a dict {{rank: steps}}, got {shown(late, 60)}")
    late = dict(late or {})
    for r, s in late.items():
        if not (isinstance(r, int) and 0 <= r < n and isinstance(s, int) and s >= 0):
            raise ArgumentError(f"late={{rank: steps}} needs ranks in 0 .. {n - 1} and steps >= 0, got {shown(r)}: "
                                f"{shown(s)}")
    side = _side_launches(side, n)
    watch, world = _Watch(), _World()
    ms, views, extra = [], [], []

    def machines(k, args, r, label, salt):
        a = choose_arch(k, arch)
        if first(k.body, PrimitiveCall) is not None:
            from tirxpy.primitives import lower_calls

            k = lower_calls(k, a)
        return _machines(k, a, args, r, watch, world, seed * 1009 + r + salt, max_steps, label)

    for r, (k, args) in enumerate(zip(kernels, args_per_rank)):
        mr, v = machines(k, args, r, "", 0)
        ms.append(mr)
        views.append(v)
    for r, launch in enumerate(side):
        if launch is not None:
            extra += machines(launch[0], launch[1], r, f" ({launch[0].name}, side stream)", 7919)[0]
    _host_writes(watch, world)
    _schedule([m for mr in ms for m in mr] + extra, watch, world, np.random.default_rng(seed), late, max_steps)
    problems = [p for mr in ms for m in mr for p in m.problems] + [p for m in extra for p in m.problems]
    results = []
    for r, (mr, v) in enumerate(zip(ms, views)):
        outs = []
        for p, a, arr, how in v:
            raw = mr[0].globals[p].data.view(storage_dtype(p.dtype)).reshape(p.shape)
            outs.append(np.array(from_bits(raw, p.dtype)))
            _write_back(a, arr, raw, how, p)
        res = SimResult(outs)
        res.problems = problems
        results.append(res)
    if check and problems:
        raise SimReportError(problems, kernels[0].name)
    return results


def _side_launches(side, n):
    """``side`` checked: ``n`` entries, each None or a ``(Kernel, args)`` pair."""
    from tirxpy.ir.kernel import Kernel

    if side is None:
        return [None] * n
    if not isinstance(side, (list, tuple)) or len(side) != n:
        raise ArgumentError(f"side= takes one (kernel, args) pair (or None) per rank: {n} entries, got "
                            f"{shown(side, 80)}")
    for r, launch in enumerate(side):
        if launch is not None and not (isinstance(launch, (list, tuple)) and len(launch) == 2
                                       and isinstance(launch[0], Kernel) and isinstance(launch[1], (list, tuple))):
            raise ArgumentError(f"side[{r}] must be a (kernel, args) pair or None, got {shown(launch, 80)}")
    return list(side)


def _host_writes(watch, world):
    """What each rank's host wrote into its symmetric buffers before the launch: written by that rank's
    host agent, which every warp of the same rank follows (the launch) and no other rank's warp does."""
    hosts = {}
    for key, (sym, owner, wag, wclk) in watch.mems.items():
        if sym.host[owner]:
            if owner not in hosts:
                hosts[owner] = world.agent(f"the host of rank {owner} (before its launch)")
            wag[:] = hosts[owner]
            wclk[:] = 1
            watch.init[key][:] = True
    watch.hosts = hosts


def _schedule(machines, watch, world, rng, late, max_steps):
    warps = [w for m in machines for c in m.cluster for w in c.warps]
    width = len(world.agent_names)
    for w in warps:
        w._gvc = np.zeros(width, np.int64)
        w._lvc = {}
        h = watch.hosts.get(w._rank)
        if h is not None:
            w._gvc[h] = 1
        w._late = late.get(w._rank, 0)
    gens = {w: exec_seq(w, w.cta.machine.kernel.body, w.alive.copy()) for w in warps}
    live = list(warps)          # the warps not done, in their order
    watch.on = True
    steps = 0
    issuers: dict = {}
    try:
        while True:
            runnable = [w for w in live if steps >= w._late and (w.block is None or w.block.cond())]
            events = [(m, e) for m in machines for e in m.events if e.ready is None or e.ready()]
            total = len(runnable) + len(events)
            held = [w for w in live if steps < w._late] if total == 0 else []
            if total == 0 and held:
                steps = min(late[w._rank] for w in held)
                continue
            if total == 0:
                live = [w for w in warps if not w.done]
                if live:
                    _deadlock(machines[0], live)
                break
            steps += 1
            if steps > max_steps:
                raise BudgetExceeded(None, None, "scheduling steps")
            k = int(rng.integers(total))
            if k >= len(runnable):
                m, ev = events[k - len(runnable)]
                m.events.remove(ev)
                watch.current, watch.issuer = None, issuers.pop(id(ev), None)
                ev.fire()
                watch.issuer = None
                continue
            w = runnable[k]
            watch.current = w
            w.block = None
            evs = w.cta.machine.events
            before = len(evs)
            try:
                while True:
                    r = next(gens[w])
                    if r is not None:
                        if r.cond():
                            continue
                        w.block = r
                    break
            except StopIteration:
                w.done = True
                live.remove(w)
                w.on_exit()
            for ev in evs[before:]:
                issuers[id(ev)] = w
    except BudgetExceeded as e:
        who = e.w if e.w is not None else None
        machines[0].report("no_progress", f"the ranks spent the budget of {max_steps} steps without finishing "
                           "(a loop that runs almost forever, or raise max_steps=)",
                           getattr(getattr(who, "where", None), "span", None), "")
    finally:
        watch.current = None
        for m in machines:
            finish_cluster(m, m.cluster)
        watch.on = False


def _deadlock(machine, live):
    lines = [f"rank {w._rank} {w.describe()} waits for {w.block.what if w.block is not None else '?'} at "
             f"{w.block.span if w.block is not None else getattr(w.where, 'span', None)}" for w in live]
    spin = [w for w in live if w.block is not None and w.block.spin]
    first = (spin or [w for w in live if w.block is not None] or live)[0]
    span = first.block.span if first.block is not None else None
    what = (f"{len(spin)} warp(s) poll a flag in a loop that nothing can change any more" if spin else
            f"every live warp waits ({len(live)} on {len({w._rank for w in live})} rank(s))")
    machine.report("deadlock", f"across ranks: {what}: a signal they wait for is never sent", span,
                   f"{len(live)} warp(s)", lines[:16] + ([f"... and {len(lines) - 16} more"] if len(lines) > 16 else []))
