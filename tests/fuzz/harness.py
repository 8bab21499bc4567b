"""The fuzz harness: every case runs under a time and memory cap and is sorted into one outcome.

A *refusal case* feeds bad input and passes only if tirxpy raises one of its own errors
(:class:`tirxpy.errors.TirxError`) whose message names what is wrong (``names=``: at least one of
the given words appears in it). Anything else is a finding:

- ``crash``: an exception that is not a TirxError (``KeyError``, ``MemoryError``, ``RecursionError``, ...);
  a :class:`HostileError` (the own code of a :class:`Hostile` argument ran, and its failure escaped) among them;
- ``hang``: the case ran past its time cap;
- ``wrong``: bad input was accepted (or good input gave a wrong answer, for ``accept`` cases);
- ``executed``: a payload ran code (it touched :data:`SENTINEL`);
- ``unhelpful``: the error is typed but its message does not name the fault.

Outcomes are tallied per area (areas starting with ``_`` are left out of the table: the harness's own
tests); ``tests/fuzz/conftest.py`` prints the table at the end of the run.
``TIRXPY_FUZZ_EXAMPLES`` (default 40) sets how many examples each hypothesis fuzz test draws.

    >>> from tirxpy.layout import S, TileLayout
    >>> refuse("layouts", lambda: TileLayout(S[(8, 0) : (1, 1)]), names=["extent"])
    'refused'
"""
from __future__ import annotations

import builtins
import collections
import contextlib
import os
import resource
import signal
import time

from hypothesis import strategies as st

from tirxpy.errors import TirxError

TALLY: collections.Counter = collections.Counter()   # (area, outcome) -> count
FINDINGS: list = []                                   # (area, outcome, detail) of every non-pass
EXAMPLES = int(os.environ.get("TIRXPY_FUZZ_EXAMPLES", "40"))
SENTINEL = "_tirxpy_fuzz_payload_ran"                 # payloads set builtins.<SENTINEL>; nothing may


class HostileError(Exception):
    """Raised by every method of a :class:`Hostile` value: private to the fuzz suite, so the library never catches
    it by type (an ``except Exception`` that turns it into a typed error is fine). Its escape is a crash."""


class Hostile:
    """A bad value whose own code raises wherever a check could run it: its ``str``, ``repr`` and ``format``, its
    truth value, its conversions to int / float / index, its comparisons, hash, arithmetic, length, iteration,
    indexing, and any attribute it lacks. The library must judge it by its type (it is none of the types an
    argument takes) before anything formats, compares or hashes it, and show it with :func:`tirxpy.errors.shown`
    (``<Hostile object>``)."""

    def _raise(self, *args, **kwargs):
        raise HostileError("a Hostile value's own code ran")

    __str__ = __repr__ = __format__ = __bool__ = __index__ = __int__ = __float__ = __complex__ = _raise
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = _raise
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = __mod__ = _raise
    __neg__ = __abs__ = __round__ = __trunc__ = __len__ = __iter__ = __contains__ = __getitem__ = _raise
    __getattr__ = _raise

    def _repr_pretty_(self, p, cycle):      # how hypothesis prints a drawn one (its repr raises)
        p.text("Hostile()")


HOSTILE = st.builds(Hostile)       # the strategy every fuzz file's bad values include


class UnprintableInt(int):
    """An int whose str, repr and format raise (its comparisons, arithmetic and index are int's): a value of a type
    an argument takes, whose refusal (out of range, say) must show it without running its own formatting."""

    def _raise(self, *args):
        raise HostileError("an UnprintableInt was formatted")

    __str__ = __repr__ = __format__ = _raise


class UnprintableStr(str):
    """A str whose str, repr and format raise."""

    def _raise(self, *args):
        raise HostileError("an UnprintableStr was formatted")

    __str__ = __repr__ = __format__ = _raise


def _shown(v, width: int = 200) -> str:
    """``repr(v)`` cut to ``width``, or ``<T object>`` when it raises (a value the harness reports may be hostile)."""
    try:
        return repr(v)[:width]
    except Exception:  # noqa: BLE001
        return f"<{type(v).__name__} object>"


def _what(e: BaseException) -> str:
    """An exception as ``Type: message`` for a finding; a :class:`HostileError` says whose code ran."""
    if isinstance(e, HostileError):
        return f"HostileError (an argument's own method ran and its failure escaped): {e}"
    try:
        return f"{type(e).__name__}: {str(e)[:300]}"
    except Exception:  # noqa: BLE001
        return f"{type(e).__name__}: <its str raised>"


