"""Cluster launch control (sm_100a): ``clusterlaunchcontrol.try_cancel`` (and its multicast form) and the
``query_cancel`` decoders of its response.

The simulator runs a grid's clusters one after another in launch order, so while one runs, every later one has
not started: ``try_cancel`` cancels the first later cluster no earlier request took (the run then skips it), and
its 16-byte response says so with the first CTA id of that cluster; once none is left the request fails. The
response lands like a TMA load (an async-proxy write completing 16 bytes of transaction on the mbarrier; the
kernel's own ``mbarrier.arrive.expect_tx`` announces them, as on the GPU); the multicast form writes it at the
same offset of every CTA of the cluster, completing on each one's mbarrier there. The encoding is the
simulator's own (PTX keeps the response opaque): word 0 is 1 when the request succeeded, words 1-3 the CTA id.

    >>> q = LaunchQueue((8, 1, 1), (2, 1, 1))         # 4 clusters of 2 CTAs
    >>> q.started(q.index(0, 0, 0)); q.take(), q.take(), q.runs(1), q.runs(3), q.first_cta(2)
    (1, 2, False, True, (4, 0, 0))

Reported: a request from a CTA that already observed a failed response (PTX: undefined behaviour;
``clc_after_failure``), a CTA id read from a failed response (undefined; ``clc_undefined_ctaid``), a response
address not 16-byte aligned or an mbarrier not 8-byte aligned (``misaligned``)."""
from __future__ import annotations

import numpy as np

from . import mbarrier as MB
from .asyncops import agent, issue_vc
from .races import ASYNC, GENERIC
from .registry import register_model
from .scheduler import Event

RESPONSE_BYTES = 16


