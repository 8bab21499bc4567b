"""Legality checks (tirxpy/primitives/gemm/checks.py) against owners computed from the PTX
formulas here, independently of the atoms and of the code under test."""
import itertools

import pytest

from tirxpy.layout import AxisStride, ComposeLayout, Iter, S, SwizzleLayout, TileLayout, laneid, m, swizzle_128B, wid_in_wg
from tirxpy.layout.atoms import mma_m16n8k16_a, mma_smem_layout, wgmma_accumulator
from tirxpy.primitives.gemm import checks
from tirxpy.scope import ThreadSet

_AXES = ("wid_in_wg", "laneid", "m")
_WORD = {"wid_in_wg": "warp-in-warpgroup", "laneid": "lane", "m": "register slot"}


def wgmma_d_owner(r, c):
    """PTX ISA Figure 149: the accumulator owner of element (r, c) of a 64 x N tile."""
    w, rr = divmod(r, 16)
    return {"wid_in_wg": w, "laneid": 4 * (rr % 8) + (c % 8) // 2, "m": 4 * (c // 8) + 2 * (rr // 8) + c % 2}


def first_difference(layout, shape, owner, base=0):
    for r, c in itertools.product(range(shape[0]), range(shape[1])):
        got = layout.apply(r, c, shape=shape)
        want = dict(owner(r, c))
        want["m"] += base
        for a in _AXES:
            if got.get(a, 0) != want[a]:
                return (r, c), a, got.get(a, 0), want[a]
    return None


def _perturbed(n):
    """The accumulator with two lane digits swapped and the warp order reversed on one digit."""
    return [
        TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2 @ m, 1 @ laneid, 4 @ m, 8 @ laneid, 1 @ m)]),
        TileLayout(S[(4, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 1 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 2 @ m)]),
        TileLayout(S[(2, 2, 2, 8, n // 8, 4, 2) : (1 @ wid_in_wg, 2 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)]),
    ]


@pytest.mark.parametrize("n", [8, 16, 24])
def test_accumulator_mismatch_names_first_element_and_owner(n):
    for bad in _perturbed(n):
        diff = first_difference(bad, (64, n), wgmma_d_owner)
        assert diff is not None
        (el, axis, got, want) = diff
        res = checks.fragment_tiles("C", bad, (64, n), wgmma_accumulator(n), (64, n), "wgmma")
        assert res.reason == f"C: {_WORD[axis]} owner of element {el} is {got}, wgmma expects {want}"


def test_accumulator_tiles_and_bases_brute_force():
    # 128 x 32 made of 2 x 2 wgmma m64n16 tiles, each at its own register base (bases 0, 16, 8, 24).
    L = TileLayout(S[(2, 4, 2, 8, 2, 2, 4, 2) : (8 @ m, 1 @ wid_in_wg, 2 @ m, 4 @ laneid, 16 @ m, 4 @ m, 1 @ laneid, 1 @ m)])
    res = checks.fragment_tiles("C", L, (128, 32), wgmma_accumulator(16), (64, 16), "wgmma")
    assert res.reason is None
    assert [t.origin for t in res.tiles] == [(0, 0), (0, 16), (64, 0), (64, 16)]
    for t in res.tiles:
        r0, c0 = t.origin
        base = L.apply(r0, c0, shape=(128, 32))["m"]
        assert t.base == base
        for r, c in itertools.product(range(64), range(16)):
            want = wgmma_d_owner(r, c)
            want["m"] += base
            assert L.apply(r0 + r, c0 + c, shape=(128, 32)) == want
    assert [t.base for t in res.tiles] == [0, 16, 8, 24]


def test_replicated_operand_is_rejected():
    L = TileLayout(S[(4, 2, 8, 2, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])
    from tirxpy.layout import R
    rep = TileLayout(S[(4, 2, 8, 2, 4, 2) : (1 @ wid_in_wg, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)] + R[2 : 8 @ m])
    assert checks.fragment_tiles("C", L, (64, 16), wgmma_accumulator(16), (64, 16), "wgmma").reason is None
    r = checks.fragment_tiles("C", rep, (64, 16), wgmma_accumulator(16), (64, 16), "wgmma").reason
    assert r == "C: element (0, 0) is held by 2 owners (the layout has replicas), wgmma expects 1"


def test_register_pairs_must_start_even_and_tiles_must_divide():
    A = TileLayout(S[(2, 8, 2, 4, 2) : (2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)] + 1 @ m)
    r = checks.fragment_tiles("A", A, (16, 16), mma_m16n8k16_a(), (16, 16), "mma.sync", align=2).reason
    assert r == ("A: the mma.sync tile at element (0, 0) starts at register slot 1; mma.sync packs 2 values per "
                 "32-bit register, so each tile must start at a multiple of 2")
    r = checks.fragment_tiles("C", wgmma_accumulator(16), (64, 16), wgmma_accumulator(8), (64, 24), "wgmma").reason
    assert r == "C: tile (64, 16) is not a whole number of wgmma tiles (64, 24)"


def mma_a_owner(r, c):
    """PTX ISA Figure 79: lane and fragment index of element (r, c) of the 16 x 16 A tile."""
    return {"laneid": 4 * (r % 8) + (c % 8) // 2, "m": c % 2 + 2 * (r // 8) + 4 * (c // 8)}


def test_transposed_operand_reports_user_coordinates():
    At = mma_m16n8k16_a().permute_dims((16, 16), (1, 0))           # the user stores A as (K, M)
    assert checks.fragment_tiles("A", At, (16, 16), mma_m16n8k16_a(), (16, 16), "mma.sync", transposed=True).reason is None
    bad = mma_m16n8k16_a()                                          # the (M, K) layout used for a (K, M) tile
    first = None
    for r, c in itertools.product(range(16), range(16)):           # canonical (m, k) order
        got, want = bad.apply(c, r, shape=(16, 16)), mma_a_owner(r, c)
        for a in ("laneid", "m"):
            if got[a] != want[a]:
                first = ((c, r), a, got[a], want[a])
                break
        if first:
            break
    el, a, g, w = first
    r = checks.fragment_tiles("A", bad, (16, 16), mma_m16n8k16_a(), (16, 16), "mma.sync", transposed=True).reason
    assert r == f"A: {_WORD[a]} owner of element {el} is {g}, mma.sync expects {w}"


# ---------------------------------------------------------------- shared memory
def _ptx_strides(mn, k, bits, major, mode):
    """LBO / SBO (bytes) of mma_smem_layout's tiles, from PTX ISA 9.7.15.5.1.2's canonical forms."""
    T = 128 // bits
    W = (mode // 16) * T if mode else T
    nb = bits // 8
    if major == "K":
        return (None if mode else mn * T * nb), 8 * W * nb
    if mode:
        return 8 * W * nb, 8 * mn * nb
    return 8 * mn * nb, 8 * T * nb


def _ptx_k_offset(k0, mn, bits, major, mode):
    T = 128 // bits
    W = (mode // 16) * T if mode else T
    if major == "K":
        return (k0 // W) * mn * W + k0 % W if mode else (k0 // T) * mn * T + k0 % T
    return (k0 // 8) * 8 * mn


@pytest.mark.parametrize("dtype, bits, k_inst", [("bfloat16", 16, 16), ("float32", 32, 8), ("float8_e4m3", 8, 32)])
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("mode", [0, 32, 64, 128])
def test_canonical_layouts_are_accepted_with_ptx_strides(dtype, bits, k_inst, major, mode):
    mn, k = 128, 2 * max(k_inst, (mode // 16) * (128 // bits) if mode else 0, 8)
    L = mma_smem_layout(mn, k, dtype, major, mode)
    op = checks.smem_operand("A", L, (mn, k), dtype, k_inst, "wgmma")
    assert not isinstance(op, str), op
    assert (op.major, op.swizzle) == (major, mode)
    assert (op.lbo, op.sbo) == _ptx_strides(mn, k, bits, major, mode)
    assert op.k_offsets == tuple(_ptx_k_offset(k0, mn, bits, major, mode) for k0 in range(0, k, k_inst))


def test_b_stored_k_by_n_is_read_as_n_by_k():
    L = mma_smem_layout(64, 32, "float16", "MN", 64)                 # (N, K), N contiguous
    user = L.permute_dims((64, 32), (1, 0))                          # the user's (K, N) view
    op = checks.smem_operand("B", user, (32, 64), "float16", 16, "wgmma", k_dim=0)
    assert (op.major, op.swizzle, op.shape) == ("MN", 64, (64, 32))


def test_smem_errors_name_the_element():
    rowmajor = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 128) : (128, 1)]))
    r = checks.smem_operand("A", rowmajor, (64, 128), "bfloat16", 16, "wgmma")
    assert r.startswith("A: ") and "element (1, 0) sits at offset 128" in r and "would read offset 64" in r
    neither = TileLayout(S[(64, 64) : (2, 128)])
    r = checks.smem_operand("B", neither, (64, 64), "bfloat16", 16, "wgmma", k_dim=0)
    assert r == ("B: neither K nor N is contiguous in shared memory (element (1, 0) sits 2 elements after (0, 0)); "
                 "a tensor-core operand is K-major or MN-major")
    odd = ComposeLayout(SwizzleLayout(2, 3, 3), mma_smem_layout(64, 64, "bfloat16", "K", 128).tile_layout)
    r = checks.smem_operand("A", odd, (64, 64), "bfloat16", 16, "wgmma")
    assert "is not a hardware 32B/64B/128B swizzle for bfloat16" in r
    tf32_mn = mma_smem_layout(64, 32, "float32", "MN", 128)
    r = checks.smem_operand("A", tf32_mn, (64, 32), "float32", 8, "wgmma", majors=("K",))
    assert r == "A: wgmma takes float32 operands K-major only; this layout is MN-major (transpose the tile in memory)"
    r = checks.smem_operand("A", mma_smem_layout(64, 64, "bfloat16", "K", 128), (64, 64), "bfloat16", 48, "wgmma")
    assert r == "A: K = 64 is not a multiple of the wgmma instruction K = 48"


def test_swizzled_tile_must_start_on_the_swizzle_period():
    big = mma_smem_layout(128, 64, "bfloat16", "K", 128)
    view = big.slice(((4, 68), (0, 64)), (128, 64))                 # rows 4.. : byte 512
    r = checks.smem_operand("A", view, (64, 64), "bfloat16", 16, "wgmma")
    assert r == "A: the tile starts at byte 512 of its buffer; a 128B-swizzle operand must start on a 1024-byte boundary"
    ok = big.slice(((64, 128), (0, 64)), (128, 64))                 # rows 64.. : byte 8192
    assert not isinstance(checks.smem_operand("A", ok, (64, 64), "bfloat16", 16, "wgmma"), str)


# ---------------------------------------------------------------- issuing threads
def test_warpgroup_reason_brute_force():
    cta = ThreadSet.full(512)
    for w0 in range(13):
        ts = cta.filter(lambda t: w0 <= t // 32 < w0 + 4)
        r = checks.warpgroups_reason(ts)
        if w0 % 4 == 0:
            assert r is None
        else:
            assert r == ("wgmma needs a full warpgroup (4 consecutive warps starting at a multiple of 4); "
                         f"the call runs on warps {w0}..{w0 + 3}")
    assert checks.warpgroups_reason(cta.filter(lambda t: t >= 128)) is None      # warpgroups 1..3 each issue
    assert checks.warpgroups_reason(cta.filter(lambda t: t < 96)) is not None


def test_warp_and_single_thread_reasons():
    cta = ThreadSet.full(128)
    assert checks.whole_warps_reason(cta.filter(lambda t: t // 32 == 2)) is None
    assert checks.whole_warps_reason(cta.filter(lambda t: t < 16)) == (
        "mma.sync needs whole warps (all 32 lanes of each); the call runs on 16 threads (warps 0, some lanes)")
    assert checks.one_thread_reason(cta.elect_one()) is None
    assert checks.one_thread_reason(cta) == ("tcgen05.mma is issued by one thread (put the call under "
                                             "`if T.elect_one():`); the call runs on the whole CTA (128 threads)")
