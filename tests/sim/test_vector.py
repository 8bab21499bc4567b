"""Simulator models of the helper instructions tile primitives emit (tirxpy/sim/vector.py)."""
import numpy as np

import tirxpy.primitives.elementwise.local  # noqa: F401 - registers ex2_approx_f32 / rcp_approx_f32
from tirxpy import T
from tirxpy.sim import run


def test_sfu_approximations_are_float32_with_flush_to_zero():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "float32"), E: T.Tensor((32,), "float32"), Rc: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    t = T.lane_id()
    E[t] = T.ptx.ex2_approx_f32(A[t])
    Rc[t] = T.ptx.rcp_approx_f32(A[t])
''')
    tiny = np.finfo(np.float32).tiny
    a = np.random.default_rng().uniform(-20, 20, 32).astype(np.float32)
    a[:6] = [0.0, -0.0, tiny / 4, -130.0, 200.0, -tiny / 8]  # subnormal inputs, underflow, overflow
    e, r = np.full(32, np.nan, np.float32), np.full(32, np.nan, np.float32)
    run(k, a, e, r)
    ftz = np.where(np.abs(a) < tiny, np.copysign(0.0, a), a).astype(np.float64)  # flushed, sign kept
    want_e = np.exp2(ftz)
    want_e = np.where(want_e < tiny, 0.0, want_e)            # -130: a subnormal result flushes to 0
    with np.errstate(over="ignore"):  # 2**200 is inf in float32, as the hardware gives
        want_e32 = want_e.astype(np.float32)
    np.testing.assert_allclose(e, want_e32, rtol=2 ** -23)
    assert np.isinf(e[4]) and e[3] == 0 and e[2] == 1 and e[5] == 1
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(r, (1 / ftz).astype(np.float32), rtol=2 ** -23)
    assert np.isposinf(r[0]) and np.isneginf(r[1]) and np.isposinf(r[2]) and np.isneginf(r[5])  # 1/(+-0) after FTZ
