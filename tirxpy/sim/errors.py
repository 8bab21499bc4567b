"""Errors and problem reports of the simulator.

Every problem names what went wrong, the kernel source line (the statement's span) and the
threads involved (CTA, warp, lanes). A run that finds problems raises :class:`SimReportError`
holding every :class:`Problem`; ``problem.kind`` is a stable name tests can match
(``"deadlock"``, ``"no_progress"``, ``"race"``, ``"uninitialized_read"``,
``"divergent_collective"``, ``"missing_fence_proxy_async"``, ``"tx_underflow"``, ...).

    >>> from tirxpy.ir.errors import Span
    >>> p = Problem("race", "shared write races with a read", Span("<doc>", 3), "cta (0, 0, 0) warp 1 lanes 0-31")
    >>> print(p)
    <doc>:3:0: race: shared write races with a read
        threads: cta (0, 0, 0) warp 1 lanes 0-31
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.scope.errors import TirxError


class SimError(TirxError, ValueError):
    """Base of every simulator error."""


class UnsupportedError(SimError):
    """The kernel uses something the simulator has no model for (named in the message)."""


class ModelError(SimError):
    """A simulator model (:func:`tirxpy.sim.register_model`) broke its contract: it raised, returned nothing for an
    instruction that returns a value, or returned values that are not one per lane. The message names the
    intrinsic and the call's source line."""


@dataclass
class Problem:
    """One finding: ``kind`` (stable name), message, source span, threads, extra notes."""

    kind: str
    msg: str
    span: object = None
    threads: str = ""
    notes: list = field(default_factory=list)

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span is not None else ""
        text = f"{where}{self.kind}: {self.msg}"
        if self.span is not None:
            src = self.span.source_line() if hasattr(self.span, "source_line") else ""
            if src.strip():
                text += f"\n    | {src.strip()}"
            via = getattr(self.span, "via", None)
            while via is not None:   # the macro calls it was expanded from, innermost first
                text += f"\n    expanded at {via}: {via.source_line().strip()}"
                via = via.via
        if self.threads:
            text += f"\n    threads: {self.threads}"
        for n in self.notes:
            text += f"\n    note: {n}"
        return text


class SimReportError(SimError):
    """The simulation found problems (``.problems``, a list of :class:`Problem`)."""

    def __init__(self, problems, kernel_name: str = "kernel"):
        self.problems = list(problems)
        head = f"simulating {kernel_name} found {len(self.problems)} problem(s):"
        super().__init__("\n".join([head] + [str(p) for p in self.problems]))

    def kinds(self) -> set:
        return {p.kind for p in self.problems}


def lanes_text(mask) -> str:
    """``lanes 0-31`` / ``lane 5`` / ``lanes 0,4,8`` from a boolean lane mask."""
    idx = [i for i, b in enumerate(mask) if b]
    if not idx:
        return "no lanes"
    if len(idx) == 1:
        return f"lane {idx[0]}"
    if idx == list(range(idx[0], idx[-1] + 1)):
        return f"lanes {idx[0]}-{idx[-1]}"
    return "lanes " + ",".join(map(str, idx[:8])) + ("..." if len(idx) > 8 else "")
