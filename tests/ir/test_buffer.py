import pytest

from tirxpy.ir import Buffer, BufferLoad, BufferRegion, IRError, Var
from tirxpy.layout import ComposeLayout, S, TileLayout, TCol, TLane, laneid, swizzle_128B, warpid


def test_defaults():
    A = Buffer("A", (4, 8), "float16")
    assert A.storage == "global" and A.layout.identical(TileLayout(S[(4, 8)]))
    t = Buffer("t", (128, 64), "float32", "tmem")
    assert t.layout.identical(TileLayout(S[(128, 64) : (1@TLane, 1@TCol)]))
    assert Buffer("r", (8,), "f32", "registers").storage == "local"
    assert Buffer("A", (4, 8), "float16").bytes() == 64


def test_loads_and_regions():
    A = Buffer("A", (256, 128), "bfloat16")
    ld = A[3, Var("j")]
    assert isinstance(ld, BufferLoad) and ld.dtype == A.dtype and str(ld) == "A[3, j]"
    v = A[64:128, 32:96]
    assert isinstance(v, BufferRegion) and v.shape == (64, 64) and v.offset == {}
    assert v.layout.identical(TileLayout(S[(64, 64) : (128, 1)] + 8224@__import__("tirxpy").layout.m))
    assert str(v) == "A[64:128, 32:96]"
    assert A[:, 0:64].shape == (256, 64) and str(A[:, 0:64]) == "A[:, 0:64]"


def test_symbolic_view_keeps_layout_and_offset():
    A = Buffer("A", (256, 128), "bfloat16")
    m0, k0 = Var("m0"), Var("k0")
    v = A[m0:m0 + 64, k0:k0 + 32]
    assert v.extents == (64, 32) and v.layout.identical(TileLayout(S[(64, 32) : (128, 1)]))
    assert str(v.offset["m"]) == "m0 * 128 + k0"


def test_a_symbolic_view_may_be_larger_than_its_strided_tensor():
    """A 32 x 32 tile over a 20-row tensor (a problem smaller than one tile): the view keeps the tensor's
    strides past the edge; a layout with no elements there is refused, naming the dimension."""
    A = Buffer("A", (20, 64), "bfloat16")
    m0, k0 = Var("m0"), Var("k0")
    v = A[m0:m0 + 32, k0:k0 + 32]
    assert v.shape == (32, 32) and v.layout.identical(TileLayout(S[(32, 32) : (64, 1)]))
    assert str(v.offset["m"]) == "m0 * 64 + k0"
    sw = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 64)]))
    s = Buffer("s", (64, 64), "bfloat16", "shared", layout=sw)
    with pytest.raises(IRError, match="dimension 0 of s: a view of 128 elements is longer than the 64 of s"):
        s[m0:m0 + 128, 0:64].layout


def test_a_constant_view_past_the_edge_says_how_to_clip_it():
    """A view with a constant start lies inside its tensor; the error names the edge and the two ways out."""
    A = Buffer("A", (100, 64), "float16")
    with pytest.raises(IRError) as e:
        A[0:128, :]
    assert "slice [0, 0 + 128) passes the edge of [0, 100)" in str(e.value)
    assert "view [0, 100)" in e.value.hint and "T.cta_id(0) * 128" in e.value.hint
    with pytest.raises(IRError, match=r"slice \[100, 100 \+ 4\) is empty or outside \[0, 100\)"):
        A[100:104, :]


def test_partial_index_and_swizzled_stage():
    sw = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(3, 128, 64)]))
    smem = Buffer("smem", (3, 128, 64), "bfloat16", "shared", layout=sw)
    st = smem[Var("stage")]
    assert st.shape == (128, 64) and st.squeeze == (True, False, False) and str(st) == "smem[stage]"
    assert str(st.offset["m"]) == "stage * 8192"
    assert smem.bytes() == 3 * 128 * 64 * 2


def test_thread_layout_on_registers():
    frag = Buffer("frag", (32, 2), "float32", "local", layout=TileLayout(S[(32, 2) : (1@laneid, 1)]))
    assert frag.layout.axes() == ("laneid", "m")
    assert frag[Var("l"), 1].buffer is frag
    assert frag.layout.apply(0, 1, shape=(32, 2)) == {"laneid": 0, "m": 1}
    assert warpid.name == "warpid"


