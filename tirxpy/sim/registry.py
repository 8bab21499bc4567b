"""Semantic models of intrinsics, by name, and the call machinery that feeds them operands.

A model is ``fn(ctx)`` returning the call's value (an array over the 32 lanes, or None) or a
generator that may ``yield Block(...)`` to wait. ``register_model(name, fn)`` attaches a model
to an intrinsic (for example one added with ``register_intrinsic``); ``register_family(regex,
fn)`` covers generated names (``wgmma_m64n128k16_...``).

    >>> from tirxpy.sim import register_model, has_model
    >>> has_model("mbarrier_init"), has_model("no_such_instruction")
    (True, False)
"""
from __future__ import annotations

import inspect
import re

import numpy as np

from tirxpy.errors import TirxError, shown
from tirxpy.intrinsics import lookup

from . import operands as O
from .errors import ModelError, UnsupportedError

_MODELS: dict = {}
_FAMILIES: list = []
WARP = 32


def register_model(name: str, fn=None):
    """Attach simulator model ``fn(ctx)`` to intrinsic ``name`` (usable as a decorator)."""
    _check_name("register_model", "name", name)
    if fn is None:
        return lambda f: register_model(name, f)
    _check_model("register_model", fn)
    _MODELS[name] = fn
    return fn


def register_family(pattern: str, fn):
    _check_name("register_family", "pattern", pattern)
    _check_model("register_family", fn)
    _FAMILIES.append((re.compile(pattern), fn))
    return fn


def _check_name(where, what, name):
    if not isinstance(name, str):
        from .args import ArgumentError

        raise ArgumentError(f"{where}: {what} must be a str (an intrinsic name), got {shown(name, 60)}")


def _check_model(where, fn):
    if not callable(fn):
        from .args import ArgumentError

        raise ArgumentError(f"{where}: the model must be a function fn(ctx), got {shown(fn, 60)}")


def model_of(name: str):
    fn = _MODELS.get(name)
    if fn is not None:
        return fn, None
    for pat, f in _FAMILIES:
        m = pat.fullmatch(name)
        if m:
            return f, m
    return None, None


def has_model(name: str) -> bool:
    _check_name("has_model", "name", name)
    _load()
    return model_of(name)[0] is not None


_LOADED = False


def _load():
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from . import (clc, cp_async, ldst_matrix, mbarrier, misc, mma_sync, ranks, sync,  # noqa: F401
                       tcgen05, tma, vector, wgmma)  # noqa: F401


