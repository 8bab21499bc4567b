"""tcgen05 gemm_async: chosen for one elected thread on sm_100a (cta_group 1 and 2, commit /
multicast), rejected with the reason otherwise; descriptors and TMEM addresses from layouts."""
import pytest

from tirxpy.intrinsics.descriptors import tcgen05_instr_desc, tcgen05_smem_desc
from tirxpy.layout import S, TileLayout, TCol, TLane
from tirxpy.layout.atoms import mma_smem_layout, tmem_accumulator
from tirxpy.primitives import DispatchError, lower_calls

from .helpers import calls, kernel, lowered, names

ENV = {"SA": mma_smem_layout(128, 64, "bfloat16", "K", 128), "SB": mma_smem_layout(256, 64, "bfloat16", "K", 128),
       "SB128": mma_smem_layout(128, 64, "bfloat16", "K", 128), "SA64": mma_smem_layout(64, 32, "float16", "K", 64),
       "SB64": mma_smem_layout(64, 32, "float16", "K", 64), "F": tmem_accumulator(64, 64, lane_base=16, col=0),
       "TF32": mma_smem_layout(128, 32, "float32", "K", 128)}

ALLOC = """    As = T.alloc_shared((128, 64), "bfloat16", layout=SA)
    Bs = T.alloc_shared((256, 64), "bfloat16", layout=SB)
    bars = T.alloc_shared((2,), "uint64")
    tbase = T.alloc_shared((1,), "uint32")
    acc = T.alloc_tmem((128, 512), "float32")
"""


def _k(call, alloc=ALLOC, guard="T.elect_one()", cluster=None, verify=True):
    body = alloc + (f"    if {guard}:\n        {call}\n" if guard else f"    {call}\n")
    return kernel(body, ENV, cluster=cluster, verify=verify)


def _mmas(stmt):
    return [c for c in calls(stmt) if c.name.startswith("tcgen05_mma")]


def test_cta_group_1_m128_two_n_tiles_k_steps_and_commit():
    call = "Tx.gemm_async(acc[:, 0:512], As, Bs[0:256, :], taddr=tbase[0], transpose_b=True, accumulate=False, mbar=bars[1])"
    alloc = ALLOC.replace("(256, 64)", "(512, 64)").replace("layout=SB)", "layout=SB512)")
    ENV["SB512"] = mma_smem_layout(512, 64, "bfloat16", "K", 128)
    body = lowered(_k(call.replace("Bs[0:256, :]", "Bs"), alloc=alloc), "sm_100a")
    mmas = _mmas(body)
    assert len(mmas) == 2 * 4 and {m.name for m in mmas} == {"tcgen05_mma_cg1_f16_ss"}
    idesc = tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=256)
    for i, mm in enumerate(mmas):
        ks, j = divmod(i, 2)
        d, a, b, idx, enable = mm.args
        assert str(d) == ("tbase[0]" if j == 0 else "tbase[0] + T.uint32(256)")   # column 256 * j, lane 0
        assert idx.value == idesc and enable.value == (ks > 0)
        assert tuple(x.value for x in b.args[0].target.indices) == (256 * j, 16 * ks)
        assert b.args[1].value == tcgen05_smem_desc(0, lbo=16, sbo=1024, swizzle=128)
    assert names(body)[-1] == "tcgen05_commit_cg1"
    assert calls(body)[-1].args[0].target.indices[0].value == 1


def test_m64_layout_f_lane_base_and_fp16():
    alloc = """    As = T.alloc_shared((64, 32), "float16", layout=SA64)
    Bs = T.alloc_shared((64, 32), "float16", layout=SB64)
    tbase = T.alloc_shared((1,), "uint32")
    acc = T.alloc_tmem((128, 64), "float32")
    d = T.alloc_buffer((64, 64), "float32", scope="tmem", layout=F)
"""
    body = lowered(_k("Tx.gemm_async(d, As, Bs, taddr=tbase[0], transpose_b=True)", alloc=alloc), "sm_100a")
    mmas = _mmas(body)
    assert len(mmas) == 2 and str(mmas[0].args[0]) == f"tbase[0] + T.uint32({16 << 16})"
    assert mmas[0].args[3].value == tcgen05_instr_desc("float32", "float16", "float16", m=64, n=64)
    assert "tcgen05_commit_cg1" not in names(body)


