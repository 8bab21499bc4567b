"""The logical tile as a grid of owners, and its terminal table (``Layout.table``).

The PNG / SVG plots of the same grid live in :mod:`tirxpy.viz`.

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

from math import prod

from tirxpy.errors import shown

from .axis import Axis
from .coords import check_shape
from .errors import LayoutError, LayoutTypeError

_ORDER = ("laneid", "tid_in_wg", "tx", "warpid", "wid_in_wg", "wgid", "cbx", "cby", "cbz",
          "bx", "by", "bz", "pid", "TLane", "TCol", "m")
_ABBREV = {"laneid": "L", "warpid": "W", "wid_in_wg": "w", "wgid": "G", "tid_in_wg": "T", "tx": "t",
           "TLane": "TL", "TCol": "TC"}
MAX_CELLS = 1 << 16
"""Largest tile the pictures draw (a picture of more cells is unreadable anyway)."""
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
        raise LayoutTypeError(f"show must be an axis name or a list of axis names, got {shown(show)} "
                              f"({type(show).__name__})")
    out = []
    for a in show:
        name = Axis.get(a).name
        if name not in used:
            raise LayoutError(f"show names axis {shown(name)}, which this layout does not use; its axes: "
                              f"{', '.join(used) or 'none'} (show=None draws them all)")
        if name not in out:
            out.append(name)
    return out


def _abbrev(layout, name):
    if name == "m":
        return "r" if any(Axis.get(a).is_thread for a in layout.axes()) else "m"
    return _ABBREV.get(name, name + "=")


def owners_grid(layout, shape=None, show=None):
    """``(rows, cols, axes, labels, owners)`` of the logical tile drawn as a 2-D grid: ``axes`` the axes
    shown, ``labels`` their abbreviations, ``owners[i]`` one tuple of axis values per replica of cell ``i``
    (row-major). The pictures of :mod:`tirxpy.viz` draw this grid."""
    from .tile import Layout  # noqa: PLC0415  (tile imports this module for Layout.table)

    if not isinstance(layout, Layout):
        hint = (": a SwizzleLayout maps addresses, draw ComposeLayout(swizzle, tile) or its tile"
                if type(layout).__name__ == "SwizzleLayout" else "")
        raise LayoutTypeError(f"a table or picture draws a TileLayout or ComposeLayout, got {type(layout).__name__:.60}"
                              f"{hint}")
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
    numbers on the left). ``show`` picks and orders the axes (default: every axis used), each one the layout
    uses."""
    rows, cols, _, labels, owners = owners_grid(layout, shape, show)
    cells = [_cell_text(labels, owners[i]) for i in range(rows * cols)]
    width = max(max(len(c) for c in cells), len(str(cols - 1)))
    lw = len(str(rows - 1))
    lines = [" " * lw + "  " + "  ".join(str(c).ljust(width) for c in range(cols)).rstrip()]
    for r in range(rows):
        body = "  ".join(cells[r * cols + c].ljust(width) for c in range(cols))
        lines.append(f"{str(r).rjust(lw)}  {body}".rstrip())
    return "\n".join(lines)
