"""Canonical WGMMA / tcgen05 shared-memory layouts against PTX ISA 9.7.15.5.1.2 ("Shared Memory
Matrix Layout": Table 38, the canonical-layout table, its worked examples and the LBO / SBO
definitions)."""
import itertools

import pytest

from tirxpy.layout import ComposeLayout, LayoutError, S, SwizzleLayout, TileLayout
from tirxpy.layout.atoms import SmemStrides, mma_smem_layout, smem_descriptor_strides

BITS = {"bf16": 16, "f16": 16, "tf32": 32, "e4m3": 8}


def cute_eval(shape, stride, coord):
    """Evaluate a CuTe layout (column-major modes) at a flat coordinate per top-level mode."""
    off = 0
    for sh, st, c in zip(shape, stride, coord):
        sh = sh if isinstance(sh, tuple) else (sh,)
        st = st if isinstance(st, tuple) else (st,)
        for e, s in zip(sh, st):
            off += (c % e) * s
            c //= e
    return off


def swz(B, off_bytes):
    """Swizzle<B, 4, 3> on a byte offset."""
    return off_bytes ^ (((off_bytes >> 7) & ((1 << B) - 1)) << 4)


# The PTX worked examples: (dtype, major, swizzle, exact layout (mn-mode, k-mode), mn, k, LBO bytes, SBO bytes).
EXAMPLES = [
    ("tf32", "K", 0, (((8, 2), (4, 4)), ((4, 32), (1, 64))), 16, 16, 64 * 4, 32 * 4),
    ("bf16", "MN", 0, (((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))), 16, 16, 128 * 2, 64 * 2),
    ("bf16", "MN", 32, (((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256))), 32, 16, 128 * 2, 256 * 2),
    ("bf16", "MN", 64, (((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512))), 64, 16, 256 * 2, 512 * 2),
]


@pytest.mark.parametrize("dtype, major, sw, cute, mn, k, lbo, sbo", EXAMPLES)
def test_ptx_worked_examples(dtype, major, sw, cute, mn, k, lbo, sbo):
    nbytes = BITS[dtype] // 8
    L = mma_smem_layout(mn, k, dtype, major, sw)
    B = {0: 0, 32: 1, 64: 2, 128: 3}[sw]
    (shape, stride) = cute
    for r, c in itertools.product(range(mn), range(k)):
        want = swz(B, cute_eval(shape, stride, (r, c)) * nbytes)
        assert L.apply(r, c, shape=(mn, k))["m"] * nbytes == want, (r, c)
    assert smem_descriptor_strides(L, dtype, major) == SmemStrides(major, sw, lbo, sbo)


