"""wgmma implementations of gemm / gemm_async / gemm_wait: chosen where they apply, rejected
with the right reason where they do not; operands checked against the layouts."""
import pytest

from tirxpy.intrinsics.descriptors import wgmma_smem_desc
from tirxpy.ir import AddressOf, IntrinsicCall
from tirxpy.layout import S, TileLayout, laneid, m, wid_in_wg
from tirxpy.layout.atoms import mma_smem_layout, wgmma_a_fragment, wgmma_accumulator
from tirxpy.primitives import DispatchError, explain, lower_calls

from .helpers import calls, kernel, lowered, names, slot_range

ENV = {"ACC": wgmma_accumulator(64), "SA": mma_smem_layout(64, 64, "bfloat16", "K", 128),
       "SB": mma_smem_layout(64, 64, "bfloat16", "K", 128),
       "SBMN": mma_smem_layout(64, 64, "bfloat16", "MN", 128).permute_dims((64, 64), (1, 0)),
       "AREG": TileLayout(S[(4, 2, 8, 4, 2, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)]),
       "ACC2": TileLayout(S[(2, 4, 2, 8, 8, 4, 2) : (32 @ m, 1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])}

ALLOC = """    As = T.alloc_shared((64, 64), "bfloat16", layout=SA)
    Bs = T.alloc_shared((64, 64), "bfloat16", layout=SB)
    acc = T.alloc_local((64, 64), "float32", layout=ACC)
"""


def _k(call, threads=128, alloc=ALLOC, guard=None, verify=True):
    body = alloc + (f"    if {guard}:\n        {call}\n" if guard else f"    {call}\n")
    return kernel(body, ENV, threads=threads, verify=verify)


def _mmas(stmt):
    return [c for c in calls(stmt) if c.name.startswith("wgmma_m64")]


def _desc_start(c):
    """(static descriptor, element coordinate) of a gemm_smem_desc call."""
    assert c.name == "gemm_smem_desc" and isinstance(c.args[0], AddressOf)
    return c.args[1].value, tuple(i.value for i in c.args[0].target.indices)


def test_ss_k_major_fence_mmas_commit_and_wait():
    body = lowered(_k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, accumulate=False, wait=1)"), "sm_90a")
    top = [c.name for c in calls(body) if c.name != "gemm_smem_desc"]
    assert top == ["wgmma_fence"] + ["wgmma_m64n64k16_f32_bf16_bf16_ss"] * 4 + [
        "wgmma_commit_group", "wgmma_wait_group", "wgmma_fence_operand_float32_x32"]
    assert calls(body)[-2].args[0].value == 1
    desc0 = wgmma_smem_desc(0, lbo=16, sbo=1024, swizzle=128)          # PTX: 128B swizzle, 8 rows x 128 B
    for ks, mma in enumerate(_mmas(body)):
        d, a, b, scale_d, sa, sb, ta, tb = mma.args
        assert slot_range(d) == (0, 32)
        assert _desc_start(a) == (desc0, (0, 16 * ks)) and _desc_start(b) == (desc0, (0, 16 * ks))
        assert scale_d.value == (ks > 0) and (sa.value, sb.value, ta.value, tb.value) == (1, 1, 0, 0)


def test_b_mn_major_sets_trans_b_and_steps_k_by_rows():
    alloc = ALLOC.replace("layout=SB", "layout=SBMN")
    body = lowered(_k("Tx.wg.gemm_async(acc, As, Bs)", alloc=alloc), "sm_90a")
    for ks, mma in enumerate(_mmas(body)):
        assert mma.args[-1].value == 1                                 # trans_b: MN-major
        desc0, start = _desc_start(mma.args[2])
        assert start == (16 * ks, 0)                                   # B is (K, N): k-step rows
        assert desc0 == wgmma_smem_desc(0, lbo=1024, sbo=1024, swizzle=128)  # one 64-wide atom; SBO: 8 K-rows x 128 B


def test_a_from_registers_and_two_m_tiles():
    alloc = """    Ar = T.alloc_local((128, 32), "bfloat16", layout=AREG2)
    Bs = T.alloc_shared((64, 32), "bfloat16", layout=SB32)
    acc = T.alloc_local((128, 64), "float32", layout=ACC2)
"""
    env = dict(ENV, AREG2=TileLayout(S[(2, 4, 2, 8, 2, 2, 4, 2) : (16 @ m, 1 @ wid_in_wg, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)]),
               SB32=mma_smem_layout(64, 32, "bfloat16", "K", 64))
    k = kernel(alloc + "    Tx.wg.gemm(acc, Ar, Bs, transpose_b=True)\n", env)
    body = lowered(k, "sm_90a")
    mmas = _mmas(body)
    assert [c.name for c in mmas] == ["wgmma_m64n64k16_f32_bf16_bf16_rs"] * 4
    assert names(body)[-3:] == ["wgmma_wait_group"] + ["wgmma_fence_operand_float32_x32"] * 2  # 64 registers
    A = env["AREG2"]
    for i, mma in enumerate(mmas):
        ks, mt = divmod(i, 2)                                          # k-step outer, M tiles inner
        d, a = mma.args[0], mma.args[1]
        assert slot_range(d) == (ENV["ACC2"].apply(64 * mt, 0, shape=(128, 64))["m"], 32)
        assert slot_range(a) == (A.apply(64 * mt, 16 * ks, shape=(128, 32))["m"] // 2, 4)
        assert a.buffer.dtype.name == "uint32"


def test_register_a_must_be_the_fragment():
    alloc = ALLOC.replace('As = T.alloc_shared((64, 64), "bfloat16", layout=SA)',
                          'As = T.alloc_local((64, 16), "bfloat16", layout=AREG)')
    alloc = alloc.replace("Bs = T.alloc_shared((64, 64)", "Bs = T.alloc_shared((64, 16)").replace("layout=SB)", "layout=SB16)")
    ENV2 = dict(ENV, SB16=mma_smem_layout(64, 16, "bfloat16", "K", 32))
    good = wgmma_a_fragment("bf16")
    ENV2["AREG"] = good
    lowered(kernel(alloc + "    Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)\n", ENV2), "sm_90a")
    ENV2["AREG"] = TileLayout(S[(4, 2, 8, 2, 4, 2) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 2 @ m)])
    with pytest.raises(DispatchError) as e:
        lower_calls(kernel(alloc + "    Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)\n", ENV2), "sm_90a")
    # element (0, 1): the fragment puts a1 (slot 1); this layout puts it at slot 2
    assert "A: register slot owner of element (0, 1) is 2, wgmma expects 1" in str(e.value)


def test_misaligned_warpgroup_is_rejected_with_its_warps():
    k = _k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)", threads=256,
           guard="T.warp_id() >= 1 and T.warp_id() < 5", verify=False)   # the verifier says so too
    with pytest.raises(DispatchError) as e:
        lower_calls(k, "sm_90a")
    msg = str(e.value)
    assert "wgmma needs a full warpgroup (4 consecutive warps starting at a multiple of 4); the call runs on warps 1..4" in msg
    assert [r for v, _, _, r in e.value.candidates if v == "wgmma"] == [
        "wgmma needs a full warpgroup (4 consecutive warps starting at a multiple of 4); the call runs on warps 1..4"]


