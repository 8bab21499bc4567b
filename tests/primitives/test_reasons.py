"""Error paths not covered next to their implementation: each reason, word for word."""
import pytest

from tests.primitives.helpers import kernel, reason, rejected
from tirxpy.primitives import DispatchError, lower_calls, register_impl, unregister_impl

L = "TileLayout(S[(32, 8) : (1@laneid, 1@m)])"


def _k(body, params='X: T.Tensor((32, 8), "float32")', threads=32, verify=True):
    return kernel(params, body, threads=threads, verify=verify)


def test_register_view_needs_static_starts():
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    i = T.cta_id(0)
    Tx.warp.copy(x[i:i + 1, 0:8], X[0:1, 0:8])""")
    err = rejected(k)
    assert reason(err, "reg_mem_scalar") == "x: a register view needs static starts (register slots are compile-time)"


def test_scalar_where_a_tensor_is_needed():
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    Tx.warp.cast(x, T.float32(1))""")
    assert reason(rejected(k), "local_cast") == "cast(dst, src) takes two tensors"
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    y = T.alloc_local((32, 8), "float32", layout={L})
    Tx.warp.fill(x, y)""")
    err = rejected(k)
    assert reason(err, "local_fill") == "fill(dst, value) takes a scalar value"
    assert reason(err, "memory_fill") == "fill(dst, value) takes a tensor and a scalar value"


def test_cast_shape_and_reduce_op_axis():
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    y = T.alloc_local((8, 32), "bfloat16", layout=TileLayout(S[(8, 32) : (1@m, 1@laneid)]))
    Tx.warp.cast(y, x)""", verify=False)  # the verifier rejects it first; the predicate still says why
    assert reason(rejected(k), "local_cast") == "y (8, 32) and x (32, 8) differ in shape"
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    s = T.alloc_local((32,), "float32", layout=TileLayout(S[32 : 1@laneid]))
    Tx.warp.reduce(s, x, op="prod", axis=1)""")
    assert reason(rejected(k), "cta_smem") == "reduce op='prod'; supported: ['max', 'min', 'sum']"
    k = _k(f"""
    x = T.alloc_local((32, 8), "float32", layout={L})
    s = T.alloc_local((32,), "float32", layout=TileLayout(S[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=3)""")
    assert reason(rejected(k), "warp_shuffle") == "axis=3 is not a dimension of x (32, 8)"


def test_sixteen_bit_reduce_is_widened_but_64_bit_is_refused():
    k = _k("""
    x = T.alloc_local((32, 2), "float64", layout=TileLayout(S[(32, 2) : (1@laneid, 1@m)]))
    s = T.alloc_local((2,), "float64", layout=TileLayout(S[2 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=0)""")
    assert reason(rejected(k), "warp_shuffle") == ("warp shuffles move 32-bit values; x is float64 (cast it to "
                                                   "float32 or int32 first)")


def test_implementation_bug_is_reported_at_the_line():
    @register_impl("tdemo_crash", "any", variant="crashy")
    def crashy(ctx):
        return {}["missing"]
    try:
        with pytest.raises(DispatchError, match=r"implementation tdemo_crash/crashy failed internally: KeyError"):
            lower_calls(_k("    Tx.tdemo_crash(X)"), "sm_80")
    finally:
        unregister_impl("tdemo_crash", "crashy")


def test_unknown_arch():
    from tirxpy.intrinsics import TargetError
    with pytest.raises(TargetError, match="unknown target 'sm90'"):
        lower_calls(_k("    Tx.warp.fill(X, T.float32(0))"), "sm90")
