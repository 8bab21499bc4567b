"""The compile target: one object, parsed once from ``"sm_90a"``, that every stage reads.

A :class:`Target` is the compute capability (``sm``: major times ten plus minor) and the suffix
(``a``: arch-specific features such as wgmma and tcgen05; ``f``: family-specific). Everything a
stage needs to know about the part is a property of it, read from one table here: shared memory
per CTA, the largest cluster, tensor-memory columns, the SM count of the flagship part, the
instruction families, the GPUs its cubin runs on. Stages take a ``Target`` (or a string they
turn into one with :func:`as_target`, which returns a ``Target`` unchanged), so the string is
parsed once, at the entry point.

    >>> t = as_target("sm_90a")
    >>> t, t.smem_per_cta, t.max_cluster, t.tmem_columns, t.sm_count
    (Target(sm=90, suffix='a'), 232448, 16, 0, 132)
    >>> "wgmma" in t.families, "tcgen05" in as_target("sm_100a").families
    (True, True)
    >>> as_target("sm_80").max_cluster, as_target("sm_100a").tmem_columns
    (0, 512)
    >>> t.runs_on((9, 0)), as_target("sm_80").runs_on((8, 6)), as_target("sm_80").runs_on((9, 0))
    (True, True, False)
    >>> for_capability((10, 0))
    Target(sm=100, suffix='a')

This module imports nothing else from tirxpy but the error root, so every layer may use it.
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import lru_cache

from tirxpy.errors import TirxError, shown

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$", re.ASCII)    # ASCII digits only

#: Targets tirxpy compiles for: those the pinned NVRTC (13.0) can target (sm_90a and sm_100a are the ones
#: tirxpy's kernels use).
SUPPORTED_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_110a", "sm_120a")

#: Bytes of shared memory one CTA may have (the opt-in maximum): 227 KiB on Hopper and data-center
#: Blackwell, 163 KiB on A100 / Orin, 99 KiB on the other parts.
SMEM_PER_CTA = {80: 166912, 87: 166912, 90: 232448, 100: 232448, 101: 232448, 103: 232448, 110: 232448}
SMEM_PER_CTA_DEFAULT = 101376
#: The largest shared-memory budget of any target: the limit that applies when no target is named.
MAX_SMEM_PER_CTA = max(SMEM_PER_CTA.values())
#: Tensor-memory columns per CTA (sm_100 .. sm_110; none elsewhere).
TMEM_COLUMNS = 512
#: CTAs per cluster: 16 (non-portable, opt-in) on Hopper and data-center Blackwell, 8 (portable) on other
#: parts with clusters (sm_90 and newer).
MAX_CLUSTER, PORTABLE_CLUSTER = 16, 8
#: SMs of the flagship part of each architecture (H100 SXM, B200 / B300): what a persistent scheduler
#: plans for by default; a smaller part of the same architecture has fewer.
SM_COUNT = {80: 108, 90: 132, 100: 148, 103: 148}
MAX_THREADS = 1024           #: threads per CTA
MAX_REGISTERS = 255          #: 32-bit registers per thread
MAX_GRID = ((1 << 31) - 1, 65535, 65535)   #: CTAs per grid dimension x, y, z


class TargetError(TirxError, ValueError):
    """A target is unknown or unsupported, or a kernel or instruction needs what the target lacks."""


@dataclass(frozen=True, order=True)
class Target:
    """A parsed target: compute capability times ten (``sm``) and the suffix ('' / 'a' / 'f').

    Construct with :func:`as_target`; the properties are the part's facts (module docstring)."""

    sm: int
    suffix: str = ""

    def __post_init__(self):
        if type(self.sm) is not int or not 0 <= self.sm < 1000 or type(self.suffix) is not str \
                or self.suffix not in ("", "a", "f"):
            raise TargetError(f"Target(sm={shown(self.sm, 30)}, suffix={shown(self.suffix, 30)}) is no target: sm is "
                              "an int in [0, 1000) and suffix is '', 'a' or 'f'; build one with as_target('sm_90a')")

    def __str__(self) -> str:
        return f"sm_{self.sm}{self.suffix}"

    @property
    def name(self) -> str:
        return str(self)

    @property
    def capability(self) -> tuple:
        """``(major, minor)``: ``(9, 0)`` for sm_90a."""
        return divmod(self.sm, 10)

    @property
    def smem_per_cta(self) -> int:
        """Bytes of shared memory one CTA may have (dynamic, opted in)."""
        return SMEM_PER_CTA.get(self.sm, SMEM_PER_CTA_DEFAULT)

    @property
    def max_cluster(self) -> int:
        """The most CTAs in a thread-block cluster (0: no clusters before sm_90)."""
        if self.sm < 90:
            return 0
        return MAX_CLUSTER if self.sm in (90, 100, 101, 103) else PORTABLE_CLUSTER

    @property
    def tmem_columns(self) -> int:
        """Tensor-memory columns per CTA (0: the part has no tensor memory)."""
        return TMEM_COLUMNS if 100 <= self.sm <= 110 else 0

    @property
    def sm_count(self) -> int | None:
        """SMs of the architecture's flagship part (None where tirxpy knows no default)."""
        return SM_COUNT.get(self.sm)

    @property
    def families(self) -> frozenset:
        """Instruction families the target has: ``mma_sync``, ``ldmatrix``, ``cp_async`` (sm_80 on),
        ``tma``, ``clusters`` (sm_90 on), ``setmaxnreg`` (every ``a`` target from sm_90a), ``wgmma``
        (sm_90a only), ``tcgen05`` (sm_100a .. sm_110a). The intrinsic table states each instruction's own range."""
        fam = {"mma_sync", "ldmatrix", "cp_async"}
        if self.sm >= 90:
            fam |= {"tma", "clusters"}
        if self.suffix == "a":
            fam |= {"setmaxnreg"} | ({"wgmma"} if self.sm == 90 else set())
            fam |= {"tcgen05"} if 100 <= self.sm <= 110 else set()
        return frozenset(fam)

    def runs_on(self, capability) -> bool:
        """Whether a cubin built for this target runs on a GPU of compute ``capability``: same major
        version and no newer minor version; an arch-specific target only on exactly that GPU."""
        cap = _capability(capability, "Target.runs_on")
        major, minor = self.capability
        if self.suffix:
            return (major, minor) == cap
        return major == cap[0] and minor <= cap[1]


