"""Legality of gemm operands, as pure functions of layouts (no IR, no dispatch).

Every check compares the operand's layout with the layout the instruction imposes, element by
element over the call's tile, and names the first element whose owner differs:

    >>> from tirxpy.layout import S, TileLayout, laneid, m, wid_in_wg
    >>> from tirxpy.layout.atoms import wgmma_accumulator
    >>> fr = fragment_tiles("C", wgmma_accumulator(16), (64, 16), wgmma_accumulator(16), (64, 16), "wgmma")
    >>> fr.reason is None, fr.tiles[0].base
    (True, 0)
    >>> bad = TileLayout(S[(4, 2, 8, 2, 4, 2) : (1@wid_in_wg, 2@m, 1@laneid, 4@m, 8@laneid, 1@m)])
    >>> print(fragment_tiles("C", bad, (64, 16), wgmma_accumulator(16), (64, 16), "wgmma").reason)
    C: lane owner of element (0, 2) is 8, wgmma expects 1

Register and TMEM fragments may sit anywhere in the thread's register file / TMEM: each
instruction tile is compared up to one constant offset on the *base* axes (``m`` for
registers, ``TCol`` for TMEM columns), read off the tile's first element.

Shared-memory operands (:func:`smem_operand`) must be a canonical K- or MN-major layout in
the swizzle mode the layout carries; the descriptor's LBO / SBO come from
:func:`tirxpy.layout.atoms.smem_descriptor_strides`, and every k-step of the call is checked
against what the descriptor makes the hardware read.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from tirxpy.layout import ComposeLayout, LayoutError, TileLayout, swizzle_for
from tirxpy.layout.atoms import smem_descriptor_strides
from tirxpy.errors import shown

AXIS_WORDS = {
    "laneid": "lane", "wid_in_wg": "warp-in-warpgroup", "warpid": "warp", "wgid": "warpgroup", "m": "register slot",
    "tx": "thread", "tid_in_wg": "thread-in-warpgroup", "TLane": "TMEM lane", "TCol": "TMEM column",
}
_ORDER = ("wgid", "warpid", "wid_in_wg", "tid_in_wg", "tx", "laneid", "TLane", "TCol", "m")


def _axis_key(a):
    return (_ORDER.index(a), a) if a in _ORDER else (len(_ORDER), a)


@dataclass(frozen=True)
class Tile:
    """One instruction tile of a call: its element origin ``(row, col)`` in the canonical
    orientation and the offsets on the base axes (``base`` is the ``m`` / ``TCol`` offset)."""

    origin: tuple
    bases: dict

    @property
    def base(self) -> int:
        return next(iter(self.bases.values())) if self.bases else 0


@dataclass(frozen=True)
class FragmentCheck:
    """Result of :func:`fragment_tiles`: ``reason`` is None when legal; ``tiles`` row-major."""

    reason: str | None
    tiles: tuple = ()


def _user(coord, transposed):
    return tuple(reversed(coord)) if transposed else tuple(coord)


def _table(layout, user_shape):
    if layout.size() != prod(user_shape):
        raise LayoutError(f"layout {shown(layout)} has {layout.size()} elements, the tile {tuple(user_shape)} has "
                          f"{prod(user_shape)}")
    names, t = layout.owner_table()
    return list(names), t


def fragment_tiles(operand: str, layout, shape, atom, atom_shape, what: str, *, transposed: bool = False,
                   base_axes=("m",), align: int = 1) -> FragmentCheck:
    """Check that ``layout`` (of a tile of ``shape`` in the canonical orientation, e.g. (M, K)
    for A) is ``atom`` (of ``atom_shape``) repeated over the tile, each repeat up to an offset on
    ``base_axes``; ``align``: the ``m`` offset of every repeat must be a multiple of it (two
    16-bit values per 32-bit register). ``transposed``: the user's tile is the transpose (its
    layout is of ``shape[::-1]``; elements are reported in the user's coordinates).
    """
    shape, atom_shape = tuple(shape), tuple(atom_shape)
    ushape = _user(shape, transposed)
    if any(s % a for s, a in zip(shape, atom_shape)):
        return FragmentCheck(
            f"{operand}: tile {ushape} is not a whole number of {what} tiles {_user(atom_shape, transposed)}")
    names, t = _table(layout, ushape)
    enames, et = atom.owner_table()
    if t.shape[1] != et.shape[1]:
        return FragmentCheck(f"{operand}: element {(0,) * len(ushape)} is held by {t.shape[1]} owners (the layout has replicas), "
                             f"{what} expects {et.shape[1]}")
    # the instruction's axes first: a mismatch is told in the words of what the instruction wants
    axes = sorted(enames, key=_axis_key) + sorted(set(names) - set(enames), key=_axis_key)

    def cols(nm, tab):
        return np.stack([tab[:, 0, nm.index(a)] if a in nm else np.zeros(tab.shape[0], np.int64) for a in axes], -1)

    act, exp = cols(names, t), cols(enames, et)
    ar, ac = np.meshgrid(np.arange(atom_shape[0]), np.arange(atom_shape[1]), indexing="ij")
    ar, ac = ar.ravel(), ac.ravel()
    tiles = []
    for r0 in range(0, shape[0], atom_shape[0]):
        for c0 in range(0, shape[1], atom_shape[1]):
            rr, cc = ar + r0, ac + c0
            lin = (cc * ushape[1] + rr) if transposed else (rr * ushape[1] + cc)
            sub = act[lin]
            bases = {}
            want = exp.copy()
            for a in base_axes:
                if a in axes:
                    k = axes.index(a)
                    bases[a] = int(sub[0, k] - exp[0, k])
                    want[:, k] += bases[a]
            bad = np.nonzero((sub != want).any(axis=1))[0]
            if len(bad):
                j = int(bad[0])
                k = int(np.nonzero(sub[j] != want[j])[0][0])
                el = _user((int(rr[j]), int(cc[j])), transposed)
                a = axes[k]
                return FragmentCheck(f"{operand}: {AXIS_WORDS.get(a, a)} owner of element {el} is {int(sub[j, k])}, "
                                     f"{what} expects {int(want[j, k])}")
            mb = bases.get("m", 0)
            if align > 1 and mb % align:
                el = _user((r0, c0), transposed)
                return FragmentCheck(
                    f"{operand}: the {what} tile at element {el} starts at register slot {mb}; {what} packs {align} "
                    f"values per 32-bit register, so each tile must start at a multiple of {align}")
            if min(bases.values(), default=0) < 0:
                return FragmentCheck(f"{operand}: the {what} tile at element {_user((r0, c0), transposed)} "
                                     f"would start at a negative offset {bases}")
            tiles.append(Tile((r0, c0), bases))
    return FragmentCheck(None, tuple(tiles))


# ---------------------------------------------------------------- shared-memory operands
@dataclass(frozen=True)
class SmemOperand:
    """A legal shared-memory operand: the canonical view (``layout`` of the ``(mn, k)`` tile),
    its major-ness, swizzle and descriptor strides, and the element offset (unswizzled, from
    the tile's origin) where each k-step of ``k_inst`` columns starts."""

    layout: object
    shape: tuple
    major: str
    swizzle: int
    lbo: int | None
    sbo: int
    k_offsets: tuple
    dtype: str = "bfloat16"


def swizzle_mode(layout, dtype) -> int | None:
    """Swizzle width in bytes (0: none) the layout carries; None if it is no hardware swizzle."""
    if isinstance(layout, TileLayout):
        return 0
    if not isinstance(layout, ComposeLayout) or not layout.swizzle_inner:
        return None
    if layout.swizzle.swizzle_len == 0:
        return 0
    for mode in (32, 64, 128):
        if swizzle_for(mode, dtype) == layout.swizzle:
            return mode
    return None


def _tile(layout):
    return layout.tile_layout if isinstance(layout, ComposeLayout) else layout


def smem_operand(operand: str, layout, user_shape, dtype: str, k_inst: int, what: str, *, k_dim: int = 1,
                 majors=("K", "MN")) -> SmemOperand | str:
    """Check a shared-memory operand and describe it for the descriptor; returns the reason
    (a str) when it is illegal.

    ``user_shape``: the operand's shape as the user wrote it; ``k_dim``: which of its two
    dimensions is K (1 for A (M, K) and a transposed B (N, K); 0 for B (K, N)). ``dtype``: a
    canonical dtype name. ``majors``: the major-nesses the instruction accepts for this dtype.
    """
    user_shape = tuple(user_shape)
    if len(user_shape) != 2:
        return f"{operand}: a {what} shared-memory operand is a 2-d tile, got shape {user_shape}"
    k, mn = user_shape[k_dim], user_shape[1 - k_dim]
    mode = swizzle_mode(layout, dtype)
    if mode is None:
        return (f"{operand}: its layout {layout!r} is not a hardware 32B/64B/128B swizzle for {dtype}; "
                "build it with tirxpy.layout.atoms.mma_smem_layout")
    view = layout if k_dim == 1 else layout.permute_dims(user_shape, (1, 0))
    tile = _tile(view)
    if "m" not in tile.axes() or set(tile.axes()) - {"m"}:
        return f"{operand}: a shared-memory operand places elements on 'm' only, its layout uses {list(tile.axes())}"
    if k % k_inst:
        return f"{operand}: K = {k} is not a multiple of the {what} instruction K = {k_inst}"

    names, tab = tile.owner_table()
    M = tab[:, 0, list(names).index("m")].reshape(mn, k)

    def off(r, c):
        return int(M[r, c])

    o = off(0, 0)
    if k > 1 and off(0, 1) - o == 1:
        major = "K"
    elif mn > 1 and off(1, 0) - o == 1:
        major = "MN"
    else:
        return (f"{operand}: neither K nor {'M' if operand == 'A' else 'N'} is contiguous in shared memory "
                f"(element {_el(0, 1, k_dim)} sits {off(0, 1) - o} elements after {_el(0, 0, k_dim)}); "
                "a tensor-core operand is K-major or MN-major")
    if major not in majors:
        return (f"{operand}: {what} takes {dtype} operands {' or '.join(majors)}-major only; this layout is "
                f"{major}-major (transpose the tile in memory)")
    try:
        st = smem_descriptor_strides(view, dtype, major, shape=(mn, k))
    except LayoutError as e:
        return f"{operand}: {e}"
    nbytes = _bits(dtype) // 8
    period = 8 * mode if mode else 16
    if (o * nbytes) % period:
        return (f"{operand}: the tile starts at byte {o * nbytes} of its buffer; a {mode or 'no'}"
                f"{'B' if mode else ''}-swizzle operand must start on a {period}-byte boundary")
    rr, cc = np.meshgrid(np.arange(mn), np.arange(k_inst), indexing="ij")
    want = _canonical(major, mode, st, nbytes)(rr, cc)
    k_offsets = []
    for k0 in range(0, k, k_inst):
        base = off(0, k0)
        if ((base - o) * nbytes) % 16:
            return f"{operand}: the k-step at column {k0} starts at byte {(base - o) * nbytes}, not 16-byte aligned"
        got = M[:, k0:k0 + k_inst] - base
        bad = np.argwhere(got != want)
        if len(bad):
            r, c = (int(x) for x in bad[0])
            return (f"{operand}: element {_el(r, k0 + c, k_dim)} sits {int(got[r, c])} elements after the k-step "
                    f"origin {_el(0, k0, k_dim)}, the {what} descriptor ({major}-major, "
                    f"{f'{mode}B' if mode else 'no'} swizzle, LBO={st.lbo}, SBO={st.sbo}) reads {int(want[r, c])}")
        if mode:
            sw = view.apply(0, k0, shape=(mn, k))["m"]
            if sw != base:
                return (f"{operand}: the k-step origin {_el(0, k0, k_dim)} is not on a swizzle-atom row boundary "
                        f"(offset {base} swizzles to {sw}); the descriptor start address must be unswizzled")
        k_offsets.append(base - o)
    return SmemOperand(view, (mn, k), major, mode, st.lbo, st.sbo, tuple(k_offsets), dtype)


def _el(r, c, k_dim):
    """(mn, k) -> the user's (row, col)."""
    return (r, c) if k_dim == 1 else (c, r)


def _bits(dtype):
    from tirxpy.layout import dtype_bits

    return dtype_bits(dtype)


def _canonical(major, mode, st, nbytes):
    """Element offset the hardware reads for (r, c) of one k-step (PTX ISA 9.7.15.5.1.2)."""
    T = 16 // nbytes
    W = (mode // 16) * T if mode else T
    sbo, lbo = st.sbo // nbytes, (st.lbo or 0) // nbytes
    if major == "K":
        if mode:
            return lambda r, c: (r // 8) * sbo + (r % 8) * W + c
        return lambda r, c: (r // 8) * sbo + (r % 8) * T + (c // T) * lbo + c % T
    if mode:
        return lambda r, c: (r // W) * lbo + r % W + (c // 8) * sbo + (c % 8) * W
    return lambda r, c: (r // T) * sbo + r % T + (c // 8) * lbo + (c % 8) * T


# ---------------------------------------------------------------- who issues the instruction
def whole_warps_reason(ts, what: str = "mma.sync") -> str | None:
    """None when ``ts`` (a ThreadSet) is a union of whole warps, else the reason."""
    if ts.tids and ts.whole("warp"):
        return None
    return f"{what} needs whole warps (all 32 lanes of each); the call runs on {ts.describe()}"


def warpgroups_reason(ts, what: str = "wgmma") -> str | None:
    """None when ``ts`` is a union of whole warpgroups, each 4 consecutive warps starting at a
    multiple of 4 (the hardware's warpgroups), else the reason."""
    if ts.tids and ts.whole("warpgroup"):      # whole groups of 128 threads from a multiple of 128
        return None
    return (f"{what} needs a full warpgroup (4 consecutive warps starting at a multiple of 4); "
            f"the call runs on {ts.describe()}")


def one_thread_reason(ts, what: str = "tcgen05.mma") -> str | None:
    """None when exactly one thread runs the call."""
    if ts.exact and len(ts) == 1:
        return None
    return (f"{what} is issued by one thread (put the call under `if T.elect_one():`); "
            f"the call runs on {ts.describe()}")
