"""Machine state of one simulated cluster: CTAs (shared memory, mbarriers, TMEM, named
barriers), warps (lane values, registers, vector clock), agents and the problem list."""
from __future__ import annotations

import numpy as np

from tirxpy.ir.visitor import shared_plan, walk_stmts

from .banks import BankCounter
from .errors import Problem, lanes_text
from .memory import Bytes, TensorMemory, clamp
from .races import Clocks, Shadow, join
from .values import from_bits, nbytes, storage_dtype, to_bits

WARP = 32
_LANE_COLUMN = np.arange(WARP)[:, None]         # lane of each row of a (32, k) register gather
_LANE_COLUMN.setflags(write=False)
_ALL = np.ones(WARP, bool)                      # every lane
_ALL.setflags(write=False)
_ARANGE: dict = {}
INFLIGHT_WGMMA = 1      # Warp.inflight bits: a wgmma's accumulator, until wgmma.wait_group retires it
INFLIGHT_TMEM_LD = 2    # a tcgen05.ld's destination registers, until tcgen05.wait::ld
INFLIGHT_WGMMA_A = 4    # a wgmma's register-A fragment (not to be touched) until wgmma.wait_group retires it


def _arange(k: int):
    """``np.arange(k)``, shared and read-only (register accesses ask for the same few widths)."""
    a = _ARANGE.get(k)
    if a is None:
        a = _ARANGE[k] = np.arange(k)
        a.setflags(write=False)
    return a


def plan_shared(kernel):
    """``({root buffer: byte offset}, total bytes)``: the placement of the generated kernel
    (:func:`tirxpy.ir.visitor.shared_plan`, which codegen and the verifier use), so buffers align and
    overlap in the simulator exactly as on the GPU. The simulated memory has at least 16 bytes."""
    offs, total = shared_plan(kernel.body)
    plan = {s.buffer: offs[id(s)] for s in walk_stmts(kernel.body) if id(s) in offs and s.buffer.base is None}
    return plan, max(total, 16)


class CTA:
    def __init__(self, machine, cta_id, rank, plan, size):
        self.machine = machine
        self.cta_id = cta_id  # (bx, by, bz)
        self.rank = rank
        self.cid = tuple(c % n for c, n in zip(cta_id, machine.cluster_dims))
        self.smem = Bytes(size, "shared")
        self.plan = plan
        self.shadow = Shadow(size)
        self.mbarriers: dict = {}
        self.named: dict = {}
        self.tmem = TensorMemory()
        self.warps: list = []
        self.collectives: dict = {}

    def describe(self):
        return f"cta {self.cta_id}"


