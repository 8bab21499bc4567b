"""``ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.b16``: the register layout of the loaded tile.

PTX ISA 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix", Figure 104 ("ldmatrix
fragment layout for one 8x8 Matrix with 16-bit elements"): a group of four consecutive threads
loads one 16-byte row; thread ``t`` receives row ``t / 4``, elements ``2 * (t % 4)`` and
``2 * (t % 4) + 1``. With ``.x2`` / ``.x4`` matrix ``q`` (row addresses from threads
``8q .. 8q + 7``) lands in destination register ``q``. ``.trans`` loads each matrix in
column-major order: thread ``t`` receives column ``t / 4``, rows ``2 * (t % 4)`` and
``2 * (t % 4) + 1``.

The logical tile is the matrices as they sit in shared memory (rows = the row addresses),
row-major; ``m`` counts 16-bit elements in the thread's registers (``m = 2 * q + j``: register
``q``, half ``j``).
"""
from __future__ import annotations
from tirxpy.errors import shown

from ..axis import laneid, m
from ..coords import is_int
from ..errors import LayoutError
from ..iters import S
from ..tile import TileLayout
from ._check import choice, positive_int


def ldmatrix_layout(num: int = 1, trans: bool = False, grid=None) -> TileLayout:
    """Layout of the ``num`` 8x8 b16 matrices one ``ldmatrix .x{num}`` loads.

    ``grid=(gr, gc)`` (``gr * gc == num``) arranges the matrices in a ``(8*gr, 8*gc)`` tile,
    matrix ``q`` at block row ``q % gr``, block column ``q // gr``; the default stacks them
    vertically, ``grid=(num, 1)``, a ``(8*num, 8)`` tile. ``ldmatrix_layout(4, grid=(2, 2))``
    is the ``mma.m16n8k16`` A fragment.

        >>> ldmatrix_layout(1).apply(3, 5, shape=(8, 8))            # row 3 -> lanes 12..15
        {'m': 1, 'laneid': 14}
        >>> ldmatrix_layout(1, trans=True).apply(3, 5, shape=(8, 8))  # column 5 -> lanes 20..23
        {'m': 1, 'laneid': 21}
        >>> ldmatrix_layout(4, grid=(2, 2)).apply(9, 10, shape=(16, 16))
        {'m': 6, 'laneid': 5}
    """
    num = choice(num, (1, 2, 4), "ldmatrix .num (matrix count)", "ldmatrix loads .x1, .x2 or .x4 matrices")
    if not isinstance(trans, bool):
        raise LayoutError(f"ldmatrix trans must be True or False, got {shown(trans)}")
    if grid is None:
        grid = (num, 1)
    if not isinstance(grid, (tuple, list)) or len(grid) != 2:
        raise LayoutError(f"ldmatrix grid must be a pair (rows, cols) of matrix counts, got {shown(grid)}")
    if not all(is_int(g) and int(g) >= 1 for g in grid):    # (the message is built only for a bad grid)
        for g in grid:
            positive_int(g, f"ldmatrix grid {shown(tuple(grid))} entry")
    gr, gc = (int(g) for g in grid)
    if gr * gc != num:
        raise LayoutError(
            f"ldmatrix grid {(gr, gc)} holds {gr * gc} matrices but .x{num} loads {num}; "
            f"give a grid whose product is {num}, e.g. ({num}, 1)"
        )
    if not trans:
        return TileLayout(S[(gr, 8, gc, 4, 2) : (2 @ m, 4 @ laneid, 2 * gr @ m, 1 @ laneid, 1 @ m)])
    return TileLayout(S[(gr, 4, 2, gc, 8) : (2 @ m, 1 @ laneid, 1 @ m, 2 * gr @ m, 4 @ laneid)])