def test_two_consumer_warpgroups_each_issue():
    k = _k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)", threads=384, guard="T.warpgroup_id() > 0")
    assert "wgmma_commit_group" in names(lowered(k, "sm_90a"))


@pytest.mark.parametrize("acc_layout, msg", [
    ("TileLayout(S[(4, 2, 8, 8, 4, 2) : (1@warpid, 2@m, 4@laneid, 4@m, 1@laneid, 1@m)])",
     "C: warp-in-warpgroup owner of element (16, 0) is 0, wgmma expects 1"),
    ("TileLayout(S[(4, 2, 8, 8, 4, 2) : (1@wid_in_wg, 1@m, 4@laneid, 4@m, 1@laneid, 2@m)])",
     "C: register slot owner of element (0, 1) is 2, wgmma expects 1"),
])
def test_accumulator_layout_mismatch(acc_layout, msg):
    env = dict(ENV, ACC=eval(acc_layout, {"TileLayout": TileLayout, "S": S, "laneid": laneid, "m": m,
                                          "wid_in_wg": wid_in_wg, "warpid": __import__("tirxpy.layout", fromlist=["warpid"]).warpid}))
    k = kernel(ALLOC + "    Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)\n", env)
    with pytest.raises(DispatchError) as e:
        lower_calls(k, "sm_90a")
    assert msg in str(e.value)


@pytest.mark.parametrize("call, msg", [
    ("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, wait=9)", "wait= is how many committed wgmma groups may stay pending"),
    ("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, swizzle=1)", "unknown attribute(s) ['swizzle']"),
    ("Tx.wg.gemm_async(acc, As[0:64, 0:32], Bs, transpose_b=True)", "shapes do not chain: C (64, 64) = A (M, K) (64, 32) @ B (N, K) (64, 64)"),
    ("Tx.cta.gemm_async(acc, As, Bs, transpose_b=True)", "wgmma is a warpgroup instruction; write Tx.wg.gemm_async(...)"),
])
def test_rejections(call, msg):
    with pytest.raises(DispatchError) as e:  # the dispatcher's own reasons (verify would refuse swizzle= first)
        lower_calls(_k(call, verify=False), "sm_90a")
    assert msg in str(e.value)


def test_square_swizzled_tile_is_both_majors():
    # a 64 x 64 128B-swizzled bf16 tile read as (K, N) is the canonical MN-major layout
    body = lowered(_k("Tx.wg.gemm_async(acc, As, Bs)"), "sm_90a")
    assert all(m_.args[-1].value == 1 for m_ in _mmas(body))


def test_row_major_b_is_not_canonical():
    alloc = ALLOC.replace('Bs = T.alloc_shared((64, 64), "bfloat16", layout=SB)', 'Bs = T.alloc_shared((64, 64), "bfloat16")')
    with pytest.raises(DispatchError) as e:
        lower_calls(kernel(alloc + "    Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)\n", ENV), "sm_90a")
    assert ("B: TileLayout(S[(64, 64) : (64@m, 1@m)]) is not a canonical K-major no-swizzle layout: element (1, 0) "
            "sits at offset 64, the descriptor (LBO=16, SBO=1024 bytes) would read offset 8") in str(e.value)


