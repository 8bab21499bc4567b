"""XOR swizzles of the memory axis, and their composition with a tile layout.

``SwizzleLayout(P, B, A)`` maps a memory coordinate ``m`` to
``m ^ (((m >> (P + A)) & ((1 << B) - 1)) << P)`` (CuTe's ``Swizzle<B, P, A>``): the ``B``-bit
field at bit ``P + A`` is XORed into the field at bit ``P``.

    >>> from tirxpy.layout import SwizzleLayout, ComposeLayout, TileLayout, S
    >>> SwizzleLayout(0, 2, 3).apply(10)
    11
    >>> L = ComposeLayout(0, 2, 3, TileLayout(S[(8, 8) : (8, 1)]))
    >>> L.apply(1, 2, shape=(8, 8))
    {'m': 11}
"""
from __future__ import annotations

import operator

import numpy as np
import sympy

from tirxpy.dtype_table import SPECS, bits_of
from tirxpy.errors import shown

from .axis import Axis
from .coords import is_int, to_coord
from .errors import MAX_COORD, MAX_SWIZZLE_BITS, LayoutError, LayoutTypeError
from .iters import as_int
from .tile import Layout, TileLayout


class bitxor(sympy.Function):
    """Symbolic ``a ^ b`` on non-negative integers (evaluates when both are ints)."""

    is_integer = True
    is_nonnegative = True

    def __new__(cls, a, b, **options):
        for v in (a, b):    # judged by type before sympy converts it (which would run the value's own code)
            if not (isinstance(v, sympy.Basic) or is_int(v)):
                raise LayoutTypeError(f"bitxor takes ints or sympy integer expressions, got {shown(v, 60)} "
                                      f"({type(v).__name__})")
        return super().__new__(cls, a, b, **options)

    @classmethod
    def eval(cls, a, b):
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) ^ int(b))
        if b == 0:
            return a
        if a == 0:
            return b


