"""Element types on the CPU: numpy storage dtypes, compute dtypes and exact conversions.

Storage keeps the raw bits (bfloat16 and float8 as unsigned integers). Values being computed
are numpy arrays of the *compute* dtype: 16- and 8-bit floats compute in float32 (as codegen
does) holding values already rounded to their type.

    >>> import numpy as np
    >>> bits = to_bits(np.array([1.0, 1.00390625, -2.5], np.float32), "bfloat16")
    >>> bits.tolist(), from_bits(bits, "bfloat16").tolist()
    ([16256, 16256, 49184], [1.0, 1.0, -2.5])
    >>> from_bits(to_bits(np.array([448.0, 500.0, 0.3], np.float32), "float8_e4m3"), "float8_e4m3").tolist()
    [448.0, 448.0, 0.3125]
"""
from __future__ import annotations

import numpy as np

from tirxpy.ir.dtype import DataType

_STORAGE = {
    "bool": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "bfloat16": np.uint16, "float32": np.float32, "float64": np.float64,
    "float8_e4m3": np.uint8, "float8_e5m2": np.uint8,
}
_COMPUTE = dict(_STORAGE, bool=np.bool_, float16=np.float32, bfloat16=np.float32, float8_e4m3=np.float32,
                float8_e5m2=np.float32)


_STORAGE_NP = {n: np.dtype(t) for n, t in _STORAGE.items()}
_COMPUTE_NP = {n: np.dtype(t) for n, t in _COMPUTE.items()}
_NAMES: dict = {}       # id(dt) -> (dt, name): the simulator asks for the same few dtype objects millions of times


def name_of(dt) -> str:
    hit = _NAMES.get(id(dt))
    if hit is not None and hit[0] is dt:    # (the entry keeps dt alive, so its id is not reused)
        return hit[1]
    d = DataType.get(dt)
    if d.is_pointer or d.is_handle:
        n = "uint32" if d.bits == 32 else "uint64"
    else:
        n = d.name
    if len(_NAMES) < 4096:
        _NAMES[id(dt)] = (dt, n)
    return n


def storage_dtype(dt):
    n = name_of(dt)
    st = _STORAGE_NP.get(n)
    if st is None:
        from .errors import UnsupportedError

        raise UnsupportedError(f"the simulator has no storage for dtype {n}")
    return st


def compute_dtype(dt):
    return _COMPUTE_NP[name_of(dt)]


def nbytes(dt) -> int:
    return storage_dtype(dt).itemsize


def _bf16_bits(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, np.float32))
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), r)


def _fp8_table(name):
    d = DataType.get(name)
    e, mbits = d.exp_bits, d.man_bits
    bias = (1 << (e - 1)) - 1
    vals = np.zeros(256, np.float64)
    for b in range(256):
        s, ex, mn = b >> 7, (b >> mbits) & ((1 << e) - 1), b & ((1 << mbits) - 1)
        if ex == 0:
            v = mn / (1 << mbits) * 2.0 ** (1 - bias)
        else:
            v = (1 + mn / (1 << mbits)) * 2.0 ** (ex - bias)
        if name == "float8_e4m3" and ex == 15 and mn == 7:
            v = np.nan
        if name == "float8_e5m2" and ex == 31:
            v = np.inf if mn == 0 else np.nan
        vals[b] = -v if s else v
    return vals


_FP8 = {n: _fp8_table(n) for n in ("float8_e4m3", "float8_e5m2")}


def _fp8_bits(x, name):
    """Round to nearest even, saturating (satfinite) like cvt.rn.satfinite."""
    tab = _FP8[name]
    x = np.asarray(x, np.float64)
    pos = np.where(np.isfinite(tab[:128]), tab[:128], -1.0)
    order = np.argsort(pos)
    sv = pos[order]
    a = np.minimum(np.abs(x), sv[-1])
    i = np.clip(np.searchsorted(sv, a), 1, len(sv) - 1)
    lo, hi = sv[i - 1], sv[i]
    pick_hi = (hi - a < a - lo) | ((hi - a == a - lo) & (order[i] % 2 == 0))
    code = np.where(pick_hi, order[i], order[i - 1]).astype(np.uint8)
    code = np.where(np.signbit(x), code | 0x80, code).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(0x7F), code).astype(np.uint8)


def to_bits(values, dt):
    """Compute-dtype values -> storage array of ``dt``."""
    n = name_of(dt)
    if n == "bfloat16":
        return _bf16_bits(values)
    if n in _FP8:
        return _fp8_bits(values, n)
    if n == "bool":
        return np.asarray(values).astype(bool).astype(np.uint8)
    st = _STORAGE_NP[n]
    v = np.asarray(values)
    if st.kind in "iu" and v.dtype.kind == "f":
        v = np.trunc(np.nan_to_num(v))
    with np.errstate(all="ignore"):
        return v.astype(st)


def from_bits(raw, dt):
    """Storage array of ``dt`` -> compute-dtype values."""
    n = name_of(dt)
    if n == "bfloat16":
        return (np.asarray(raw).astype(np.uint32) << 16).view(np.float32)
    if n in _FP8:
        return _FP8[n][np.asarray(raw).astype(np.uint8)].astype(np.float32)
    if n == "bool":
        return np.asarray(raw) != 0
    if n == "float16":
        raw = np.asarray(raw)
        if raw.dtype == np.uint16 or raw.dtype == np.int16:
            raw = np.ascontiguousarray(raw).view(np.float16)
        return raw.astype(np.float32)
    return np.asarray(raw)


def round_to(values, dt):
    """Values rounded to ``dt`` and returned in its compute dtype (a cast)."""
    n = name_of(dt)
    if n in ("bfloat16", "float16", "float8_e4m3", "float8_e5m2"):
        return from_bits(to_bits(np.asarray(values, np.float32) if n != "float16" else values, dt), dt)
    if n == "bool":
        return np.asarray(values).astype(bool)
    cd = compute_dtype(dt)
    v = np.asarray(values)
    with np.errstate(all="ignore"):
        if cd.kind in "iu" and v.dtype.kind == "f":
            v = np.trunc(np.nan_to_num(v))
            return v.astype(np.int64).astype(cd)
        if cd.kind in "iu" and v.dtype.kind == "b":
            return v.astype(cd)
        return v.astype(cd)