class Warp:
    def __init__(self, cta, wid, agent, nthreads):
        self.cta = cta
        self.wid = wid
        self.agent = agent
        self.tid = wid * WARP + np.arange(WARP)
        self.alive = self.tid < nthreads
        self.env: dict = {}
        self.regs: dict = {}
        self.rinit: dict = {}   # root -> bool (32, nbytes): register bytes written since the tile's allocation
        self.rfull: set = set()  # roots whose every byte is written (reads skip the check)
        self.deferring = False  # evaluating the value of a register store: uninitialized reads taint it
        self.poison = None      # lanes whose value being stored read uninitialized registers
        self.moves = 0          # changes this warp made (stores, intrinsics with an effect)
        self.vc = cta.machine.clocks.fresh()
        self.vc[agent] = 1
        self.results: dict = {}
        self.coll_seq: dict = {}
        self.done = False
        self.block = None  # (cond, what, span) while blocked
        self.last_phase: dict = {}
        self.cp_async_groups: list = []
        self.cp_async_open: list = []
        self.bulk_groups: list = []
        self.bulk_open: list = []
        self.tc_pending: list = []  # tcgen05 ops not yet committed
        self.maxnreg = None
        self.where = None
        self.mbar_inits: list = []      # mbarriers this warp initialized (fence.mbarrier_init releases them)
        self.mbar_known: set = set()    # mbarriers whose init a relaxed cluster barrier ordered before this warp
        self.mbar_wait = None           # the mbarrier this warp is blocked on

        self.wsync = 0         # warp-sync epoch: bumped by every synchronization of the warp's lanes (sync_lanes)
        self.lane_ids = np.arange(WARP, dtype=np.int32)
        self.tid32 = self.tid.astype(np.int32)
        self.inflight: dict = {}  # root -> int8[nbytes]: register bytes an async instruction still uses (INFLIGHT_*)
        self.dirty: dict = {}  # root -> bool[nbytes]: written by ordinary code since wgmma.fence
        self.read_since_fence: dict = {}    # root -> bool[nbytes]: of a wgmma accumulator, read since wgmma.fence
        self.wg_acc_roots: set = set()      # register tiles a wgmma of this warp accumulated into
        self.wg_fences = 0                  # wgmma.fence instructions this warp executed

    @property
    def wgid(self):
        return self.wid // 4

    # ---- registers ----
    def _flag(self, table, root):
        f = table.get(root)
        if f is None:
            f = np.zeros(max(root.bytes(), 1), bool)
            table[root] = f
        return f

    def wgmma_fenced(self):
        """A ``wgmma.fence``: ordinary register accesses so far are ordered before the wgmmas that follow."""
        self.dirty.clear()
        self.read_since_fence.clear()
        self.wg_fences += 1

    def note_acc_read(self, root, byte_idx):
        """An ordinary read of bytes ``byte_idx`` of ``root``: remembered, until the next ``wgmma.fence``, where a
        wgmma accumulated into ``root`` before (a wgmma writing them before that fence is reported)."""
        if root in self.wg_acc_roots:
            f = self._flag(self.read_since_fence, root)
            f[clamp(np.asarray(byte_idx), 0, f.size - 1)] = True

    def check_inflight(self, root, byte_idx, node, what, by_wgmma=False):
        """Report a read / write (``what``) of register bytes ``byte_idx`` of ``root`` that an asynchronous
        instruction still uses: a wgmma's accumulator or register A fragment before the ``wgmma.wait_group``
        retiring it, a ``tcgen05.ld``'s destination before ``tcgen05.wait::ld`` (PTX: undefined behaviour).
        ``by_wgmma``: the reader is another wgmma's A operand, which may share an A fragment in flight."""
        f = self.inflight.get(root)
        if f is None:
            return
        hit = int(np.bitwise_or.reduce(f[clamp(byte_idx, 0, f.size - 1)].ravel(), initial=0))
        if by_wgmma:
            hit &= ~INFLIGHT_WGMMA_A
        span = getattr(node, "span", None) or getattr(self.where, "span", None)
        if hit & (INFLIGHT_WGMMA | INFLIGHT_WGMMA_A):
            self.cta.machine.report(
                "wgmma_accumulator_before_wait",
                f"{what} of register tile {root.name} while a wgmma using it "
                f"({'accumulator' if hit & INFLIGHT_WGMMA else 'A fragment'}) is still in flight", span, self.describe(),
                ["wgmma results are visible only after wgmma.commit_group + wgmma.wait_group" if hit & INFLIGHT_WGMMA
                 else "a wgmma's A fragment registers are not to be read or written until the wgmma.wait_group "
                      "retiring it; read them before issuing the wgmma (e.g. store them first)"])
        if hit & INFLIGHT_TMEM_LD:
            self.cta.machine.report(
                "tmem_ld_before_wait", f"{what} of register tile {root.name} while a tcgen05.ld loading it is not "
                "waited for", span, self.describe(),
                ["issue T.ptx.tcgen05_wait_ld() after the tcgen05.ld and before using its registers"])

    def mark_inflight(self, root, byte_idx, bit):
        """Bytes ``byte_idx`` of register tile ``root`` are in use by an asynchronous instruction (``bit``)."""
        f = self.inflight.get(root)
        if f is None:
            f = self.inflight[root] = np.zeros(max(root.bytes(), 1), np.int8)
        idx = np.asarray(byte_idx, np.int64).ravel()
        f[idx[(idx >= 0) & (idx < f.size)]] |= bit     # bytes past the tile were reported (oob_local)

    def retire_inflight(self, bit):
        """Every use ``bit`` of registers by asynchronous instructions completed (their wait ran)."""
        for root, f in list(self.inflight.items()):
            f &= ~np.int8(bit)
            if not f.any():
                del self.inflight[root]

    def read_regs(self, regs, off, dt, k, ok, node):
        root = getattr(node, "buffer", None)
        root = root.root if root is not None else None
        idx = off[:, None] + _arange(k)
        if root is not None and root in self.inflight and ok.any():
            self.check_inflight(root, idx[ok].ravel(), node, "read")
        idx = clamp(idx, 0, regs.shape[1] - 1)
        self.note_acc_read(root, idx[ok].ravel())
        if root is not None and root not in self.rfull:
            self.check_init(root, idx, ok, node)
        raw = regs[_LANE_COLUMN, idx].reshape(-1).view(storage_dtype(dt))
        return from_bits(raw, dt)

    def read_regs_at(self, root, off, dt, node):
        """:meth:`read_regs` of bytes ``off .. off + nbytes(dt)`` of ``root`` in all 32 lanes (the caller checked
        that they lie inside the tile): the same checks, one column slice instead of a gather."""
        k = nbytes(dt)
        regs = self.regs.get(root)
        if regs is None:
            regs = self.local(root)
        if root in self.inflight:
            self.check_inflight(root, np.arange(off, off + k), node, "read")
        self.note_acc_read(root, np.arange(off, off + k))
        if root not in self.rfull:
            self.check_init(root, np.arange(off, off + k)[None, :], _ALL, node)
        raw = np.ascontiguousarray(regs[:, off:off + k]).reshape(-1).view(storage_dtype(dt))
        return from_bits(raw, dt)

    def write_regs_at(self, root, off, val, dt, node, poison=None):
        """:meth:`write_regs` (ordinary) of the 32 values ``val`` at bytes ``off .. off + nbytes(dt)`` of ``root`` in
        all lanes (the caller checked that they lie inside the tile)."""
        k = nbytes(dt)
        regs = self.regs.get(root)
        if regs is None:
            regs = self.local(root)
        cols = slice(off, off + k)
        if root in self.inflight:
            self.check_inflight(root, np.arange(off, off + k), node, "write")
        self._flag(self.dirty, root)[cols] = True
        regs[:, cols] = np.ascontiguousarray(to_bits(np.asarray(val), dt)).reshape(-1).view(np.uint8).reshape(WARP, k)
        if poison is not None:
            self.rinit[root][:, cols] = ~poison[:, None]
            self.rfull.discard(root)
        elif root not in self.rfull:
            self.rinit[root][:, cols] = True

    def check_init(self, root, idx, ok, node, what="reads"):
        """Report a read of register bytes ``idx`` ((32, k), rows are lanes) of ``root`` that no
        write initialized, in the lanes ``ok``; remembers a root once all its bytes are written.

        A value computed from such bytes and stored to registers is not reported: the stored
        bytes become uninitialized instead (``deferring`` / ``poison``), so the report comes
        where undefined data reaches memory, an address, a condition or an instruction."""
        ini = self.rinit.get(root)
        if ini is None:
            self.local(root)
            ini = self.rinit[root]
        got = ini[_LANE_COLUMN, idx]
        bad = ~got.all(axis=1) & ok
        if bad.any() and self.deferring:   # register -> register: the destination is undefined too
            self.poison = bad if self.poison is None else self.poison | bad
        elif bad.any():
            self.cta.machine.report(
                "uninitialized_read", f"{what} register tile {root.name} where nothing was written since its "
                f"allocation (its value is undefined)",
                getattr(node, "span", None) or getattr(self.where, "span", None),
                self.describe(bad), ["write the tile first (a fill, a load, or an mma with accumulate off)"],
                key=("uninitialized_read", "local", root.name, getattr(getattr(node, "span", None), "line", None)))
        elif ini.all():
            self.rfull.add(root)

    def write_regs(self, root, lanes, off, val, dt, node, ordinary=True, poison=None):
        """Write ``val`` (``dt``) at byte offsets ``off`` of register tile ``root`` in lanes ``lanes``: ``off`` and
        ``val`` one per lane, or ``(lanes, n)`` for ``n`` elements per lane."""
        k = nbytes(dt)
        regs = self.local(root)
        off = np.asarray(off, np.int64)
        idx = (off[..., None] + _arange(k)).reshape(len(lanes), -1)
        flat = idx.ravel()
        bad = (idx < 0) | (idx >= regs.shape[1])
        inside = not bad.any()
        if ordinary:
            if root in self.inflight:
                self.check_inflight(root, flat, node, "write")
            self._flag(self.dirty, root)[flat if inside else clamp(flat, 0, regs.shape[1] - 1)] = True
        if not inside:
            self.cta.machine.report("oob_local", f"register access past the end of {root.name} ({regs.shape[1]} bytes)",
                                    getattr(node, "span", None), self.describe())
            return
        raw = np.ascontiguousarray(to_bits(np.asarray(val), dt)).reshape(-1).view(np.uint8).reshape(idx.shape)
        rows = np.asarray(lanes)[:, None]
        regs[rows, idx] = raw
        if poison is not None:
            self.rinit[root][rows, idx] = ~poison[:, None]
            self.rfull.discard(root)
        elif root not in self.rfull:
            self.rinit[root][rows, idx] = True

    # ---- shared memory accesses (race checking) ----
    def smem_access(self, offsets, k, write, proxy, node, agent=None, vc=None, atomic=False, lanes=None):
        """Check and record an access of ``k`` bytes at each of ``offsets`` (out of range: reported and
        dropped); ``atomic`` marks an atomic read-modify-write (pass ``write=True``), which races with plain
        accesses only (:meth:`tirxpy.sim.races.Shadow.access`). ``lanes`` (the lane of each offset, for this
        warp's own plain loads and stores) also checks the access against the bytes other lanes of the warp wrote
        since its last warp synchronization (:attr:`wsync`)."""
        off = np.asarray(offsets, np.int64).ravel()
        if off.size == 0:
            return
        sh = self.cta.shadow
        bad = (off < 0) | (off + k > sh.size)
        if bad.any():
            self.cta.machine.report("oob_shared", f"shared-memory {'write' if write else 'read'} at byte "
                                    f"{int(off[bad][0])} is outside the {sh.size}-byte allocation",
                                    getattr(node, "span", None), self.describe())
            off = off[~bad]
            lanes = None if lanes is None else np.asarray(lanes).ravel()[~bad]
        idx = off[:, None] + np.arange(k)
        self.cta.machine.check_access(self.cta, idx, self.agent if agent is None else agent,
                                      self.vc if vc is None else vc, write, proxy, node, self, atomic)
        if lanes is not None and agent is None and not atomic:
            found = sh.lane_conflict(idx, np.asarray(lanes, np.int64).ravel(), self.agent, self.wsync, write)
            if found is not None:
                self.cta.machine.report_lane_race(self, found, write, node)

    def elect(self, node, mask):
        tids = self.cta.machine.elected.get(id(node))
        if tids is not None:
            return mask & np.isin(self.tid, tids)
        out = np.zeros(WARP, bool)
        if mask.any():
            out[int(np.argmax(mask))] = True
        return out

    def describe(self, mask=None):
        lanes = "" if mask is None else " " + lanes_text(mask)
        return f"{self.cta.describe()} warp {self.wid}{lanes}"

    def tick(self):
        """Advance this agent's clock (after a release)."""
        self.vc[self.agent] += 1

    def acquire(self, vc):
        self.wsync += 1
        if vc is not None:
            self.vc = join(self.vc, vc)

    def sync_lanes(self):
        """The warp's lanes synchronize (``bar.warp.sync``, a ``.sync`` collective): what each lane wrote to
        shared memory before is ordered before what the others access after."""
        self.wsync += 1

    def release(self):
        v = self.vc.copy()
        self.tick()
        return v

    def local(self, root):
        r = self.regs.get(root)
        if r is None:
            r = np.zeros((WARP, max(root.bytes(), 1)), np.uint8)
            self.regs[root] = r
            self.rinit[root] = np.zeros(r.shape, bool)
            self.rfull.discard(root)
        return r

    def free_local(self, root):
        """A register tile's (re-)allocation: its old contents are gone (uninitialized again)."""
        self.regs.pop(root, None)
        self.rinit.pop(root, None)
        self.rfull.discard(root)


