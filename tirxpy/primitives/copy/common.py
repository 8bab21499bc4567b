"""Facts copies read from layouts: contiguous vector width, alignment, edge guards, and the
vector load / store instructions (registered in the intrinsic table under ``vld_*`` / ``vst_*`` names).

Vector width contract: a vector of ``v`` elements moves ``v`` logically consecutive elements of
the innermost dimension of the view with one instruction. It is legal when in *every* operand
those elements sit at consecutive ``m`` and the first one at an ``m`` that is a multiple of
``v`` (base pointers of global tensors and shared buffers are 16-byte aligned: torch
allocations and tirxpy's shared-memory planner guarantee it).

Edge contract (ragged tiles): a global view whose start is symbolic may cross the tensor's
edge; copies guard each vector with ``start_d + coord_d < shape_d`` for every such dimension
(scalar-indexed ones too). Loads of out-of-range elements write 0 to registers / shared;
stores skip them. ``guard=False`` on the call drops the checks when the author knows the tile is
inside. Vectors never straddle the edge because ``v`` divides the tensor's innermost extent.
"""
from __future__ import annotations

from math import gcd

from tirxpy.intrinsics import lookup, register_intrinsic
from tirxpy.ir import expr as E
from tirxpy.ir import ops
from tirxpy.layout import ComposeLayout, group

# ------------------------------------------------------------------ vector instructions
_SPACES = {"global": "global", "shared": "shared"}


def _register_vectors():
    for space, kind in (("global", "gmem_ptr"), ("shared", "smem_addr")):
        for n in (1, 2, 4):
            names = "abcd"[:n]
            regs = ", ".join("{" + c + "}" for c in names)
            vec = f".v{n}" if n > 1 else ""
            lbrace, rbrace = ("{ ", " }") if n > 1 else ("", "")
            ld = f"vld_{space}_v{n}_b32"
            if lookup(ld) is None:
                register_intrinsic(ld, f"ld.{space}{vec}.b32 {lbrace}{regs}{rbrace}, [{{addr}}];",
                                   [(c, "reg", "uint32", "w") for c in names] + [("addr", kind)],
                                   doc=f"{4 * n}-byte vector load from {space} memory into {n} b32 registers")
            st = f"vst_{space}_v{n}_b32"
            if lookup(st) is None:
                register_intrinsic(st, f"st.{space}{vec}.b32 [{{addr}}], {lbrace}{regs}{rbrace};",
                                   [("addr", kind, None, "w")] + [(c, "reg", "uint32") for c in names],
                                   doc=f"{4 * n}-byte vector store of {n} b32 registers to {space} memory")


_register_vectors()


def vector_intrinsic(kind: str, space: str, nwords: int) -> str:
    """Name of the ``kind`` ('ld' / 'st') instruction moving ``nwords`` b32 words in ``space``."""
    return f"v{kind}_{space}_v{nwords}_b32"


# ------------------------------------------------------------------ divisibility
def divisor(e, lets=None) -> int:
    """A positive integer that provably divides the value of index expression ``e`` (0 counts
    as divisible by anything: returns a large power of two for 0). ``lets``: the values of
    let-bound names (:func:`tirxpy.ir.analysis.let_values`), looked through, so that
    ``c0 = T.cta_id(0) * 64`` keeps its factor 64 where ``c0`` is used."""
    big = 1 << 20
    if isinstance(e, int):
        return big if e == 0 else gcd(abs(e), big)
    if isinstance(e, E.IntImm):
        v = e.value
        return big if v == 0 else gcd(abs(v), big)
    if isinstance(e, (E.Add, E.Sub)):
        return gcd(divisor(e.a, lets), divisor(e.b, lets))
    if isinstance(e, E.Mul):
        return min(big, divisor(e.a, lets) * divisor(e.b, lets))
    if isinstance(e, E.Shl) and isinstance(e.b, E.IntImm):
        return min(big, divisor(e.a, lets) << e.b.value)
    if isinstance(e, E.Var) and lets and e in lets:
        return divisor(lets[e], lets)
    return 1


# ------------------------------------------------------------------ contiguity of one view
def contiguous_run(tile) -> tuple:
    """``(run, align)`` of a memory view: elements along the innermost dimension are contiguous
    in ``m`` in aligned groups of ``run``; ``align`` divides the ``m`` of every group start."""
    lay = tile.layout
    swz = None
    if isinstance(lay, ComposeLayout):
        swz, lay = lay.swizzle, lay.tile_layout
    shape = tile.shape
    g = group(lay, shape)
    if g is None:
        return 1, 1
    G, ranges = g
    a, b = ranges[-1]
    if b <= a:
        return 1, 1
    inner = G.shard[b - 1]
    run = inner.extent if (inner.axis.name == "m" and inner.stride == 1) else 1
    align = 1 << 20
    for k, it in enumerate(G.shard):
        if it.axis.name == "m" and k != b - 1:
            align = gcd(align, it.stride)
    align = gcd(align, G.offset.get("m", 0) or (1 << 20))
    off = tile.offset.get("m")
    if off is not None:
        align = gcd(align, divisor(off, tile.lets))
    if swz is not None and swz.swizzle_len:
        p = 1 << swz.per_element
        run, align = gcd(run, p), gcd(align, p)
    if tile.storage == "global":
        # the innermost extent of the tensor bounds vectors at the ragged edge
        run = gcd(run, tile.buffer.shape[-1]) if tile.buffer.shape[-1] else run
    return run, align


def pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def max_vector(tiles, max_bytes: int = 16) -> int:
    """Largest power-of-two element count that every memory view allows (>= 1)."""
    v = 1 << 20
    for t in tiles:
        run, align = contiguous_run(t)
        v = min(v, pow2_floor(gcd(run, align)))
        v = min(v, pow2_floor(max(1, max_bytes * 8 // t.dtype.bits)))
    return max(1, v)


# ------------------------------------------------------------------ guards
def edge_guard(tile, coord):
    """``start_d + coord_d < shape_d`` for the dimensions of a global view that may cross the
    tensor edge (symbolic starts), as one condition (None when the view is provably inside)."""
    if tile.storage != "global":
        return None
    cond = None
    idx = tile.index(coord)
    for d, (s, e, sq) in enumerate(zip(tile.starts, tile.extents, tile.squeeze)):
        if isinstance(s, E.IntImm):
            continue
        c = ops.lt(idx[d], tile.buffer.shape[d])
        cond = c if cond is None else ops.logical_and(cond, c)
    return cond


def same_logical_shape(a, b) -> str | None:
    sa = tuple(d for d in a.shape if d != 1)
    sb = tuple(d for d in b.shape if d != 1)
    if sa != sb:
        return f"{a.name} has shape {a.shape} and {b.name} has shape {b.shape}"
    return None


def map_coord(coord, src, dst):
    """The coordinate in ``dst`` of the element at ``coord`` in ``src`` (same shape up to 1-dims)."""
    vals = [c for c, n in zip(coord, src.shape) if n != 1]
    out, k = [], 0
    for n in dst.shape:
        if n == 1:
            out.append(ops.const(0))
        else:
            out.append(vals[k])
            k += 1
    return tuple(out)
