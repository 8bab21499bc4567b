"""kernel_args draws arguments sim.run accepts, and refuses what it cannot honour."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tirxpy import T
from tirxpy.errors import TirxTypeError, TirxValueError
from tirxpy.sim import run
from tirxpy.testing import kernel_args

K = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4, 8), "bfloat16"), B: T.Tensor((4, 8), "float32"), I: T.Tensor((6,), "uint8"),
      H: T.Tensor((3,), "float16"), n: T.int32, s: T.float32):
    T.launch(grid=(1,), threads=32)
    B[0, 0] = T.cast(A[0, 0], "float32") + s
''')

ADD1 = T.parse_script('''
@T.prim_func
def add1(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    T.launch(grid=(2,), threads=32)
    i = T.cta_id(0) * 32 + T.thread_id()
    B[i] = A[i] + T.float32(1)
''')


@given(kernel_args(K))
def test_one_argument_per_parameter_of_the_right_shape_and_dtype(args):
    a, b, i, h, n, s = args
    assert a.shape == (4, 8) and a.dtype == np.float32          # bfloat16 as float32 values
    assert b.dtype == np.float32 and i.dtype == np.uint8 and h.dtype == np.float16 and h.shape == (3,)
    assert set(np.unique(a)) <= {x / 2 for x in range(-4, 5)}
    assert i.min() >= 0 and i.max() <= 16
    assert isinstance(n, int) and 0 <= n <= 8 and isinstance(s, float)


@given(kernel_args(K, values=[3.0], scalars={"n": 7, "s": st.just(0.5)}))
def test_values_and_scalars_are_honoured(args):
    a, b, i, h, n, s = args
    assert (a == 3.0).all() and (b == 3.0).all() and n == 7 and s == 0.5


@settings(max_examples=5, deadline=None)
@given(kernel_args(ADD1))
def test_sim_run_accepts_the_arguments(args):
    a, b = args
    run(ADD1, a, b)
    assert np.array_equal(b, a + 1)


def test_bad_inputs_are_typed_errors_with_the_fix_at_the_call():
    with pytest.raises(TirxTypeError, match="takes a kernel"):
        kernel_args("not a kernel")
    with pytest.raises(TirxValueError, match=r"names \['m'\].*scalar parameters are \['n', 's'\]"):
        kernel_args(K, scalars={"m": 1})
    with pytest.raises(TirxValueError, match="is empty"):
        kernel_args(K, values=[])
    with pytest.raises(TirxValueError, match="sequence of numbers"):
        kernel_args(K, values=["x"])


@pytest.mark.parametrize("scalars,match", [
    ({"n": "x"}, r"scalars=\.\.\.\): parameter n \(int32\): .*got str 'x'"),
    ({"n": 1.5}, r"parameter n \(int32\): pass an int, got float 1.5"),
    ({"n": 2 ** 40}, r"1099511627776 is outside int32's range"),
    ({"s": "0.5"}, r"parameter s \(float32\)"),
])
def test_a_fixed_scalar_its_dtype_does_not_hold_is_refused_before_drawing(scalars, match):
    # these were drawn as given, and only sim.run refused them (or a test used a value the kernel cannot take)
    with pytest.raises(TirxValueError, match=match):
        kernel_args(K, scalars=scalars)


def test_a_scalar_strategy_that_draws_a_bad_value_is_named():
    @settings(max_examples=2, deadline=None)
    @given(kernel_args(K, scalars={"n": st.just(0.25)}))
    def drawn(args):
        pass

    with pytest.raises(TirxValueError, match=r"the strategy for n drew a bad value: parameter n \(int32\)"):
        drawn()
