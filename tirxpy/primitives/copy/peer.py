"""copy between this GPU's global memory and a peer's (NVLink), by the active threads together.

A *peer tensor* is a global tensor whose layout names the ``rank`` axis
(:mod:`tirxpy.layout.ranks`): its pointer is the peer's buffer mapped into this process (torch symmetric
memory's ``get_buffer`` / ``buffer_ptrs``), and the layout says which rank holds it. ``Tx.copy(local,
peer)`` pulls a tile from the peer and ``Tx.copy(peer, local)`` pushes one to it: the active threads
split the tile into 16-byte (or the widest both layouts allow) vectors, thread ``rank`` moving chunks
``rank, rank + N, ...`` with ``ld.global`` + ``st.global`` (a peer's memory is reached with ordinary
generic loads and stores over the mapping). The chunks go in batches of ``depth`` (the call's ``depth=``
attribute, default :data:`DEPTH`): a thread first loads its ``depth`` chunks of the batch into registers,
then stores them, so ``depth`` loads are in flight at once instead of one load waiting out its round trip
before the next is issued (``depth * 16`` bytes of registers per thread for 16-byte vectors). Up to two
batches are unrolled; more run as a ``T.serial`` loop, which the CUDA compiler may unroll. The copy does
not signal: follow it with a release on a flag (:mod:`tirxpy.intrinsics.peer`) so the reader knows the
data is there.

    Tx.warp.copy(Peer[r0:r0 + 16, :], Local[r0:r0 + 16, :], depth=8)   # 8 vectors in flight per lane

``Tx.copy_async(shared, peer, mbar=...)`` needs no variant of its own: a tensor map built over the peer
address lets TMA load straight from the peer (variant ``tma``), as for any global tensor.

    >>> from tirxpy.primitives.copy.peer import is_peer
    >>> from tirxpy.ir.buffer import Buffer
    >>> from tirxpy.layout import TileLayout, S, rank
    >>> is_peer(Buffer("P", (4, 8), "bfloat16", layout=TileLayout(S[(4, 8)] + 1 @ rank)))
    True
"""
from __future__ import annotations

from math import prod

from tirxpy.ir.expr import AddressOf
from tirxpy.ir.stmt import BufferStore, IfThenElse
from tirxpy.ir import ops

from ..dispatch import fail, register_impl
from .common import edge_guard, map_coord, max_vector, same_logical_shape, vector_intrinsic
from .mem_mem import _coord, _rank, regular_threads, same_dtype


def is_peer(t) -> bool:
    """True for a global tensor (or view) whose layout names the ``rank`` axis: another GPU's memory."""
    lay = getattr(t, "layout", None)
    return getattr(t, "storage", None) == "global" and lay is not None and "rank" in lay.axes()


def is_peer_copy(ctx):
    """Both operands in global memory, at least one of them a peer's (its layout names ``rank``)."""
    if len(ctx.operands) != 2:
        return f"copy takes (dst, src), got {len(ctx.operands)} operands"
    dst, src = ctx.tensor(0), ctx.tensor(1)
    if dst.storage != "global" or src.storage != "global":
        return f"dst is '{dst.storage}' and src is '{src.storage}'; this variant copies global <-> a peer's global"
    if not (is_peer(dst) or is_peer(src)):
        return (f"neither {dst.name} nor {src.name} is a peer tensor (a layout naming the rank axis): global -> global "
                "copies on one GPU are not a tile primitive")
    return same_logical_shape(dst, src)


DEPTH = 4        # chunks in flight per thread unless the call says ``depth=``


def _depth(ctx) -> int:
    d = ctx.attr("depth", DEPTH)
    if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= 16:
        fail(f"depth={d!r}: the chunks a thread keeps in flight must be an integer in 1 .. 16")
    return d


@register_impl("copy", "sm_80", variant="peer_vec", priority=15, when=[is_peer_copy, same_dtype, regular_threads])
def peer_vec(ctx):
    """global <-> a peer's global by all active threads, 4/8/16-byte vectors through registers, ``depth``
    loads in flight per thread (each batch: every load, then every store)."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    depth = _depth(ctx)
    v = max_vector([dst, src], 16)
    if v * dst.dtype.bits < 32:
        fail(f"the widest vector both layouts allow is {v} element(s) of {src.dtype} "
             f"({v * src.dtype.bits // 8} bytes); this variant moves at least 4 bytes per instruction")
    nw = v * src.dtype.bits // 32
    rank, n = _rank(ctx)
    nchunks = prod(src.shape) // v
    iters = -(-nchunks // n)
    depth = min(depth, iters)
    batches = -(-iters // depth)
    ragged = batches * depth * n != nchunks
    words, alloc = ctx.local("peer_stage", (depth * nw,), "uint32")
    guard = ctx.attr("guard", True)

    def batch(b):
        loads, stores = [], []
        for d in range(depth):
            it = ops.add(ops.mul(b, depth), d) if batches > 1 else ops.const(d)
            c = ops.add(ops.mul(it, n), rank) if iters > 1 else rank
            sc = _coord(ops.mul(c, v) if v > 1 else c, src.shape)
            dc = map_coord(sc, src, dst)
            regs = [words[d * nw + j] for j in range(nw)]
            ld = ctx.emit(vector_intrinsic("ld", "global", nw), *regs, AddressOf(src.load(sc)))
            st = ctx.emit(vector_intrinsic("st", "global", nw), AddressOf(dst.load(dc)), *regs)
            inside = ops.lt(c, nchunks) if ragged else None
            g_src = _and(inside, edge_guard(src, sc) if guard else None)
            g_dst = _and(inside, edge_guard(dst, dc) if guard else None)
            zero = [BufferStore(words, (ops.const(d * nw + j),), ops.const(0, "uint32")) for j in range(nw)]
            loads.append(IfThenElse(g_src, [ld], zero) if g_src is not None else ld)
            stores.append(IfThenElse(g_dst, [st]) if g_dst is not None else st)
        return ctx.seq(loads + stores)

    return ctx.seq([alloc, ctx.loop(batches, batch, kind="unroll" if batches <= 2 else "serial", name="batch")])


def _and(a, b):
    if a is None:
        return b
    return a if b is None else ops.logical_and(a, b)
