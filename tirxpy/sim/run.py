"""``tirxpy.sim.run(kernel, *args)``: simulate a kernel on the CPU, every CTA of the grid, and
return its tensors the way a launch leaves them."""
from __future__ import annotations

import itertools

import numpy as np

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.buffer import Buffer
from tirxpy.ir.visitor import first, walk_stmts
from tirxpy.target import as_target

from .access import GPTR_SHIFT
from .args import ArgumentError, check_ctas, check_launch, check_options, check_scalar, check_sizes, to_array
from .clc import LaunchQueue
from .errors import SimReportError
from .expr import compile_expr
from .finish import finish_cluster
from .machine import CTA, WARP, Machine, Warp, plan_shared
from .memory import Bytes
from .scheduler import run_cluster
from .target import allocated, choose_arch
from .values import compute_dtype, from_bits, storage_dtype, to_bits


class SimResult(tuple):
    """The output tensors (numpy, in argument order) with ``.problems`` (empty when clean) and ``.bank_conflicts``:
    the source lines whose vector shared-memory loads / stores took more wavefronts than ideal
    (:class:`tirxpy.sim.banks.BankConflicts`, the most wavefronts lost first; empty when none did)."""

    problems: list = []
    bank_conflicts: list = []


def _elected(kernel):
    from tirxpy.ir.analysis import annotate_active_threads

    out = {}
    try:
        info = annotate_active_threads(kernel)
    except Exception:  # noqa: BLE001 - analysis is a help here, not a requirement
        return out

    for s in walk_stmts(kernel.body):
        if isinstance(s, St.IfThenElse):
            elects = [c for c in _conj(s.cond) if isinstance(c, E.ElectOne)]
            ts = info.get(s.then_body)
            if elects and ts is not None and ts.exact:
                for e in elects:
                    out[id(e)] = np.array(sorted(ts.tids), np.int64)
    return out


def _conj(e):
    if isinstance(e, E.And):
        return _conj(e.a) + _conj(e.b)
    return [e]


DEFAULT_STEPS = 400_000