def test_cta_group_2_pair_and_multicast_commit():
    alloc = ALLOC.replace("(256, 64)", "(128, 64)").replace("layout=SB)", "layout=SB128)")
    call = "Tx.gemm_async(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True, cta_group=2, mbar=bars[0], cta_mask=3)"
    body = lowered(_k(call, alloc=alloc, guard="T.cta_id_in_cluster(0) == 0 and T.elect_one()", cluster=(2,)), "sm_100a")
    mmas = _mmas(body)
    assert len(mmas) == 4 and mmas[0].name == "tcgen05_mma_cg2_f16_ss"
    assert mmas[0].args[3].value == tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=256, n=256, cta_group=2)
    last = calls(body)[-1]
    assert last.name == "tcgen05_commit_cg2_multicast" and last.args[1].value == 3
    with pytest.raises(DispatchError) as e:
        lower_calls(_k(call, alloc=alloc), "sm_100a")
    assert "cta_group=2 runs on a CTA pair: launch with a cluster of an even number of CTAs" in str(e.value)


@pytest.mark.parametrize("call, msg", [
    ("Tx.gemm_async(acc[:, 0:256], As, Bs, transpose_b=True)", "taddr= is required"),
    ("Tx.gemm_async(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True, cta_group=3)", "cta_group= must be 1 or 2"),
    ("Tx.gemm_async(acc[:, 0:200], As, Bs[0:200, :], taddr=tbase[0], transpose_b=True)",
     "tcgen05.mma with M = 128 takes N in multiples of 16"),
    ("Tx.gemm_async(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True, mbar=tbase[0])",
     "mbar= takes one uint64 mbarrier in shared memory"),
    ("Tx.gemm_async(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True, cta_mask=1)",
     "cta_mask= multicasts the commit's arrival; it needs mbar="),
])
def test_rejections(call, msg):
    with pytest.raises(DispatchError) as e:
        lower_calls(_k(call), "sm_100a")
    assert msg in str(e.value)


def test_not_elected_and_wrong_tmem_layout():
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.gemm_async(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True)", guard=None), "sm_100a")
    assert ("tcgen05.mma is issued by one thread (put the call under `if T.elect_one():`); the call runs on the "
            "whole CTA (128 threads)") in str(e.value)
    alloc = ALLOC.replace('acc = T.alloc_tmem((128, 512), "float32")',
                          'acc = T.alloc_buffer((128, 256), "float32", scope="tmem", layout=SWAP)')
    ENV["SWAP"] = TileLayout(S[(64, 2, 256) : (1 @ TLane, 64 @ TLane, 1 @ TCol)])   # rows interleaved over lane halves
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.gemm_async(acc, As, Bs, taddr=tbase[0], transpose_b=True)", alloc=alloc), "sm_100a")
    # row 1 of Layout D is TMEM lane 1; this layout puts it at lane 64
    assert "C: TMEM lane owner of element (1, 0) is 64, tcgen05.mma expects 1" in str(e.value)


def test_tf32_kind_and_k_step_of_8():
    alloc = """    As = T.alloc_shared((128, 32), "float32", layout=TF32)
    Bs = T.alloc_shared((128, 32), "float32", layout=TF32)
    tbase = T.alloc_shared((1,), "uint32")
    acc = T.alloc_tmem((128, 128), "float32")
"""
    body = lowered(_k("Tx.gemm_async(acc, As, Bs, taddr=tbase[0], transpose_b=True)", alloc=alloc), "sm_100a")
    mmas = _mmas(body)
    assert len(mmas) == 4 and mmas[0].name == "tcgen05_mma_cg1_tf32_ss"
    assert [tuple(i.value for i in m_.args[1].args[0].target.indices) for m_ in mmas] == [(0, 0), (0, 8), (0, 16), (0, 24)]


def test_synchronous_gemm_on_tmem_says_use_gemm_async():
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.gemm(acc[:, 0:256], As, Bs, taddr=tbase[0], transpose_b=True)", verify=False), "sm_100a")
    assert "tcgen05.mma is asynchronous: write Tx.gemm_async(C, A, B, mbar=bar)" in str(e.value)
