"""Compile targets (``sm_80``, ``sm_90a``, ``sm_100a``, ...) and which of them have an instruction.

A requirement is the lowest target that has the instruction, optionally an arch-specific
``a`` suffix (``sm_90a`` features are absent from plain ``sm_90``) and a highest target
(``wgmma`` exists only on Hopper; Blackwell replaced it with ``tcgen05``).

    >>> parse_arch("sm_100a")
    Arch(sm=100, suffix='a')
    >>> Requirement("sm_90a").missing("sm_90")
    "needs sm_90a (arch-specific 'a' features); the kernel targets sm_90 — compile with arch='sm_90a'"
    >>> Requirement("sm_80").missing("sm_100a") is None
    True
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TargetError

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")

#: Targets tirxpy compiles for: those the pinned NVRTC (13.0) can target (sm_90a and sm_100a are the ones
#: tirxpy's kernels use).
SUPPORTED_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_103a", "sm_110a", "sm_120a")


@dataclass(frozen=True, order=True)
class Arch:
    """A parsed target: compute capability times ten and the suffix ('' / 'a' / 'f')."""

    sm: int
    suffix: str = ""

    def __str__(self) -> str:
        return f"sm_{self.sm}{self.suffix}"


def parse_arch(arch) -> Arch:
    """``"sm_90a"`` -> ``Arch(90, "a")``; raises TargetError for anything else."""
    if isinstance(arch, Arch):
        return arch
    m = _ARCH_RE.fullmatch(arch) if isinstance(arch, str) else None
    if m is None:
        raise TargetError(
            f"unknown target {arch!r:.60}; write it as 'sm_<major><minor>[a]', one of {', '.join(SUPPORTED_ARCHS)}"
        )
    sm = int(m.group(1))
    if sm < 80:
        raise TargetError(f"target {arch} is older than sm_80, the oldest tirxpy supports; use 'sm_80' or newer")
    return Arch(sm, m.group(2))


def target_arch(arch) -> Arch:
    """``arch`` parsed, when it is one of :data:`SUPPORTED_ARCHS` (a target NVRTC can compile for);
    TargetError listing them otherwise.

        >>> target_arch("sm_90a")
        Arch(sm=90, suffix='a')
        >>> target_arch("sm_91")
        Traceback (most recent call last):
        ...
        tirxpy.intrinsics.errors.TargetError: unknown target 'sm_91'; tirxpy compiles for sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100a, sm_103a, sm_110a, sm_120a
    """
    a = parse_arch(arch) if isinstance(arch, (str, Arch)) else None
    if a is None or str(a) not in SUPPORTED_ARCHS:
        raise TargetError(f"unknown target {arch!r:.60}; tirxpy compiles for {', '.join(SUPPORTED_ARCHS)}")
    return a


@dataclass(frozen=True)
class Requirement:
    """Targets that have an instruction: ``lowest`` upwards, up to ``highest`` (inclusive) if given.

    ``lowest`` with an ``a`` suffix means the feature is arch-specific: the target must carry
    the ``a`` suffix too.
    """

    lowest: str = "sm_80"
    highest: str | None = None
    why_highest: str = ""

    def __post_init__(self):
        parse_arch(self.lowest)
        if self.highest is not None:
            parse_arch(self.highest)

    def missing(self, arch) -> str | None:
        """None if ``arch`` has the instruction, else the reason (without the instruction name)."""
        a = parse_arch(arch)
        lo = parse_arch(self.lowest)
        if a.sm < lo.sm:
            return f"needs {self.lowest}; the kernel targets {a} — compile with arch='{self.lowest}'"
        if self.highest is not None and a.sm > parse_arch(self.highest).sm:
            extra = f" ({self.why_highest})" if self.why_highest else ""
            span = self.lowest if self.highest == self.lowest else f"{self.lowest}..{self.highest}"
            return f"exists only on {span}{extra}; the kernel targets {a}"
        if lo.suffix == "a" and a.suffix != "a":
            want = f"sm_{a.sm}a"
            return (f"needs {self.lowest} (arch-specific 'a' features); the kernel targets {a} — "
                    f"compile with arch='{want}'")
        return None

    def __str__(self) -> str:
        return self.lowest if self.highest is None else f"{self.lowest}..{self.highest}"