class Ctx:
    """What a model sees: the warp, active lanes, the call, its table entry and operand values."""

    def __init__(self, w, mask, call, entry, match):
        self.w, self.mask, self.call, self.entry, self.match = w, mask, call, entry, match
        self.cta = w.cta
        self.machine = w.cta.machine
        self.span = call.span
        self._nodes = {o.name: a for o, a in zip(entry.args, call.args)}
        self._cache: dict = {}

    @property
    def lanes(self):
        return np.nonzero(self.mask)[0]

    def node(self, name):
        return self._nodes[name]

    def has(self, name):
        return name in self._nodes

    def threads(self, mask=None):
        return self.w.describe(self.mask if mask is None else mask)

    def report(self, kind, msg, notes=(), mask=None, key=None):
        self.machine.report(kind, msg, self.span, self.threads(mask), notes, key=key)

    def check_aligned(self, addrs, align, what, lanes=None, space="shared"):
        """Report (``misaligned``) the first of the issuing lanes (or ``lanes``) whose address in ``addrs`` (one per
        lane; for ``space="global"`` a tagged pointer, whose offset in its tensor counts, as tensors start 256-byte
        aligned) is not a multiple of ``align`` bytes: the GPU faults on it (misaligned address). Returns whether
        all are aligned."""
        lanes = self.lanes if lanes is None else np.asarray(lanes)
        a = np.asarray(addrs).astype(np.uint64)
        if space == "global":
            from .access import GPTR_SHIFT

            a = a & np.uint64((1 << GPTR_SHIFT) - 1)
        a = a.astype(np.int64)[lanes] if np.ndim(a) else np.full(lanes.size, int(a), np.int64)
        bad = a % align != 0
        if not bad.any():
            return True
        j = int(np.argmax(bad))
        self.report("misaligned", f"{what}: {space} address {int(a[j]):#x} (lane {int(lanes[j])}) is not "
                    f"{align}-byte aligned, which the GPU faults on (misaligned address)",
                    [f"pass an address that is a multiple of {align} bytes (align the tile or its index)"])
        return False

    def imm(self, name):
        v = self.arg(name)
        return int(np.asarray(v).ravel()[int(np.argmax(self.mask))] if np.ndim(v) else v)

    def arg(self, name):
        if name in self._cache:
            return self._cache[name]
        o = self.entry.operand(name)
        node = self._nodes[name]
        w, mask = self.w, self.mask
        k = o.kind
        if k in ("reg", "pred", "imm") and not o.vector and not o.is_output:
            v = O.scalar_value(w, mask, node, o.dtype)
        elif k == "reg" or (k == "pred" and o.is_output):
            buf, starts = O.target_of(node)
            if buf is None or buf.storage != "local":
                raise UnsupportedError(f"{self.call.name}: register operand {name} must be a register tile "
                                       f"(T.alloc_local) element or region, got `{node}`")
            v = O.RegRef(w, buf.root, O.start_bytes(w, mask, buf, starts, node), o.count, o.dtype, node)
        elif k == "smem_addr":
            v = self._address(node, o, "shared")
        elif k == "smem_addr16":
            v = self._address(node, o, "shared") >> 4
        elif k in ("cluster_addr",):
            v = self._address(node, o, "shared")
        elif k == "tmem_addr":
            v = self._tmem(node)
        elif k == "gmem_ptr":
            v = self._address(node, o, "global")
        elif k == "tensormap":
            v = O.tensor_map(self.call, self.entry, node)
        elif k == "desc64":
            if isinstance(node, E_Expr()):
                v = O.scalar_value(w, mask, node, "uint64")
            else:
                v = O.descriptor(w, mask, self.call, name, node, self.desc_flavor(), self.desc_major(name))
        else:
            raise UnsupportedError(f"{self.call.name}: operand kind {k}")
        self._cache[name] = v
        return v

    def desc_flavor(self):
        return "tcgen05" if self.call.name.startswith("tcgen05") else "wgmma"

    def desc_major(self, name):
        """The major-ness codegen builds descriptor ``name`` in (:func:`tirxpy.intrinsics.descriptors.desc_major`)."""
        from tirxpy.intrinsics.descriptors import desc_major

        return desc_major(self.desc_flavor(), name, self._nodes)

    def _address(self, node, o, where):
        from tirxpy.ir import expr as E

        if isinstance(node, E.Expr) and not isinstance(node, E.BufferLoad):
            return O.scalar_value(self.w, self.mask, node, "uint64" if where == "global" else "uint32").astype(np.int64)
        if isinstance(node, E.BufferLoad) and node.buffer.storage == "local":
            return O.scalar_value(self.w, self.mask, node, "uint32").astype(np.int64)
        buf, starts = O.target_of(node)
        if buf is None:
            raise UnsupportedError(f"{self.call.name}: operand {o.name} must be an address or a buffer element / region")
        from . import access

        idx = [O.compile_expr(s)(self.w, self.mask) for s in starts]
        if where == "global":
            if buf.storage != "global":
                raise UnsupportedError(f"{self.call.name}: operand {o.name} must be in global memory, {buf.name} is {buf.storage}")
            return access.address(self.w, self.mask, buf, idx, self.call).astype(np.uint64).view(np.int64)
        if not buf.storage.startswith("shared"):
            raise UnsupportedError(f"{self.call.name}: operand {o.name} must be in shared memory, {buf.name} is {buf.storage}")
        return access.address(self.w, self.mask, buf, idx, self.call).astype(np.int64)

    def _tmem(self, node):
        from tirxpy.ir import expr as E

        if isinstance(node, E.Expr) and not isinstance(node, E.BufferLoad):
            return O.scalar_value(self.w, self.mask, node, "uint32").astype(np.int64)
        if isinstance(node, E.BufferLoad) and node.buffer.storage != "tmem":
            return O.scalar_value(self.w, self.mask, node, "uint32").astype(np.int64)
        buf, starts = O.target_of(node)
        if buf is None or buf.storage != "tmem":
            raise UnsupportedError(f"{self.call.name}: tensor-memory operand must be a tmem region or an address")
        from .memory import element_slots_axis

        idx = [O.compile_expr(s)(self.w, self.mask) for s in starts]
        lane = element_slots_axis(buf, idx, "TLane")
        col = element_slots_axis(buf, idx, "TCol")
        return ((lane << 16) | col).astype(np.int64)


def E_Expr():
    from tirxpy.ir import expr as E

    return E.Expr


# Intrinsics whose models change nothing another warp could observe (reads, waits that do not
# block, fences): a loop iterating over only these makes no progress (interp._while). Entries
# with memory=False (pure computations) are idle too; everything else counts as a change.
_IDLE = re.compile(r"mbarrier_(try|test)_wait\w*|ld_acquire\w*|ld_shared_cluster\w*|vld_\w+|fence_\w+|"
                   r"tcgen05_fence\w*|wgmma_fence\w*|tcgen05_wait_\w+|nanosleep|\w*prefetch\w*|bar_warp_sync|"
                   r"griddepcontrol_wait|gemm_smem_desc\w*|clusterlaunchcontrol_query\w*")
