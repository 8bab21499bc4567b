"""fill / cast / element-wise maps on register tiles: results by interpretation, broadcasting,
legality reasons naming element and owner."""
import numpy as np
import pytest

from tests.primitives.helpers import choices, compile_ok, kernel, reason, rejected
from tests.primitives.interp import bf16_array, run_lowered

L = "TileLayout(S[(32, 4) : (1@laneid, 1@m)])"         # row r in lane r, 4 columns per lane
ROWS = "TileLayout(S[(32, 1) : (1@laneid, 1@m)])"      # one value per row, in that row's lane


def _prog(ops: str, dt="float32"):
    return kernel(f'A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32"), V: T.Tensor((32, 1), "float32"), '
                  f'O: T.Tensor((32, 4), "{dt}")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    b = T.alloc_local((32, 4), "float32", layout={L})
    v = T.alloc_local((32, 1), "float32", layout={ROWS})
    o = T.alloc_local((32, 4), "{dt}", layout={L})
    Tx.warp.copy(a, A[0:32, 0:4])
    Tx.warp.copy(b, B[0:32, 0:4])
    Tx.warp.copy(v, V[0:32, 0:1])
{ops}
    Tx.warp.copy(O[0:32, 0:4], o)""", threads=32)


RNG = np.random.default_rng(3)
A = RNG.uniform(0.5, 2, (32, 4)).astype(np.float32)
B = RNG.uniform(-2, 2, (32, 4)).astype(np.float32)
V = RNG.uniform(0.5, 2, (32, 1)).astype(np.float32)


@pytest.mark.parametrize("op,ref", [
    ("Tx.warp.add(o, a, b)", A + B), ("Tx.warp.sub(o, a, b)", A - B), ("Tx.warp.mul(o, a, v)", A * V),
    ("Tx.warp.div(o, a, T.float32(4))", A / 4), ("Tx.warp.maximum(o, a, b)", np.maximum(A, B)),
    ("Tx.warp.minimum(o, b, T.float32(0))", np.minimum(B, 0)), ("Tx.warp.exp2(o, b)", 2.0 ** B),
    ("Tx.warp.exp(o, b)", np.exp(B)), ("Tx.warp.rsqrt(o, a)", 1 / np.sqrt(A)), ("Tx.warp.relu(o, b)", np.maximum(B, 0)),
    ("Tx.warp.silu(o, b)", B / (1 + np.exp(-B))), ("Tx.warp.neg(o, b)", -B), ("Tx.warp.fma(o, a, b, v)", A * B + V),
    ("Tx.warp.relu_grad(o, a, b)", np.where(B <= 0, 0, A)), ("Tx.warp.binary(o, b, a, fn='relu_grad')", B),
    ("Tx.warp.binary(o, a, b, fn='mul')", A * B), ("Tx.warp.unary(o, a, fn='sqrt')", np.sqrt(A)),
])
def test_maps(op, ref):
    k = _prog("    " + op)
    assert choices(k)[3][0] == "local_map"
    out = run_lowered(k, A=A, B=B, V=V, O=np.zeros((32, 4), np.float32)).result("O")
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_cast_and_bf16_math_in_float32():
    k = _prog("    Tx.warp.mul(o, a, b)", dt="bfloat16")
    out = run_lowered(k, A=A, B=B, V=V, O=np.zeros((32, 4), np.float32)).result("O")
    np.testing.assert_array_equal(out, bf16_array(A * B))
    k = kernel('A: T.Tensor((32, 4), "float32"), O: T.Tensor((32, 4), "bfloat16")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    o = T.alloc_local((32, 4), "bfloat16", layout={L})
    Tx.warp.copy(a, A[0:32, 0:4])
    Tx.warp.cast(o, a)
    Tx.warp.copy(O[0:32, 0:4], o)""", threads=32)
    assert choices(k)[1][0] == "local_cast"
    out = run_lowered(k, A=A, O=np.zeros((32, 4), np.float32)).result("O")
    np.testing.assert_array_equal(out, bf16_array(A))


def test_fill_every_slot_including_replicas():
    k = kernel('O: T.Tensor((32, 4), "float32")', f"""
    o = T.alloc_local((32, 4), "float32", layout={L})
    Tx.warp.fill(o, T.float32(7))
    Tx.warp.copy(O[0:32, 0:4], o)""", threads=32)
    out = run_lowered(k, O=np.zeros((32, 4), np.float32)).result("O")
    assert (out == 7).all()


def test_broadcast_needs_the_same_thread_and_names_owner():
    bad = "TileLayout(S[(32, 1) : (1@laneid, 1@m)] + 1@warpid)"   # the row values live in warp 1
    k = kernel('V: T.Tensor((32, 1), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    v = T.alloc_local((32, 1), "float32", layout={bad})
    Tx.cta.mul(a, a, v)""", threads=64)
    err = rejected(k)
    assert reason(err, "local_map") == ("v: element (0, 0) is owned by (laneid 0, warpid 1), but thread 0 "
                                        "(laneid 0, warpid 0) needs it for element (0, 0) of a")


def test_shape_and_storage_reasons():
    k = kernel('X: T.Tensor((32, 4), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    b = T.alloc_local((4, 32), "float32", layout=TileLayout(S[(4, 32) : (1@m, 1@laneid)]))
    s = T.alloc_shared((32, 4), "float32")
    Tx.warp.add(a, a, b)""", threads=32)
    assert reason(rejected(k), "local_map") == "b (4, 32) does not broadcast to a (32, 4)"
    k = kernel('X: T.Tensor((32, 4), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    s = T.alloc_shared((32, 4), "float32")
    Tx.warp.add(a, a, s)""", threads=32)
    assert reason(rejected(k), "local_map") == ("s is in 'shared'; element-wise maps read register tiles "
                                                "(copy it to registers first)")
    k = kernel('X: T.Tensor((32, 4), "float32")', """
    s = T.alloc_shared((32, 4), "float32")
    Tx.warp.exp(s, s)""", threads=32)
    assert reason(rejected(k), "local_map") == "dst s is in 'shared'; element-wise maps write register tiles ('local')"
    k = kernel('X: T.Tensor((32, 4), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    Tx.warp.unary(a, a, fn="cube")""", threads=32)
    assert "needs fn= one of" in reason(rejected(k), "local_map")


def test_compiles_sm80():
    compile_ok(_prog("    Tx.warp.fma(o, a, b, v)\n    Tx.warp.silu(o, o)"), "sm_80")


def test_unknown_function_names_the_choices():
    from tirxpy.ir import Var
    from tirxpy.primitives.elementwise.local import apply_fn

    with pytest.raises(ValueError, match="unknown element-wise function 'frob'; use one of exp, exp2"):
        apply_fn("frob", [Var("x", "float32")])
