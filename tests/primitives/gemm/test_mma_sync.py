"""mma.sync gemm: chosen for whole warps with register fragments on sm_80+, rejected with the
reason otherwise; register slots of every instruction read off the layouts."""
import itertools

import pytest

from tirxpy.layout import S, TileLayout, laneid, m
from tirxpy.primitives import DispatchError, lower_calls

from .helpers import calls, kernel, lowered, slot_range

# C 32 x 16 as 2 x 2 tiles of 16 x 8; A 32 x 32 as 2 x 2 tiles of 16 x 16; B 32 x 16 as 2 x 2 tiles of 16 x 8
ENV = {"CL": TileLayout(S[(2, 2, 8, 2, 4, 2) : (8 @ m, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)]),
       "AL": TileLayout(S[(2, 2, 8, 2, 2, 4, 2) : (16 @ m, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)]),
       "BL": TileLayout(S[(2, 2, 4, 2, 2, 8) : (8 @ m, 2 @ m, 1 @ laneid, 1 @ m, 4 @ m, 4 @ laneid)])}
ALLOC = """    a = T.alloc_local((32, 32), "bfloat16", layout=AL)
    b = T.alloc_local((32, 16), "bfloat16", layout=BL)
    acc = T.alloc_local((32, 16), "float32", layout=CL)
"""


def c_owner(r, c):
    """PTX ISA Figure 83 (m16n8k16 C): lane and register of element (r, c) of a 16 x 8 tile."""
    return 4 * (r % 8) + (c % 8) // 2, c % 2 + 2 * (r // 8)


def a_owner(r, c):
    return 4 * (r % 8) + (c % 8) // 2, c % 2 + 2 * (r // 8) + 4 * (c // 8)


def b_owner(k, n):
    return 4 * n + (k % 8) // 2, k % 2 + 2 * (k // 8)


def _tile_base(L, shape, origin, owner, tile):
    """The register slot where tile ``origin`` starts, after checking every element by formula."""
    r0, c0 = origin
    base = L.apply(r0, c0, shape=shape)["m"] - owner(0, 0)[1]
    for r, c in itertools.product(range(tile[0]), range(tile[1])):
        got = L.apply(r0 + r, c0 + c, shape=shape)
        assert (got["laneid"], got["m"]) == (owner(r, c)[0], owner(r, c)[1] + base)
    return base


def _k(call, threads=64, alloc=ALLOC, guard=None, verify=True):
    body = alloc + (f"    if {guard}:\n        {call}\n" if guard else f"    {call}\n")
    return kernel(body, ENV, threads=threads, verify=verify)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_one_mma_per_tile_and_k_step_with_slots_from_layouts(arch):
    body = lowered(_k("Tx.warp.gemm(acc, a, b)"), arch)
    mmas = [c for c in calls(body) if c.name.startswith("mma_sync")]
    assert len(mmas) == 2 * 2 * 2 and {x.name for x in mmas} == {"mma_sync_m16n8k16_f32_bf16_bf16_f32"}
    i = 0
    for mt, nt in itertools.product(range(2), range(2)):
        cb = _tile_base(ENV["CL"], (32, 16), (16 * mt, 8 * nt), c_owner, (16, 8))
        for ks in range(2):
            d, av, bv, cv = mmas[i].args
            i += 1
            ab = _tile_base(ENV["AL"], (32, 32), (16 * mt, 16 * ks), a_owner, (16, 16))
            bb = _tile_base(ENV["BL"], (32, 16), (16 * ks, 8 * nt), b_owner, (16, 8))
            assert slot_range(d) == (cb, 4) and slot_range(cv) == (cb, 4)
            assert slot_range(av) == (ab // 2, 4) and slot_range(bv) == (bb // 2, 2)
            assert av.buffer.dtype.name == "uint32" and d.buffer.dtype.name == "float32"


def test_accumulate_false_reads_zeros_on_the_first_k_step():
    body = lowered(_k("Tx.warp.gemm(acc, a, b, accumulate=False)"), "sm_80")
    mmas = [c for c in calls(body) if c.name.startswith("mma_sync")]
    assert [x.args[3].buffer.name.endswith("zero1") for x in mmas] == [True, False] * 4


def test_several_warps_each_issue():
    assert calls(lowered(_k("Tx.warp.gemm(acc, a, b)", threads=128, guard="T.warp_id() < 2"), "sm_80"))


@pytest.mark.parametrize("call, guard, msg", [
    ("Tx.warp.gemm(acc, a, b)", "T.lane_id() < 16", "mma.sync needs whole warps (all 32 lanes of each); the call runs on 32 threads"),
    ("Tx.wg.gemm(acc, a, b)", None, "mma.sync is a warp instruction; write Tx.warp.gemm(...)"),
    ("Tx.warp.gemm(acc, b, b)", None, "shapes do not chain: C (32, 16) = A (M, K) (32, 16) @ B (K, N) (32, 16)"),
    ("Tx.warp.gemm(acc, a, b, transpose_b=True)", None, "shapes do not chain"),
    ("Tx.warp.gemm(acc, a, b, transpose_a=T.lane_id())", None, "transpose_a= must be a Python bool"),
])
def test_rejections(call, guard, msg):
    with pytest.raises(DispatchError) as e:
        lower_calls(_k(call, guard=guard, verify=False), "sm_80")
    assert msg in str(e.value)


def test_layout_mismatch_names_the_element():
    env_bad = TileLayout(S[(2, 2, 8, 2, 4, 2) : (8 @ m, 2 @ m, 1 @ laneid, 4 @ m, 8 @ laneid, 1 @ m)])
    ENV2 = dict(ENV, CL=env_bad)
    with pytest.raises(DispatchError) as e:
        lower_calls(kernel(ALLOC + "    Tx.warp.gemm(acc, a, b)\n", ENV2, threads=64), "sm_80")
    got = env_bad.apply(0, 2, shape=(32, 16))["laneid"]
    assert f"C: lane owner of element (0, 2) is {got}, mma.sync expects {c_owner(0, 2)[0]}" in str(e.value)


def test_wrong_dtypes_and_storage():
    alloc = ALLOC.replace('b = T.alloc_local((32, 16), "bfloat16"', 'b = T.alloc_local((32, 16), "float16"')
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.warp.gemm(acc, a, b)", alloc=alloc), "sm_80")
    assert "mma.sync m16n8k16 takes A and B both bfloat16 or both float16; got bfloat16 and float16" in str(e.value)
    alloc = ALLOC.replace('a = T.alloc_local((32, 32), "bfloat16", layout=AL)', 'a = T.alloc_shared((32, 32), "bfloat16")')
    with pytest.raises(DispatchError) as e:
        lower_calls(_k("Tx.warp.gemm(acc, a, b)", alloc=alloc), "sm_80")
    assert "A (a) is in shared memory; mma.sync takes every operand in registers" in str(e.value)
