"""Hypothesis strategy for the arguments of a kernel: arrays matching its tensor parameters and
numbers for its scalar parameters, ready for :func:`tirxpy.sim.run`.

``kernel_args(kernel, values=None, scalars=None)`` draws a list with one entry per parameter, in
order. A tensor parameter gets a numpy array of its shape: float tensors take values from
``values`` (default: multiples of 0.5 in [-2, 2], exact in every float format down to fp4, so a
float64 reference agrees exactly with any input conversion), integer tensors small integers in
their dtype's range, bool tensors 0 / 1. bfloat16 and the 8 / 6 / 4-bit floats come as float32
values (what ``sim.run`` accepts for them). A scalar parameter gets ``scalars[name]`` (a value or a
strategy), or by default an int in 0..8 (floats: a value from ``values``); a value its dtype does not
hold (``"x"``, ``1.5`` or ``2**40`` for an int32) raises ``TirxValueError``, as ``sim.run`` would.

    >>> from tirxpy import T
    >>> from tirxpy.testing import kernel_args
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((4, 8), "bfloat16"), n: T.int32):
    ...     T.launch(grid=(1,), threads=32)
    ...     A[0, 0] = T.cast(n, "bfloat16")
    ... ''')
    >>> from hypothesis import given
    >>> @given(kernel_args(k, scalars={"n": 3}))
    ... def shaped(args):
    ...     a, n = args
    ...     assert a.shape == (4, 8) and str(a.dtype) == "float32" and n == 3
    >>> shaped()
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tirxpy.errors import TirxTypeError, TirxValueError, shown

_DEFAULT_VALUES = tuple(x / 2 for x in range(-4, 5))
_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "bool": np.bool_}


def _params(kernel):
    try:
        params = getattr(kernel, "params", None) if hasattr(kernel, "launch") else None
    except Exception:   # noqa: BLE001  (a __getattr__ of its own that raises: no kernel)
        params = None
    if params is None:
        raise TirxTypeError(f"kernel_args takes a kernel (a @T.prim_func or T.parse_script result), got "
                            f"{type(kernel).__name__}")
    return params


def _np_dtype(dt):
    if dt.name in _NUMPY:
        return _NUMPY[dt.name]
    if dt.is_float:
        return np.float32
    return np.dtype(dt.name)


def _int_range(dt):
    if dt.is_bool:
        return 0, 1
    if dt.is_uint:
        return 0, min(16, (1 << dt.bits) - 1)
    return max(-8, -(1 << (dt.bits - 1))), min(8, (1 << (dt.bits - 1)) - 1)


def _array(rng, shape, dt, values):
    npdt = _np_dtype(dt)
    if dt.is_float:
        return rng.choice(np.asarray(values, dtype=np.float64), size=shape).astype(npdt)
    lo, hi = _int_range(dt)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(npdt)


def _check_values(values):
    if values is None:
        return _DEFAULT_VALUES
    try:
        vals = tuple(float(v) for v in values)
    except Exception:   # noqa: BLE001  (not numbers, or a value whose own __iter__ / __float__ raises)
        raise TirxValueError(f"kernel_args(values=...) takes a sequence of numbers, got {shown(values)}") from None
    if not vals:
        raise TirxValueError("kernel_args(values=...) is empty; give at least one value")
    return vals


def kernel_args(kernel, values=None, scalars=None):
    """A strategy for the list of arguments of ``sim.run(kernel, *args)`` (see the module docstring).
    A bad ``kernel``, ``values`` or ``scalars`` raises here, before anything is drawn."""
    from tirxpy.ir.buffer import Buffer

    params = _params(kernel)
    vals = _check_values(values)
    if scalars is not None and not isinstance(scalars, dict):
        raise TirxTypeError(f"kernel_args(scalars=...) takes a dict of scalar parameter names to values or "
                            f"strategies, got {shown(scalars, 60)}")
    scalars = dict(scalars or {})
    names = {p.name for p in params if not isinstance(p, Buffer)}
    extra = sorted(set(scalars) - names)
    if extra:
        raise TirxValueError(f"kernel_args(scalars=...) names {extra}, which are not scalar parameters of "
                             f"{kernel.name}; its scalar parameters are {sorted(names) or 'none'}")
    for p in params:
        v = scalars.get(p.name)
        if not isinstance(p, Buffer) and v is not None and not isinstance(v, st.SearchStrategy):
            scalars[p.name] = _scalar(p, v, "")
    return _draw_args(tuple(params), vals, scalars)


def _scalar(p, v, how):
    """``v`` as the value of scalar parameter ``p`` (the rules of :func:`tirxpy.sim.args.check_scalar`), or
    TirxValueError naming ``scalars=``: ``{"n": "x"}`` for an int32 ``n`` is refused before anything is drawn."""
    from tirxpy.sim.args import ArgumentError, check_scalar

    try:
        return check_scalar(p, v)
    except ArgumentError as e:
        raise TirxValueError(f"kernel_args(scalars=...){how}: {e}") from None


@st.composite
def _draw_args(draw, params, vals, scalars):
    from tirxpy.ir.buffer import Buffer

    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    out = []
    for p in params:
        if isinstance(p, Buffer):
            out.append(_array(rng, tuple(p.shape), p.dtype, vals))
            continue
        given = scalars.get(p.name)
        if isinstance(given, st.SearchStrategy):
            out.append(_scalar(p, draw(given), f": the strategy for {p.name} drew a bad value"))
        elif given is not None:
            out.append(given)
        elif p.dtype.is_float:
            out.append(draw(st.sampled_from(vals)))
        elif p.dtype.is_bool:
            out.append(draw(st.booleans()))
        else:
            out.append(draw(st.integers(0, 8)))
    return out
