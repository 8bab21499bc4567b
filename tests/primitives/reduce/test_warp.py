"""sum / max / min over an axis: in-thread folds, butterflies over exactly the lane bits of the
axis (replicas not counted twice), CTA reductions through shared memory; results by interpretation."""
import numpy as np
import pytest

from tests.primitives.helpers import calls, choices, compile_ok, intrinsics, kernel, reason, rejected
from tests.primitives.interp import run_lowered

ACC = "wgmma_accumulator(16)"


def _acc_rows(op, dst_shape="(64,)", dst_layout=None, accum=False):
    # rows of the wgmma accumulator: row = 16*warp + 8*h + lane/4 -> the row vector lives in the 4 lanes of a quad
    dl = dst_layout or "TileLayout(S[(4, 2, 8) : (1@wid_in_wg, 1@m, 4@laneid)] + R[4 : 1@laneid])"
    extra = ", accum=True" if accum else ""
    return kernel('A: T.Tensor((64, 16), "float32"), O: T.Tensor(' + dst_shape + ', "float32")', f"""
    acc = T.alloc_local((64, 16), "float32", layout={ACC})
    r = T.alloc_local({dst_shape}, "float32", layout={dl})
    Tx.wg.copy(acc, A[0:64, 0:16])
    Tx.wg.fill(r, T.float32(1.0))
    Tx.wg.{op}(r, acc, axis=1{extra})
    Tx.wg.copy(O[0:64], r)""", threads=128)


A = np.random.default_rng(4).uniform(-3, 3, (64, 16)).astype(np.float32)


@pytest.mark.parametrize("op,ref", [("sum", A.sum(1)), ("max", A.max(1)), ("min", A.min(1))])
def test_row_reductions_on_wgmma_accumulator(op, ref):
    k = _acc_rows(op)
    ch = choices(k)
    assert ch[2][0] == "warp_shuffle"
    assert intrinsics(ch[2][1]) == [f"shfl_sync_bfly_f32"] * 4  # 2 rows x lane bits {1, 2}
    masks = [a.args[1].value for a in calls(ch[2][1])]
    assert sorted(set(masks)) == [1, 2]
    out = run_lowered(k, A=A, O=np.zeros(64, np.float32)).result("O")
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_accumulate_and_kept_dim():
    k = _acc_rows("sum", accum=True)
    out = run_lowered(k, A=A, O=np.zeros(64, np.float32)).result("O")
    np.testing.assert_allclose(out, A.sum(1) + 1, rtol=1e-5, atol=1e-5)


def test_replicas_are_not_summed_twice():
    # every element held by two lanes (replica on lane bit 4): only lane bits 0..3 are reduced
    k = kernel('X: T.Tensor((16,), "float32"), O: T.Tensor((1,), "float32")', """
    x = T.alloc_local((16,), "float32", layout=TileLayout(S[16 : 1@laneid] + R[2 : 16@laneid]))
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.copy(x, X[0:16])
    Tx.warp.sum(s, x, axis=0)
    Tx.warp.copy(O[0:1], s)""", threads=32)
    ch = choices(k)
    assert sorted(c.args[1].value for c in calls(ch[1][1])) == [1, 2, 4, 8]
    x = np.arange(16, dtype=np.float32)
    assert run_lowered(k, X=x, O=np.zeros(1, np.float32)).result("O")[0] == x.sum()


def test_cta_reduction_through_shared_memory():
    k = kernel('X: T.Tensor((1024,), "float32"), O: T.Tensor((1,), "float32")', """
    x = T.alloc_local((1024,), "float32", layout=TileLayout(S[(4, 32, 8) : (1@warpid, 1@laneid, 1@m)]))
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[(4, 32) : (1@warpid, 1@laneid)]))
    Tx.cta.copy(x, X[0:1024])
    Tx.cta.max(s, x, axis=0)
    Tx.cta.copy(O[0:1], s)""", threads=128)
    ch = choices(k)
    assert ch[1][0] == "cta_smem"
    assert intrinsics(ch[1][1]).count("syncthreads") == 2
    x = np.random.default_rng(5).standard_normal(1024).astype(np.float32)
    assert run_lowered(k, X=x, O=np.zeros(1, np.float32)).result("O")[0] == x.max()


