"""Cooperative global/shared copies and cp.async: vector width from both layouts (swizzle
included), edge guards, results by interpretation, reasons, NVRTC."""
import numpy as np
import pytest

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected
from tests.primitives.interp import bf16_array, run_lowered

SW = "mma_smem_layout(64, 64, 'bfloat16', 'K', 128)"


def _roundtrip(layout=SW, n=100, threads=128, variant=""):
    d = f", dispatch='{variant}'" if variant else ""
    return kernel(f'A: T.Tensor(({n}, 64), "bfloat16"), B: T.Tensor(({n}, 64), "bfloat16")', f"""
    s = T.alloc_shared((64, 64), "bfloat16", layout={layout})
    r0 = T.cta_id(0) * 64
    Tx.cta.copy(s, A[r0:r0 + 64, 0:64]{d})
    Tx.cta.copy(B[r0:r0 + 64, 0:64], s{d})""", threads=threads, grid=-(-n // 64))


def test_swizzled_tile_uses_16_byte_vectors_and_roundtrips_ragged():
    k = _roundtrip()
    (v1, s1), (v2, s2) = choices(k)
    assert v1 == v2 == "mem_mem_vec"
    assert intrinsics(s1) == ["vld_global_v4_b32", "vst_shared_v4_b32"]
    a = bf16_array(np.random.default_rng(6).standard_normal((100, 64)))
    out = run_lowered(k, A=a, B=np.full((100, 64), 7, np.float32)).result("B")
    np.testing.assert_array_equal(out, a)   # rows 100..127 of the second tile are neither read nor written


def test_transposed_shared_layout_falls_back_to_scalar():
    col = "TileLayout(S[(64, 64) : (1@m, 64@m)])"   # column-major: no two row neighbours adjacent
    k = _roundtrip(col)
    assert [c[0] for c in choices(k)] == ["mem_mem_scalar", "mem_mem_scalar"]
    err = rejected(_roundtrip(col, variant="mem_mem_vec"))
    assert reason(err, "mem_mem_vec") == ("the widest vector both layouts allow is 1 element(s) of bfloat16 (2 bytes); "
                                          "this variant moves at least 4 bytes per instruction")
    a = bf16_array(np.random.default_rng(7).standard_normal((100, 64)))
    out = run_lowered(k, A=a, B=np.zeros((100, 64), np.float32)).result("B")
    np.testing.assert_array_equal(out, a)


def test_partial_thread_sets_and_reasons():
    k = kernel('A: T.Tensor((64, 64), "float32")', """
    s = T.alloc_shared((64, 64), "float32")
    if T.warp_id() == 1:
        Tx.warp.copy(s, A[0:64, 0:64])""", threads=128)
    (v, st), = choices(k)
    assert v == "mem_mem_vec" and "T.lane_id()" in str(st) and "T.warp_id()" not in str(st).split("address_of")[0]
    k = kernel('A: T.Tensor((64, 64), "float32")', """
    s = T.alloc_shared((64, 64), "float32")
    if T.lane_id() != 7:
        Tx.copy(s, A[0:64, 0:64])""", threads=32)
    err = rejected(k)
    assert reason(err, "mem_mem_vec") == "the active threads (31 threads (warps 0, some lanes)) are not a regular warps x lanes grid"
    k = kernel('A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")', """
    Tx.cta.copy(B, A)""", threads=32)
    assert reason(rejected(k), "mem_mem_vec") == ("global -> global copies are not a tile primitive (stage through "
                                                  "shared memory or registers)")


def test_cp_async_zero_fills_ragged_rows():
    k = kernel('A: T.Tensor((100, 64), "bfloat16"), B: T.Tensor((128, 64), "bfloat16")', f"""
    s = T.alloc_shared((64, 64), "bfloat16", layout={SW})
    r0 = T.cta_id(0) * 64
    Tx.cta.copy_async(s, A[r0:r0 + 64, 0:64])
    T.evaluate(T.ptx.cp_async_wait_group(0))
    Tx.cta.copy(B[r0:r0 + 64, 0:64], s)""", threads=128, grid=2)
    (v, st), _ = choices(k)
    assert v == "cp_async"
    assert set(intrinsics(st)) == {"cp_async_cg_16_zfill", "cp_async_commit_group"}
    err = rejected(kernel('A: T.Tensor((64, 64), "bfloat16")', """
    s = T.alloc_shared((64, 64), "float32")
    Tx.cta.copy_async(s, A[0:64, 0:64], dispatch="cp_async")""", threads=128))
    assert reason(err, "cp_async") == "cp.async cannot convert bfloat16 to float32"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_compiles(arch):
    compile_ok(_roundtrip(), arch)
    compile_ok(kernel('A: T.Tensor((100, 64), "bfloat16")', f"""
    s = T.alloc_shared((64, 64), "bfloat16", layout={SW})
    r0 = T.cta_id(0) * 64
    Tx.cta.copy_async(s, A[r0:r0 + 64, 0:64])""", threads=128, grid=2), arch)


def test_vector_copy_refuses_to_convert_and_scalar_copy_converts():
    """A float32 -> int32 copy must convert values: the raw-bit vector copy is rejected with the
    reason, and the scalar copy it falls back to converts each element."""
    body = """
    s = T.alloc_shared((64, 64), "int32")
    Tx.cta.copy(s, A[0:64, 0:64]{d})
    T.ptx.syncthreads()
    Tx.cta.copy(B[0:64, 0:64], s)"""
    sig = 'A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "int32")'
    err = rejected(kernel(sig, body.format(d=", dispatch='mem_mem_vec'"), threads=128))
    assert reason(err, "mem_mem_vec") == ("A is float32 and s is int32: vector loads / stores move raw bits and "
                                          "cannot convert (mem_mem_scalar converts element by element)")
    k = kernel(sig, body.format(d=""), threads=128)
    assert [c[0] for c in choices(k)] == ["mem_mem_scalar", "mem_mem_vec"]
    a = np.random.default_rng(8).uniform(-1000, 1000, (64, 64)).astype(np.float32)
    out = run_lowered(k, A=a, B=np.zeros((64, 64), np.int32)).result("B")
    np.testing.assert_array_equal(out, np.trunc(a).astype(np.int32))