def test_b_in_registers_is_rejected():
    alloc = ALLOC.replace('Bs = T.alloc_shared((64, 64), "bfloat16", layout=SB)', 'Bs = T.alloc_local((64, 64), "bfloat16")')
    k = kernel(alloc + "    Tx.wg.gemm(acc, As, Bs, transpose_b=True)\n", ENV, verify=False)  # 2048 registers
    with pytest.raises(DispatchError) as e:
        lower_calls(k, "sm_90a")
    assert "B (Bs) is in local memory; wgmma reads B from shared memory" in str(e.value)


def test_wrong_target_lists_candidates_at_the_users_line():
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)"), "sm_100a")
    rows = {v: r for v, _, _, r in e.value.candidates}
    assert rows["wgmma"].startswith("target sm_100a: exists only on sm_90a")
    assert rows["tcgen05"].startswith("tcgen05.mma is issued by one thread")
    assert "Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)" in str(e.value)   # the user's line


def test_gemm_wait_and_explain():
    k = _k("Tx.wg.gemm_wait(0, acc)")
    # 64 x 64 f32 accumulator over a warpgroup: 32 registers per thread, fenced after the wait
    assert names(lowered(k, "sm_90a")) == ["wgmma_wait_group", "wgmma_fence_operand_float32_x32"]
    assert "gemm_wait/wgmma" in explain(k, "sm_90a")
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.wg.gemm_wait(12, acc)"), "sm_90a")
    assert "takes an int n in 0..7" in str(e.value)


def test_gemm_wait_must_name_its_accumulators():
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.wg.gemm_wait(0)"), "sm_90a")
    assert "must name the accumulators it waits for, e.g. Tx.wg.gemm_wait(0, C)" in str(e.value)
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.wg.gemm_wait(0, As)"), "sm_90a")
    assert "operand 1 of gemm_wait must be a register accumulator (local); it is shared" in str(e.value)


def test_every_wait_fences_the_accumulator_registers_in_the_cuda_source():
    """wgmma.wait_group names no registers: without a fence the compiler may read C before it."""
    from tirxpy.lower import build

    for call in ("Tx.wg.gemm(acc, As, Bs, transpose_b=True)", "Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, wait=0)"):
        src = build(_k(call), "sm_90a").cuda_source
        body = src[src.index('extern "C"'):]
        wait = body.index("tx_wgmma_wait_group")
        fence = body.index("tx_wgmma_fence_operand_float32_x32", wait)
        assert fence > wait and '"+f"' in src[src.index("tx_wgmma_fence_operand_float32_x32"):]
    lowered_names = names(lowered(_k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)"), "sm_90a"))
    assert "wgmma_fence_operand_float32_x32" not in lowered_names  # no wait, nothing to fence yet


def test_run_time_accumulate_flag_goes_to_scale_d():
    env = dict(ENV)
    k = kernel(ALLOC + "    Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, accumulate=T.lane_id() > 3)\n", env)
    mmas = _mmas(lowered(k, "sm_90a"))
    assert not isinstance(mmas[0].args[3], IntrinsicCall) and str(mmas[0].args[3]) == "T.lane_id() > 3"
    assert all(m_.args[3].value is True for m_ in mmas[1:])


def test_folded_variant_by_name_same_descriptors_in_foldable_cuda():
    """``dispatch="wgmma_folded"``: the same mmas and descriptor starts as the default, through
    ``gemm_smem_desc_folded``, whose CUDA adds each k-step's offset in 16-byte units to the buffer's base
    (2 per k-step of 16 bf16 columns) in C++, not in asm. The default call never picks it."""
    import tirxpy

    k = _k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True, accumulate=False, wait=1, dispatch='wgmma_folded')")
    body = lowered(k, "sm_90a")
    desc0 = wgmma_smem_desc(0, lbo=16, sbo=1024, swizzle=128)
    descs = [c for c in calls(body) if c.name == "gemm_smem_desc_folded"]
    assert len(descs) == 8 and not [c for c in calls(body) if c.name == "gemm_smem_desc"]
    starts = [(c.args[1].value, tuple(i.value for i in c.args[0].target.indices)) for c in descs]
    assert starts == [(desc0, (0, 16 * ks)) for ks in range(4) for _ in range(2)]
    assert [c.name for c in calls(lowered(_k("Tx.wg.gemm_async(acc, As, Bs, transpose_b=True)"), "sm_90a"))
            if c.name.startswith("gemm_smem")] == ["gemm_smem_desc"] * 8
    src = tirxpy.compile(k, arch="sm_90a").cuda_source
    assert "return (unsigned long long)(((desc0 >> 32) << 32) | (unsigned)((unsigned)desc0 + addr));" in src
    for ks in range(4):
        assert f"tx_gemm_smem_desc_folded(((tx_smem_addr(&As[0]) >> 4) + (unsigned)({2 * ks}))" in src
