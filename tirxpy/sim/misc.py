"""elect.sync, setmaxnreg, shuffles, atomics, clocks, special registers, cluster ids and DSMEM (race-checked
like the CTA's own shared-memory accesses)."""
from __future__ import annotations

import numpy as np

from tirxpy.target import as_target

from .access import global_span, global_target
from .errors import UnsupportedError
from .interp import Block
from .races import GENERIC
from .registry import register_model
from .values import nbytes

WARP = 32


@register_model("elect_sync")
def _elect(ctx):
    out = np.zeros(WARP, bool)
    mask = ctx.arg("mask").astype(np.int64)
    cand = [l for l in ctx.lanes if (int(mask[l]) >> l) & 1]
    if cand:
        out[cand[0]] = True
    return out


def launch_registers(threads: int) -> int:
    """Registers per thread at a kernel's entry, as :func:`tirxpy.lang.roles.register_split` counts them: a kernel
    with ``setmaxnreg`` is built with ``__launch_bounds__(threads, 1)``, i.e. 65536 / threads rounded down to a
    multiple of 8, at most 248."""
    return min(65536 // threads // 8 * 8, 248)


def _pool(ctx):
    """The CTA's register pool (PTX ISA, setmaxnreg): ``{"free": registers no warp holds}``, empty at entry."""
    cta = ctx.cta
    if not hasattr(cta, "reg_pool"):
        cta.reg_pool = {"free": 0}
    return cta.reg_pool


def _setmaxnreg(ctx, inc):
    """``setmaxnreg.inc / .dec`` (PTX ISA, setmaxnreg) per warp: every warp starts with
    :func:`launch_registers` per thread; ``.dec`` to ``n`` releases ``32 * (current - n)`` registers to the
    CTA's pool; ``.inc`` to ``n`` blocks until the pool holds ``32 * (n - current)`` and takes them. After a
    warp's first setmaxnreg, a ``.dec`` above or an ``.inc`` below its count is a ``setmaxnreg_misuse`` (the entry
    count is ptxas's choice, at most :func:`launch_registers`, so the first one is not judged against it). An
    ``.inc`` that the pool can never pay for (the ``.dec`` of other warps do not release enough) hangs:
    ``deadlock``. The count is a multiple of 8 in [24, 256]. The entry count is taken as the launch allocation, an
    upper bound of ptxas's: a kernel compiled to fewer registers at entry frees less with its ``.dec``."""
    n = ctx.imm("nregs")
    w = ctx.w
    name = "setmaxnreg.inc" if inc else "setmaxnreg.dec"
    per = launch_registers(ctx.machine.kernel.launch.threads)
    cur = w.maxnreg if w.maxnreg is not None else per
    if not (24 <= n <= 256 and n % 8 == 0):
        ctx.report("setmaxnreg_misuse", f"{name}.sync.aligned.u32 {n}: the count must be a multiple of 8 in "
                   "[24, 256]")
        return
    if w.maxnreg is not None and ((n < cur) if inc else (n > cur)):
        ctx.report("setmaxnreg_misuse", f"{name} to {n} registers per thread from {cur}: "
                   f"{'.inc must not lower' if inc else '.dec must not raise'} the warp's count (undefined in PTX)",
                   [f"use setmaxnreg.{'dec' if inc else 'inc'} to go from {cur} to {n}, or leave it out"])
        return
    pool = _pool(ctx)
    if not inc:
        pool["free"] += WARP * max(cur - n, 0)
        w.maxnreg = n
        return
    need = WARP * max(n - cur, 0)
    if pool["free"] < need:
        threads = ctx.machine.kernel.launch.threads
        yield Block(lambda: pool["free"] >= need,
                    f"{need} registers from the CTA's register pool for {name} {cur} -> {n} (the pool holds "
                    f"{pool['free']} now; the CTA has {threads} threads x {per} = {threads * per}): the "
                    "setmaxnreg.dec of other warps must release what the .inc take -- lower the .inc count, lower "
                    "the .dec count, or run one setmaxnreg per warpgroup (not a .dec and an .inc)", ctx.span)
    pool["free"] -= need
    w.maxnreg = n


@register_model("setmaxnreg_inc")
def _inc(ctx):
    yield from _setmaxnreg(ctx, True)


@register_model("setmaxnreg_dec")
def _dec(ctx):
    yield from _setmaxnreg(ctx, False)


def _shfl(mode):
    def model(ctx):
        v = ctx.arg("v")
        b = ctx.arg("lane").astype(np.int64)
        lane = np.arange(WARP)
        if mode == "idx":
            j = b & 31
        elif mode == "up":
            j = np.where(lane - b >= 0, lane - b, lane)
        elif mode == "down":
            j = np.where(lane + b <= 31, lane + b, lane)
        else:
            j = lane ^ (b & 31)
        src_ok = ctx.mask[j]
        bad = ctx.mask & ~src_ok
        if bad.any():
            ctx.report("shfl_inactive_source", f"shfl.sync.{mode} reads lanes that do not take part in the shuffle",
                       mask=bad)
        return np.where(ctx.mask, v[j], v)
    return model


for _m in ("idx", "up", "down", "bfly"):
    for _t in ("b32", "f32"):
        register_model(f"shfl_sync_{_m}_{_t}", _shfl(_m))

_ATOM = {"add": np.add, "max": np.maximum, "min": np.minimum, "exch": lambda a, b: b, "or": np.bitwise_or,
         "and": np.bitwise_and}


def _atom(op, dt, ret=True):
    fn = _ATOM[op]

    def model(ctx):
        ptr = ctx.arg("ptr")
        v = ctx.arg("v")
        ctx.check_aligned(ptr, nbytes(dt), ctx.call.name, space="global")
        buf, off = global_target(ctx.machine, ptr, ctx.lanes)
        out = np.zeros(WARP, v.dtype)
        if buf is None:
            ctx.report("oob_global", "atomic on a pointer that is not inside a tensor argument")
            return out
        mem = ctx.machine.globals[buf]
        for l in ctx.lanes:
            if off[l] < 0 or off[l] + nbytes(dt) > mem.size:
                ctx.report("oob_global", f"atomic at byte {off[l]} is outside {buf.name}")
                continue
            old = mem.read(np.array([off[l]]), dt)
            out[l] = old[0]
            mem.write(np.array([off[l]]), fn(old, np.asarray([v[l]]).astype(old.dtype)), dt)
        return out if ret else None
    return model


for _op, _t, _dt in (("add", "u32", "uint32"), ("add", "s32", "int32"), ("add", "f32", "float32"),
                     ("add", "u64", "uint64"), ("max", "s32", "int32"), ("min", "s32", "int32"),
                     ("max", "u32", "uint32"), ("exch", "b32", "uint32"), ("or", "b32", "uint32"),
                     ("and", "b32", "uint32")):
    register_model(f"atom_global_{_op}_{_t}", _atom(_op, _dt))
    if _op != "exch":
        register_model(f"red_global_{_op}_{_t}", _atom(_op, _dt, ret=False))
register_model("red_global_add_release_gpu_u32", _atom("add", "uint32", ret=False))


@register_model("atom_global_cas_b32")
def _cas(ctx):
    ptr, cmp, v = ctx.arg("ptr"), ctx.arg("cmp"), ctx.arg("v")
    out = np.zeros(WARP, np.uint32)
    for l in ctx.lanes:
        got = global_span(ctx, ptr[l:l + 1], 4, "atom.cas")
        if got is None:
            continue
        mem, o = got
        old = mem.read(np.array([o]), "uint32")
        out[l] = old[0]
        if old[0] == cmp[l]:
            mem.write(np.array([o]), np.array([v[l]], np.uint32), "uint32")
    return out


def _ld_global(dt, what):
    def model(ctx):
        ptr = ctx.arg("ptr")
        out = np.zeros(WARP, dt)
        for l in ctx.lanes:
            got = global_span(ctx, ptr[l:l + 1], 4, what)
            if got is not None:
                out[l] = got[0].read(np.array([got[1]]), dt)[0]
        return out
    return model


register_model("ld_acquire_gpu_u32", _ld_global("uint32", "ld.acquire"))
register_model("ld_global_f32", _ld_global("float32", "ld.global"))


def _atom_shared(dt):
    """``atom.shared`` RMW lane by lane; the race shadow sees the warp's bytes as one atomic access (ordered
    with plain accesses, free with other atomics)."""
    def model(ctx):
        addr, v = ctx.arg("addr"), ctx.arg("v")
        out = np.zeros(WARP, v.dtype)
        k = nbytes(dt)
        offs = np.array([int(addr[l]) for l in ctx.lanes], np.int64)
        ctx.check_aligned(addr, k, ctx.call.name)
        ctx.w.smem_access(offs, k, True, GENERIC, ctx.call, atomic=True)    # (reports bytes out of range)
        for l in ctx.lanes:
            a = np.array([int(addr[l])])
            if not 0 <= a[0] <= ctx.cta.shadow.size - k:
                continue
            old = ctx.cta.smem.read(a, dt)
            out[l] = old[0]
            ctx.cta.smem.write(a, old + np.asarray([v[l]]).astype(old.dtype), dt)
        return out
    return model


register_model("atom_shared_add_u32", _atom_shared("uint32"))
register_model("atom_shared_add_f32", _atom_shared("float32"))


def _tick(ctx):
    ctx.machine.clock += 1 + int(ctx.machine.rng.integers(16))
    return ctx.machine.clock


register_model("clock", lambda ctx: np.full(WARP, _tick(ctx) & 0xFFFFFFFF, np.uint32))
register_model("clock64", lambda ctx: np.full(WARP, _tick(ctx), np.uint64))
register_model("globaltimer", lambda ctx: np.full(WARP, _tick(ctx) * 1000, np.uint64))


@register_model("nanosleep")
def _sleep(ctx):
    yield None


register_model("laneid", lambda ctx: np.arange(WARP, dtype=np.uint32))
register_model("warpid", lambda ctx: np.full(WARP, ctx.w.wid, np.uint32))
register_model("smid", lambda ctx: np.full(WARP, ctx.cta.rank, np.uint32))


@register_model("nsmid")
def _nsmid(ctx):
    """The SM count of the target's flagship part (:attr:`tirxpy.target.Target.sm_count`)."""
    n = as_target(ctx.machine.arch).sm_count
    if n is None:
        raise UnsupportedError(f"%nsmid: tirxpy knows no SM count for {ctx.machine.arch}; simulate for sm_90a or "
                               "sm_100a (arch=), or pass the count to the kernel as a parameter")
    return np.full(WARP, n, np.uint32)


@register_model("trap")
def _trap(ctx):
    ctx.report("trap", "the kernel executed trap")
    yield Block(lambda: False, "nothing (trapped)", ctx.span)


def _cl(fn):
    return lambda ctx: np.full(WARP, fn(ctx), np.uint32)


register_model("cluster_ctarank", _cl(lambda c: c.cta.rank))
register_model("cluster_nctarank", _cl(lambda c: len(c.machine.cluster)))
for _i, _a in enumerate("xyz"):
    register_model(f"cluster_ctaid_{_a}", _cl(lambda c, i=_i: c.cta.cid[i]))
    register_model(f"clusterid_{_a}", _cl(lambda c, i=_i: c.cta.cta_id[i] // c.machine.cluster_dims[i]))
    register_model(f"cluster_nctaid_{_a}", _cl(lambda c, i=_i: c.machine.cluster_dims[i]))


@register_model("mapa_shared")
def _mapa(ctx):
    addr = ctx.arg("addr").astype(np.int64)
    cta = ctx.arg("cta").astype(np.int64)
    big = [l for l in ctx.lanes if not 0 <= addr[l] < 1 << 24]
    if big:     # the cluster address keeps 24 bits of offset; no CTA's shared memory reaches past them
        ctx.report("oob_shared", f"{ctx.call.name}: shared::cta address {int(addr[big[0]]):#x} (lane {big[0]}) is past "
                   "every CTA's shared memory")
    # bit 31 tags a shared::cluster address so that rank 0 differs from a plain shared::cta address
    return ((1 << 31) | (cta << 24) | (addr & 0xFFFFFF)).astype(np.uint32)


def _remote(ctx, addr):
    """``(cta, offset)`` of a shared::cluster address; ``(None, offset)`` (reported) for a rank
    outside the cluster."""
    addr = int(addr)
    if not addr >> 31:  # a shared::cta address names this CTA, all of its bits the offset
        return ctx.cta, addr
    rank = (addr >> 24) & 0x7F
    if rank >= len(ctx.machine.cluster):
        ctx.report("oob_shared", f"{ctx.call.name}: shared::cluster address {addr:#x} names CTA rank {rank}; the "
                   f"cluster has {len(ctx.machine.cluster)} CTA(s)")
        return None, addr & 0xFFFFFF
    return ctx.machine.cluster[rank], addr & 0xFFFFFF


def _dsmem_access(ctx, cta, a, k, write):
    """A DSMEM access of ``k`` bytes at byte ``a`` of ``cta``'s shared memory by the issuing warp, checked like
    one of its own (range, races with the other CTA's warps, reads of never-written bytes); False when out of
    range (reported)."""
    if a % k:
        ctx.report("misaligned", f"{ctx.call.name}: shared::cluster offset {a:#x} in {cta.describe()} is not "
                   f"{k}-byte aligned, which the GPU faults on (misaligned address)",
                   [f"pass an address that is a multiple of {k} bytes"], key=("misaligned", ctx.call.name, a))
    if a < 0 or a + k > cta.shadow.size:
        ctx.report("oob_shared", f"{ctx.call.name} accesses byte {a} of {cta.describe()}'s {cta.shadow.size}-byte "
                   "shared memory")
        return False
    ctx.cta.machine.check_access(cta, np.arange(a, a + k), ctx.w.agent, ctx.w.vc, write, GENERIC, ctx.call, ctx.w)
    return True


def _ld_cluster(dt):
    def model(ctx):
        addr = ctx.arg("addr")
        out = np.zeros(WARP, np.float32 if dt == "float32" else np.uint32)
        for l in ctx.lanes:
            cta, a = _remote(ctx, addr[l])
            if cta is None or not _dsmem_access(ctx, cta, a, 4, False):
                continue
            out[l] = cta.smem.read(np.array([a]), dt)[0]
        return out
    return model


def _st_cluster(dt):
    def model(ctx):
        addr, v = ctx.arg("addr"), ctx.arg("v")
        for l in ctx.lanes:
            cta, a = _remote(ctx, addr[l])
            if cta is not None and _dsmem_access(ctx, cta, a, 4, True):
                cta.smem.write(np.array([a]), np.array([v[l]]), dt)
    return model


register_model("ld_shared_cluster_u32", _ld_cluster("uint32"))
register_model("ld_shared_cluster_f32", _ld_cluster("float32"))
register_model("st_shared_cluster_u32", _st_cluster("uint32"))
register_model("st_shared_cluster_f32", _st_cluster("float32"))
