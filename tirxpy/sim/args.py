"""Checks of what ``tirxpy.sim.run`` is given, before anything is simulated.

Every rule raises :class:`ArgumentError` (a :class:`~tirxpy.sim.SimError`) that names the
parameter and how to fix the call:

- a tensor parameter takes a numpy array or a dense (strided, no two elements at one address)
  CPU / CUDA torch tensor of the parameter's shape and dtype (bfloat16 / float8 also as their
  raw bits, ``uint16`` / ``uint8``, or as ``float32`` values), neither complex nor requiring grad;
- a scalar parameter takes a Python / numpy number that its dtype holds exactly (an int in
  range for integer dtypes, a finite float within range for float dtypes; NaN / inf pass);
- the launch fits the target (:class:`tirxpy.target.Target`) and the simulator: ``threads`` in
  1..1024, a cluster of at most the target's ``max_cluster`` CTAs whose shape divides the grid,
  grid extents within CUDA's, at most :data:`MAX_CTAS` simulated CTAs and :data:`MAX_WARPS`
  simulated warps, shared memory within the target's ``smem_per_cta`` bytes and register tiles
  within :data:`MAX_LOCAL` bytes per thread;
- ``ctas=`` names CTAs inside the grid, ``seed`` is a non-negative int, ``max_steps`` a positive int.

    >>> import numpy as np
    >>> from tirxpy import T
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((4,), "float32"), n: T.int32):
    ...     T.launch(grid=(1,), threads=32)
    ...     A[0] = T.cast(n, "float32")
    ... ''')
    >>> check_scalar(k.params[1], 2 ** 40)
    Traceback (most recent call last):
    ...
    tirxpy.sim.args.ArgumentError: parameter n (int32): 1099511627776 is outside int32's range [-2147483648, 2147483647]
"""
from __future__ import annotations

import math
import numbers
import sys

import numpy as np

from tirxpy.errors import ArgumentError as _BaseArgumentError, shown
from tirxpy.ir.dtype import from_torch
from tirxpy.target import MAX_GRID, MAX_THREADS

from .errors import SimError
from .values import name_of, storage_dtype

MAX_CTAS = 4096            # CTAs one run simulates (pass ctas= to look at a few of a larger grid)
MAX_WARPS = 32768          # warps one run simulates, over all its CTAs
MAX_LOCAL = 1 << 16        # bytes of register tiles per thread
_NARROW = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2")


class ArgumentError(SimError, _BaseArgumentError):
    """A bad argument to :func:`tirxpy.sim.run` (wrong kind, dtype, shape or value)."""


def _torch():
    """torch if it is loaded (an argument can only be a torch tensor then; importing it costs seconds)."""
    return sys.modules.get("torch")


def to_array(p, a):
    """``(numpy array, how)`` of tensor argument ``a`` for parameter ``p`` after the checks above;
    ``how`` is "bits" (a torch bfloat16 / float8 tensor viewed as its bits), "torch" or "numpy"."""
    torch = _torch()
    want = name_of(p.dtype)
    if torch is not None and isinstance(a, torch.Tensor):
        if a.layout != torch.strided or a.device.type not in ("cpu", "cuda"):
            raise ArgumentError(f"parameter {p.name}: a {a.layout} tensor on {a.device}; pass a dense (strided) "
                                f"tensor on the CPU or a CUDA device")
        if any(st == 0 and n > 1 for st, n in zip(a.stride(), a.shape)):
            raise ArgumentError(f"parameter {p.name}: the tensor repeats elements (stride 0, e.g. from expand()); "
                                f"pass {p.name}.contiguous()")
        if a.requires_grad:
            raise ArgumentError(f"parameter {p.name}: the tensor requires grad; the simulator writes its results "
                                f"into it, so pass {p.name}.detach() (or a tensor made under torch.no_grad())")
        got = from_torch(a.dtype)
        got = str(a.dtype) if got is None else got.name
        if a.is_complex() or got != want and not (want in _NARROW and got == "float32"):
            raise ArgumentError(f"parameter {p.name}: torch dtype {a.dtype} does not match the kernel's {want}"
                                + (" (or float32 values)" if want in _NARROW else "") + f"; pass a {want} tensor")
        _shape(p, tuple(a.shape))
        t = a.detach().cpu()
        if got in ("bfloat16", "float8_e4m3", "float8_e5m2"):
            bits = torch.int16 if got == "bfloat16" else torch.uint8
            return t.contiguous().view(bits).numpy().view(storage_dtype(want)), "bits"
        return t.numpy(), "torch"
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"parameter {p.name} is a tensor {tuple(p.shape)} of {want}: pass a numpy array or a "
                            f"torch tensor, got {type(a).__name__}")
    st = storage_dtype(p.dtype)
    ok = a.dtype == st or (want in _NARROW and a.dtype == np.float32) or (want == "bool" and a.dtype == np.bool_)
    if not ok:
        extra = f" (its raw bits as {st.name}, or float32 values)" if want in _NARROW and st.kind != "f" else \
            (" (or float32 values)" if want in _NARROW else "")
        raise ArgumentError(f"parameter {p.name}: numpy dtype {a.dtype} does not match the kernel's {want}; pass "
                            f"a {st.name} array{extra}")
    _shape(p, a.shape)
    return a, "numpy"


