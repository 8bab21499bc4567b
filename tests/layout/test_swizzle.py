"""Swizzles and ComposeLayout (tirxpy/layout/swizzle.py)."""
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import tirxpy.layout
from tirxpy.testing import compose_layouts, domain, norm
from tirxpy.layout import (
    ComposeLayout, LayoutError, S, SwizzleLayout, TileLayout, dtype_bits, laneid, swizzle_32B, swizzle_64B,
    swizzle_128B, swizzle_for,
)


@st.composite
def swizzles(draw):
    B = draw(st.integers(0, 3))
    return SwizzleLayout(draw(st.integers(0, 3)), B, draw(st.integers(B, 4)))


def ref_swizzle(sw, m):
    """Bit by bit: bit P+b of m is XORed with bit P+A+b, for b < B."""
    out = m
    for b in range(sw.swizzle_len):
        out ^= ((m >> (sw.per_element + sw.atom_len + b)) & 1) << (sw.per_element + b)
    return out


@given(swizzles(), st.integers(0, 3))
def test_swizzle_is_a_bijection_on_each_period_block(sw, block):
    lo = block * sw.period
    img = [sw.apply(lo + x) for x in range(sw.period)]
    assert sorted(img) == list(range(lo, lo + sw.period))
    assert img == [ref_swizzle(sw, lo + x) for x in range(sw.period)]


@given(swizzles(), st.lists(st.integers(0, 4095), min_size=1, max_size=8))
def test_swizzle_array_and_symbolic_agree_with_int(sw, ms):
    arr = sw.apply(np.array(ms, dtype=np.int64))
    assert arr.tolist() == [sw(x) for x in ms]
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    e = sw.apply(x)
    assert [int(sympy.sympify(e).subs(x, v)) for v in ms] == [sw(v) for v in ms]


def test_design_swizzle_example():
    assert SwizzleLayout(0, 2, 3).apply(10) == 11
    L = ComposeLayout(0, 2, 3, TileLayout(S[(8, 8) : (8, 1)]))
    assert L.apply(1, 2, shape=(8, 8)) == {"m": 11}


def test_tirx_128B_fp16_example():
    L = ComposeLayout(SwizzleLayout(3, 3, 3), TileLayout(S[(8, 64) : (64, 1)]))
    for i, j in domain((8, 64)):
        assert L.apply(i, j, shape=(8, 64)) == {"m": 64 * i + 8 * ((j // 8) ^ i) + j % 8}
    banks = [(L.apply(i, 0, shape=(8, 64))["m"] * 2 // 4) % 32 for i in range(8)]
    assert banks == list(range(0, 32, 4))


@given(compose_layouts())
def test_compose_owners_are_swizzled_tile_owners(L):
    for i in range(L.size()):
        want = [dict(d, m=ref_swizzle(L.swizzle, d["m"])) for d in L.tile_layout.owners(i)]
        assert L.owners(i) == want
        assert L.owners(i)[0] == L.apply(i)
    assert eval(repr(L), vars(tirxpy.layout)) == L


@settings(max_examples=20)
@given(compose_layouts(), st.data())
def test_compose_symbolic_apply_matches_integer_apply(L, data):
    rows, cols = L.tile_layout.shard[0].extent, L.size() // L.tile_layout.shard[0].extent
    i, j = sympy.symbols("i j", integer=True, nonnegative=True)
    sym = L.apply(i, j, shape=(rows, cols))
    for c in data.draw(st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1)), min_size=1, max_size=3)):
        got = {k: int(sympy.sympify(v).subs({i: c[0], j: c[1]})) for k, v in sym.items()}
        assert got == L.apply(*c, shape=(rows, cols))


def test_swizzle_outer_permutes_logical_index():
    sw = SwizzleLayout(0, 2, 2)
    L = ComposeLayout(sw, TileLayout(S[16 : 1 @ laneid]), swizzle_inner=False)
    for i in range(16):
        assert L.owners(i) == [{"laneid": sw(i)}] == [L.apply(i)]
    assert L.is_injective() and "swizzle_inner=False" in repr(L)


@pytest.mark.parametrize("swizzle_bytes,dtype,bytes_per_elem", [
    (32, "bf16", 2), (64, "float16", 2), (128, "f32", 4), (128, "e4m3", 1), (64, 64, 8), (32, "tf32", 4),
])
def test_swizzle_for_hardware_modes(swizzle_bytes, dtype, bytes_per_elem):
    sw = swizzle_for(swizzle_bytes, dtype)
    # Hardware (PTX tensor-map / wgmma swizzle modes): in the byte address, the 16-byte chunk
    # index bits [4, 4 + B) are XORed with the 128-byte line bits [7, 7 + B), B = log2(bytes / 16).
    B = {32: 1, 64: 2, 128: 3}[swizzle_bytes]
    for e in range(4096 // bytes_per_elem):
        a = e * bytes_per_elem
        assert sw(e) * bytes_per_elem + a % bytes_per_elem == a ^ (((a >> 7) & ((1 << B) - 1)) << 4)
    assert {32: swizzle_32B, 64: swizzle_64B, 128: swizzle_128B}[swizzle_bytes](dtype) == sw


@pytest.mark.parametrize("call,msg", [
    (lambda: SwizzleLayout(-1, 2, 3), "per_element must be a non-negative int"),
    (lambda: SwizzleLayout(0, 2.0, 3), "swizzle swizzle_len must be an integer, got 2.0"),
    (lambda: SwizzleLayout(0, 3, 2), "atom_len 2 < swizzle_len 3"),
    (lambda: SwizzleLayout(0, 2, 3, axis="laneid"), "'laneid' is a thread axis"),
    (lambda: SwizzleLayout(0, 2, 3, axis="TLane"), "'TLane' is a tmem axis"),
    (lambda: ComposeLayout(0, 2, TileLayout(S[8 : 1])), "use ComposeLayout"),
    (lambda: ComposeLayout(SwizzleLayout(0, 1, 1), S[8 : 1]), "with a TileLayout, got LayoutSpec"),
    (lambda: ComposeLayout(0, 1, 1, TileLayout(S[8 : 1 @ laneid])), "places nothing on 'm'"),
    (lambda: ComposeLayout(0, 2, 2, TileLayout(S[24 : 1 @ laneid]), swizzle_inner=False), "size 24 is not a multiple"),
    (lambda: dtype_bits("float7"), "unknown dtype 'float7'"),
    (lambda: dtype_bits(12), "12 bits is not supported"),
    (lambda: swizzle_for(16, "bf16"), "must be 32, 64 or 128 bytes"),
    (lambda: swizzle_for(128, 4), "sub-byte element types"),
])
def test_bad_input(call, msg):
    with pytest.raises(LayoutError, match=msg):
        call()


def test_compose_identity_and_queries():
    a = ComposeLayout(0, 2, 3, TileLayout(S[(8, 8) : (8, 1)]))
    b = ComposeLayout(SwizzleLayout(0, 2, 3), TileLayout(S[(8, 8) : (8, 1)]))
    assert a == b and hash(a) == hash(b) and a.identical(b) and a.equivalent(b)
    assert a.size() == 64 and a.axes() == ("m",) and a.is_injective()
    assert norm(a.owners(0)) == [{}]
    a.check_well_formed()


def test_swizzled_view_is_a_layout_and_round_trips():
    """A slice of a swizzled tile (half its rows) is a valid ComposeLayout on its own."""
    import tirxpy.layout as tl

    full = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(16, 64) : (64, 1)]))
    view = full.slice(((8, 16), (0, 64)), shape=(16, 64))
    for r in range(8):
        for c in range(64):
            assert view.owners(r, c, shape=(8, 64)) == full.owners(r + 8, c, shape=(16, 64))
    again = eval(repr(view), vars(tl))
    assert again == view


