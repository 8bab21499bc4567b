"""sim.run checks its arguments before simulating (tirxpy/sim/args.py): each bad call raises
ArgumentError (a SimError and a TirxError) whose message names the parameter and the fix; good
calls near the edges still run and give the right values."""
import numpy as np
import pytest
import torch

from tirxpy import T
from tirxpy.errors import TirxError
from tirxpy.sim import SimError, run
from tirxpy.sim.args import MAX_CTAS, ArgumentError

ADD = T.parse_script('''
@T.prim_func
def add(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), n: T.int32):
    T.launch(grid=(2,), threads=32)
    i = T.cta_id(0) * 32 + T.thread_id()
    B[i] = A[i] + T.cast(n, "float32")
''')


def _raises(fn, *words):
    with pytest.raises(ArgumentError) as ei:
        fn()
    assert isinstance(ei.value, (SimError, TirxError, ValueError))
    msg = str(ei.value)
    for w in words:
        assert w in msg, msg
    return msg


def _ab():
    return np.arange(64, dtype=np.float32), np.zeros(64, np.float32)


def test_good_call_runs():
    a, b = _ab()
    run(ADD, a, b, 3)
    assert (b == a + 3).all()


def test_argument_count():
    a, b = _ab()
    _raises(lambda: run(ADD, a, b), "takes 3 arguments", "A, B, n", "got 2")


def test_dtype_mismatch_numpy_and_torch():
    a, b = _ab()
    _raises(lambda: run(ADD, a.astype(np.float64), b, 1), "parameter A", "float64", "float32")
    _raises(lambda: run(ADD, torch.zeros(64, dtype=torch.int32), torch.zeros(64), 1), "parameter A", "int32")


def test_complex_and_non_array_tensors():
    a, b = _ab()
    _raises(lambda: run(ADD, a.astype(np.complex64), b, 1), "parameter A", "complex64")
    _raises(lambda: run(ADD, torch.zeros(64, dtype=torch.complex64), torch.zeros(64), 1), "parameter A", "complex")
    _raises(lambda: run(ADD, list(a), b, 1), "parameter A", "numpy array", "list")
    _raises(lambda: run(ADD, 3.0, b, 1), "parameter A", "float")


def test_shape_mismatch():
    a, b = _ab()
    _raises(lambda: run(ADD, a.reshape(8, 8), b, 1), "parameter A", "(8, 8)", "(64,)")


def test_tensor_requiring_grad():
    a = torch.zeros(64, requires_grad=True)
    _raises(lambda: run(ADD, a, torch.zeros(64), 1), "parameter A", "requires grad", "detach")


def test_scalars_out_of_range_non_integer_or_arrays():
    a, b = _ab()
    _raises(lambda: run(ADD, a, b, 2 ** 31), "parameter n", "outside int32", "2147483647")
    _raises(lambda: run(ADD, a, b, 1.5), "parameter n", "int")
    _raises(lambda: run(ADD, a, b, np.array([1])), "parameter n", "scalar")
    _raises(lambda: run(ADD, a, b, "3"), "parameter n", "str")
    _raises(lambda: run(ADD, a, b, True), "parameter n", "bool")


def test_scalar_edges_run_exactly():
    a, b = _ab()
    run(ADD, a, b, -(2 ** 31))
    assert (b == a + np.float32(-(2 ** 31))).all()
    run(ADD, a, b, np.int64(7))
    assert (b == a + 7).all()


def test_float_scalar_overflow():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "float32"), x: T.float32):
    T.launch(grid=(1,), threads=32)
    A[T.thread_id()] = x
