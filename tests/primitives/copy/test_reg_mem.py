"""copy registers <-> global / shared: chosen where the layouts allow vectors, scalar otherwise,
rejected with reasons; results checked by interpreting the lowered IR; compiled through NVRTC."""
import numpy as np
import pytest

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected
from tests.primitives.interp import bf16_array, run_lowered
from tirxpy.primitives import lower_calls

ROWL = "TileLayout(S[(2, 32, 8) : (8@m, 1@laneid, 1@m)])"


def _row_copy(n=100, d=512, dt="bfloat16", layout=ROWL, threads=128):
    return kernel(f'X: T.Tensor(({n}, {d}), "{dt}"), Y: T.Tensor(({n}, {d}), "{dt}")', f"""
    row = T.cta_id(0) * {threads // 32} + T.warp_id()
    x = T.alloc_local(({d},), "{dt}", layout={layout})
    Tx.warp.copy(x, X[row, :])
    Tx.warp.copy(Y[row, :], x)""", threads=threads, grid=-(-n // (threads // 32)))


def test_bf16_rows_use_16_byte_vectors_and_roundtrip():
    k = _row_copy()
    (v1, s1), (v2, s2) = choices(k)
    assert (v1, v2) == ("reg_mem_vec", "reg_mem_vec")
    assert intrinsics(s1) == ["vld_global_v4_b32"] * 2 and intrinsics(s2) == ["vst_global_v4_b32"] * 2
    x = bf16_array(np.random.default_rng(1).standard_normal((100, 512)))
    m = run_lowered(k, X=x, Y=np.full((100, 512), np.nan, np.float32))
    np.testing.assert_array_equal(m.result("Y"), x)  # ragged last CTA: rows 100..103 are guarded


@pytest.mark.parametrize("extra,vector", [(0, True), (4, True), (3, False)])
def test_a_named_column_start_keeps_its_alignment(extra, vector):
    """``c0 = T.cta_id(0) * 64 + extra`` used as a slice start: the copies see through the name to the expression
    (:func:`tirxpy.ir.analysis.let_values`), so they keep 16-byte vectors exactly where ``c0`` is a multiple of 4
    floats; the result is the same either way."""
    k = kernel('X: T.Tensor((32, 140), "float32"), Y: T.Tensor((32, 140), "float32")', f"""
    c0 = T.cta_id(0) * 64 + {extra}
    x = T.alloc_local((32, 64), "float32", layout=TileLayout(S[(32, 16, 4) : (4@m, 1@laneid, 1@m)]))
    Tx.warp.copy(x, X[0:32, c0:c0 + 64])
    Tx.warp.copy(Y[0:32, c0:c0 + 64], x)""", threads=32, grid=2)
    (_, s1), (_, s2) = choices(k)
    assert set(intrinsics(s1)) == ({"vld_global_v4_b32"} if vector else set()), intrinsics(s1)
    assert set(intrinsics(s2)) == ({"vst_global_v4_b32"} if vector else set()), intrinsics(s2)
    x = np.random.default_rng(2).standard_normal((32, 140)).astype(np.float32)
    y = np.full((32, 140), np.nan, np.float32)
    m = run_lowered(k, X=x, Y=y)
    got, want = m.result("Y"), y.copy()
    want[:, extra:extra + 128] = x[:, extra:extra + 128]
    np.testing.assert_array_equal(got, want)
    if not vector:      # the rejection names the view's start and what the name stands for
        err = rejected(kernel('X: T.Tensor((32, 140), "float32")', f"""
    c0 = T.cta_id(0) * 64 + {extra}
    x = T.alloc_local((32, 64), "float32", layout=TileLayout(S[(32, 16, 4) : (4@m, 1@laneid, 1@m)]))
    Tx.warp.copy(x, X[0:32, c0:c0 + 64], dispatch="reg_mem_vec")""", threads=32, grid=2))
        why = reason(err, "reg_mem_vec")
        assert "X's view allows 1 element(s) of float32" in why and f"c0 = T.cta_id(0) * 64 + {extra}" in why, why


def test_edge_guard_only_for_symbolic_starts():
    k = kernel('X: T.Tensor((4, 256), "float32")', """
    x = T.alloc_local((256,), "float32", layout=TileLayout(S[(2, 32, 4) : (4@m, 1@laneid, 1@m)]))
    Tx.warp.copy(x, X[1, :])""", threads=32)
    (_, s), = choices(k)
    assert "if" not in str(s).split("\n")[0] and "<" not in str(s)
    k2 = _row_copy(n=64)
    (_, s2), _ = choices(k2)
    assert "row < 64" in str(s2)


def test_strided_lane_layout_falls_back_to_scalar_with_reason():
    # lane l holds elements l, l + 32, ...: no two consecutive elements in one thread
    k = _row_copy(d=64, layout="TileLayout(S[(2, 32) : (1@m, 1@laneid)])")
    (v, s), _ = choices(k)
    assert v == "reg_mem_scalar"
    e_ch = lower_calls  # noqa: F841
    err = rejected(kernel('X: T.Tensor((4, 64), "bfloat16")', """
    x = T.alloc_local((64,), "bfloat16", layout=TileLayout(S[(2, 32) : (1@m, 1@laneid)]))
    Tx.warp.copy(x, X[0, :], dispatch="reg_mem_vec")""", threads=32))
    assert "no vector of >= 4 bytes fits: x's layout does not give one thread 8 consecutive elements" in \
        reason(err, "reg_mem_vec")
    x = bf16_array(np.random.default_rng(2).standard_normal((100, 64)))
    m = run_lowered(k, X=x, Y=np.zeros((100, 64), np.float32))
    np.testing.assert_array_equal(m.result("Y"), x)


def test_converting_store_and_replica_store():
    k = kernel('Y: T.Tensor((2, 64), "bfloat16"), S_: T.Tensor((4,), "float32")', """
    y = T.alloc_local((64,), "float32", layout=TileLayout(S[(32, 2) : (1@laneid, 1@m)]))
    Tx.warp.fill(y, T.float32(1.5))
    Tx.warp.copy(Y[T.cta_id(0), :], y)
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[32 : 1@laneid]))
    Tx.warp.fill(s, T.float32(2.0))
    Tx.warp.copy(S_[T.cta_id(0):T.cta_id(0) + 1], s)""", threads=32, grid=2)
    ch = choices(k)
    assert ch[1][0] == "reg_mem_vec" and "cvt" not in intrinsics(ch[1][1])
    assert "T.lane_id() % 32 == 0" in str(ch[3][1]) or "T.lane_id() == 0" in str(ch[3][1])
    m = run_lowered(k, Y=np.zeros((2, 64), np.float32), S_=np.zeros(4, np.float32))
    np.testing.assert_array_equal(m.result("Y"), np.full((2, 64), 1.5))
    np.testing.assert_array_equal(m.result("S_"), [2, 2, 0, 0])


def test_shared_side_and_wgmma_accumulator_store():
    k = kernel('C: T.Tensor((64, 16), "float32")', """
    acc = T.alloc_local((64, 16), "float32", layout=wgmma_accumulator(16))
    sm = T.alloc_shared((64, 16), "float32")
    for i in T.serial(1):
        Tx.wg.fill(acc, T.float32(0))
    Tx.wg.copy(sm, acc)
    Tx.wg.copy(acc, sm)
    Tx.wg.copy(C[0:64, 0:16], acc)""", threads=128)
    ch = choices(k)
    assert [c[0] for c in ch] == ["local_fill", "reg_mem_vec", "reg_mem_vec", "reg_mem_vec"]
    assert intrinsics(ch[1][1]) == ["vst_shared_v2_b32"] * 4


def test_rejections_name_the_fact():
    err = rejected(kernel('X: T.Tensor((64,), "float32")', """
    a = T.alloc_shared((64,), "float32")
    Tx.cta.copy(a, X[0:64], dispatch="reg_mem_vec")""", threads=64))
    assert reason(err, "reg_mem_vec") == ("dst is 'shared' and src is 'global'; this variant moves registers <-> "
                                          "global/shared")
    err = rejected(kernel('X: T.Tensor((256,), "float32")', """
    x = T.alloc_local((256,), "float32", layout=TileLayout(S[(2, 32, 4) : (1@warpid, 1@laneid, 1@m)]))
    if T.warp_id() == 0:
        Tx.warp.copy(x, X[0:256])""", threads=64))
    assert reason(err, "reg_mem_scalar") == ("x: the thread with warpid=1, laneid=0 owns elements of the tile but "
                                             "does not run the call (it runs on warps 0)")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_compiles(arch):
    compile_ok(_row_copy(), arch)


def test_register_views_are_pinned_to_their_warps():
    # acc[0:16, :] of a warpgroup accumulator lives in warp 0 only (its wid_in_wg offset is 0)
    k = kernel('A: T.Tensor((64, 16), "float32"), O: T.Tensor((64, 16), "float32")', """
    acc = T.alloc_local((64, 16), "float32", layout=wgmma_accumulator(16))
    Tx.wg.copy(acc, A[0:64, 0:16])
    Tx.wg.copy(O[16:32, 0:8], acc[16:32, 8:16])
    Tx.wg.exp2(acc[0:16, :], acc[0:16, :])
    Tx.wg.fill(acc[48:64, 0:8], T.float32(5))
    Tx.wg.copy(O[0:16, 0:16], acc[0:16, :])
    Tx.wg.copy(O[48:64, 0:16], acc[48:64, :])""", threads=128)
    ch = choices(k)
    assert "T.warp_id_in_wg() == 0" in str(ch[2][1])
    a = np.random.default_rng(9).standard_normal((64, 16)).astype(np.float32)
    out = run_lowered(k, A=a, O=np.zeros((64, 16), np.float32)).result("O")
    want = np.zeros((64, 16), np.float32)
    want[16:32, 0:8] = a[16:32, 8:16]
    want[0:16] = 2.0 ** a[0:16]
    want[48:64] = a[48:64]
    want[48:64, 0:8] = 5
    np.testing.assert_allclose(out, want, rtol=1e-6)
