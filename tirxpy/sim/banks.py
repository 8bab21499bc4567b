"""Shared-memory bank conflicts of the vector loads and stores a kernel runs (``vld_shared`` / ``vst_shared``
of 4, 8 or 16 bytes a lane), counted as the hardware serves them: in *wavefronts*.

The rule (sm_80 and later): shared memory has 32 banks of 4-byte words; a warp's access of ``w`` bytes a lane is
served in phases of ``128 / w`` consecutive lanes (all 32 lanes for 4 bytes, lanes 0-15 and 16-31 for 8, quarters
for 16), and a phase takes as many wavefronts as the largest number of *distinct* words any one bank holds among
the words its lanes touch (lanes reading one word share it). The ideal is one wavefront per phase with an active
lane. ncu's "L1 Wavefronts Shared" counts the same: on an H100, a wgmma accumulator's 8-byte stores into
unswizzled rows of 64 floats take 8 wavefronts where 2 are ideal, and into 128-byte-swizzled rows of 32 floats 4.

    >>> import numpy as np
    >>> lanes = np.arange(32)
    >>> wavefronts(lanes, 4 * lanes, 4)          # consecutive words: one wavefront
    (1, 1)
    >>> wavefronts(lanes, 128 * lanes, 4)        # one column of a 32-float row-major tile: all in bank 0
    (32, 1)
    >>> wavefronts(lanes, np.zeros(32, int), 4)  # one word for everyone
    (1, 1)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tirxpy.errors import shown

from .args import ArgumentError
from .races import sorted_unique

BANKS = 32
WORD = 4
PHASE_BYTES = 128


def _ints(name, x):
    """``x`` as a flat int64 array, or :class:`~tirxpy.sim.args.ArgumentError` when it is not integers in range."""
    try:
        a = np.asarray(x)
    except Exception:   # noqa: BLE001  (not numbers, ragged, or an object whose own array protocol raises)
        a = None
    if a is None or a.dtype.kind not in "iu" or a.ndim > 1:
        raise ArgumentError(f"wavefronts: {name} must be a sequence of ints (int64 range), got {shown(x, 60)}")
    return a.astype(np.int64).ravel()


def wavefronts(lanes, offsets, width: int) -> tuple:
    """``(wavefronts, ideal)`` of one warp access in which lane ``lanes[i]`` (0 .. 31, each at most once) touches
    ``width`` bytes (4, 8 or 16) from byte ``offsets[i]`` of shared memory; see the module docstring for the rule.

        >>> wavefronts([0, 1], [0, 4], 2)
        Traceback (most recent call last):
        ...
        tirxpy.sim.args.ArgumentError: wavefronts: width must be 4, 8 or 16 bytes (a vector of 1, 2 or 4 words), got 2
    """
    if type(width) is not int or width not in (4, 8, 16):
        raise ArgumentError("wavefronts: width must be 4, 8 or 16 bytes (a vector of 1, 2 or 4 words), got "
                            f"{shown(width, 40)}")
    lanes, off = _ints("lanes", lanes), _ints("offsets", offsets)
    if lanes.shape != off.shape or ((lanes < 0) | (lanes >= 32)).any() or np.unique(lanes).size != lanes.size:
        raise ArgumentError(f"wavefronts: lanes must be distinct lane ids 0 .. 31, one per offset; got {lanes.size} "
                            f"lanes for {off.size} offsets")
    return _count(lanes, off, width)


def _count(lanes, off, width):
    """:func:`wavefronts` of arguments already checked (int64 arrays; the simulator's own accesses)."""
    if lanes.size == 0:
        return 0, 0
    words = off[:, None] // WORD + np.arange(width // WORD)        # (lanes, words a lane)
    phase = lanes // (PHASE_BYTES // width)
    total = ideal = 0
    for ph in sorted_unique(phase):
        w = sorted_unique(words[phase == ph])
        total += int(np.bincount(w % BANKS, minlength=BANKS).max())
        ideal += 1
    return total, ideal


@dataclass
class BankConflicts:
    """One source line's shared-memory accesses that took more wavefronts than ideal: ``where`` (its span),
    ``accesses`` (warp instructions), ``wavefronts`` and ``ideal`` (their sums)."""

    where: object
    accesses: int
    wavefronts: int
    ideal: int

    def __str__(self) -> str:
        src = self.where.source_line().strip() if hasattr(self.where, "source_line") else ""
        text = (f"{self.where}: {self.wavefronts / self.accesses:g} shared-memory wavefronts a warp access where "
                f"{self.ideal / self.accesses:g} would do ({self.accesses} accesses)")
        return text + (f"\n    | {src}" if src else "")


class BankCounter:
    """Wavefronts per source line over a run (:meth:`note` per warp access; :meth:`conflicts` the lines that took
    more than ideal, the most wavefronts lost first)."""

    def __init__(self):
        self._lines: dict = {}

    def note(self, span, lanes, offsets, width: int) -> None:
        got, ideal = _count(np.asarray(lanes, np.int64), np.asarray(offsets, np.int64), width)
        key = (getattr(span, "file", None), getattr(span, "line", None))
        entry = self._lines.setdefault(key, [span, 0, 0, 0])
        entry[1] += 1
        entry[2] += got
        entry[3] += ideal

    def conflicts(self) -> list:
        out = [BankConflicts(s, n, w, i) for s, n, w, i in self._lines.values() if w > i]
        return sorted(out, key=lambda c: c.ideal - c.wavefronts)
