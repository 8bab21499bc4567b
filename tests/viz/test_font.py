import numpy as np

from tirxpy.viz.font import GLYPH_H, GLYPH_W, draw_text, glyph, has_glyph, text_width


def test_glyphs_are_5x7_and_distinct():
    chars = "0123456789LWwrmTG/"
    for ch in chars:
        g = glyph(ch)
        assert has_glyph(ch) and len(g) == GLYPH_H and all(len(row) == GLYPH_W and set(row) <= {"#", "."} for row in g)
    assert len({glyph(c) for c in chars}) == len(chars)


def test_missing_glyph_is_a_box():
    assert not has_glyph("~") and glyph("~")[0] == "#####"


def test_draw_and_clip():
    img = np.zeros((9, 20, 3), dtype=np.uint8)
    draw_text(img, 1, 1, "1", (255, 255, 255))
    ink = {(y - 1, x - 1) for y, x in zip(*np.nonzero(img[:, :, 0]))}
    want = {(r, c) for r, row in enumerate(glyph("1")) for c, b in enumerate(row) if b == "#"}
    assert ink == want
    draw_text(img, 18, 5, "88", (9, 9, 9))  # partly outside: clipped, no error
    assert text_width("L12") == 17 and text_width("") == 0 and text_width("ab", 2) == 22
