"""Pictures of layouts: a PNG / SVG plot of the logical tile, one coloured cell per element.

A cell's colour picks its owning thread (hue by lane, shade by warp); its label lists the owners as
:func:`tirxpy.layout.grid.table` does (``L12 W6 r1``: lane 12, warp 6, register 1). Plots of more
than :data:`LABEL_CELLS` cells draw colours only.

    >>> from tirxpy.layout import TileLayout, S, laneid, warpid
    >>> img = render_image(TileLayout(S[(2, 4) : (1@warpid, 1@laneid)]), shape=(2, 4))
    >>> img.shape, img.dtype.name
    ((65, 87, 3), 'uint8')
"""
from __future__ import annotations

import colorsys
import os
from xml.sax.saxutils import escape

import numpy as np

from tirxpy.layout.coords import is_int
from tirxpy.layout.errors import LayoutError, LayoutTypeError
from tirxpy.layout.grid import owners_grid
from tirxpy.errors import shown

from .font import GLYPH_H, draw_text, text_width
from .png import encode_png

LABEL_CELLS = 4096
"""Plots of more cells than this draw colours only, no labels."""


# ---------------------------------------------------------------- colours
def _thread_key(owner: dict):
    """(lane, warp) that picks a cell's colour: the owning thread, else TMEM lane, else memory slot."""
    lane = warp = None
    if "laneid" in owner:
        lane = owner["laneid"]
    for a in ("tid_in_wg", "tx"):
        if a in owner:
            lane = owner[a] % 32 if lane is None else lane
            warp = owner[a] // 32
    w = [owner[a] for a in ("warpid", "wid_in_wg") if a in owner]
    if w:
        warp = (warp or 0) + sum(w)
    if "wgid" in owner:
        warp = (warp or 0) + 4 * owner["wgid"]
    if lane is None and warp is None:
        if "TLane" in owner:
            lane, warp = owner["TLane"] % 32, owner["TLane"] // 32
        else:
            mv = owner.get("m", 0)
            lane, warp = mv % 32, mv // 32
    return lane or 0, warp or 0


_LIGHT = (0.62, 0.45, 0.76, 0.35)


def owner_color(owner: dict) -> tuple:
    """RGB colour of a cell owned by ``owner``: hue by lane (spread around the wheel so that
    neighbouring lanes contrast), shade by warp.

        >>> owner_color({"laneid": 0, "warpid": 0})
        (236, 81, 81)
    """
    if not isinstance(owner, dict) or not all(isinstance(a, str) and is_int(v) for a, v in owner.items()):
        raise LayoutTypeError("owner_color takes one owner: a dict of axis name -> int (an entry of what "
                              f"L.owners(...) returns), got {shown(owner, 80)}")
    lane, warp = _thread_key({a: int(v) for a, v in owner.items()})
    hue = (lane * 0.381966) % 1.0
    r, g, b = colorsys.hls_to_rgb(hue, _LIGHT[warp % 4], 0.8)
    return (round(r * 255), round(g * 255), round(b * 255))


def _ink(rgb):
    lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    return (0, 0, 0) if lum > 140 else (255, 255, 255)


# ---------------------------------------------------------------- geometry
class _Geometry:
    """Pixel positions shared by the PNG and the SVG."""

    PAD, LINE = 3, GLYPH_H + 2

    def __init__(self, rows, cols, label_lines, labelled):
        self.rows, self.cols, self.labelled = rows, cols, labelled
        if labelled:
            longest = max((text_width(s) for lines in label_lines for s in lines), default=0)
            self.cw = max(longest + 2 * self.PAD + 1, text_width(str(cols - 1)) + 2 * self.PAD, 16)
            nl = max((len(x) for x in label_lines), default=1)
            self.ch = max(nl, 1) * self.LINE + 2 * self.PAD
            self.left = text_width(str(rows - 1)) + 2 * self.PAD + 2
            self.top = GLYPH_H + 2 * self.PAD + 2
        else:
            self.cw = self.ch = 8
            self.left = self.top = 2
        self.width = self.left + cols * self.cw + 2
        self.height = self.top + rows * self.ch + 2

    def cell(self, r, c):
        """(x, y, w, h) of cell (r, c), 1-pixel grid line excluded."""
        return self.left + c * self.cw + 1, self.top + r * self.ch + 1, self.cw - 1, self.ch - 1


def _label_lines(labels, reps):
    out = []
    for k, lb in enumerate(labels):
        vals = []
        for r in reps:
            if str(r[k]) not in vals:
                vals.append(str(r[k]))
        out.append(lb + "/".join(vals))
    return out


def _prepare(layout, shape, show):
    rows, cols, axes, labels, owners = owners_grid(layout, shape, show)
    names, t = layout.owner_table()
    colours = [owner_color(dict(zip(names, map(int, t[i][0])))) for i in range(rows * cols)]
    lines = [_label_lines(labels, owners[i]) for i in range(rows * cols)]
    geo = _Geometry(rows, cols, lines, rows * cols <= LABEL_CELLS)
    return geo, colours, lines


