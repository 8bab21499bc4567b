"""``tirxpy.sim.run(kernel, *args)``: simulate a kernel on the CPU, every CTA of the grid, and
return its tensors the way a launch leaves them."""
from __future__ import annotations

import itertools

import numpy as np

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.buffer import Buffer

from .access import GPTR_SHIFT
from .errors import SimError, SimReportError
from .machine import CTA, WARP, Machine, Warp, plan_shared
from .memory import Bytes
from .scheduler import run_cluster
from .values import from_bits, storage_dtype, to_bits


class SimResult(tuple):
    """The output tensors (numpy, in argument order) with ``.problems`` (empty when clean)."""

    problems: list = []


def _has_primitives(body) -> bool:
    found = []

    def walk(s):
        if isinstance(s, St.PrimitiveCall):
            found.append(s)
        for _, v in s.fields():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, St.Stmt):
                    walk(x)
    walk(body)
    return bool(found)


def _to_numpy(t, buf):
    try:
        import torch

        if isinstance(t, torch.Tensor):
            if t.dtype == torch.bfloat16:
                return t.detach().cpu().view(torch.int16).numpy().view(np.uint16), "bits"
            return t.detach().cpu().numpy(), "torch"
    except ImportError:
        pass
    a = np.asarray(t)
    return a, "numpy"


def _elected(kernel):
    from tirxpy.ir.analysis import annotate_active_threads

    out = {}
    try:
        info = annotate_active_threads(kernel)
    except Exception:  # noqa: BLE001 - analysis is a help here, not a requirement
        return out

    def walk(s):
        if isinstance(s, St.IfThenElse):
            elects = [c for c in _conj(s.cond) if isinstance(c, E.ElectOne)]
            ts = info.get(s.then_body)
            if elects and ts is not None and ts.exact:
                for e in elects:
                    out[id(e)] = np.array(sorted(ts.tids), np.int64)
        for _, v in s.fields():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, St.Stmt):
                    walk(x)
    walk(kernel.body)
    return out


def _conj(e):
    if isinstance(e, E.And):
        return _conj(e.a) + _conj(e.b)
    return [e]


def run(kernel, *args, arch: str = "sm_90a", seed: int = 0, check: bool = True, max_steps: int = 2_000_000,
        ctas=None):
    """Simulate ``kernel`` with ``args`` (numpy arrays / torch tensors for tensors, numbers for
    scalars). Tensors are updated in place where possible; returns a :class:`SimResult` tuple of
    numpy arrays (one per tensor parameter, bfloat16 / float8 as float32 values).

    ``seed`` picks among legal interleavings; ``check=True`` raises :class:`SimReportError` when
    a problem was found (deadlock, race, mbarrier misuse, out of bounds, unsupported intrinsic);
    with ``check=False`` the problems are on ``result.problems``. ``ctas`` limits the run to
    some CTA ids (tuples), for quick checks.
    """
    if _has_primitives(kernel.body):
        from tirxpy.primitives import lower_calls

        kernel = lower_calls(kernel, arch)
    if len(args) != len(kernel.params):
        raise SimError(f"{kernel.name} takes {len(kernel.params)} arguments "
                       f"({', '.join(p.name for p in kernel.params)}), got {len(args)}")
    m = Machine(kernel, arch, np.random.default_rng(seed), max_steps)
    m.elected = _elected(kernel)
    views = []
    for tag, (p, a) in enumerate(zip(kernel.params, args), start=1):
        if isinstance(p, Buffer):
            arr, how = _to_numpy(a, p)
            if arr.size != int(np.prod(p.shape)):
                raise SimError(f"parameter {p.name}: expected {p.shape} ({int(np.prod(p.shape))} elements), got shape {arr.shape}")
            st = storage_dtype(p.dtype)
            raw = arr.reshape(-1).view(st) if (arr.dtype == st or how == "bits") else to_bits(arr.reshape(-1), p.dtype)
            mem = Bytes(raw.nbytes, p.name)
            mem.data[:] = np.ascontiguousarray(raw).view(np.uint8)
            m.globals[p] = mem
            m.gtag[p] = tag << GPTR_SHIFT
            m.gtag_buf[tag] = p
            views.append((p, a, arr, how))
        else:
            dt = p.dtype
            from .values import compute_dtype

            m.scalars[p] = np.full(WARP, a, compute_dtype(dt))
    grid = []
    for g in kernel.launch.grid:
        from .expr import compile_expr

        grid.append(int(compile_expr(g)(_Scalars(m), np.ones(WARP, bool))[0]))
    grid += [1] * (3 - len(grid))
    cl = m.cluster_dims
    for d in range(3):
        if grid[d] % cl[d]:
            raise SimError(f"grid {tuple(grid)} is not a multiple of the cluster shape {cl}")
    plan, size = plan_shared(kernel)
    nthreads = kernel.launch.threads
    nwarps = -(-nthreads // WARP)
    for cz, cy, cx in itertools.product(range(grid[2] // cl[2]), range(grid[1] // cl[1]), range(grid[0] // cl[0])):
        members = []
        for rz, ry, rx in itertools.product(range(cl[2]), range(cl[1]), range(cl[0])):
            cid = (cx * cl[0] + rx, cy * cl[1] + ry, cz * cl[2] + rz)
            if ctas is not None and cid not in [tuple(c) + (0,) * (3 - len(c)) for c in ctas]:
                continue
            members.append(cid)
        if not members:
            continue
        m.clocks.names.clear()
        m.cluster_state.clear()
        cta_objs = []
        for rank, cid in enumerate(members):
            c = CTA(m, cid, rank if len(members) == int(np.prod(cl)) else rank, plan, size)
            cta_objs.append(c)
        for c in cta_objs:
            for wi in range(nwarps):
                a = m.clocks.add(f"{c.describe()} warp {wi}")
                c.warps.append(Warp(c, wi, a, nthreads))
        m.cluster = cta_objs
        run_cluster(m, cta_objs)
        from .finish import finish_cluster

        finish_cluster(m, cta_objs)
    outs = []
    for p, a, arr, how in views:
        raw = m.globals[p].data.view(storage_dtype(p.dtype)).reshape(p.shape)
        val = from_bits(raw, p.dtype)
        outs.append(np.array(val))
        _write_back(a, arr, raw, how, p)
    res = SimResult(outs)
    res.problems = list(m.problems)
    if check and m.problems:
        raise SimReportError(m.problems, kernel.name)
    return res


class _Scalars:
    """Stand-in warp for evaluating launch expressions of scalar parameters."""

    def __init__(self, m):
        self.env = {}
        self.cta = type("C", (), {"machine": m})()


def _write_back(a, arr, raw, how, p):
    try:
        if how == "bits":
            import torch

            a.copy_(torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16).reshape(a.shape).to(a.device))
        elif how == "torch":
            import torch

            a.copy_(torch.from_numpy(np.array(from_bits(raw, p.dtype)).reshape(a.shape)).to(a.dtype).to(a.device))
        elif isinstance(a, np.ndarray) and a.flags.writeable and a.dtype == raw.dtype:
            a[...] = raw.reshape(a.shape)
        elif isinstance(a, np.ndarray) and a.flags.writeable:
            a[...] = np.asarray(from_bits(raw, p.dtype)).reshape(a.shape).astype(a.dtype)
    except (TypeError, ValueError):
        pass