def test_reasons():
    base = 'X: T.Tensor((1024,), "float32")'
    spread = "TileLayout(S[(4, 32, 8) : (1@warpid, 1@laneid, 1@m)])"
    one = "TileLayout(S[1 : 1@m] + R[(4, 32) : (1@warpid, 1@laneid)])"
    k = kernel(base, f"""
    x = T.alloc_local((1024,), "float32", layout={spread})
    s = T.alloc_local((1,), "float32", layout={one})
    if T.warp_id() < 2:
        Tx.warp.sum(s, x, axis=0)""", threads=128)
    err = rejected(k)
    assert reason(err, "warp_shuffle").startswith("x: axis 0 is spread over warpid; combining warps needs shared memory")
    assert reason(err, "cta_smem") == ("a cross-warp reduction synchronizes the CTA; the call runs on warps 0..1 "
                                       "(call it where every thread of the CTA runs, e.g. Tx.cta.sum)")
    k = kernel(base, """
    x = T.alloc_local((12, 8), "float32", layout=TileLayout(S[(12, 8) : (1@laneid, 1@m)]))
    s = T.alloc_local((8,), "float32", layout=TileLayout(S[8 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=0)""", threads=32)
    assert reason(rejected(k), "warp_shuffle") == "x: axis 0 spans 12 lanes; butterfly shuffles need a power of two"
    k = kernel(base, """
    x = T.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8) : (1@laneid, 1@m)]))
    s = T.alloc_local((5,), "float32", layout=TileLayout(S[5 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=0)""", threads=32)
    assert reason(rejected(k), "warp_shuffle") == "s has shape (5,); reducing x (32, 8) over axis 0 gives (8,)"
    k = kernel(base, """
    x = T.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8) : (1@laneid, 1@m)]))
    s = T.alloc_local((32,), "float32", layout=TileLayout(S[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=1)
    Tx.warp.sum(s, x, axis=0)""", threads=32)
    assert "(32, 8) over axis 0 gives (8,)" in reason(rejected(k), "warp_shuffle")
    k = kernel(base, """
    x = T.alloc_local((64,), "float32", layout=TileLayout(S[(32, 2) : (1@laneid, 1@m)]))
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.sum(s, x, axis=0)""", threads=100)
    assert reason(rejected(k), "warp_shuffle") == (
        "x: the launch's 100 threads end 4 lanes into warp 3, which has no lanes 4..31; warp shuffles need whole "
        "warps (launch a multiple of 32 threads, or keep the call off warp 3)")


def test_compiles():
    compile_ok(_acc_rows("max"), "sm_90a")


def test_cta_reduction_of_per_warpgroup_tiles_uses_separate_scratch():
    # a (wid_in_wg, laneid) tile is one instance per warpgroup: two rows reduced at once
    k = kernel('X: T.Tensor((2, 256), "float32"), O: T.Tensor((2,), "float32")', """
    x = T.alloc_local((256,), "float32", layout=TileLayout(S[(4, 32, 2) : (1@wid_in_wg, 1@laneid, 1@m)]))
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[(4, 32) : (1@wid_in_wg, 1@laneid)]))
    wg = T.warpgroup_id()
    Tx.cta.copy(x, X[wg, :])
    Tx.cta.sum(s, x, axis=0)
    Tx.cta.copy(O[wg:wg + 1], s)""", threads=256)
    assert choices(k)[1][0] == "cta_smem"
    x = np.random.default_rng(10).integers(-50, 50, (2, 256)).astype(np.float32)
    out = run_lowered(k, X=x, O=np.zeros(2, np.float32)).result("O")
    np.testing.assert_array_equal(out, x.sum(1))
