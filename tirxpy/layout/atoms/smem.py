"""Canonical shared-memory operand layouts of WGMMA (sm_90a) and tcgen05.mma (sm_100a).

PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout" (Table 38, Figures 156-165) and its
"Canonical Layouts" table (the same layouts are used by tcgen05, PTX ISA 9.7.16.3.3). With
``T = 128 / bits`` elements per 16 bytes and ``S`` the swizzle width in bytes:

- K-major (K contiguous): swizzle atom = 8 rows x ``S`` bytes, row-major; no-swizzle
  ("interleave") core matrix = 8 rows x 16 bytes, contiguous. SBO = offset between
  8-row groups; LBO (no-swizzle only) = offset between core matrices along K.
- MN-major (MN contiguous): swizzle atom = ``S`` bytes of MN x 8 values of K; no-swizzle core
  matrix = 16 bytes of MN x 8 values of K. Swizzled: LBO = offset between atoms along MN,
  SBO = offset between 8-column groups of K. Interleave: LBO = offset between 8-column groups
  of K, SBO = offset between core matrices along MN.

Every layout here is of the logical ``(mn, k)`` tile, row-major ``(row, col) = (mn, k)``: for
A that is the M x K matrix; for B pass the N x K view (B transposed). Atoms repeat along MN
first, then along K (the PTX examples' order). The layout is
``ComposeLayout(swizzle, TileLayout(...))`` with the ``Swizzle<B, 4, 3>``-in-bytes of the mode
(``B = 0`` for no swizzle, the identity). :func:`smem_descriptor_strides` reads LBO / SBO back
off any such layout for the matrix descriptor (PTX ISA 9.7.15.5.1.2.2 "Matrix Descriptor
Format", 9.7.16.4.1 "Shared memory descriptor").
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.errors import shown

from ..axis import m as m_axis
from ..coords import check_shape
from ..errors import LayoutError
from ..iters import S
from ..swizzle import ComposeLayout, SwizzleLayout, dtype_bits, swizzle_for
from ..tile import TileLayout
from ._check import choice, positive_int

MAX_OPERAND_BYTES = 256 * 1024
"""Largest operand tile the shared-memory atoms build (an SM has 228 KiB of shared memory)."""
SWIZZLE_MODES = (0, 32, 64, 128)
"""Swizzle widths in bytes; 0 is no swizzle (the interleaved core-matrix layout)."""
MAJORS = ("K", "MN")


@dataclass(frozen=True)
class SmemStrides:
    """What a WGMMA / tcgen05 shared-memory descriptor needs besides the start address.

    ``lbo`` / ``sbo`` are byte offsets (the descriptor stores them >> 4); ``lbo`` is ``None``
    where the hardware ignores it (swizzled K-major: "not used, assumed to be 1").
    ``swizzle`` is the swizzle width in bytes (0: none).
    """

    major: str
    swizzle: int
    lbo: int | None
    sbo: int


def _params(dtype, swizzle, major):
    bits = dtype_bits(dtype)
    if bits not in (8, 16, 32):
        raise LayoutError(
            f"tensor-core shared-memory operands have 8-, 16- or 32-bit elements; {shown(dtype)} has {bits} bits"
        )
    choice(swizzle, SWIZZLE_MODES, "swizzle (bytes)", "use 0 (no swizzle), 32, 64 or 128")
    choice(major, MAJORS, "major", "'K' when K is contiguous in memory, 'MN' when M (or N) is")
    return bits, 128 // bits


def _swizzle(swizzle, dtype, T):
    if swizzle == 0:
        return SwizzleLayout(T.bit_length() - 1, 0, 3)
    return swizzle_for(swizzle, dtype)


def mma_smem_layout(mn: int, k: int, dtype, major: str = "K", swizzle: int = 128) -> ComposeLayout:
    """Canonical layout of an ``(mn, k)`` operand tile in shared memory (element offsets on ``m``).

    Requires ``mn`` and ``k`` to be whole numbers of swizzle atoms / core matrices.

        >>> L = mma_smem_layout(64, 64, "bf16", "K", 128)
        >>> L
        ComposeLayout(3, 3, 3, TileLayout(S[(8, 8, 1, 64) : (512@m, 64@m, 4096@m, 1@m)]))
        >>> L.apply(1, 0, shape=(64, 64)), L.apply(1, 8, shape=(64, 64))   # chunk 0 <-> chunk 1 in row 1
        ({'m': 72}, {'m': 64})
        >>> smem_descriptor_strides(L, "bf16", "K")
        SmemStrides(major='K', swizzle=128, lbo=None, sbo=1024)
    """
    bits, T = _params(dtype, swizzle, major)
    mn = positive_int(mn, "mn (rows of the operand tile)")
    k = positive_int(k, "k (columns of the operand tile)")
    if mn * k * bits > 8 * MAX_OPERAND_BYTES:
        raise LayoutError(f"an {shown((mn, k))} operand tile of {bits}-bit elements takes "
                          f"{shown(mn * k * bits // 8, 60)} bytes; a "
                          f"shared-memory operand holds at most {MAX_OPERAND_BYTES} (the limit MAX_OPERAND_BYTES: one "
                          "SM has 228 KiB of shared memory): shrink mn or k")
    W = (swizzle // 16) * T if swizzle else T  # elements of the contiguous run of one atom row
    if major == "K":
        if mn % 8 or k % W:
            raise LayoutError(
                f"a K-major {f'{swizzle}B' if swizzle else 'no'}-swizzle {bits}-bit tile needs mn % 8 == 0 and k % {W} == 0 "
                f"(atom = 8 rows x {W} elements); got ({mn}, {k}): pad the tile"
            )
        # (row group, row, atom col, col):  8-row groups first, then atoms along K.
        tile = TileLayout(S[(mn // 8, 8, k // W, W) : (8 * W, W, mn * W, 1)])
    else:
        if mn % W or k % 8:
            raise LayoutError(
                f"an MN-major {f'{swizzle}B' if swizzle else 'no'}-swizzle {bits}-bit tile needs mn % {W} == 0 and k % 8 == 0 "
                f"(atom = {W} MN-elements x 8 K-values); got ({mn}, {k}): pad the tile"
            )
        tile = TileLayout(S[(mn // W, W, k // 8, 8) : (8 * W, 1, 8 * mn, W)])
    return ComposeLayout(_swizzle(swizzle, dtype, T), tile)


wgmma_smem_layout = mma_smem_layout
tcgen05_smem_layout = mma_smem_layout


def _mode_of(layout, dtype, T):
    if isinstance(layout, TileLayout):
        return 0, layout
    if not isinstance(layout, ComposeLayout) or not layout.swizzle_inner:
        raise LayoutError(
            "expected a shared-memory operand layout (TileLayout or ComposeLayout with an inner swizzle), got "
            f"{shown(layout)}"
        )
    sw = layout.swizzle
    if sw.swizzle_len == 0:
        return 0, layout.tile_layout
    for mode in (32, 64, 128):
        if swizzle_for(mode, dtype) == sw:
            return mode, layout.tile_layout
    raise LayoutError(
        f"swizzle {shown(sw)} is not a hardware 32B/64B/128B swizzle for {shown(dtype)} "
        f"(those are {[swizzle_for(b, dtype) for b in (32, 64, 128)]}); build the layout with mma_smem_layout"
    )


_STRIDES: dict = {}


def smem_descriptor_strides(layout, dtype, major: str = "K", shape=None) -> SmemStrides:
    """Leading / stride byte offsets and swizzle mode the matrix descriptor needs, read off
    ``layout`` (a layout of the logical ``(mn, k)`` operand tile).

    The offsets are measured on the unswizzled tile layout: SBO / LBO are the ``m`` distances
    between the neighbouring core matrices named in PTX ISA 9.7.15.5.1.2.1. The whole window one
    instruction reads (all ``mn`` rows x one atom of K) is then checked against the canonical
    formula; a layout the descriptor cannot express raises :class:`LayoutError` naming the
    first element that differs.

        >>> L = mma_smem_layout(64, 16, "bf16", "MN", 0)
        >>> smem_descriptor_strides(L, "bf16", "MN")
        SmemStrides(major='MN', swizzle=0, lbo=1024, sbo=128)

    A result is kept per (layout value, dtype, major, shape): layouts compare by structure and are
    immutable, and a kernel asks for the same few operand tiles' strides at every descriptor.
    """
    try:
        key = (type(layout), layout, type(dtype), dtype, type(major), major, None if shape is None else tuple(shape))
        hit = _STRIDES.get(key)
    except Exception:       # noqa: BLE001  (unhashable, or a hash / == of its own that raises: refused below)
        key = hit = None
    if hit is not None:
        return hit
    out = _descriptor_strides(layout, dtype, major, shape)
    if key is not None:
        if len(_STRIDES) >= 4096:
            _STRIDES.clear()
        _STRIDES[key] = out
    return out


def _descriptor_strides(layout, dtype, major, shape) -> SmemStrides:
    bits, T = _params(dtype, 0, major)
    nbytes = bits // 8
    mode, tile = _mode_of(layout, dtype, T)
    if shape is None:
        raise_hint = "pass shape=(mn, k)"
        sizes = [it.extent for it in tile.shard]
        shape = None
        # Recover (mn, k) from the canonical 4-iterator form when no shape is given.
        if len(sizes) == 4:
            shape = (sizes[0] * sizes[1], sizes[2] * sizes[3])
        if shape is None:
            raise LayoutError(f"cannot tell the (mn, k) shape of {shown(layout)}; {raise_hint}")
    if not isinstance(shape, (tuple, list)) or len(shape) != 2:
        raise LayoutError(f"shape must be the (mn, k) pair of the operand tile, got {shown(shape)}")
    mn, k = check_shape(shape, tile.size())
    if mn * min(k, 128) > 1 << 17:
        raise LayoutError(f"shape ({mn}, {k}): the descriptor check reads {mn} rows x up to 128 columns, past "
                          f"{1 << 17} elements (no shared-memory operand is that large); pass the operand tile's "
                          "own (mn, k) shape")
    if m_axis.name not in tile.axes():
        raise LayoutError(f"{shown(layout)} places nothing in memory (no 'm' axis); it is not a shared-memory operand")
    W = (mode // 16) * T if mode else T

    def off(r, c):
        return tile.apply(r, c, shape=(mn, k))[m_axis.name]

    base = off(0, 0)
    if major == "K":
        if mn < 8 or k < W:
            raise LayoutError(f"tile ({mn}, {k}) is smaller than one {W}-wide, 8-row core matrix / swizzle atom")
        sbo = (off(8, 0) - base) * nbytes if mn > 8 else 8 * W * nbytes
        lbo = None
        if mode == 0:
            lbo = (off(0, T) - base) * nbytes if k > T else 8 * T * nbytes
        row_stride = W  # within an atom / core matrix
        window_k = W if mode else min(k, 2 * T)

        def expect(r, c):
            e = (r // 8) * (sbo // nbytes) + (r % 8) * row_stride
            if mode:
                return e + c
            return e + (c // T) * (lbo // nbytes) + c % T

        window = ((r, c) for r in range(mn) for c in range(window_k))
    else:
        if mn < W or k < 8:
            raise LayoutError(f"tile ({mn}, {k}) is smaller than one {W} x 8 core matrix / swizzle atom")
        if mode:
            lbo = (off(W, 0) - base) * nbytes if mn > W else 8 * W * nbytes
            sbo = (off(0, 8) - base) * nbytes if k > 8 else 8 * mn * nbytes

            def expect(r, c):
                return (r // W) * (lbo // nbytes) + r % W + (c // 8) * (sbo // nbytes) + (c % 8) * W
        else:
            lbo = (off(0, 8) - base) * nbytes if k > 8 else 8 * mn * nbytes
            sbo = (off(T, 0) - base) * nbytes if mn > T else 8 * T * nbytes

            def expect(r, c):
                return (r // T) * (sbo // nbytes) + r % T + (c // 8) * (lbo // nbytes) + (c % 8) * T

        window = ((r, c) for r in range(mn) for c in range(min(k, 16)))
    for what, v in (("LBO", lbo), ("SBO", sbo)):
        if v is not None and (v <= 0 or v % 16):
            raise LayoutError(
                f"{what} = {v} bytes derived from {shown(layout)}; the descriptor needs a positive multiple of 16 bytes"
            )
    for r, c in window:
        got = off(r, c) - base
        want = expect(r, c)
        if got != want:
            raise LayoutError(
                f"{shown(layout)} is not a canonical {major}-major {f'{mode}B' if mode else 'no'}-swizzle layout: "
                f"element ({r}, {c}) sits at "
                f"offset {got}, the descriptor (LBO={lbo}, SBO={sbo} bytes) would read offset {want}; "
                "build it with mma_smem_layout"
            )
    return SmemStrides(major, mode, lbo, sbo)
