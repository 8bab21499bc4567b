"""table() and plot(): cell contents from owners(), PNG pixels and SVG structure."""
import xml.etree.ElementTree as ET

import pytest

from tirxpy.layout import LayoutError, R, S, TileLayout, laneid, warpid
from tirxpy.layout.atoms import mma_smem_layout, wgmma_accumulator
from tirxpy.layout.pictures import LABEL_CELLS, owner_color, plot, render_image, render_svg, table
from tirxpy.layout.png import decode_png

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


def test_png_pixels(tmp_path):
    out = plot(DESIGN, tmp_path / "d.png", shape=(8, 16))
    assert out == [str(tmp_path / "d.png")]
    img = decode_png((tmp_path / "d.png").read_bytes())
    ref = render_image(DESIGN, shape=(8, 16))
    assert img.shape == ref.shape and (img == ref).all()
    bg = (160, 160, 160)
    colours = {}
    for r in range(8):
        for c in range(16):
            own = DESIGN.owners(r, c, shape=(8, 16))[0]
            colours[(r, c)] = owner_color(own)
    # Cells with the same owner thread share a colour, different lanes in a warp differ.
    assert colours[(3, 8)] == colours[(3, 9)]
    assert colours[(3, 8)] != colours[(3, 10)]
    assert colours[(0, 0)] != colours[(0, 8)]  # warp 5 vs warp 6: another shade
    # Every cell colour occurs in the image; grid lines are grey.
    present = {tuple(p) for p in img.reshape(-1, 3).tolist()}
    assert set(colours.values()) <= present and bg in present


def test_png_cell_geometry(tmp_path):
    plot(DESIGN, tmp_path / "g.png", shape=(8, 16))
    img = decode_png((tmp_path / "g.png").read_bytes())
    from tirxpy.layout.pictures import _prepare

    geo, _, _ = _prepare(DESIGN, (8, 16), None)
    assert img.shape == (geo.height, geo.width, 3)
    for (r, c) in [(0, 0), (3, 9), (7, 15), (5, 2)]:
        x, y, w, h = geo.cell(r, c)
        want = owner_color(DESIGN.owners(r, c, shape=(8, 16))[0])
        assert tuple(img[y + h - 2, x + w - 2]) == want
        assert tuple(img[y - 1, x + 2]) == (160, 160, 160)  # grid line above the cell


def test_large_plot_is_unlabelled(tmp_path):
    L = wgmma_accumulator(128)  # 8192 cells
    assert L.size() > LABEL_CELLS
    img = render_image(L, shape=(64, 128))
    assert img.shape == (2 + 64 * 8 + 2, 2 + 128 * 8 + 2, 3)
    assert tuple(img[2 + 1 + 3, 2 + 1 + 3]) == owner_color(L.owners(0, 0, shape=(64, 128))[0])


def test_svg_structure(tmp_path):
    written = plot(DESIGN, tmp_path / "both", shape=(8, 16))
    assert written == [str(tmp_path / "both.png"), str(tmp_path / "both.svg")]
    root = ET.parse(tmp_path / "both.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    cells = [e for e in root.iter(ns + "rect") if e.get("class") == "cell"]
    assert len(cells) == 128
    c = cells[3 * 16 + 9]
    assert c.find(ns + "title").text == "(3, 9): L12 W6/10 r1"
    assert c.get("fill") == "#%02x%02x%02x" % owner_color(DESIGN.owners(3, 9, shape=(8, 16))[0])
    labels = [e for e in root.iter(ns + "text") if e.get("class") == "label"]
    assert len(labels) == 128
    assert [t.text for t in labels[3 * 16 + 9]] == ["L12", "W6/10", "r1"]
    headers = [e.text for e in root.iter(ns + "text") if e.get("class") == "header"]
    assert headers == [str(i) for i in range(16)] + [str(i) for i in range(8)]
    assert render_svg(DESIGN, shape=(8, 16)) == (tmp_path / "both.svg").read_text()


def test_plot_bad_directory(tmp_path):
    with pytest.raises(LayoutError, match="directory .* does not exist"):
        plot(DESIGN, tmp_path / "nope" / "x.png", shape=(8, 16))


def test_layout_table_method_delegates():
    assert DESIGN.table(shape=(8, 16)) == table(DESIGN, shape=(8, 16))


def test_pictures_count_replicas_and_check_their_arguments(tmp_path):
    reps = TileLayout(S[4 : 1] + R[2**30 : 1])
    with pytest.raises(LayoutError, match="1073741824 owners \\(replicas\\); a picture lists at most 64 per cell"):
        table(reps)
    with pytest.raises(LayoutError, match="show must be an axis name or a list of axis names, got 3"):
        table(TileLayout(S[4 : 1]), show=3)
    with pytest.raises(LayoutError, match="is not a usable file name"):
        plot(TileLayout(S[4 : 1]), "a\x00b.png")
