"""copy between this GPU's global memory and a peer's (NVLink), by the active threads together.

A *peer tensor* is a global tensor whose layout names the ``rank`` axis
(:mod:`tirxpy.layout.ranks`): its pointer is the peer's buffer mapped into this process (torch symmetric
memory's ``get_buffer`` / ``buffer_ptrs``), and the layout says which rank holds it. ``Tx.copy(local,
peer)`` pulls a tile from the peer and ``Tx.copy(peer, local)`` pushes one to it: the active threads
split the tile into 16-byte (or the widest both layouts allow) vectors, thread ``rank`` moving chunks
``rank, rank + N, ...`` with one ``ld.global`` + ``st.global`` each (a peer's memory is reached with
ordinary generic loads and stores over the mapping). The copy does not signal: follow it with a release
on a flag (:mod:`tirxpy.intrinsics.peer`) so the reader knows the data is there.

``Tx.copy_async(shared, peer, mbar=...)`` needs no variant of its own: a tensor map built over the peer
address lets TMA load straight from the peer (variant ``tma``), as for any global tensor.

    >>> from tirxpy.primitives.copy.peer import is_peer
    >>> from tirxpy.ir.buffer import Buffer
    >>> from tirxpy.layout import TileLayout, S, rank
    >>> is_peer(Buffer("P", (4, 8), "bfloat16", layout=TileLayout(S[(4, 8)] + 1 @ rank)))
    True
"""
from __future__ import annotations

from tirxpy.ir.expr import AddressOf
from tirxpy.ir.stmt import BufferStore, IfThenElse
from tirxpy.ir import ops

from ..dispatch import register_impl
from .common import edge_guard, same_logical_shape, vector_intrinsic
from .mem_mem import _chunks, regular_threads, same_dtype


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


@register_impl("copy", "sm_80", variant="peer_vec", priority=15, when=[is_peer_copy, same_dtype, regular_threads])
def peer_vec(ctx):
    """global <-> a peer's global by all active threads, 4/8/16-byte vectors through registers."""
    dst, src = ctx.tensor(0), ctx.tensor(1)
    words, alloc = ctx.local("peer_stage", (4,), "uint32")

    def body(v, sc, dc):
        nw = v * src.dtype.bits // 32
        regs = [words[j] for j in range(nw)]
        ld = ctx.emit(vector_intrinsic("ld", "global", nw), *regs, AddressOf(src.load(sc)))
        st = ctx.emit(vector_intrinsic("st", "global", nw), AddressOf(dst.load(dc)), *regs)
        zero = [BufferStore(words, (ops.const(j),), ops.const(0, "uint32")) for j in range(nw)]
        g_src = edge_guard(src, sc) if ctx.attr("guard", True) else None
        g_dst = edge_guard(dst, dc) if ctx.attr("guard", True) else None
        out = [IfThenElse(g_src, [ld], zero) if g_src is not None else ld, st]
        return IfThenElse(g_dst, out) if g_dst is not None else ctx.seq(out)

    return ctx.seq([alloc, _chunks(ctx, dst, src, body, min_bytes=4)])
