"""Which targets have an instruction: a requirement is the lowest target that has it, optionally an
arch-specific ``a`` suffix (``sm_90a`` features are absent from plain ``sm_90``) and a highest target
(``wgmma`` exists only on Hopper; Blackwell replaced it with ``tcgen05``).

Targets themselves are :class:`tirxpy.target.Target` (``Arch`` and ``parse_arch`` are its names in
this package).

    >>> parse_arch("sm_100a")
    Target(sm=100, suffix='a')
    >>> Requirement("sm_90a").missing("sm_90")
    "needs sm_90a (arch-specific 'a' features); the kernel targets sm_90 — compile with arch='sm_90a'"
    >>> Requirement("sm_80").missing("sm_100a") is None
    True
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.target import SUPPORTED_ARCHS, Target, as_target, supported_target

Arch = Target
#: ``"sm_90a"`` -> ``Target(90, "a")`` (:func:`tirxpy.target.as_target`).
parse_arch = as_target
#: ``arch`` as a Target when NVRTC compiles for it (:func:`tirxpy.target.supported_target`).
target_arch = supported_target

__all__ = ["Arch", "Requirement", "SUPPORTED_ARCHS", "parse_arch", "target_arch"]


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
