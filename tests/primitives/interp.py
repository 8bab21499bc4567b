"""Run lowered kernels on the CPU for the primitives' tests, through the simulator.

``run_lowered(kernel, **tensors)`` lowers tile primitives (``tirxpy.primitives.lower_calls``)
and runs the kernel with ``tirxpy.sim.run`` (every CTA, warps interleaved, race and protocol
checks on); ``.result(name)`` reads a tensor back. ``bf16_array`` rounds test inputs to bf16.
"""
from __future__ import annotations

import numpy as np


def bf16_array(a) -> np.ndarray:
    """Round a float array to bf16 values (kept as float32), round-to-nearest-even."""
    f = np.asarray(a, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return u.view(np.float32)


def run_lowered(kernel, arch="sm_90a", **args):
    """Lower ``kernel`` and run it on ``args`` (tensors and scalars by parameter name) through
    :func:`tirxpy.sim.run`; ``.result(name)`` reads a tensor back (bf16 as float32 values)."""
    from tirxpy.sim import run

    names = [p.name for p in kernel.params]
    missing = [n for n in names if n not in args]
    if missing:
        raise TypeError(f"run_lowered: missing arguments {missing}")
    res = run(kernel, *(args[n] for n in names), arch=arch)
    return _SimOutputs(dict(zip(names, res)))


class _SimOutputs:
    def __init__(self, by_name):
        self._by_name = by_name

    def result(self, name) -> np.ndarray:
        return np.asarray(self._by_name[name])