@lru_cache(maxsize=64)
def _parse(arch: str) -> Target:
    m = _ARCH_RE.fullmatch(arch)
    if m is None:
        raise TargetError(
            f"unknown target {shown(arch, 60)}; write it as 'sm_<major><minor>[a]', one of {', '.join(SUPPORTED_ARCHS)}"
        )
    sm = int(m.group(1))
    if sm < 80:
        raise TargetError(f"target {arch} is older than sm_80, the oldest tirxpy supports; use 'sm_80' or newer")
    return Target(sm, m.group(2))


def as_target(arch) -> Target:
    """``"sm_90a"`` -> ``Target(90, "a")`` (a Target passes through); TargetError for anything else."""
    if isinstance(arch, Target):
        return arch
    if not isinstance(arch, str):
        raise TargetError(f"unknown target {shown(arch, 60)} ({type(arch).__name__}); write it as "
                          f"'sm_<major><minor>[a]', one of {', '.join(SUPPORTED_ARCHS)}")
    return _parse(arch if type(arch) is str else str.__str__(arch))    # (a str subclass as the plain str it holds)


def supported_target(arch) -> Target:
    """``arch`` as a Target, when it is one of :data:`SUPPORTED_ARCHS` (a target NVRTC can compile for);
    TargetError listing them otherwise.

        >>> supported_target("sm_90a")
        Target(sm=90, suffix='a')
        >>> supported_target("sm_91")
        Traceback (most recent call last):
        ...
        tirxpy.target.TargetError: unknown target 'sm_91'; tirxpy compiles for sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100a, sm_103a, sm_110a, sm_120a
    """
    t = as_target(arch) if isinstance(arch, (str, Target)) else None
    if t is None or str(t) not in SUPPORTED_ARCHS:
        raise TargetError(f"unknown target {shown(arch, 60)}; tirxpy compiles for {', '.join(SUPPORTED_ARCHS)}")
    return t


def _capability(capability, fn: str) -> tuple:
    """``capability`` as a ``(major, minor)`` pair of Python ints, major in [0, 100) and minor in [0, 10) (what
    ``torch.cuda.get_device_capability()`` returns; sm is major * 10 + minor); TargetError naming ``fn`` otherwise."""
    try:
        pair = tuple(capability) if isinstance(capability, (tuple, list)) else None
        ok = pair is not None and len(pair) == 2 and not any(isinstance(v, bool) for v in pair)
        pair = tuple(operator.index(v) for v in pair) if ok else None
    except Exception:   # noqa: BLE001  (an entry that is no int, or whose __index__ raises)
        pair = None
    if pair is None or not (0 <= pair[0] < 100 and 0 <= pair[1] < 10):
        raise TargetError(f"{fn}: a compute capability is a (major, minor) pair of ints, minor below 10, e.g. (9, 0) "
                          f"for an H100, got {shown(capability, 60)} ({type(capability).__name__})")
    return pair


def for_capability(capability) -> Target:
    """The target to build for a GPU of compute ``capability``: (9, 0) -> sm_90a, (10, 0) -> sm_100a
    (the arch-specific targets that have wgmma / tcgen05), else the plain ``sm_XY``."""
    major, minor = _capability(capability, "for_capability")
    return as_target({(9, 0): "sm_90a", (10, 0): "sm_100a"}.get((major, minor), f"sm_{major}{minor}"))


__all__ = ["Target", "TargetError", "as_target", "supported_target", "for_capability", "SUPPORTED_ARCHS",
           "SMEM_PER_CTA", "MAX_SMEM_PER_CTA", "TMEM_COLUMNS", "MAX_CLUSTER", "PORTABLE_CLUSTER", "SM_COUNT",
           "MAX_THREADS", "MAX_REGISTERS", "MAX_GRID"]