''')
    a = np.zeros(32, np.float32)
    _raises(lambda: run(k, a, 1e300), "parameter x", "overflows float32")
    run(k, a, float("inf"))
    assert np.isinf(a).all()


def test_options():
    a, b = _ab()
    _raises(lambda: run(ADD, a, b, 1, seed=-1), "seed=")
    _raises(lambda: run(ADD, a, b, 1, check="yes"), "check=")
    _raises(lambda: run(ADD, a, b, 1, max_steps=0), "max_steps=")
    _raises(lambda: run(object(), a), "kernel")


def test_ctas_selection():
    a, b = _ab()
    _raises(lambda: run(ADD, a, b, 1, ctas=[(5,)]), "ctas=", "outside the grid")
    _raises(lambda: run(ADD, a, b, 1, ctas=[]), "ctas=", "empty")
    _raises(lambda: run(ADD, a, b, 1, ctas="0"), "ctas=")
    _raises(lambda: run(ADD, a, b, 1, ctas=[(0.5,)]), "ctas=", "CTA id")
    run(ADD, a, b, 1, ctas=[1])
    assert (b[32:] == a[32:] + 1).all() and (b[:32] == 0).all()


def _grid_kernel(grid, threads=32, cluster=None, shared=None, local=None):
    """A kernel with the given launch, unverified (the parser's verifier refuses static launches over the
    limits: the simulator checks kernels built or parsed without it too)."""
    cl = f", cluster={cluster}" if cluster else ""
    sh = f"    s = T.alloc_shared(({shared},), \"uint8\")\n    t = T.alloc_shared(({shared},), \"uint8\")\n" \
        if shared else ""
    lo = f"    r = T.alloc_local(({local},), \"uint8\")\n" if local else ""
    return T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((1,), "int32"), gx: T.int32, gy: T.int32):
    T.launch(grid={grid}, threads={threads}{cl})
{sh}{lo}    A[0] = 1
''', verify=False)


def test_huge_grids_are_refused_naming_the_limit():
    a = np.zeros(1, np.int32)
    k = _grid_kernel("(gx, gy)")
    msg = _raises(lambda: run(k, a, 1 << 20, 1), "1048576 CTAs", str(MAX_CTAS), "ctas=")
    assert "MAX_CTAS" in msg
    _raises(lambda: run(k, a, 1, 70000), "70000", "65535")
    _raises(lambda: run(k, a, 0, 1), "extent 0", "1..")
    run(k, a, 1 << 20, 1, ctas=[(5,)])      # a few CTAs of a huge grid
    assert a[0] == 1


def test_launch_shape_limits():
    a = np.zeros(1, np.int32)
    _raises(lambda: run(_grid_kernel("(2,)", threads=2048), a, 1, 1), "2048 threads", "1..1024")
    _raises(lambda: run(_grid_kernel("(32,)", cluster=(32,)), a, 1, 1), "cluster", "16")
    _raises(lambda: run(_grid_kernel("(gx,)", cluster=(2,)), a, 3, 1), "not a multiple of the cluster")
    _raises(lambda: run(_grid_kernel("(1,)", shared=150000), a, 1, 1), "300", "shared memory", "232448")
    _raises(lambda: run(_grid_kernel("(1,)", local=1 << 20), a, 1, 1), "register tiles", "65536")


def test_bfloat16_bits_values_and_torch_round_trip():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "bfloat16"), B: T.Tensor((32,), "bfloat16")):
    T.launch(grid=(1,), threads=32)
    B[T.thread_id()] = A[T.thread_id()] * T.bfloat16(2)
''')
    x = torch.randn(32).bfloat16()
    y = torch.zeros(32).bfloat16()
    run(k, x, y)
    assert torch.equal(y, x * 2)
    yv = np.zeros(32, np.float32)
    run(k, x.float().numpy(), yv)
    assert (yv == (x * 2).float().numpy()).all()


def test_launch_limits_are_the_targets():
    """The cluster and shared-memory limits are those of the simulated target (tirxpy.target): sm_120a has
    portable clusters of 8 and 99 KiB of shared memory per CTA, sm_90a clusters of 16 and 227 KiB."""
    a = np.zeros(1, np.int32)
    run(_grid_kernel("(16,)", cluster=(16,)), a, 1, 1)
    _raises(lambda: run(_grid_kernel("(16,)", cluster=(16,)), a, 1, 1, arch="sm_120a"), "at most 8 CTAs on sm_120a")
    run(_grid_kernel("(1,)", shared=60000), a, 1, 1)
    _raises(lambda: run(_grid_kernel("(1,)", shared=60000), a, 1, 1, arch="sm_120a"), "120032 bytes of shared memory",
            "the limit is 101376 on sm_120a")