def test_buffer_errors():
    with pytest.raises(IRError, match=r"has 32 elements but tensor A has shape \(4, 4\)"):
        Buffer("A", (4, 4), "float32", layout=TileLayout(S[32]))
    with pytest.raises(IRError, match="non-static extent"):
        Buffer("A", (Var("n"),), "float32")
    A = Buffer("A", (8, 8), "float32")
    with pytest.raises(IRError, match=r"index 9 is out of range \[0, 8\) in dimension 1 of A"):
        A[0, 9]
    with pytest.raises(IRError, match=r"A has 2 dimension\(s\) \(8, 8\) but is indexed with 3"):
        A[0, 0, 0]
    with pytest.raises(IRError, match="slice extent `n - m0` is not a compile-time constant") as e:
        A[Var("m0"):Var("n"), 0]
    assert "A[m0:m0 + 128]" in str(e.value)
    with pytest.raises(IRError, match="strided slices are not supported"):
        A[0:8:2, 0]
    with pytest.raises(IRError, match="tensor memory of shape"):
        Buffer("t", (256, 8), "float16", "tmem")
    with pytest.raises(IRError, match="unknown storage scope 'sram'"):
        Buffer("A", (8,), "float32", "sram")


def test_alias_shares_the_root_storage_and_is_bounded():
    from tirxpy.ir import Buffer, IRError

    acc = Buffer("acc", (64, 16), "float32", "local")
    pairs = acc.alias((16,), "uint64", name="pairs")  # 16 x 8 bytes of 1024 bytes
    assert pairs.root is acc and pairs.alias((4,)).root is acc
    assert pairs.storage == "local" and pairs.dtype.bits == 64
    with pytest.raises(IRError, match="needs 8200 bytes but acc has only 4096"):
        acc.alias((1025,), "uint64")


# ---------------------------------------------------------------------- closed-form sizes
def _table_footprint(layout, axis="m"):
    names, t = layout.owner_table()
    return int(t[:, :, names.index(axis)].max()) + 1 if axis in names else 1


@pytest.mark.parametrize("layout", [
    TileLayout(S[(4, 8) : (8, 1)]), TileLayout(S[(4, 8) : (1, 4)] + 7@__import__("tirxpy").layout.m),
    TileLayout(S[(32, 4, 2) : (1@laneid, 2, 1)]), TileLayout(S[(8, 8) : (0, 1)]),
    TileLayout(S[(2, 16) : (1@warpid, 1@laneid)]),
    ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(3, 128, 64)])),
    ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(8, 64) : (128, 1)])),
])
def test_footprint_closed_form_matches_the_table(layout):
    from tirxpy.ir.buffer import footprint

    for axis in ("m", "laneid", "TCol"):
        assert footprint(layout, axis) == _table_footprint(layout, axis)


def test_footprint_of_huge_layouts_is_closed_form():
    from tirxpy.ir.buffer import footprint

    assert footprint(TileLayout(S[(2**40, 4) : (8, 1)])) == (2**40 - 1) * 8 + 3 + 1
    sw = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(2**30, 64)]))
    assert footprint(sw) == 2**36       # whole swizzle periods: the bound is exact


def test_on_chip_buffers_over_the_limit_are_refused_when_built():
    with pytest.raises(IRError, match=r"s \(2, 58112\) float32 in shared memory needs 464896 bytes of shared memory "
                                      r"per CTA, over the limit of 232448"):
        Buffer("s", (2, 58112), "float32", "shared")
    assert Buffer("s", (58112,), "float32", "shared").bytes() == 232448
    with pytest.raises(IRError, match=r"needs 1024 tensor-memory columns, over the limit of 512"):
        Buffer("t", (128, 512), "float64", "tmem", layout=TileLayout(S[(128, 512) : (1@TLane, 1@TCol)]))
    with pytest.raises(IRError, match=r"has the bool True"):
        Buffer("b", (True,), "float32")
    with pytest.raises(IRError, match=r"has the float 4.0"):
        Buffer("b", (4.0,), "float32")
    assert Buffer("g", (2**40,), "float32").shape == (2**40,)     # global tensors are only bounded by 2**62


@pytest.mark.parametrize("shape,stacked", [((2, 64, 64), True), ((64, 65), False)])
def test_a_layout_of_another_size_is_refused_with_the_fix(shape, stacked):
    """A layout whose size is not the tensor's is an IRError; where the tensor holds whole copies of the layout's
    tile (a ring of stages given one stage's layout) the hint says to build the layout over the whole shape."""
    with pytest.raises(IRError, match=r"has 4096 elements but tensor X has shape") as e:
        Buffer("X", shape, "bfloat16", "shared", layout=TileLayout(S[(64, 64)]))
    if stacked:
        assert "holds 2 copies of the layout's tile" in e.value.hint and "S[(STAGES, rows, cols)]" in e.value.hint
    else:
        assert e.value.hint == "give a layout whose extents multiply to the tensor's element count"