class Machine:
    """Whole-run state: kernel, arguments, global memory, problems, agents, seed."""

    def __init__(self, kernel, arch, rng, max_steps):
        self.kernel = kernel
        self.arch = arch
        self.rng = rng
        self.max_steps = max_steps
        self.steps = 0              # budget spent: scheduling steps + loop iterations (interp.charge)
        self.progress = 0           # bumped by every change other warps could observe (interp._while)
        self.stopped = False        # the budget ran out: the run ends there
        self.problems: list = []
        self._seen: set = set()
        self.globals: dict = {}  # param Buffer -> Bytes
        self.gbase: dict = {}  # param Buffer -> pointer tag
        self.scalars: dict = {}
        self.cluster_dims = tuple(kernel.launch.cluster or (1,)) + (1,) * (3 - len(kernel.launch.cluster or (1,)))
        self.clocks = Clocks()
        self.sites: list = []
        self.events: list = []
        self.clock = 0
        self.gtag: dict = {}
        self.gtag_buf: dict = {}
        self.elected: dict = {}
        self.wg_pending: dict = {}
        self.cluster_state: dict = {}
        self.clc = None             # tirxpy.sim.clc.LaunchQueue of a single-process run (cluster launch control)
        self.banks = BankCounter()  # shared-memory wavefronts of the vector accesses, per source line

    def site(self, span, who):
        self.sites.append((span, who))
        return len(self.sites) - 1

    def report(self, kind, msg, span=None, threads="", notes=(), key=None):
        k = key if key is not None else (kind, getattr(span, "line", None), msg)
        if k in self._seen:
            return
        self._seen.add(k)
        self.problems.append(Problem(kind, msg, span, threads, list(notes)))

    def scalar(self, var, span):
        v = self.scalars.get(var)
        if v is None:
            from .errors import UnsupportedError

            raise UnsupportedError(f"variable {var.name} has no value here (used before it is bound)")
        return v

    def check_access(self, cta, idx, agent, vc, write, proxy, node, warp, atomic=False):
        site = self.site(getattr(node, "span", None), warp.describe() if agent == warp.agent else self.agent_name(agent))
        found = cta.shadow.access(idx, agent, vc, write, proxy, site, atomic)
        if (not write or atomic) and cta.shadow.uninit_at >= 0:
            self.report_uninit_shared(cta, cta.shadow.uninit_at, node, warp.describe() if agent == warp.agent else
                                      f"{self.agent_name(agent)} (issued by {warp.describe()})")
        if found is None:
            return
        kind, other, osite = found
        span = getattr(node, "span", None)
        me = warp.describe() if agent == warp.agent else f"{self.agent_name(agent)} (issued by {warp.describe()})"
        ospan, owho = self.sites[osite] if osite >= 0 else (None, self.agent_name(other))
        if kind == "fence":
            self.report("missing_fence_proxy_async",
                        "async-proxy read of shared memory written by ordinary (generic-proxy) stores "
                        "without a fence.proxy.async between them", span, me,
                        [f"the write: {ospan} by {owho}", "add T.ptx.fence_proxy_async() after the stores "
                         "(and before the barrier that orders them with the async operation)"])
            return
        acc = "atomic update" if atomic else "write" if write else "read"
        prev = {"write": "a write", "read": "a read", "atomic": "an atomic update"}[kind]
        self.report("race", f"shared-memory {acc} is not ordered after {prev} by "
                    f"{owho if kind == 'write' else self.agent_name(other)}"
                    " (no barrier / mbarrier wait between them)", span, me,
                    [f"the other access: {ospan}"] if ospan is not None else [],
                    key=("race", getattr(span, "line", None), getattr(ospan, "line", None), kind))

    def report_lane_race(self, warp, found, write, node):
        """A lane's shared-memory access (``found``: ``(lane, other lane)``) of bytes another lane of the same warp
        wrote with no warp synchronization between them."""
        lane, other = found
        span = getattr(node, "span", None)
        self.report("race", f"shared-memory {'write' if write else 'read'} by lane {lane} is not ordered after a write "
                    f"by lane {other} of the same warp (no __syncwarp / bar.warp.sync or barrier between them); the "
                    "lanes of a warp need not run together", span, warp.describe(),
                    ["add T.ptx.bar_warp_sync(T.uint32(0xffffffff)) (or a barrier) between the write and the "
                     "access"], key=("race", "lanes", getattr(span, "line", None)))

    def report_uninit_shared(self, cta, byte, node, who):
        span = getattr(node, "span", None)
        tile = next((f"shared tile {b.name}" for b, o in cta.plan.items() if o <= byte < o + b.bytes()),
                    "shared memory outside every tile")
        self.report("uninitialized_read", f"reads {tile} at byte {byte} before anything wrote it (its value is "
                    "undefined)", span, who, ["write it first (stores, a TMA / cp.async load, stmatrix) and order "
                                              "the write before the read (barrier / mbarrier wait)"],
                    key=("uninitialized_read", "shared", getattr(span, "line", None), tile))

    def agent_name(self, a):
        return self.clocks.names[a] if 0 <= a < len(self.clocks.names) else f"agent {a}"


def _on_exit(self):
    """A warp finished: what it leaves behind that can never complete."""
    m = self.cta.machine
    if getattr(self, "wg_groups", None) or getattr(self, "wg_open", None):
        m.report("wgmma_not_waited", "a warp exits with wgmma operations never waited for "
                 "(wgmma.commit_group + wgmma.wait_group missing)", None, self.describe(),
                 key=("wgmma_not_waited", self.cta.rank))
    if self.bulk_open or any(not op["done"] for g in self.bulk_groups for op in g):
        pass  # the copies still complete; a kernel may exit with bulk stores in flight


Warp.on_exit = _on_exit
