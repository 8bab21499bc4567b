"""mask on register tiles: column bound and diagonal (causal) bound on a WGMMA accumulator
fragment, device-valued bounds, results by simulation; rejection reasons."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.primitives.helpers import choices, kernel, reason, rejected
from tests.primitives.interp import run_lowered

ACC = "wgmma_accumulator(32)"


def _prog(call, params=""):
    return kernel('A: T.Tensor((64, 32), "float32"), O: T.Tensor((64, 32), "float32")' + params, f"""
    acc = T.alloc_local((64, 32), "float32", layout={ACC})
    Tx.wg.copy(acc, A[0:64, 0:32])
    {call}
    Tx.wg.copy(O[0:64, 0:32], acc)""", threads=128)


A = np.random.default_rng(7).uniform(-3, 3, (64, 32)).astype(np.float32)
R, C = np.meshgrid(np.arange(64), np.arange(32), indexing="ij")


def _run(k, **kw):
    return run_lowered(k, A=A, O=np.full((64, 32), np.nan, np.float32), **kw).result("O")


@pytest.mark.parametrize("cols,diag", [(19, None), (None, -5), (27, 3), (0, None), (32, None)])
def test_mask_bounds(cols, diag):
    extra = (f", cols={cols}" if cols is not None else "") + (f", diag={diag}" if diag is not None else "")
    k = _prog(f"Tx.wg.mask(acc, acc, T.float32(-1e30){extra})".replace("-1e30", "float('-inf')"))
    assert choices(k)[1][0] == "local_mask"
    keep = np.ones_like(A, bool)
    if cols is not None:
        keep &= C < cols
    if diag is not None:
        keep &= C <= R + diag
    np.testing.assert_array_equal(_run(k), np.where(keep, A, -np.inf))


def test_mask_device_bounds():
    k = _prog("Tx.wg.mask(acc, acc, T.float32(0), cols=n - 3, diag=d)", ", n: T.int32, d: T.int32")
    keep = (C < 20) & (C <= R - 40)
    np.testing.assert_array_equal(_run(k, n=23, d=-40), np.where(keep, A, 0))


def test_mask_on_a_view_counts_coordinates_from_the_view():
    """A view of the accumulator (rows 16.., columns 8..): each thread's part of the coordinates
    carries the view's offsets, and the bounds apply to coordinates within the view."""
    k = _prog("Tx.wg.mask(acc[16:48, 8:24], acc[16:48, 8:24], T.float32(0), cols=9, diag=-3)")
    r, c = np.meshgrid(np.arange(32), np.arange(16), indexing="ij")
    want = A.copy()
    want[16:48, 8:24] = np.where((c < 9) & (c <= r - 3), A[16:48, 8:24], 0)
    np.testing.assert_array_equal(_run(k), want)


_KERNELS = {}


def _device_kernel(which, dtype):
    """One kernel per (bounds given, bound dtype), built once: the bounds are kernel parameters."""
    if (which, dtype) not in _KERNELS:
        args = {"cols": "cols=n", "diag": "diag=d", "both": "cols=n, diag=d"}[which]
        _KERNELS[which, dtype] = _prog(f"Tx.wg.mask(acc, acc, T.float32(0), {args})", f", n: T.{dtype}, d: T.{dtype}")
    return _KERNELS[which, dtype]


@settings(max_examples=30, deadline=None)
@given(which=st.sampled_from(["cols", "diag", "both"]), dtype=st.sampled_from(["int32", "int64"]), data=st.data())
def test_mask_matches_exact_integer_bounds(which, dtype, data):
    """Any run-time bound, up to the extremes of its type, keeps exactly the elements with
    ``c < cols`` and ``c <= r + diag`` in exact integer arithmetic (the lowering's per-row limits
    clamp the bounds first, so they cannot overflow)."""
    bits = 31 if dtype == "int32" else 63
    near = st.integers(-100, 100)
    value = st.one_of(near, st.integers(-2 ** bits, 2 ** bits - 1), st.sampled_from([-2 ** bits, 2 ** bits - 1]))
    n, d = data.draw(value, "cols"), data.draw(value, "diag")
    keep = np.ones_like(A, bool)
    if which in ("cols", "both"):
        keep &= C < n
    if which in ("diag", "both"):
        keep &= C - R <= d              # (not R + d: that overflows int64 in numpy at the extremes)
    np.testing.assert_array_equal(_run(_device_kernel(which, dtype), n=n, d=d), np.where(keep, A, 0))


def test_mask_rejections():
    k = _prog("Tx.wg.mask(acc, acc, T.float32(0))")
    assert "mask needs cols= or diag=" in reason(rejected(k), "local_mask")
    k = kernel('A: T.Tensor((64, 32), "float32")', """
    acc = T.alloc_local((64, 32), "float32", layout=wgmma_accumulator(32))
    Tx.wg.mask(acc, A[0:64, 0:32], T.float32(0), cols=3)""", threads=128)
    assert "this variant masks register tiles" in reason(rejected(k), "local_mask")