def canonical_offset(dtype, major, sw, mn, r, c):
    """Byte offset from the canonical-layout table (atoms along MN first, then along K)."""
    b = BITS[dtype] // 8
    T = 16 // b
    if major == "K":
        W = sw // b if sw else T
        if sw:  # ((8,m),(T,2k)):((sw/16*T, SBO),(1,T)); atoms of K follow all MN groups
            el = (r % 8) * W + (r // 8) * 8 * W + c % W + (c // W) * mn * W
        else:  # ((8,m),(T,2k)):((1T,SBO),(1,LBO))
            el = (r % 8) * T + (r // 8) * 8 * T + c % T + (c // T) * mn * T
    else:
        W = sw // b if sw else T
        if sw:  # ((T,sw/16,m),(8,k)):((1,T,LBO),(sw/16*T,SBO))
            el = r % W + (r // W) * 8 * W + (c % 8) * W + (c // 8) * 8 * mn
        else:  # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
            el = r % T + (r // T) * 8 * T + (c % 8) * T + (c // 8) * 8 * mn
    return swz({0: 0, 32: 1, 64: 2, 128: 3}[sw], el * b)


@pytest.mark.parametrize("dtype", ["bf16", "tf32", "e4m3"])
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("sw", [0, 32, 64, 128])
def test_every_mode_against_canonical_table(dtype, major, sw):
    b = BITS[dtype] // 8
    W = (sw // b) if sw else 16 // b
    mn, k = (16, 2 * W) if major == "K" else (2 * W, 16)
    L = mma_smem_layout(mn, k, dtype, major, sw)
    names, t = L.owner_table()
    offs = t[:, 0, names.index("m")] * b
    for i in range(mn * k):
        r, c = divmod(i, k)
        assert offs[i] == canonical_offset(dtype, major, sw, mn, r, c), (r, c)
    # A bijection onto [0, mn*k) elements: nothing overlaps, nothing is left out.
    assert sorted(offs.tolist()) == [j * b for j in range(mn * k)]
    st = smem_descriptor_strides(L, dtype, major)
    assert st.swizzle == sw and st.major == major
    if major == "K":
        assert st.sbo == 8 * (sw or 16)  # 8 rows of one atom / core matrix
        assert st.lbo == (None if sw else mn * 16)  # no-swizzle: next core matrix along K
    elif sw:
        assert (st.lbo, st.sbo) == (8 * sw, 8 * mn * b)
    else:
        assert (st.lbo, st.sbo) == (8 * mn * b, 128)


def test_strides_rejects_non_canonical():
    bad = ComposeLayout(SwizzleLayout(3, 3, 3), TileLayout(S[(8, 8, 1, 64) : (512, 1, 4096, 8)]))
    with pytest.raises(LayoutError, match=r"not a canonical K-major 128B-swizzle layout: element \(0, 1\) sits at offset 8"):
        smem_descriptor_strides(bad, "bf16", "K")


def test_strides_rejects_foreign_swizzle():
    L = ComposeLayout(SwizzleLayout(2, 3, 3), TileLayout(S[(8, 8, 1, 64) : (512, 64, 4096, 1)]))
    with pytest.raises(LayoutError, match="not a hardware 32B/64B/128B swizzle for 'bf16'"):
        smem_descriptor_strides(L, "bf16", "K")


def test_strides_needs_shape_for_other_forms():
    L = TileLayout(S[(16, 16) : (16, 1)])
    with pytest.raises(LayoutError, match=r"cannot tell the \(mn, k\) shape .*pass shape=\(mn, k\)"):
        smem_descriptor_strides(L, "bf16", "K")
    with pytest.raises(LayoutError, match="not a canonical K-major no-swizzle layout"):
        smem_descriptor_strides(L, "bf16", "K", shape=(16, 16))


def test_strides_rejects_non_memory_layout():
    from tirxpy.layout import laneid

    with pytest.raises(LayoutError, match="places nothing in memory"):
        smem_descriptor_strides(TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]), "bf16", "K", shape=(8, 4))


@pytest.mark.parametrize(
    "args, msg",
    [
        ((64, 60, "bf16", "K", 128), r"K-major 128B-swizzle 16-bit tile needs mn % 8 == 0 and k % 64 == 0"),
        ((60, 64, "bf16", "K", 0), r"K-major no-swizzle 16-bit tile needs mn % 8 == 0 and k % 8 == 0"),
        ((48, 16, "bf16", "MN", 128), r"MN-major 128B-swizzle 16-bit tile needs mn % 64 == 0 and k % 8 == 0"),
        ((64, 64, "bf16", "K", 16), r"swizzle \(bytes\) must be one of 0, 32, 64, 128"),
        ((64, 64, "bf16", "k", 128), r"major must be one of 'K', 'MN'"),
        ((64, 64, "f64", "K", 128), "8-, 16- or 32-bit elements; 'f64' has 64 bits"),
        ((0, 64, "bf16", "K", 128), "mn .* must be a positive int, got 0"),
        ((64, "64", "bf16", "K", 128), "k .* must be a positive int, got '64'"),
    ],
)
def test_bad_arguments(args, msg):
    with pytest.raises(LayoutError, match=msg):
        mma_smem_layout(*args)


def test_operand_size_and_shape_checks():
    with pytest.raises(LayoutError, match="a shared-memory operand holds at most 262144 \\(the limit MAX_OPERAND_BYTES"):
        mma_smem_layout(2**40, 64, "bf16")
    L = mma_smem_layout(64, 64, "bf16")
    with pytest.raises(LayoutError, match="must be a tuple of positive ints: entry 0 is 64.5"):
        smem_descriptor_strides(L, "bf16", shape=(64.5, 64))
    with pytest.raises(LayoutError, match="shape must be the \\(mn, k\\) pair"):
        smem_descriptor_strides(L, "bf16", shape=(4096,))


def test_descriptor_strides_are_kept_per_layout_value_and_refusals_are_not():
    """smem_descriptor_strides answers an equal layout (built anew) from its memo, keeps dtype / major / shape
    apart, and refuses bad arguments every time."""
    from tirxpy.layout.atoms import smem

    smem._STRIDES.clear()
    a = smem.smem_descriptor_strides(mma_smem_layout(64, 64, "bf16", "K", 128), "bf16", "K", (64, 64))
    b = smem.smem_descriptor_strides(mma_smem_layout(64, 64, "bf16", "K", 128), "bf16", "K", [64, 64])
    assert a is b and len(smem._STRIDES) == 1 and (a.swizzle, a.sbo) == (128, 1024)
    c = smem.smem_descriptor_strides(mma_smem_layout(64, 16, "bf16", "MN", 0), "bf16", "MN")
    assert c == SmemStrides(major="MN", swizzle=0, lbo=1024, sbo=128) and len(smem._STRIDES) == 2
    for _ in range(2):
        with pytest.raises(LayoutError, match="shape must be the"):
            smem.smem_descriptor_strides(mma_smem_layout(64, 64, "bf16", "K", 128), "bf16", "K", "ab")
        with pytest.raises(LayoutError, match="shape must be the"):
            smem.smem_descriptor_strides(mma_smem_layout(64, 64, "bf16", "K", 128), "bf16", "K", 64)
    assert len(smem._STRIDES) == 2