_IDLE_CACHE: dict = {}

# Built-in warp-scope instructions that name their participating lanes (a member mask) or count
# per warp, so they may run with some lanes of a warp: the models check those themselves.
_PARTIAL_OK = re.compile(r"shfl_sync_\w+|elect_sync|bar_warp_sync|barrier_(sync|arrive)|mma_sync_\w+|wgmma_m64\w+")


def _idle(entry):
    hit = _IDLE_CACHE.get(entry.name)
    if hit is None or hit[0] is not entry:
        hit = _IDLE_CACHE[entry.name] = (entry, not entry.memory or bool(_IDLE.fullmatch(entry.name)))
    return hit[1]


def _check_scope(w, call, entry, mask):
    """An instruction of scope warp or wider is executed by every live lane of the warp together
    (PTX ``.sync.aligned`` / collective): under divergent control flow it is reported."""
    if entry.scope == "thread" or _PARTIAL_OK.fullmatch(call.name) or (mask == w.alive).all():
        return
    w.cta.machine.report(
        "divergent_collective", f"T.ptx.{call.name} has scope {entry.scope!r}: every live lane of the warp executes "
        f"it together, but only {int(mask.sum())} of {int(w.alive.sum())} lanes reach it here (divergent control "
        "flow)", call.span, w.describe(mask),
        ["call it where the whole warp is active (a warp-uniform condition such as T.warp_id() == 0, not "
         "T.lane_id() < n or T.elect_one()); register_intrinsic(..., scope='thread') for per-thread instructions"],
        key=("divergent_collective", call.name, getattr(call.span, "line", None)))


_SYNC_OP = re.compile(r"\.sync\b|\bbar\b|\bbarrier\b")
_SYNC_CACHE: dict = {}


def _syncs_lanes(entry) -> bool:
    """Whether ``entry`` synchronizes the lanes of the warp that runs it (a collective of warp scope or wider, or a
    ``.sync`` / barrier instruction such as ``shfl.sync``): the warp's lanes are then taken as ordered there
    (:meth:`~tirxpy.sim.machine.Warp.sync_lanes`)."""
    hit = _SYNC_CACHE.get(entry.name)
    if hit is None or hit[0] is not entry:
        hit = _SYNC_CACHE[entry.name] = (entry, entry.scope != "thread" or bool(_SYNC_OP.search(entry.template)))
    return hit[1]


def execute_call(w, call, mask):
    """Run one intrinsic call for the active lanes of ``w`` (a generator)."""
    _load()
    entry = lookup(call.name)
    fn, match = model_of(call.name)
    if entry is not None:
        _check_scope(w, call, entry, mask)
        if _syncs_lanes(entry):
            w.sync_lanes()
        if not _idle(entry):
            w.cta.machine.progress += 1
            w.moves += 1
    if entry is None or fn is None:
        w.cta.machine.report("unsupported", f"intrinsic {call.name} has no simulator model"
                             + ("" if entry is not None else " (and is not in the intrinsic table)"), call.span,
                             w.describe(mask), ["attach one with tirxpy.sim.register_model(name, fn)"],
                             key=("unsupported", call.name))
        w.results[id(call)] = np.zeros(WARP, np.uint32)
        return
    ctx = Ctx(w, mask, call, entry, match)
    unsupported = False
    try:
        r = fn(ctx)
        if inspect.isgenerator(r):
            r = yield from r
    except UnsupportedError as e:
        w.cta.machine.report("unsupported", str(e), call.span, w.describe(mask), key=("unsupported", call.name, str(e)))
        r, unsupported = None, True
    except TirxError:
        raise
    except Exception as e:          # a model's own bug: named, with the call it ran for
        raise ModelError(f"{call.span}: the simulator model of T.ptx.{call.name} raised {type(e).__name__}: "
                         f"{e}") from e
    if r is None and entry.ret is not None:
        if not unsupported:
            raise ModelError(f"{call.span}: the simulator model of T.ptx.{call.name} returned None, but the "
                             f"instruction returns its operand {shown(entry.ret)}: return its value in every lane (32 "
                             "values, or one for all)")
        r = np.zeros(WARP, np.uint32)
    if r is not None:
        try:
            w.results[id(call)] = np.broadcast_to(np.asarray(r), (WARP,)).copy()
        except ValueError:
            raise ModelError(f"{call.span}: the simulator model of T.ptx.{call.name} returned shape "
                             f"{np.shape(r)}; return one value per lane (32) or one for all") from None