class Hang(BaseException):
    """The case ran past its time cap (a BaseException, so library ``except Exception`` cannot eat it)."""


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def capped(seconds: float = 5.0, mem: int = 2 << 30):
    """Run the body with at most ``seconds`` of wall time and ``mem`` bytes of new address space."""
    def _alarm(signum, frame):
        raise Hang(f"over {seconds} s")

    old_handler = signal.signal(signal.SIGALRM, _alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _vm_bytes() + mem
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _record(area: str, outcome: str, detail: str = "") -> str:
    TALLY[(area, outcome)] += 1
    if outcome not in ("refused", "accepted"):
        FINDINGS.append((area, outcome, detail))
    return outcome


def _run(fn, seconds, mem):
    """(outcome, value or exception): outcome is 'returned', 'raised', 'hang'."""
    if hasattr(builtins, SENTINEL):
        delattr(builtins, SENTINEL)
    try:
        with capped(seconds, mem):
            value = fn()
        return "returned", value
    except Hang as e:
        return "hang", e
    except Exception as e:  # noqa: BLE001  (classified below)
        return "raised", e


def classify(area: str, fn, *, names=(), seconds: float = 5.0, mem: int = 2 << 30, allow=None) -> str:
    """Run ``fn()`` as a refusal case and return its outcome (tallied under ``area``).

    ``allow(value)`` may accept a returned value as right (bad-looking input with a defined answer)."""
    t0 = time.monotonic()
    kind, v = _run(fn, seconds, mem)
    took = time.monotonic() - t0
    if hasattr(builtins, SENTINEL):
        return _record(area, "executed", f"{fn!r}")
    if kind == "hang":
        return _record(area, "hang", f"{took:.1f} s")
    if kind == "returned":
        if allow is not None and allow(v):
            return _record(area, "accepted")
        return _record(area, "wrong", f"accepted, returned {_shown(v)}")
    if isinstance(v, HostileError) or not isinstance(v, TirxError):
        return _record(area, "crash", _what(v))
    msg = str(v)
    if names and not any(n.lower() in msg.lower() for n in names):
        return _record(area, "unhelpful", f"{type(v).__name__}: {msg:.300} (names none of {list(names)})")
    if len(msg) < 20:
        return _record(area, "unhelpful", f"{type(v).__name__}: {msg!r} (too short to act on)")
    return _record(area, "refused")


def refuse(area: str, fn, *, names=(), seconds: float = 5.0, mem: int = 2 << 30, allow=None) -> str:
    """:func:`classify` then assert the case was handled (refused with a helpful error, or allowed)."""
    out = classify(area, fn, names=names, seconds=seconds, mem=mem, allow=allow)
    assert out in ("refused", "accepted"), f"{area}: {out}: {FINDINGS[-1][2]}"
    return out


def accept(area: str, fn, check, *, seconds: float = 5.0, mem: int = 2 << 30) -> str:
    """Good input near the edges: ``fn()`` must return a value for which ``check(value)`` is true."""
    kind, v = _run(fn, seconds, mem)
    if hasattr(builtins, SENTINEL):
        out = _record(area, "executed", f"{fn!r}")
    elif kind == "hang":
        out = _record(area, "hang", "")
    elif kind == "raised":
        out = _record(area, "crash" if not isinstance(v, TirxError) else "wrong", f"good input raised {_what(v)}")
    elif not check(v):
        out = _record(area, "wrong", f"returned {_shown(v)}")
    else:
        out = _record(area, "accepted")
    assert out == "accepted", f"{area}: {out}: {FINDINGS[-1][2]}"
    return out


def summary() -> str:
    """The tally as a table: one row per area, one column per outcome."""
    cols = ["refused", "accepted", "crash", "hang", "wrong", "executed", "unhelpful"]
    areas = sorted({a for a, _ in TALLY if not a.startswith("_")})
    rows = ["| area | cases | " + " | ".join(cols) + " |", "|" + " --- |" * (len(cols) + 2)]
    for a in areas:
        n = sum(TALLY[(a, c)] for c in cols)
        rows.append(f"| {a} | {n} | " + " | ".join(str(TALLY[(a, c)]) for c in cols) + " |")
    return "\n".join(rows)


def export() -> dict:
    """The tally and findings as plain lists (what a pytest-xdist worker sends to the main process)."""
    return {"tally": [(a, o, n) for (a, o), n in TALLY.items()], "findings": [list(f) for f in FINDINGS]}


def print_table(terminalreporter) -> None:
    """The tally table and the first findings at the end of a run that ran fuzz cases (none otherwise)."""
    if not any(not a.startswith("_") for a, _ in TALLY):
        return
    terminalreporter.write_sep("-", "fuzz outcomes per area (tests/fuzz/harness.py)")
    terminalreporter.write_line(summary())
    for area, outcome, detail in [f for f in FINDINGS if not f[0].startswith("_")][:40]:
        terminalreporter.write_line(f"  {area}: {outcome}: {detail}")