def run(kernel, *args, arch: str | None = None, seed: int = 0, check: bool = True, max_steps: int = DEFAULT_STEPS,
        ctas=None):
    """Simulate ``kernel`` with ``args`` (numpy arrays / torch tensors for tensors, numbers for
    scalars). Tensors are updated in place where possible; returns a :class:`SimResult` tuple of
    numpy arrays (one per tensor parameter, bfloat16 / float8 as float32 values). A tensor argument is taken in
    its parameter's logical shape and held as that many elements in row-major order; every access to it (element
    loads and stores, TMA boxes) goes through the parameter's layout, as on the GPU. The array written back holds
    that storage: the elements of a view whose layout overlaps (strides ``(1, 1)``) share it, so read such a
    view's results through its strides (``(k, x)`` at storage element ``k + x``). A layout that reaches past the
    element count (a strided view, such as one slice of a fused projection) holds each element at its layout offset
    instead (:func:`spread_offsets`), so the kernel reads the tensor's own elements, as on the GPU.

    ``arch`` (None: taken from the instructions the kernel uses, :mod:`tirxpy.sim.target`);
    ``seed`` picks among legal interleavings; ``check=True`` raises :class:`SimReportError` when
    a problem was found (deadlock, no progress, race, uninitialized read, mbarrier misuse, out of
    bounds, unsupported intrinsic); with ``check=False`` the problems are on ``result.problems``. Shared-memory
    bank conflicts are no problem but a cost: ``result.bank_conflicts`` lists the lines whose vector accesses
    took more wavefronts than ideal (:mod:`tirxpy.sim.banks`).
    ``max_steps`` bounds the run's work (loop iterations plus scheduling steps): a loop that
    would run past it is reported as ``no_progress`` and the run stops there. ``ctas`` limits
    the run to some CTA ids (tuples), for quick checks. Arguments are checked first
    (:mod:`tirxpy.sim.args`).
    """
    from tirxpy.ir.kernel import Kernel

    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"sim.run simulates a kernel (a @T.prim_func / T.parse_script result), got "
                            f"{type(kernel).__name__}")
    check_options(seed, check, max_steps)
    if len(args) != len(kernel.params):
        raise ArgumentError(f"{kernel.name} takes {len(kernel.params)} arguments "
                            f"({', '.join(p.name for p in kernel.params)}), got {len(args)}")
    arch = choose_arch(kernel, arch)
    if first(kernel.body, St.PrimitiveCall) is not None:
        from tirxpy.primitives import lower_calls

        kernel = lower_calls(kernel, arch)
    m = Machine(kernel, arch, np.random.default_rng(int(seed)), int(max_steps))
    views = _bind(m, kernel, args)
    grid = []
    for g in kernel.launch.grid:
        grid.append(int(compile_expr(g)(_Scalars(m), np.ones(WARP, bool))[0]))
    grid += [1] * (3 - len(grid))
    cl = m.cluster_dims
    target = as_target(arch)
    check_launch(kernel, grid, cl, target)
    wanted = check_ctas(ctas, grid, grid[0] * grid[1] * grid[2], -(-kernel.launch.threads // WARP))
    plan, size = plan_shared(kernel)
    check_sizes(kernel, size, [b for b in allocated(kernel) if b.storage == "local" and b.base is None], target)
    m.elected = _elected(kernel)
    nthreads = kernel.launch.threads
    nwarps = -(-nthreads // WARP)
    if wanted is None:
        clusters = itertools.product(range(grid[2] // cl[2]), range(grid[1] // cl[1]), range(grid[0] // cl[0]))
    else:   # only the clusters holding a wanted CTA (the grid may be huge)
        clusters = sorted({(z // cl[2], y // cl[1], x // cl[0]) for x, y, z in wanted})
    m.clc = LaunchQueue(grid, cl)
    for cz, cy, cx in clusters:
        index = m.clc.index(cz, cy, cx)           # launch order; a cluster launch control request may take it
        if not m.clc.runs(index):
            continue
        m.clc.started(index)
        members = []
        for rz, ry, rx in itertools.product(range(cl[2]), range(cl[1]), range(cl[0])):
            cid = (cx * cl[0] + rx, cy * cl[1] + ry, cz * cl[2] + rz)
            if wanted is None or cid in wanted:
                members.append(cid)
        if not members:
            continue
        m.clocks.names.clear()
        m.cluster_state.clear()
        cta_objs = [CTA(m, cid, rank, plan, size) for rank, cid in enumerate(members)]
        for c in cta_objs:
            for wi in range(nwarps):
                a = m.clocks.add(f"{c.describe()} warp {wi}")
                c.warps.append(Warp(c, wi, a, nthreads))
        m.cluster = cta_objs
        run_cluster(m, cta_objs)
        if m.stopped:
            break
        finish_cluster(m, cta_objs)
    outs = []
    for p, a, arr, how in views:
        raw = m.globals[p].data.view(storage_dtype(p.dtype))
        off = spread_offsets(p)
        raw = (raw if off is None else raw[off]).reshape(p.shape)
        val = from_bits(raw, p.dtype)
        outs.append(np.array(val))
        _write_back(a, arr, raw, how, p)
    res = SimResult(outs)
    res.problems = list(m.problems)
    res.bank_conflicts = m.banks.conflicts()
    if check and m.problems:
        raise SimReportError(m.problems, kernel.name)
    return res


SPREAD_LIMIT = 1 << 28
"""The most elements the simulator holds for one tensor whose layout reaches past its element count."""


def spread_offsets(p):
    """Storage offsets of the elements of tensor parameter ``p`` (row-major order) when its layout reaches past its
    element count, as a strided view does (the query slice of a fused ``(B, S, 3, H, D)`` projection reaches ``3 H
    D`` elements per row and holds ``H D``); None otherwise, where the simulator holds the elements in row-major
    order and every access goes through the layout. A reach past :data:`SPREAD_LIMIT`, or one without a closed stride
    form, is refused (:class:`~tirxpy.sim.args.ArgumentError`)."""
    from tirxpy.ir.buffer import footprint
    from tirxpy.layout import TileLayout
    from tirxpy.lower.build import tensor_strides

    lay = p.layout
    if lay is None or not isinstance(lay, TileLayout):
        return None
    n = int(np.prod(p.shape, dtype=np.int64))
    reach = footprint(lay)
    if reach <= n:
        return None
    if reach > SPREAD_LIMIT:
        raise ArgumentError(f"parameter {p.name}: its layout reaches {reach} elements for its {n}; the simulator holds "
                            f"such a strided tensor as that reach, at most {SPREAD_LIMIT} elements: simulate a smaller "
                            "shape or smaller strides")
    shape, strides = tensor_strides(p)
    if tuple(shape) != tuple(p.shape):
        raise ArgumentError(f"parameter {p.name}: its layout reaches {footprint(lay)} elements, more than its {n}, "
                            "and is not a strided map of its dimensions; the simulator holds such a tensor only "
                            "through strides")
    off = np.zeros((), dtype=np.int64)
    for ext, st in zip(shape, strides):
        off = off[..., None] + np.arange(ext, dtype=np.int64) * (st or 0)
    return off.reshape(-1)


def _bind(m, kernel, args):
    """Global memories and scalar values of the arguments (checked); the tensor views to write back."""
    views = []
    for tag, (p, a) in enumerate(zip(kernel.params, args), start=1):
        if isinstance(p, Buffer):
            arr, how = to_array(p, a)
            st = storage_dtype(p.dtype)
            flat = arr.reshape(-1)
            same = arr.dtype == st or how == "bits" or arr.dtype == np.bool_
            raw = flat.view(st) if same else to_bits(flat, p.dtype)
            off = spread_offsets(p)
            if off is not None:          # a strided view: each element at its layout offset (the rest zero)
                spread = np.zeros(int(off.max()) + 1, dtype=st)
                spread[off] = raw
                raw = spread
            mem = Bytes(raw.nbytes, p.name)
            mem.data[:] = np.ascontiguousarray(raw).view(np.uint8)
            m.globals[p] = mem
            m.gtag[p] = tag << GPTR_SHIFT
            m.gtag_buf[tag] = p
            views.append((p, a, arr, how))
        else:
            m.scalars[p] = np.full(WARP, check_scalar(p, a), compute_dtype(p.dtype))
    return views


class _Scalars:
    """Stand-in warp for evaluating launch expressions of scalar parameters."""

    def __init__(self, m):
        self.env = {}
        self.cta = type("C", (), {"machine": m})()


def _write_back(a, arr, raw, how, p):
    """Results back into the caller's tensor (its dtype and device; a read-only numpy array is
    left alone: the results are in the returned tuple)."""
    if how == "bits":
        import torch

        bits = torch.from_numpy(np.ascontiguousarray(raw).view(np.int16 if raw.dtype == np.uint16 else np.uint8).copy())
        a.copy_(bits.view(a.dtype).reshape(a.shape).to(a.device))
    elif how == "torch":
        import torch

        a.copy_(torch.from_numpy(np.array(from_bits(raw, p.dtype)).reshape(a.shape)).to(a.dtype).to(a.device))
    elif a.flags.writeable and a.dtype == raw.dtype:
        a[...] = raw.reshape(a.shape)
    elif a.flags.writeable:
        a[...] = np.asarray(from_bits(raw, p.dtype)).reshape(a.shape).astype(a.dtype)
