"""Slot correspondence for per-thread element-wise work on register tiles, with broadcasting.

For a destination register tile and operand register tiles (numpy broadcasting: an operand's
dimensions align to the right; extent 1 broadcasts), :func:`slot_map` returns, for every slot
of the destination the executing thread holds, the slot of each operand that holds the element
the destination element reads. The answer must be the same for every active thread (registers
are compile-time slots); it is computed from the owner tables and checked for all threads, and
an operand element the thread does not own is a legality error naming the element and owners.
"""
from __future__ import annotations

from tirxpy.ir.buffer import footprint

from ..dispatch import fail
from ..fragment import FragmentError, thread_ids, tile_fragment


def _owner_index(tile):
    """{(thread key over the layout's thread axes, linear element): slot}, and those axes."""
    names, t = tile.layout.owner_table()
    axes = [a for a in names if a != "m"]
    mi = names.index("m") if "m" in names else None
    idx = {}
    owners: dict = {}
    cols = [names.index(a) for a in axes]
    for i in range(t.shape[0]):
        for r in range(t.shape[1]):
            key = tuple(int(t[i, r, c]) for c in cols)
            idx[(key, i)] = int(t[i, r, mi]) if mi is not None else 0
            owners.setdefault(i, []).append(key)
    return axes, idx, owners


def broadcast_shape_ok(dst, op) -> str | None:
    ds, os_ = dst.shape, op.shape
    if len(os_) > len(ds):
        return f"{op.name} has shape {os_}, more dimensions than {dst.name} {ds}"
    for a, b in zip(reversed(ds), reversed(os_)):
        if b != 1 and b != a:
            return f"{op.name} {os_} does not broadcast to {dst.name} {ds}"
    return None


def _op_coord(coord, dst, op):
    k = len(dst.shape) - len(op.shape)
    return tuple(0 if n == 1 else c for c, n in zip(coord[k:], op.shape))


def _linear(coord, shape):
    i = 0
    for c, n in zip(coord, shape):
        i = i * n + c
    return i


def register_fragment(ctx, tile):
    if tile.storage != "local":
        fail(f"{tile.name} is in {tile.storage} memory; element-wise primitives work on register tiles "
             "(copy it into a T.alloc_local tile first)")
    if not tile.static_starts:
        fail(f"{tile.name}: a register view needs static starts")
    try:
        return tile_fragment(tile, ctx.threads)
    except FragmentError as e:
        fail(f"{tile.name}: {e.reason}")


_MAPS: dict = {}     # (dst layout, shape, pins, operand layout, shape, pins, thread ids) -> the operand's map


def slot_map(ctx, dst, operands):
    """``(frag, maps)``: ``maps[j][k]`` is the slot of ``operands[j]`` read by destination slot
    ``frag.slots[k]`` (``None`` entries in ``operands`` are scalars and get ``None``). A map is a function
    of the two tiles' layouts, shapes and pinned axes and of the active threads, so one that was built
    (every check passed) is reused for the same values (layouts compare by structure)."""
    frag = register_fragment(ctx, dst)
    maps = []
    for op in operands:
        if op is None:
            maps.append(None)
            continue
        register_fragment(ctx, op)
        why = broadcast_shape_ok(dst, op)
        if why:
            fail(why)
        from ..fragment import pinned_axes

        pin = pinned_axes(op)
        memo = (dst.layout, dst.shape, tuple(sorted(pinned_axes(dst).items())), op.layout, op.shape,
                tuple(sorted(pin.items())), ctx.threads.tids)
        hit = _MAPS.get(memo)
        if hit is not None:
            maps.append(list(hit))
            continue
        axes, idx, owners = _owner_index(op)
        per_slot = [None] * frag.nslots
        for tid in sorted(ctx.threads.tids):
            ids = thread_ids(tid)
            if tid not in frag.holders:
                continue
            key = tuple(ids[a] for a in axes)
            for k in range(frag.nslots):
                c = frag.static_coord(k, ids)
                oc = _op_coord(c, dst, op)
                lin = _linear(oc, op.shape)
                s = idx.get((key, lin)) if all(ids[a] == v for a, v in pin.items()) else None
                if s is None:
                    who = ", ".join([f"{a} {v}" for a, v in zip(axes, owners[lin][0])]
                                    + [f"{a} {v}" for a, v in pin.items()]) or "no thread"
                    mine = ", ".join([f"{a} {v}" for a, v in zip(axes, key)] + [f"{a} {ids[a]}" for a in pin])
                    fail(f"{op.name}: element {oc} is owned by ({who}), but thread {tid} ({mine}) needs it "
                                 f"for element {c} of {dst.name}")
                if per_slot[k] is None:
                    per_slot[k] = (s, tid)
                elif per_slot[k][0] != s:
                    fail(f"{op.name}: the element that {dst.name} slot {frag.slots[k]} reads sits in slot "
                         f"{per_slot[k][0]} of thread {per_slot[k][1]} but slot {s} of thread {tid}")
        maps.append([p[0] if p else None for p in per_slot])
        if len(_MAPS) >= 4096:
            _MAPS.clear()
        _MAPS[memo] = tuple(maps[-1])
    return frag, maps


def all_slots(tile) -> list:
    """Every register slot a local view covers (for fills that need no element order)."""
    names, t = tile.layout.owner_table()
    if "m" not in names:
        return [0]
    return sorted({int(x) for x in t[:, :, names.index("m")].reshape(-1).tolist()}) if footprint(tile.layout) else [0]
