"""table(): the owner grid as text, cell contents from owners() (tirxpy/layout/grid.py)."""
import pytest

import tirxpy.layout
from tirxpy.errors import TirxError
from tirxpy.layout import LayoutError, R, S, TileLayout, laneid, warpid
from tirxpy.layout.atoms import mma_smem_layout
from tirxpy.layout.grid import owners_grid, table

DESIGN = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)


def parse_table(text):
    lines = text.splitlines()
    header = lines[0].split()
    return header, [line.split("  ") for line in lines[1:]]


def test_table_cells_match_owners():
    text = table(DESIGN, shape=(8, 16))
    lines = text.splitlines()
    assert lines[0].split() == [str(c) for c in range(16)]
    assert len(lines) == 9
    # Columns are aligned: every cell starts at the header's offset.
    starts = [lines[0].index(" " + str(c) + " ") + 1 if c < 15 else lines[0].rindex("15") for c in range(16)]
    for r in range(8):
        row = lines[1 + r]
        assert row.split()[0] == str(r)
        for c in range(16):
            own = DESIGN.owners(r, c, shape=(8, 16))
            want = f"L{own[0]['laneid']} W{own[0]['warpid']}/{own[1]['warpid']} r{own[0]['m']}"
            assert row[starts[c] :].startswith(want), (r, c, row)
    assert "L12 W6/10 r1" in lines[4]


def test_table_1d_and_high_rank_and_show():
    L = TileLayout(S[(4,) : (1 @ laneid,)])
    t1 = table(L)
    assert t1.splitlines()[1].split() == ["0", "L0", "L1", "L2", "L3"]
    L3 = TileLayout(S[(2, 2, 2) : (1 @ warpid, 1 @ laneid, 1)])
    t3 = table(L3, shape=(2, 2, 2)).splitlines()
    assert len(t3) == 1 + 4 and t3[0].split() == ["0", "1"]
    assert t3[4].split() == ["3", "L1", "W1", "r0", "L1", "W1", "r1"]
    assert table(DESIGN, shape=(8, 16), show=("laneid",)).splitlines()[4].split()[10] == "L12"


def test_table_replicas_on_two_axes_listed_in_full():
    L = TileLayout(S[2 : 1 @ laneid] + R[2 : 8 @ laneid] + R[2 : 1 @ warpid])
    row = table(L).splitlines()[1]
    assert "L0 W0/L0 W1/L8 W0/L8 W1" in row


def test_memory_layout_labels_m():
    L = mma_smem_layout(8, 64, "bf16", "K", 128)
    row1 = table(L, shape=(8, 64)).splitlines()[2].split()
    assert row1[1:3] == [f"m{L.apply(1, 0, shape=(8, 64))['m']}", f"m{L.apply(1, 1, shape=(8, 64))['m']}"]


@pytest.mark.parametrize(
    "shape, msg",
    [((8, 8), r"shape \(8, 8\) has 64 elements but the layout has 128"), ((0, 128), "tuple of positive ints"), ("x", "tuple of positive ints")],
)
def test_bad_shape(shape, msg):
    with pytest.raises(LayoutError, match=msg):
        table(DESIGN, shape=shape)


def test_too_large():
    with pytest.raises(LayoutError, match="pictures draw at most 65536"):
        table(TileLayout(S[(1 << 17,) : (1,)]))


def test_unknown_show_axis():
    with pytest.raises(LayoutError, match="unknown axis 'lane'"):
        table(DESIGN, shape=(8, 16), show=("lane",))


def test_show_axis_the_layout_does_not_use():
    """A known axis the layout does not use is refused by name (it was dropped, and the table showed less than
    asked), as is any axis of a layout with none."""
    with pytest.raises(LayoutError, match="show names axis 'wgid', which this layout does not use; its axes: "
                                          "laneid, warpid, m"):
        table(DESIGN, shape=(8, 16), show=("laneid", "wgid"))
    with pytest.raises(LayoutError, match="show names axis 'F', which this layout does not use; its axes: none"):
        table(TileLayout(S[() : ()]), show="F")
    assert table(DESIGN, shape=(8, 16), show=("m", "laneid", "m")).splitlines()[1].split()[1:3] == ["r0", "L0"]


def test_layout_table_method_delegates():
    assert DESIGN.table(shape=(8, 16)) == table(DESIGN, shape=(8, 16))


def test_table_counts_replicas_and_checks_show():
    reps = TileLayout(S[4 : 1] + R[2**30 : 1])
    with pytest.raises(LayoutError, match="1073741824 owners \\(replicas\\); a picture lists at most 64 per cell"):
        table(reps)
    with pytest.raises(LayoutError, match="show must be an axis name or a list of axis names, got 3"):
        table(TileLayout(S[4 : 1]), show=3)


def test_owners_grid_lists_each_cells_replicas_row_major():
    rows, cols, axes, labels, owners = owners_grid(DESIGN, (8, 16))
    assert (rows, cols, axes, labels) == (8, 16, ["laneid", "warpid", "m"], ["L", "W", "r"])
    assert owners[3 * 16 + 9] == [(12, 6, 1), (12, 10, 1)]
    assert owners_grid(TileLayout(S[(2, 2, 2) : (1 @ warpid, 1 @ laneid, 1)]), (2, 2, 2))[:2] == (4, 2)


def test_plots_are_not_in_the_layout_package_and_the_error_says_where_they_are():
    with pytest.raises(ImportError, match=r"pictures live in tirxpy.viz — `from tirxpy.viz import plot`") as e:
        from tirxpy.layout import plot  # noqa: F401
    assert isinstance(e.value, TirxError)
    with pytest.raises(ImportError, match="from tirxpy.viz import render_svg"):
        tirxpy.layout.render_svg
    assert not hasattr(tirxpy.layout, "no_such_name")