def test_footprint_is_one_past_the_largest_swizzled_address():
    sw = SwizzleLayout(0, 2, 3)
    L = ComposeLayout(sw, TileLayout(S[(3, 8) : (8, 1)] + 5 @ tirxpy.layout.m))
    brute = max(sw.apply(5 + 8 * r + c) for r in range(3) for c in range(8)) + 1
    assert L.footprint() == brute


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float8_e4m3", "float64"])
def test_hardware_swizzle_bytes_inverts_swizzle_for(dtype):
    from tirxpy.layout import hardware_swizzle_bytes

    for mode in (32, 64, 128):
        assert hardware_swizzle_bytes(swizzle_for(mode, dtype), dtype) == mode
    assert hardware_swizzle_bytes(SwizzleLayout(0, 0, 3), dtype) == 0        # the identity: no swizzle
    assert hardware_swizzle_bytes(SwizzleLayout(5, 3, 3), dtype) is None     # not a hardware mode


def test_dense_box_mismatch_ignores_the_swizzle_and_names_the_first_element():
    sw = swizzle_128B("bf16")
    assert ComposeLayout(sw, TileLayout(S[(64, 64) : (64, 1)])).dense_box_mismatch((64, 64)) is None
    # rows padded to 72 elements: the first element off the dense box is (1, 0) at 72, not 64
    assert ComposeLayout(sw, TileLayout(S[(64, 64) : (72, 1)])).dense_box_mismatch((64, 64)) == ((1, 0), 72, 64)


def test_compose_layout_tile_is_the_method():
    from tirxpy.layout.errors import LayoutTypeError

    L = ComposeLayout(0, 2, 3, TileLayout(S[(8, 8) : (8, 1)]))
    assert L.tile_layout.identical(TileLayout(S[(8, 8) : (8, 1)]))
    assert L.tile.__func__ is tirxpy.layout.Layout.tile              # Layout.tile() is not shadowed
    with pytest.raises(LayoutTypeError, match="tile \\(inner\\) takes a TileLayout, got ComposeLayout; a swizzled"):
        L.tile(TileLayout(S[2 : 1]), (8, 8), (2, 1))


def test_swizzle_is_an_involution_and_huge_reverse_queries_are_closed_form():
    L = ComposeLayout(0, 2, 3, TileLayout(S[2**40 : 1]))
    assert L.elements_at(m=8) == [9] and L.apply(9) == {"m": 8}
    with pytest.raises(LayoutError, match="per_element \\+ atom_len \\+ swizzle_len = 66 bits; the limit is 64"):
        SwizzleLayout(1, 32, 33)
    with pytest.raises(LayoutError, match="swizzle_inner must be True or False, got 'yes'"):
        ComposeLayout(0, 2, 3, TileLayout(S[(8, 8) : (8, 1)]), swizzle_inner="yes")
