"""tirxpy.layout: storage-first layouts on named hardware axes.

    >>> from tirxpy.layout import TileLayout, S, R, laneid, warpid
    >>> L = TileLayout(S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] + R[2 : 4@warpid] + 5@warpid)
    >>> L.owners(3, 9, shape=(8, 16))
    [{'laneid': 12, 'warpid': 6, 'm': 1}, {'laneid': 12, 'warpid': 10, 'm': 1}]
"""
from tirxpy.errors import TirxError

from .axis import Axis, Bank, F, P, TCol, TLane, bx, by, bz, cbx, cby, cbz, laneid, m, pid, rank, tid_in_wg, tx, warpid, wgid, wid_in_wg
from .errors import LayoutError
from .iters import AxisStride, Iter, LayoutSpec, R, S
from .swizzle import ComposeLayout, SwizzleLayout, bitxor, dtype_bits, hardware_swizzle_bytes, swizzle_32B, swizzle_64B, swizzle_128B, swizzle_for
from .tile import Layout, TileLayout
from .canonical import canonicalize, equivalent, identical
from .algebra import direct_sum, group, permute_dims, slice_layout, split_iter, tile_product
from .algebra_compose import compose, pack, unpack
from .atoms import (
    SmemStrides, WGMMA_N, ldmatrix_layout, mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c, mma_smem_layout,
    smem_descriptor_strides, tcgen05_smem_layout, tmem_accumulator, tmem_ld_layout, tmem_ld_tile, tmem_ld_tmem_layout,
    tmem_warpx4_layout,
    wgmma_a_fragment, wgmma_accumulator, wgmma_smem_layout,
)
from .grid import table
from .ranks import peer_of, ranks_of, replicated, sharded


class _MovedError(TirxError, ImportError):
    """A name that moved out of tirxpy.layout (a TirxError and an ImportError)."""


_MOVED = {"plot": "tirxpy.viz", "render_image": "tirxpy.viz", "render_svg": "tirxpy.viz"}


def __getattr__(name):
    # pictures (PNG / SVG plots) live in tirxpy.viz, above the layouts; tirxpy.layout imports nothing of it
    if name in _MOVED:
        raise _MovedError(f"tirxpy.layout.{name} is not part of the layouts: pictures live in {_MOVED[name]} — "
                          f"`from {_MOVED[name]} import {name}`")
    raise AttributeError(f"module 'tirxpy.layout' has no attribute {name!r}")
