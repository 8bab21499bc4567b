"""tirxpy.viz: pictures of layouts (PNG / SVG plots of the logical tile) and the small PNG encoder
and bitmap font they draw with. It sits above :mod:`tirxpy.layout` and imports only it; the
terminal table stays with the layouts (:func:`tirxpy.layout.table`, ``Layout.table``).

    >>> import os, tempfile
    >>> from tirxpy.layout import TileLayout, S, laneid
    >>> from tirxpy.viz import plot
    >>> with tempfile.TemporaryDirectory() as d:
    ...     [os.path.basename(p) for p in plot(TileLayout(S[4 : 1@laneid]), os.path.join(d, "lanes"))]
    ['lanes.png', 'lanes.svg']
"""
from .pictures import LABEL_CELLS, owner_color, plot, render_image, render_svg
from .png import decode_png, encode_png

__all__ = ["LABEL_CELLS", "decode_png", "encode_png", "owner_color", "plot", "render_image", "render_svg"]
