"""tcgen05 gemm_async with block scaling (sfa= / sfb=): kind::mxf8f6f4.block_scale per k-step
with the scale-factor ids in the instruction descriptor and TMEM scale addresses from the
layouts; rejection reasons word for word; NVRTC for sm_100a."""
from tirxpy.intrinsics.descriptors import tcgen05_block_scaled_instr_desc
from tirxpy.layout.atoms import mma_smem_layout, tmem_warpx4_layout

from .helpers import calls, kernel, lowered
from ..helpers import compile_ok, reason, rejected

ENV = {"SA": mma_smem_layout(128, 128, "float8_e4m3", "K", 128), "SB": mma_smem_layout(64, 128, "float8_e4m3", "K", 128),
       "SFA": tmem_warpx4_layout(4, col=128), "SFB": tmem_warpx4_layout(4, col=132)}


def _k(call, a_dt="float8_e4m3", sfa_layout="SFA"):
    body = f"""    As = T.alloc_shared((128, 128), "{a_dt}", layout=SA)
    Bs = T.alloc_shared((64, 128), "float8_e4m3", layout=SB)
    bars = T.alloc_shared((1,), "uint64")
    tbase = T.alloc_shared((1,), "uint32")
    acc = T.alloc_tmem((128, 64), "float32")
    sfa = T.alloc_tmem((32, 4), "uint32", layout={sfa_layout})
    sfb = T.alloc_tmem((32, 4), "uint32", layout=SFB)
    w = T.thread_id() % 2
    if T.elect_one():
        {call}
"""
    return kernel(body, ENV)


CALL = "Tx.gemm_async(acc, As, Bs, taddr=tbase[0], transpose_b=True, mbar=bars[0], sfa=sfa, sfb=sfb[:, 2 * w:2 * w + 2])"


def test_four_k_steps_scale_ids_and_addresses():
    body = lowered(_k(CALL), "sm_100a")
    mmas = [c for c in calls(body) if c.name.startswith("tcgen05_mma")]
    assert [m.name for m in mmas] == ["tcgen05_mma_cg1_mxf8f6f4_block_scale"] * 4
    for ks, mm in enumerate(mmas):
        d, a, b, idesc, sa, sb, enable = mm.args
        assert idesc.value == tcgen05_block_scaled_instr_desc("mxf8f6f4", "float8_e4m3", "float8_e4m3", m=128, n=64,
                                                              a_scale_id=ks, b_scale_id=ks)
        assert str(sa) == "tbase[0] + T.uint32(128)"
        assert str(sb) == 'tbase[0] + T.cast(w * 2, "uint32") + T.uint32(132)'  # column 132 + 2 w of the view
        assert tuple(x.value for x in a.args[0].target.indices) == (0, 32 * ks)
    assert calls(body)[-1].name == "tcgen05_commit_cg1"


def test_reasons_word_for_word():
    err = rejected(_k(CALL.replace(", sfb=sfb[:, 2 * w:2 * w + 2]", "")), "sm_100a")
    assert reason(err, "tcgen05") == "block scaling takes both sfa= and sfb= (TMEM scale-factor tiles of A and B)"
    err = rejected(_k(CALL.replace("sfb[:, 2 * w:2 * w + 2]", "sfb")), "sm_100a")
    assert reason(err, "tcgen05") == "sfb (sfb) has shape (32, 4); expected (32, 2) words (word (t, j) = matrix row 32 j + t)"
    err = rejected(_k(CALL, sfa_layout="TileLayout(S[(32, 4) : (1@TLane, 1@TCol)] + 128@TCol)"), "sm_100a")
    assert reason(err, "tcgen05") == ("sfa (sfa): word (0, 0) is at TMEM (lane, column) [(0, 128)]; .32x128b.warpx4 puts "
                                      "it at [(0, 128), (32, 128), (64, 128), (96, 128)] (layout tmem_warpx4_layout)")
    err = rejected(_k(CALL.replace("sfa=sfa", "sfa=Bs")), "sm_100a")
    assert reason(err, "tcgen05") == ("sfa (Bs) is in shared memory; tcgen05.mma reads scale factors from tensor memory "
                                      "(copy them there with Tx.copy_async: tcgen05.cp)")


def test_compiles_sm100a():
    compile_ok(_k(CALL), "sm_100a")