class LaunchQueue:
    """The clusters of a ``grid`` of ``cluster``-sized clusters by launch-order index (x fastest, then y, then z):
    which have started, which a ``try_cancel`` took (they never run)."""

    def __init__(self, grid, cluster):
        self.counts = tuple(g // c for g, c in zip(grid, cluster))
        self.cluster = tuple(cluster)
        self.total = self.counts[0] * self.counts[1] * self.counts[2]
        self.cursor = 0             # the first index that has neither started nor been canceled
        self.canceled: set = set()
        self.failed_seen: set = set()   # CTA ids that observed a failed response

    def index(self, cz, cy, cx) -> int:
        """The launch-order index of the cluster at cluster coordinates ``(cx, cy, cz)``."""
        return (cz * self.counts[1] + cy) * self.counts[0] + cx

    def first_cta(self, index: int) -> tuple:
        """The CTA id ``(x, y, z)`` of the first CTA of cluster ``index``."""
        nx, ny = self.counts[0], self.counts[1]
        return (index % nx * self.cluster[0], index // nx % ny * self.cluster[1], index // (nx * ny) * self.cluster[2])

    def started(self, index: int) -> None:
        self.cursor = max(self.cursor, index + 1)

    def runs(self, index: int) -> bool:
        return index not in self.canceled

    def take(self):
        """Cancel the next cluster that has not started: its index, or None when none is left."""
        if self.cursor >= self.total:
            return None
        i = self.cursor
        self.canceled.add(i)
        self.cursor += 1
        return i


def _response(q, index):
    """The 16 response bytes for a request that canceled cluster ``index`` of ``q`` (None: failed)."""
    words = np.zeros(4, np.uint32)
    if index is not None:
        words[:] = (1,) + q.first_cta(index)
    return words.view(np.uint8)


def _try_cancel(multicast):
    def model(ctx):
        m, w = ctx.machine, ctx.w
        q = m.clc
        if q is None:
            ctx.report("unsupported", f"{ctx.call.name} is simulated in single-process runs (tirxpy.sim.run), not "
                       "across ranks")
            return
        res, bar = ctx.arg("result"), ctx.arg("bar")
        ok = ctx.check_aligned(res, RESPONSE_BYTES, f"{ctx.call.name}: the response address (16-byte aligned)")
        ok = ctx.check_aligned(bar, 8, f"{ctx.call.name}: the mbarrier (8-byte aligned)") and ok
        for l in ctx.lanes:
            r_off = int(res[l])
            if r_off < 0 or r_off + RESPONSE_BYTES > ctx.cta.smem.size:
                ctx.report("oob_shared", f"{ctx.call.name}: its response at smem {r_off:#x} runs past the "
                           f"{ctx.cta.smem.size}-byte shared memory")
                ok = False
        if not ok:
            return
        if ctx.cta.cta_id in q.failed_seen:
            ctx.report("clc_after_failure", f"{ctx.call.name} from a CTA that already observed a failed response "
                       "(PTX: undefined behaviour)", notes=["stop requesting once "
                                                           "clusterlaunchcontrol_query_is_canceled returned false"])
        targets = m.cluster if multicast else [ctx.cta]
        for l in ctx.lanes:
            resp = _response(q, q.take())
            r_off, b_off = int(res[l]), int(bar[l])
            for cta in targets:
                _respond(ctx, m, w, cta, r_off, b_off, resp)
    return model


def _respond(ctx, m, w, cta, r_off, b_off, resp):
    """Write ``resp`` at ``r_off`` of ``cta`` asynchronously, completing its bytes on the mbarrier at ``b_off``."""
    a = agent(m, ("clc", cta.rank, b_off), f"launch-control response to cta {cta.cta_id} on mbarrier {b_off:#x}")
    MB.check_issue(ctx, cta, b_off, ctx.call.name)
    vc = issue_vc(w, a)
    ph = MB.phase_of(cta, b_off)
    call = ctx.call

    def fire():
        idx = np.arange(r_off, r_off + RESPONSE_BYTES)
        if r_off < 0 or r_off + RESPONSE_BYTES > cta.smem.size:
            m.report("oob_shared", f"{call.name} writes its response at smem {r_off:#x}, past the {cta.smem.size}-byte "
                     "shared memory", call.span, w.describe())
            return
        m.check_access(cta, idx, a, vc, True, ASYNC, call, w)
        cta.smem.data[idx] = resp
        MB.complete_tx(m, cta, b_off, RESPONSE_BYTES, vc, call.span, w.describe(), ph, a)
    m.events.append(Event(fire, f"launch-control response into cta {cta.cta_id}", mbar=(cta, b_off)))


def _read_response(ctx):
    """The issuing lanes' responses, ``(lanes, 4)`` uint32 words (a 16-byte generic shared-memory load), or None."""
    res = ctx.arg("result")
    lanes = ctx.lanes
    if lanes.size == 0:
        return None
    aligned = ctx.check_aligned(res, RESPONSE_BYTES, f"{ctx.call.name}: the response address (16-byte aligned)")
    off = res[lanes].astype(np.int64)
    ctx.w.smem_access(off, RESPONSE_BYTES, False, GENERIC, ctx.call, lanes=lanes)     # (reports bytes out of range)
    if not aligned or (off < 0).any() or (off + RESPONSE_BYTES > ctx.cta.smem.size).any():
        return None
    idx = off[:, None] + 4 * np.arange(4)
    return ctx.cta.smem.read(idx.ravel(), "uint32").reshape(lanes.size, 4)


@register_model("clusterlaunchcontrol_query_is_canceled")
def _is_canceled(ctx):
    out = np.zeros(32, bool)
    got = _read_response(ctx)
    if got is None:
        return out
    out[ctx.lanes] = got[:, 0] == 1
    q = ctx.machine.clc
    if q is not None and not out[ctx.lanes].all():
        q.failed_seen.add(ctx.cta.cta_id)
    return out


def _first_ctaid(axis):
    def model(ctx):
        out = np.zeros(32, np.uint32)
        got = _read_response(ctx)
        if got is None:
            return out
        if (got[:, 0] != 1).any():
            ctx.report("clc_undefined_ctaid", f"{ctx.call.name} of a failed response: its CTA id is undefined (PTX)",
                       notes=["read the CTA id only where clusterlaunchcontrol_query_is_canceled is true"])
        out[ctx.lanes] = got[:, 1 + axis]
        return out
    return model


register_model("clusterlaunchcontrol_try_cancel", _try_cancel(False))
register_model("clusterlaunchcontrol_try_cancel_multicast", _try_cancel(True))
for _i, _ax in enumerate("xyz"):
    register_model(f"clusterlaunchcontrol_query_first_ctaid_{_ax}", _first_ctaid(_i))
