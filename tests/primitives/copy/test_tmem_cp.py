"""shared -> TMEM with tcgen05.cp .32x128b.warpx4: chosen for one thread with the warpx4 word
layout, reasons word for word otherwise, NVRTC for sm_100a."""
from tirxpy.intrinsics.descriptors import tcgen05_smem_desc

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected

SF = "tmem_warpx4_layout(4, col=8)"


def _k(smem_shape="(2, 32, 4)", tmem_layout=SF, guard="T.elect_one()", call="Tx.copy_async(sf, ss[1], taddr=tbase[0])",
       sdtype="uint32", tdtype="uint32"):
    body = f"""    tbase = T.alloc_shared((1,), "uint32")
    ss = T.alloc_shared({smem_shape}, "{sdtype}")
    sf = T.alloc_tmem((32, 4), "{tdtype}", layout={tmem_layout})
""" + (f"    if {guard}:\n        {call}\n" if guard else f"    {call}\n")
    return kernel('C: T.Tensor((1,), "float32")', body, threads=128, prelude="")


def test_chosen_column_from_layout_and_descriptor():
    (v, s), = choices(_k(), "sm_100a")
    assert v == "tcgen05_cp"
    assert intrinsics(s) == ["tcgen05_cp_cg1_32x128b_warpx4", "gemm_smem_desc"]
    call = s.expr  # Evaluate(IntrinsicCall)
    addr, d = call.args
    assert str(addr) == "tbase[0] + T.uint32(8)"                       # column 8 of the layout
    assert d.args[1].value == tcgen05_smem_desc(0, lbo=128, sbo=128, swizzle=0)
    assert tuple(x.value for x in d.args[0].target.indices) == (1, 0, 0)  # stage 1's first word


def test_reasons_word_for_word():
    err = rejected(_k(guard=None), "sm_100a")
    assert reason(err, "tcgen05_cp") == ("tcgen05.cp is issued by one thread; write Tx.copy_async(...) under "
                                         "`if T.elect_one():` (the call runs on the whole CTA (128 threads))")
    err = rejected(_k(tmem_layout="TileLayout(S[(32, 4) : (1@TLane, 1@TCol)])"), "sm_100a")
    assert reason(err, "tcgen05_cp") == ("dst (sf): word (0, 0) is at TMEM (lane, column) [(0, 0)]; .32x128b.warpx4 "
                                         "puts it at [(0, 0), (32, 0), (64, 0), (96, 0)] (layout tmem_warpx4_layout)")
    err = rejected(_k(smem_shape="(2, 32, 8)", call="Tx.copy_async(sf, ss[1, :, 0:4], taddr=tbase[0])"), "sm_100a")
    assert reason(err, "tcgen05_cp") == ("src (ss): word (1, 0) is at word offset 8; tcgen05.cp .32x128b reads 32 "
                                         "dense 16-byte rows (offset 4), unswizzled")
    err = rejected(_k(call="Tx.copy_async(sf, ss[1])"), "sm_100a")
    assert reason(err, "tcgen05_cp") == "pass taddr= the TMEM base address tcgen05.alloc wrote (e.g. taddr=tmem_base[0])"
    err = rejected(_k(tdtype="float32"), "sm_100a")
    assert reason(err, "tcgen05_cp") == "tcgen05.cp does not convert: sf is float32, ss is uint32"


def test_compiles_sm100a():
    compile_ok(_k(), "sm_100a")
