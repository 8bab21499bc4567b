"""registers <-> TMEM with tcgen05.ld / st .32x32b: chosen when every register slot is its
thread's TMEM lane and column, reasons naming the element and both owners, NVRTC for sm_100a."""
import pytest

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected

ACC_REG = "TileLayout(S[(4, 32, 64) : (1@wid_in_wg, 1@laneid, 1@m)])"   # thread = TMEM lane, slot = column


def _k(reg_layout=ACC_REG, tmem_layout="tmem_accumulator(128, 64)", scope="wg", extra=", taddr=tbase[0]"):
    return kernel('C: T.Tensor((128, 64), "float32")', f"""
    tbase = T.alloc_shared((1,), "uint32")
    acc = T.alloc_tmem((128, 64), "float32", layout={tmem_layout})
    r = T.alloc_local((128, 64), "float32", layout={reg_layout})
    Tx.{scope}.copy(r, acc{extra})
    Tx.{scope}.copy(acc, r{extra})""", threads=128)


def test_ld_st_32x32b():
    (v1, s1), (v2, s2) = choices(_k(), "sm_100a")
    assert (v1, v2) == ("tcgen05_ld", "tcgen05_st")
    assert intrinsics(s1) == ["tcgen05_ld_32x32b_x64", "tcgen05_wait_ld"]
    assert intrinsics(s2) == ["tcgen05_st_32x32b_x64", "tcgen05_wait_st"]
    assert "T.warp_id() % 4 * 32" in str(s1)


def test_reasons():
    swapped = "TileLayout(S[(4, 32, 2, 32) : (1@wid_in_wg, 1@laneid, 1@m, 2@m)])"
    err = rejected(_k(swapped), "sm_100a")
    assert reason(err, "tcgen05_ld") == ("acc: element (0, 1) is at TMEM (lane 0, column 1), but tcgen05 .32x32b "
                                         "gives it to warp 0 lane 0 register 2, which reaches (lane 0, column 2)")
    err = rejected(_k(extra=""), "sm_100a")
    assert reason(err, "tcgen05_ld") == "pass taddr= the TMEM base address tcgen05.alloc wrote (e.g. taddr=tmem_base[0])"
    err = rejected(_k(), "sm_90a")
    assert reason(err, "tcgen05_ld") == "target sm_90a: needs sm_100a; the kernel targets sm_90a"


def test_compiles_sm100a():
    compile_ok(_k(), "sm_100a")
