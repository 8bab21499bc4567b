"""plot(): PNG pixels and SVG structure of the owner grid (tirxpy/viz/pictures.py)."""
import xml.etree.ElementTree as ET

import pytest

from tirxpy.layout import LayoutError, R, S, TileLayout, laneid, warpid
from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.viz.pictures import LABEL_CELLS, _prepare, owner_color, plot, render_image, render_svg
from tirxpy.viz.png import decode_png

DESIGN = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)


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


def test_plot_checks_its_arguments():
    with pytest.raises(LayoutError, match="pictures draw at most 65536"):
        render_image(TileLayout(S[(1 << 17,) : (1,)]))
    with pytest.raises(LayoutError, match="show must be an axis name or a list of axis names, got 3"):
        render_svg(TileLayout(S[4 : 1]), show=3)
    with pytest.raises(LayoutError, match="is not a usable file name"):
        plot(TileLayout(S[4 : 1]), "a\x00b.png")


@pytest.mark.parametrize("bad, hint", [("S[4:1]", "got str"), (None, "got NoneType"), (3, "got int"),
                                       ("swizzle", "got SwizzleLayout: a SwizzleLayout maps addresses")])
def test_drawing_something_that_is_no_layout_is_refused(bad, hint):
    from tirxpy.layout import SwizzleLayout
    from tirxpy.layout.grid import table

    bad = SwizzleLayout(0, 1, 1) if bad == "swizzle" else bad
    for draw in (render_image, render_svg, table):
        with pytest.raises(LayoutError, match=f"draws a TileLayout or ComposeLayout, {hint}"):
            draw(bad)


@pytest.mark.parametrize("owner", [None, [1], {"laneid": "x"}, {"laneid": 1.5}, {"laneid": True}, {3: 1}])
def test_owner_color_takes_an_owner_dict(owner):
    with pytest.raises(LayoutError, match=r"owner_color takes one owner: a dict of axis name -> int"):
        owner_color(owner)


def test_owner_color_reads_numpy_ints():
    import numpy as np

    assert owner_color({"laneid": np.int64(5), "warpid": np.uint8(1)}) == owner_color({"laneid": 5, "warpid": 1})


def test_plot_into_a_directory_is_refused(tmp_path):
    for path in (tmp_path, str(tmp_path) + "/", "sub/"):
        with pytest.raises(LayoutError, match="is a directory; give a file name in it"):
            plot(TileLayout(S[4 : 1]), path)
    assert list(tmp_path.iterdir()) == []
