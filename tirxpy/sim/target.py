"""Which target a kernel is simulated for.

The rule: an explicit ``arch=`` must have every intrinsic the kernel uses (and tensor memory, if
the kernel allocates some), else :class:`~tirxpy.sim.args.ArgumentError` names the first that
it lacks and the target that has it. Without ``arch=`` the kernel decides: the first of
:data:`CANDIDATES` that has all of them (``sm_90a`` unless a Blackwell-only instruction such as
``tcgen05`` or a ``T.alloc_tmem`` tile asks for ``sm_100a``).

    >>> from tirxpy import T
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((1,), "uint32")):
    ...     T.launch(grid=(1,), threads=32)
    ...     T.ptx.tcgen05_fence_after_thread_sync()
    ... ''')
    >>> choose_arch(k, None)
    'sm_100a'
"""
from __future__ import annotations

from tirxpy.intrinsics import lookup
from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.buffer import Buffer
from tirxpy.ir.visitor import walk_exprs, walk_stmts
from tirxpy.target import TargetError, as_target
from tirxpy.errors import shown

from .args import ArgumentError

CANDIDATES = ("sm_90a", "sm_100a")


def used(kernel):
    """``(intrinsic names in first-use order, allocated buffers)`` of the kernel body."""
    names = {}
    for e in walk_exprs(kernel.body):
        if isinstance(e, E.IntrinsicCall):
            names.setdefault(e.name, e)
    return names, allocated(kernel)


def allocated(kernel):
    """The buffers the kernel body allocates, in statement order (``used(kernel)[1]``, without the walk over
    every expression)."""
    return [s.buffer for s in walk_stmts(kernel.body) if isinstance(s, St.Allocate) and isinstance(s.buffer, Buffer)]


def _lacks(arch, names, bufs):
    """The first reason ``arch`` cannot run the kernel, or None."""
    for name in names:
        e = lookup(name)
        if e is None:
            continue  # reported as unsupported when it runs
        why = e.requirement.missing(arch)
        if why is not None:
            return f"T.ptx.{name} ({e.ptx}) {why.split(' — ')[0]}", e.requirement.lowest
    if any(b.storage == "tmem" for b in bufs) and not as_target(arch).tmem_columns:
        return "tensor memory (T.alloc_tmem) needs sm_100a", "sm_100a"
    return None


def choose_arch(kernel, arch):
    """The target to simulate ``kernel`` for (see the module docstring)."""
    names, bufs = used(kernel)
    if arch is not None:
        if not isinstance(arch, str):
            raise ArgumentError(f"arch= is a target name such as 'sm_90a' or 'sm_100a' (or None: taken from the "
                                f"kernel), got {type(arch).__name__} {shown(arch, 40)}")
        try:
            as_target(arch)
        except TargetError as e:
            raise ArgumentError(f"arch={shown(arch)}: {e}") from None
        lack = _lacks(arch, names, bufs)
        if lack is not None:
            raise ArgumentError(f"arch={shown(arch)} cannot run {kernel.name}: {lack[0]}; pass arch='{lack[1]}' or "
                                "leave arch= out to take the target from the kernel")
        return arch
    reasons = []
    for cand in CANDIDATES:
        lack = _lacks(cand, names, bufs)
        if lack is None:
            return cand
        reasons.append(f"{cand}: {lack[0]}")
    raise ArgumentError(f"no target has every instruction {kernel.name} uses ({'; '.join(reasons)}); a kernel "
                        "mixes Hopper-only (wgmma) and Blackwell-only (tcgen05) instructions, or pass arch=")
