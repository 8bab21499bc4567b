"""Pictures of layouts: a terminal table and a PNG / SVG plot of the logical tile.

Each cell of the logical tile lists its owners compactly: ``L12 W6 r1`` is lane 12, warp 6,
register (``m``) 1; replicas are separated by ``/`` (``L12 W6/10 r1`` when they differ on one
axis only). 1-D layouts draw as one row; rank > 2 shapes as ``(prod(leading), last)``.

    >>> from tirxpy.layout import TileLayout, S, R, laneid, warpid
    >>> L = TileLayout(S[(2, 4) : (1@warpid, 1@laneid)] + R[2 : 2@warpid])
    >>> print(table(L, shape=(2, 4)))
       0         1         2         3
    0  L0 W0/2   L1 W0/2   L2 W0/2   L3 W0/2
    1  L0 W1/3   L1 W1/3   L2 W1/3   L3 W1/3

Abbreviations: ``L`` laneid, ``W`` warpid, ``w`` wid_in_wg, ``G`` wgid, ``T`` tid_in_wg,
``t`` tx, ``TL`` / ``TC`` TLane / TCol, ``r`` the register slot ``m`` of a thread-owned layout
(``m`` itself for memory layouts); other axes print as ``name=``.
"""
from __future__ import annotations

import colorsys
import os
from math import prod
from xml.sax.saxutils import escape

import numpy as np

from .axis import Axis
from .coords import check_shape
from .errors import LayoutError, LayoutTypeError
from .font import GLYPH_H, draw_text, text_width
from .png import encode_png

_ORDER = ("laneid", "tid_in_wg", "tx", "warpid", "wid_in_wg", "wgid", "cbx", "cby", "cbz",
          "bx", "by", "bz", "pid", "TLane", "TCol", "m")
_ABBREV = {"laneid": "L", "warpid": "W", "wid_in_wg": "w", "wgid": "G", "tid_in_wg": "T", "tx": "t",
           "TLane": "TL", "TCol": "TC"}
MAX_CELLS = 1 << 16
"""Largest tile the pictures draw (a picture of more cells is unreadable anyway)."""
LABEL_CELLS = 4096
"""Plots of more cells than this draw colours only, no labels."""
MAX_CELL_OWNERS = 64
"""Most owners (replicas) one cell of a picture lists."""


# ---------------------------------------------------------------- the grid of owners
def _grid_shape(layout, shape):
    size = layout.size()
    shape = (size,) if shape is None else check_shape(shape, size)
    if size > MAX_CELLS:
        raise LayoutError(f"the layout has {size} elements; pictures draw at most {MAX_CELLS} (the limit MAX_CELLS): "
                          "draw a sub-tile (Layout.slice)")
    reps = layout.replica_count_total()
    if reps > MAX_CELL_OWNERS:
        raise LayoutError(f"each element of the layout has {reps} owners (replicas); a picture lists at most "
                          f"{MAX_CELL_OWNERS} per cell (the limit MAX_CELL_OWNERS): draw the layout without its replicas")
    if len(shape) == 1:
        return 1, shape[0]
    return prod(shape[:-1]), shape[-1]


def _axes(layout, show):
    used = layout.axes()
    if show is None:
        ordered = [a for a in _ORDER if a in used]
        return ordered + [a for a in used if a not in ordered]
    if isinstance(show, str):
        show = (show,)
    if not isinstance(show, (list, tuple)):
        raise LayoutTypeError(f"show must be an axis name or a list of axis names, got {show!r} ({type(show).__name__})")
    out = []
    for a in show:
        name = Axis.get(a).name
        if name in used and name not in out:
            out.append(name)
    return out


def _abbrev(layout, name):
    if name == "m":
        return "r" if any(Axis.get(a).is_thread for a in layout.axes()) else "m"
    return _ABBREV.get(name, name + "=")


def _owners_grid(layout, shape, show):
    """(rows, cols, axes, labels, owners) with owners[i] a list of per-replica value tuples."""
    rows, cols = _grid_shape(layout, shape)
    axes = _axes(layout, show)
    names, t = layout.owner_table()
    idx = [names.index(a) for a in axes]
    owners = [[tuple(int(v) for v in rep[idx]) for rep in t[i]] for i in range(rows * cols)]
    labels = [_abbrev(layout, a) for a in axes]
    return rows, cols, axes, labels, owners


def _cell_text(labels, reps):
    if not labels:
        return "."
    if len(reps) == 1:
        return " ".join(f"{lb}{v}" for lb, v in zip(labels, reps[0]))
    differ = [k for k in range(len(labels)) if len({r[k] for r in reps}) > 1]
    if len(differ) <= 1:
        parts = []
        for k, lb in enumerate(labels):
            vals = [str(r[k]) for r in reps] if k in differ else [str(reps[0][k])]
            parts.append(lb + "/".join(vals))
        return " ".join(parts)
    return "/".join(" ".join(f"{lb}{v}" for lb, v in zip(labels, r)) for r in reps)


def table(layout, shape=None, show=None) -> str:
    """The logical tile as an aligned text grid of owners (column headers on top, row
    numbers on the left). ``show`` picks and orders the axes (default: every axis used)."""
    rows, cols, _, labels, owners = _owners_grid(layout, shape, show)
    cells = [_cell_text(labels, owners[i]) for i in range(rows * cols)]
    width = max(max(len(c) for c in cells), len(str(cols - 1)))
    lw = len(str(rows - 1))
    lines = [" " * lw + "  " + "  ".join(str(c).ljust(width) for c in range(cols)).rstrip()]
    for r in range(rows):
        body = "  ".join(cells[r * cols + c].ljust(width) for c in range(cols))
        lines.append(f"{str(r).rjust(lw)}  {body}".rstrip())
    return "\n".join(lines)


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
    lane, warp = _thread_key(owner)
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
    rows, cols, axes, labels, owners = _owners_grid(layout, shape, show)
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
    ``path.svg``) for a path with neither suffix. Returns the paths written."""
    if not isinstance(path, (str, os.PathLike)):
        raise LayoutTypeError(f"plot path must be a file name (str or path), got {path!r} ({type(path).__name__})")
    path = os.fspath(path)
    if not isinstance(path, str) or "\x00" in path or not path:
        raise LayoutError(f"plot path {path!r} is not a usable file name; give e.g. 'layout.png'")
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
            raise LayoutError(f"cannot write {p!r}: directory {d!r} does not exist")
        data = (encode_png(render_image(layout, shape=shape, show=show)) if kind == "png"
                else render_svg(layout, shape=shape, show=show).encode("utf-8"))
        try:
            with open(p, "wb") as f:
                f.write(data)
        except OSError as e:
            raise LayoutError(f"cannot write {p!r}: {e.strerror or e}; pick a writable path") from None
        written.append(p)
    return written