def _shape(p, shape):
    if tuple(shape) != tuple(p.shape):
        raise ArgumentError(f"parameter {p.name}: shape {tuple(shape)} does not match the kernel's {tuple(p.shape)}")


def check_scalar(p, v):
    """The value of scalar parameter ``p`` as a Python number, or ArgumentError."""
    dt = name_of(p.dtype)
    torch = _torch()
    if isinstance(v, np.ndarray) or (torch is not None and isinstance(v, torch.Tensor)):
        raise ArgumentError(f"parameter {p.name} is a scalar ({dt}): pass a number, got a "
                            f"{type(v).__name__} of shape {tuple(v.shape)}")
    if dt == "bool":
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, numbers.Integral) and int(v) in (0, 1)):
            return bool(v)
        raise ArgumentError(f"parameter {p.name} (bool): pass True or False, got {shown(v)}")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise ArgumentError(f"parameter {p.name} ({dt}): pass {'an int' if dt[0] in 'iu' else 'a number'}, "
                            f"got {type(v).__name__} {shown(v, 60)}")
    st = storage_dtype(p.dtype)
    if st.kind in "iu":
        if not isinstance(v, numbers.Integral):
            raise ArgumentError(f"parameter {p.name} ({dt}): pass an int, got {type(v).__name__} {shown(v)}")
        info = np.iinfo(st)
        if not info.min <= int(v) <= info.max:
            raise ArgumentError(f"parameter {p.name} ({dt}): {shown(int(v), 60)} is outside {dt}'s range "
                                f"[{info.min}, {info.max}]")
        return int(v)
    big = float(np.finfo(np.float32 if dt in _NARROW else st).max)
    try:
        f = float(v)
    except OverflowError:                           # an int past every float's range
        f = None
    if f is None or math.isfinite(f) and abs(f) > big:
        raise ArgumentError(f"parameter {p.name} ({dt}): {shown(v, 60)} overflows {dt} (largest finite {big:g})")
    return f