def render_image(layout, shape=None, show=None) -> np.ndarray:
    """The plot as an (H, W, 3) uint8 RGB array."""
    geo, colours, lines = _prepare(layout, shape, show)
    img = np.full((geo.height, geo.width, 3), 255, dtype=np.uint8)
    img[geo.top : geo.top + geo.rows * geo.ch + 1, geo.left : geo.left + geo.cols * geo.cw + 1] = (160, 160, 160)
    for i, rgb in enumerate(colours):
        r, c = divmod(i, geo.cols)
        x, y, w, h = geo.cell(r, c)
        img[y : y + h, x : x + w] = rgb
        if geo.labelled:
            for k, s in enumerate(lines[i]):
                draw_text(img, x + geo.PAD, y + geo.PAD + k * geo.LINE, s, _ink(rgb))
    if geo.labelled:
        for c in range(geo.cols):
            x, _, w, _ = geo.cell(0, c)
            s = str(c)
            draw_text(img, x + (w - text_width(s)) // 2, geo.PAD, s, (0, 0, 0))
        for r in range(geo.rows):
            _, y, _, h = geo.cell(r, 0)
            s = str(r)
            draw_text(img, geo.left - geo.PAD - 1 - text_width(s), y + (h - GLYPH_H) // 2, s, (0, 0, 0))
    return img


def render_svg(layout, shape=None, show=None) -> str:
    """The plot as SVG text: one ``<rect class="cell">`` per element (its ``<title>`` lists the
    owners), one ``<text class="label">`` per labelled cell, ``<text class="header">`` indices."""
    geo, colours, lines = _prepare(layout, shape, show)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{geo.width}" height="{geo.height}" '
        f'viewBox="0 0 {geo.width} {geo.height}" font-family="monospace" font-size="9">',
        f'<rect class="background" x="0" y="0" width="{geo.width}" height="{geo.height}" fill="#ffffff"/>',
    ]
    for i, rgb in enumerate(colours):
        r, c = divmod(i, geo.cols)
        x, y, w, h = geo.cell(r, c)
        fill = "#%02x%02x%02x" % rgb
        title = escape(f"({r}, {c}): " + " ".join(lines[i]))
        out.append(f'<rect class="cell" x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}"><title>{title}</title></rect>')
        if geo.labelled:
            ink = "#%02x%02x%02x" % _ink(rgb)
            spans = "".join(
                f'<tspan x="{x + geo.PAD}" y="{y + geo.PAD + (k + 1) * geo.LINE - 2}">{escape(s)}</tspan>'
                for k, s in enumerate(lines[i])
            )
            out.append(f'<text class="label" fill="{ink}">{spans}</text>')
    if geo.labelled:
        for c in range(geo.cols):
            x, _, w, _ = geo.cell(0, c)
            out.append(f'<text class="header" x="{x + w // 2}" y="{geo.top - geo.PAD}" text-anchor="middle">{c}</text>')
        for r in range(geo.rows):
            _, y, _, h = geo.cell(r, 0)
            out.append(f'<text class="header" x="{geo.left - geo.PAD}" y="{y + h // 2 + 3}" text-anchor="end">{r}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plot(layout, path, shape=None, show=None) -> list:
    """Write the plot to ``path``: PNG for ``*.png``, SVG for ``*.svg``, both (``path.png`` and
    ``path.svg``) for a path with neither suffix; a directory is refused. Returns the paths written."""
    if not isinstance(path, (str, os.PathLike)):
        raise LayoutTypeError(f"plot path must be a file name (str or path), got {shown(path)} ({type(path).__name__})")
    path = os.fspath(path)
    if not isinstance(path, str) or "\x00" in path or not path:
        raise LayoutError(f"plot path {shown(path)} is not a usable file name; give e.g. 'layout.png'")
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise LayoutError(f"plot path {shown(path)} is a directory; give a file name in it, e.g. "
                          f"{os.path.join(path, 'layout.png')!r}")
    low = path.lower()
    if low.endswith(".png"):
        targets = [(path, "png")]
    elif low.endswith(".svg"):
        targets = [(path, "svg")]
    else:
        targets = [(path + ".png", "png"), (path + ".svg", "svg")]
    written = []
    for p, kind in targets:
        d = os.path.dirname(p)
        if d and not os.path.isdir(d):
            raise LayoutError(f"cannot write {shown(p)}: directory {shown(d)} does not exist")
        data = (encode_png(render_image(layout, shape=shape, show=show)) if kind == "png"
                else render_svg(layout, shape=shape, show=show).encode("utf-8"))
        try:
            with open(p, "wb") as f:
                f.write(data)
        except OSError as e:
            raise LayoutError(f"cannot write {shown(p)}: {e.strerror or e}; pick a writable path") from None
        written.append(p)
    return written