class SwizzleLayout:
    """The XOR permutation ``Swizzle<B=swizzle_len, P=per_element, A=atom_len>`` of ``m``.

    Requires ``P >= 0``, ``B >= 0``, ``A >= B`` (else the two bit fields overlap and the map
    is no bijection). Postcondition: a bijection of every aligned block of
    ``2 ** (P + A + B)`` coordinates onto itself.
    """

    def __init__(self, per_element: int, swizzle_len: int, atom_len: int, axis="m"):
        vals = []
        for name, v in (("per_element", per_element), ("swizzle_len", swizzle_len), ("atom_len", atom_len)):
            v = as_int(v, f"swizzle {name}")
            if v < 0:
                raise LayoutError(f"swizzle {name} must be a non-negative int, got {shown(v)}")
            if v > MAX_SWIZZLE_BITS:
                raise LayoutError(f"swizzle {name} is {shown(v, 60)} bits; per_element + atom_len + swizzle_len is at "
                                  f"most {MAX_SWIZZLE_BITS} (the limit MAX_SWIZZLE_BITS: a swizzle acts on 64-bit "
                                  "addresses)")
            vals.append(v)
        self.per_element, self.swizzle_len, self.atom_len = vals
        if sum(vals) > MAX_SWIZZLE_BITS:
            raise LayoutError(f"swizzle per_element + atom_len + swizzle_len = {sum(vals)} bits; the limit is "
                              f"{MAX_SWIZZLE_BITS} (MAX_SWIZZLE_BITS: a swizzle acts on 64-bit addresses)")
        if self.atom_len < self.swizzle_len:
            raise LayoutError(
                f"swizzle atom_len {self.atom_len} < swizzle_len {self.swizzle_len}: the XOR source and target "
                "bit fields overlap; use atom_len >= swizzle_len"
            )
        ax = Axis.get(axis)
        if ax.kind != "memory":
            raise LayoutError(
                f"a swizzle permutes a memory address, but {shown(ax.name)} is a {ax.kind} axis; swizzle 'm' instead"
            )
        self.axis = ax

    @property
    def period(self) -> int:
        """Length of the aligned blocks the swizzle permutes."""
        return 1 << (self.per_element + self.atom_len + self.swizzle_len)

    def _mask(self):
        return (1 << self.swizzle_len) - 1

    def apply(self, m):
        """Swizzle one coordinate: int (>= 0), numpy int array or sympy expression. The swizzle is
        an involution (``apply(apply(m)) == m``): the XOR source bits are not among its targets."""
        P, B, A = self.per_element, self.swizzle_len, self.atom_len
        if isinstance(m, np.ndarray):
            if m.dtype.kind not in "iu":
                raise LayoutTypeError(f"swizzled coordinates must be an integer array, got dtype {m.dtype}")
        else:
            m = to_coord(m, "swizzled coordinate") if isinstance(m, sympy.Basic) else as_int(m, "swizzled coordinate")
            if is_int(m) and not 0 <= m < MAX_COORD:
                raise LayoutError(f"swizzled coordinate {m} is outside [0, 2**64): memory coordinates are >= 0 and "
                                  "below the limit of layout coordinates (2**64)")
        if B == 0:
            return m
        if isinstance(m, np.ndarray) or is_int(m):
            return m ^ (((m >> (P + A)) & self._mask()) << P)
        field = sympy.Mod(sympy.floor(m / (1 << (P + A))), 1 << B)
        return bitxor(m, field * (1 << P))

    def __call__(self, m):
        return self.apply(m)

    def key(self):
        return (self.per_element, self.swizzle_len, self.atom_len, self.axis.name)

    def __eq__(self, other):
        return isinstance(other, SwizzleLayout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"SwizzleLayout({self.per_element}, {self.swizzle_len}, {self.atom_len})"


class ComposeLayout(Layout):
    """A tile layout whose memory coordinate is then swizzled.

    ``ComposeLayout(per_element, swizzle_len, atom_len, tile_layout, swizzle_inner=True)`` or
    ``ComposeLayout(SwizzleLayout(...), tile_layout)``; the parts are ``.swizzle`` and
    ``.tile_layout`` (``.tile()`` is :meth:`Layout.tile`, the blocked product, as for every layout). With ``swizzle_inner=True`` (the
    usual shared-memory case) the swizzle permutes the ``m`` coordinate the tile layout
    produces. With ``swizzle_inner=False`` it permutes the logical linear index before the
    tile layout sees it (so the size must be a whole number of swizzle periods).

    A swizzled layout may be a view of a larger allocation (a slice of a swizzled tile), so
    its own ``m`` footprint need not be whole swizzle periods; whoever allocates storage
    for it sizes the allocation with :meth:`footprint`.
    """

    def __init__(self, *args, swizzle_inner: bool = True):
        if len(args) == 2 and isinstance(args[0], SwizzleLayout):
            swz, tile = args
        elif len(args) == 4:
            swz, tile = SwizzleLayout(*args[:3]), args[3]
        else:
            raise LayoutError(
                "use ComposeLayout(per_element, swizzle_len, atom_len, tile_layout) or "
                "ComposeLayout(SwizzleLayout(...), tile_layout)"
            )
        if not isinstance(tile, TileLayout):
            raise LayoutTypeError(f"ComposeLayout composes a swizzle with a TileLayout, got {type(tile).__name__}; "
                                  "wrap an S[...] spec in TileLayout(...)")
        if not isinstance(swz, SwizzleLayout):
            raise LayoutTypeError(f"ComposeLayout's swizzle must be a SwizzleLayout, got {type(swz).__name__}")
        if not isinstance(swizzle_inner, bool):
            raise LayoutTypeError(f"swizzle_inner must be True or False, got {shown(swizzle_inner)}")
        self.swizzle = swz
        self.tile_layout = tile
        self.swizzle_inner = swizzle_inner
        ax = swz.axis.name
        if self.swizzle_inner:
            if ax not in tile.axes():
                raise LayoutError(
                    f"the swizzle permutes {shown(ax)}, but {shown(tile)} places nothing on {shown(ax)}; a swizzle "
                    "needs a layout with a memory component"
                )
        elif tile.size() % swz.period and tile.size() > 1 << (swz.per_element + swz.atom_len):
            raise LayoutError(
                f"layout size {tile.size()} is not a multiple of the swizzle period {swz.period}"
            )

    def size(self, axis=None) -> int:
        return self.tile_layout.size(axis)

    def replica_count_total(self) -> int:
        return self.tile_layout.replica_count

    def _reach_upper(self) -> dict:
        """An upper bound of every coordinate: the swizzle changes only bits [P, P + B) of ``m``, and only of
        an ``m >= 2**(P + A)``; so ``m' <= m | (2**(P + B) - 1)``, and ``m | low`` grows with ``m``."""
        hi = self.tile_layout._reach_upper()
        a, s = self.swizzle.axis.name, self.swizzle
        if a in hi and s.swizzle_len and hi[a] >> (s.per_element + s.atom_len):
            hi[a] |= (1 << (s.per_element + s.swizzle_len)) - 1
        return hi

    def dense_box_mismatch(self, box):
        """The unswizzled tile's :meth:`~tirxpy.layout.tile.Layout.dense_box_mismatch`."""
        return self.tile_layout.dense_box_mismatch(box)

    def footprint(self) -> int:
        """Storage an allocation needs on the swizzled axis: one past the largest swizzled
        coordinate (offset included). Read off the owner table (at most ``MAX_TABLE`` owners)."""
        names, t = self.owner_table()
        return int(t[:, :, names.index(self.swizzle.axis.name)].max()) + 1

    def axes(self) -> tuple:
        return self.tile_layout.axes()

    def _elements_at(self, want: dict) -> list:
        """Closed form: the swizzle is an involution, so the tile is asked for the unswizzled
        coordinate (inner swizzle) or its answers are swizzled back (outer swizzle)."""
        a = self.swizzle.axis.name
        if self.swizzle_inner:
            if a in want:
                want = dict(want, **{a: self.swizzle.apply(want[a])})
            return self.tile_layout._elements_at(want)
        n = self.size()
        return sorted(j for j in (self.swizzle.apply(i) for i in self.tile_layout._elements_at(want)) if j < n)

    def apply(self, *coord, shape=None) -> dict:
        if not self.swizzle_inner:
            from .coords import flatten, normalize

            c, shp = normalize(coord, shape, self.size())
            return self.tile_layout.apply(self.swizzle.apply(flatten(c, shp)))
        out = self.tile_layout.apply(*coord, shape=shape)
        name = self.swizzle.axis.name
        out[name] = self.swizzle.apply(out[name])
        return out

    def owners(self, *coord, shape=None) -> list[dict]:
        if not self.swizzle_inner:
            from .coords import flatten, normalize

            c, shp = normalize(coord, shape, self.size())
            return self.tile_layout.owners(self.swizzle.apply(flatten(c, shp)))
        name = self.swizzle.axis.name
        res = self.tile_layout.owners(*coord, shape=shape)
        for d in res:
            d[name] = self.swizzle.apply(d[name])
        return res

    def _owner_table(self):
        names, t = self.tile_layout.owner_table()
        t = t.copy()
        if self.swizzle_inner:
            a = names.index(self.swizzle.axis.name)
            t[:, :, a] = self.swizzle.apply(t[:, :, a])
        else:
            perm = self.swizzle.apply(np.arange(self.size(), dtype=np.int64))
            t = t[perm]
        return names, t

    def check_well_formed(self) -> None:
        self.tile_layout.check_well_formed()

    def identical(self, other) -> bool:
        return (
            isinstance(other, ComposeLayout)
            and self.swizzle == other.swizzle
            and self.tile_layout.identical(other.tile_layout)
            and self.swizzle_inner == other.swizzle_inner
        )

    def __eq__(self, other):
        return self.identical(other)

    def __hash__(self):
        return hash((self.swizzle, self.tile_layout, self.swizzle_inner))

    def __repr__(self):
        s = self.swizzle
        inner = "" if self.swizzle_inner else ", swizzle_inner=False"
        return f"ComposeLayout({s.per_element}, {s.swizzle_len}, {s.atom_len}, {self.tile_layout!r}{inner})"


_SWIZZLE_BYTES = {32: 1, 64: 2, 128: 3}


def dtype_bits(dtype) -> int:
    """Bits per element for a dtype name (``"bf16"``, ``"float32"``: :func:`tirxpy.dtype_table.bits_of`) or an
    int bit count."""
    if is_int(dtype):
        bits = operator.index(dtype)
    else:
        try:
            bits = bits_of(str(dtype))
        except Exception:   # noqa: BLE001  (a __str__ of its own that raises: no dtype name)
            bits = None
        if bits is None:
            raise LayoutError(f"unknown dtype {shown(dtype)}; give the element size in bits (e.g. 16) or one of "
                              f"{', '.join(n for n, *_ in SPECS)}")
    if bits not in (4, 6, 8, 16, 32, 64):
        raise LayoutError(f"element size {shown(bits, 60)} bits is not supported by the shared-memory swizzles")
    return bits


def swizzle_for(swizzle_bytes: int, dtype) -> SwizzleLayout:
    """The hardware 32B / 64B / 128B shared-memory swizzle for elements of ``dtype``.

    The 16-byte chunks of each ``swizzle_bytes`` row are XORed with the row index modulo the
    row count of the 1024-byte (128B), 512-byte (64B) or 256-byte (32B) atom: in bytes this is
    ``Swizzle<B, 4, 3>`` with ``B = 1, 2, 3``; in elements of ``b`` bytes, ``P = log2(16 / b)``.

        >>> swizzle_for(128, "bf16")
        SwizzleLayout(3, 3, 3)
    """
    if not is_int(swizzle_bytes) or swizzle_bytes not in _SWIZZLE_BYTES:
        err = LayoutError if is_int(swizzle_bytes) else LayoutTypeError
        raise err(f"swizzle mode must be 32, 64 or 128 bytes (an int), got {shown(swizzle_bytes)}")
    bits = dtype_bits(dtype)
    if bits < 8:
        raise LayoutError("sub-byte element types are swizzled in bytes: pass dtype=8 with packed columns")
    per = {8: 4, 16: 3, 32: 2, 64: 1}[bits]
    return SwizzleLayout(per, _SWIZZLE_BYTES[swizzle_bytes], 3)


def hardware_swizzle_bytes(swizzle: SwizzleLayout, dtype) -> int | None:
    """Which shared-memory swizzle mode (0 / 32 / 64 / 128 bytes) ``swizzle`` is for elements of
    ``dtype``, or None when it is none of the hardware's (TMA / matrix-descriptor) modes.

        >>> hardware_swizzle_bytes(SwizzleLayout(3, 3, 3), "bf16"), hardware_swizzle_bytes(SwizzleLayout(1, 1, 1), "bf16")
        (128, None)
    """
    if not isinstance(swizzle, SwizzleLayout):
        raise LayoutTypeError(f"hardware_swizzle_bytes takes a SwizzleLayout, got {shown(swizzle)} "
                              f"({type(swizzle).__name__})")
    if swizzle.swizzle_len == 0:
        return 0
    for mode in (32, 64, 128):
        if swizzle_for(mode, dtype) == swizzle:
            return mode
    return None


def swizzle_32B(dtype) -> SwizzleLayout:
    """32-byte swizzle for ``dtype``: ``swizzle_32B("bf16") == SwizzleLayout(3, 1, 3)``."""
    return swizzle_for(32, dtype)


def swizzle_64B(dtype) -> SwizzleLayout:
    """64-byte swizzle for ``dtype``: ``swizzle_64B("bf16") == SwizzleLayout(3, 2, 3)``."""
    return swizzle_for(64, dtype)


def swizzle_128B(dtype) -> SwizzleLayout:
    """128-byte swizzle for ``dtype``: ``swizzle_128B("bf16") == SwizzleLayout(3, 3, 3)``."""
    return swizzle_for(128, dtype)