def check_options(seed, check, max_steps):
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise ArgumentError(f"seed= picks the interleaving and is a non-negative int, got {shown(seed)}")
    if not isinstance(check, (bool, np.bool_)):
        raise ArgumentError(f"check= is True (raise SimReportError on problems) or False, got {shown(check)}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral) or int(max_steps) < 1:
        raise ArgumentError(f"max_steps= is the positive step budget of the run, got {shown(max_steps)}")


def check_launch(kernel, grid, cluster, target):
    """The launch fits the limits of ``target`` (a :class:`tirxpy.target.Target`) and the simulator's
    (see the module docstring)."""
    n = kernel.launch.threads
    if not 1 <= n <= MAX_THREADS:
        raise ArgumentError(f"{kernel.name} launches {n} threads per CTA; CUDA allows 1..{MAX_THREADS}")
    for d, (g, lim) in enumerate(zip(grid, MAX_GRID)):
        if not 1 <= g <= lim:
            raise ArgumentError(f"{kernel.name}: grid {tuple(grid)} has extent {g} in dimension {d}; CUDA allows "
                                f"1..{lim}")
    most = max(target.max_cluster, 1)      # a target without clusters runs one CTA per cluster
    if any(c < 1 for c in cluster) or math.prod(cluster) > most:
        raise ArgumentError(f"{kernel.name}: cluster {tuple(cluster)} must have extents >= 1 and at most "
                            f"{most} CTAs on {target}")
    for d in range(3):
        if grid[d] % cluster[d]:
            raise ArgumentError(f"{kernel.name}: grid {tuple(grid)} is not a multiple of the cluster shape "
                                f"{tuple(cluster)}")


def check_sizes(kernel, smem_bytes, local_roots, target):
    """Shared memory within ``target``'s bytes per CTA, register tiles within :data:`MAX_LOCAL` per thread."""
    if smem_bytes > target.smem_per_cta:
        raise ArgumentError(f"{kernel.name} allocates {smem_bytes} bytes of shared memory per CTA; the limit is "
                            f"{target.smem_per_cta} on {target}")
    total = sum(r.bytes() for r in local_roots)
    if total > MAX_LOCAL:
        raise ArgumentError(f"{kernel.name} allocates {total} bytes of register tiles per thread; the simulator's "
                            f"limit is {MAX_LOCAL}")


def check_ctas(ctas, grid, nctas_total, warps_per_cta=1):
    """The CTA ids to simulate (a set of 3-tuples) or None for all; refuses more than MAX_CTAS
    CTAs or MAX_WARPS warps."""
    if ctas is None:
        if nctas_total > MAX_CTAS or nctas_total * warps_per_cta > MAX_WARPS:
            raise ArgumentError(f"the grid {tuple(grid)} has {nctas_total} CTAs ({nctas_total * warps_per_cta} "
                                f"warps); the simulator runs at most {MAX_CTAS} CTAs (MAX_CTAS) and {MAX_WARPS} warps "
                                "(MAX_WARPS) per run: shrink the problem or pass ctas=[(x, y), ...] to simulate "
                                "some of them")
        return None
    what = "ctas= is a list of CTA ids (ints or tuples of up to 3 ints), got {}"
    try:
        entries = None if isinstance(ctas, (str, bytes)) else iter(ctas)
    except Exception:   # noqa: BLE001  (not iterable, or an __iter__ of its own that raises)
        entries = None
    if entries is None:
        raise ArgumentError(what.format(shown(ctas, 80)))
    out = set()
    while True:
        try:
            c = next(entries)
        except StopIteration:
            break
        except Exception:   # noqa: BLE001  (an iterator of its own code that raises)
            raise ArgumentError(what.format(shown(ctas, 80))) from None
        t = (c,) if isinstance(c, numbers.Integral) and not isinstance(c, bool) else c
        if not isinstance(t, (tuple, list)) or not 1 <= len(t) <= 3 or \
                any(isinstance(x, bool) or not isinstance(x, numbers.Integral) for x in t):
            raise ArgumentError(f"ctas= entry {shown(c, 60)} is not a CTA id (an int or a tuple of up to 3 ints)")
        t = tuple(int(x) for x in t) + (0,) * (3 - len(t))
        if any(not 0 <= x < g for x, g in zip(t, grid)):
            raise ArgumentError(f"ctas= entry {shown(c)} is outside the grid {tuple(grid)}")
        out.add(t)
        if len(out) > MAX_CTAS or len(out) * warps_per_cta > MAX_WARPS:
            raise ArgumentError(f"ctas= names more than {MAX_CTAS} CTAs (MAX_CTAS) or {MAX_WARPS} warps (MAX_WARPS), "
                                "the most one run simulates")
    if not out:
        raise ArgumentError("ctas= is empty: name at least one CTA id to simulate (or leave it None for all)")
    return out
