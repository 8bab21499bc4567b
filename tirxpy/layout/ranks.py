"""The rank axis: which GPU of a process group holds which elements of a tensor.

``rank`` is an :class:`~tirxpy.layout.axis.Axis` like ``laneid``: a stride on it moves an element to
another GPU. A tensor sharded by rows over ``world`` ranks stores block ``r`` of its rows on rank ``r``,
row-major there (local ``m`` offsets start at 0 on every rank)::

    S[(world, rows // world, cols) : (1@rank, cols@m, 1@m)]

A layout that does not name ``rank`` leaves it free: every rank holds the element (a replicated tensor,
as ``laneid`` left out means every lane holds it); ``R[world : 1@rank]`` says the same explicitly.
``owners()`` answers across ranks (the owner dicts carry ``rank``), slicing a region keeps the rank in
the offset, and :func:`peer_of` says which rank to read a region from and how it lies there.

    >>> from tirxpy.layout.ranks import sharded, ranks_of, peer_of
    >>> L = sharded((4, 3), world=2)
    >>> L
    TileLayout(S[(2, 2, 3) : (1@rank, 3@m, 1@m)])
    >>> L.owners(3, 1, shape=(4, 3))               # row 3 is rank 1's local row 1
    [{'rank': 1, 'm': 4}]
    >>> ranks_of(L, ((1, 3), (0, 3)), (4, 3))       # rows 1..2 straddle the two shards
    [0, 1]
    >>> peer_of(L, ((2, 4), (0, 3)), (4, 3))        # rows 2..3: all on rank 1, rows 0..1 there
    (1, TileLayout(S[(2, 3) : (3@m, 1@m)]))
"""
from __future__ import annotations

from math import prod

from tirxpy.errors import shown

from .axis import Axis
from .coords import check_shape
from .errors import MAX_ANSWER, LayoutError, LayoutTypeError
from .iters import Iter, as_int, bounded_int
from .tile import Layout, TileLayout

rank = Axis.get("rank")


def _world(world) -> int:
    w = as_int(world, "world (the number of ranks)")
    if w < 1:
        raise LayoutError(f"world = {shown(w, 60)}: a process group has at least one rank")
    return w


def _shape(shape) -> tuple:
    return check_shape(shape, None)


def sharded(shape, world, dim: int = 0) -> TileLayout:
    """The layout of a tensor of logical ``shape`` split into ``world`` equal blocks along ``dim``, block
    ``r`` held by rank ``r``, each block row-major in its rank's memory.

    *Requires*: ``shape[dim] % world == 0``. *Postcondition*: element ``c`` has one owner, on rank
    ``c[dim] // (shape[dim] // world)``, at the row-major offset of ``c`` inside that block.

        >>> sharded((2, 4), world=2, dim=1)
        TileLayout(S[(2, 2, 2) : (2@m, 1@rank, 1@m)])
    """
    w = _world(world)
    shape = _shape(shape)
    d = as_int(dim, "dim")
    if not 0 <= d < len(shape):
        raise LayoutError(f"dim {shown(d, 60)} is not a dimension of shape {shown(shape)} (0 .. {len(shape) - 1})")
    if shape[d] % w:
        raise LayoutError(f"dimension {d} of shape {shown(shape, 60)} has {shown(shape[d], 60)} entries, not a "
                          f"multiple of world = {shown(w, 60)}; "
                          "pad it to a multiple of the number of ranks or shard another dimension")
    local = list(shape)
    local[d] //= w
    strides = [prod(local[k + 1:]) for k in range(len(local))]
    its = []
    for k, n in enumerate(local):
        if k == d:
            its.append(Iter(w, 1, rank))
        its.append(Iter(n, strides[k], "m"))
    return TileLayout.from_iters(its)


def replicated(shape, world) -> TileLayout:
    """Every rank holds the whole row-major tensor: ``S[shape] + R[world : 1@rank]``.

        >>> replicated((2, 2), 2).owners(1)
        [{'m': 1, 'rank': 0}, {'m': 1, 'rank': 1}]
    """
    w = _world(world)
    shape = _shape(shape)
    strides = [prod(shape[k + 1:]) for k in range(len(shape))]
    return TileLayout.from_iters([Iter(n, s, "m") for n, s in zip(shape, strides)], [Iter(w, 1, rank)])


def _tile(layout, op) -> TileLayout:
    if not isinstance(layout, Layout):
        raise LayoutTypeError(f"{op} takes a layout, got {shown(layout)} ({type(layout).__name__})")
    return getattr(layout, "tile_layout", layout)


def _ranks_closed(L: TileLayout) -> set:
    """Ranks a layout's owners reach (its rank iterators' digits plus the offset)."""
    vals = {L.offset.get("rank", 0)}
    for it in L.shard + L.replica:
        if it.axis is rank:
            vals = {v + j * it.stride for v in vals for j in range(it.extent)}
    return vals


def ranks_of(layout, region, shape) -> list:
    """The sorted ranks holding at least one element of ``region`` (``((start, stop), ...)`` or slices per
    dimension) of the logical tile ``shape``. A layout that does not name ``rank`` answers ``[]``: it pins
    no rank (every rank holds every element).

    *Postcondition*: ``r in ranks_of(L, region, shape)`` iff some element ``c`` of the region has an owner
    with ``owner['rank'] == r``. Exact, in closed form per strided box (a region that is no box is cut in
    halves until each part is one).

        >>> ranks_of(sharded((8,), 4), ((0, 8),), (8,))
        [0, 1, 2, 3]
    """
    L = _tile(layout, "ranks_of")
    if "rank" not in L.axes():
        return []
    shape = check_shape(shape, L.size())
    from .algebra import _slice, check_region

    out: set = set()
    todo = [tuple(check_region(region, shape))]
    while todo:
        reg = todo.pop()
        if any(a >= b for a, b in reg):
            continue
        sub, _ = _slice(L, reg, shape, complete=False)   # a region that is no box is halved instead
        if sub is not None:
            out |= _ranks_closed(sub)
            continue
        d = max(range(len(reg)), key=lambda k: reg[k][1] - reg[k][0])
        a, b = reg[d]
        mid = (a + b) // 2
        todo += [reg[:d] + ((a, mid),) + reg[d + 1:], reg[:d] + ((mid, b),) + reg[d + 1:]]
    return sorted(out)


def _drop_rank(L: TileLayout) -> TileLayout:
    """``L`` without the rank axis: a shard iterator on rank becomes the same count of elements at one place on
    ``m`` (the rank it moves to is the caller's choice of peer), so the size stays; rank replicas go."""
    off = {k: v for k, v in L.offset.items() if k != "rank"}
    return TileLayout.from_iters([it if it.axis is not rank else Iter(it.extent, 0, "m") for it in L.shard],
                                 [it for it in L.replica if it.axis is not rank], off)


def peer_of(layout, region, shape, me: int | None = None, world: int | None = None) -> tuple:
    """``(rank, local layout)``: the rank that holds every element of ``region`` and the region's layout in
    that rank's memory (``rank`` removed). With ``me`` given and holding the region (a replicated tensor),
    ``me`` is chosen: read locally when you can. ``me`` is a rank, an int >= 0. Raises :class:`LayoutError` when no
    single rank holds the whole region (it names the ranks: split the region at the shard boundary).

    ``world`` (the process group's size, when given) bounds the ranks: ``me`` must lie in ``[0, world)``, and so
    must the rank returned (a layout made for a larger group names ranks the group does not have); a
    :class:`LayoutError` names the value and the group's ranks otherwise.

        >>> peer_of(replicated((4,), 2), ((0, 2),), (4,), me=1)
        (1, TileLayout(S[2 : 1@m]))
        >>> peer_of(replicated((4,), 2), ((0, 2),), (4,), me=2, world=2)
        Traceback (most recent call last):
        ...
        tirxpy.layout.errors.LayoutError: peer_of: me = 2 is not a rank of a group of world = 2 ranks (0 .. 1); ...
    """
    L = _tile(layout, "peer_of")
    if world is not None:
        world = _world(world)
    if me is not None:
        me = bounded_int(me, "peer_of: me (this process's rank)", 0)
        if world is not None and me >= world:
            raise LayoutError(f"peer_of: me = {me} is not a rank of a group of world = {world} ranks (0 .. "
                              f"{world - 1}); pass this process's rank in the group "
                              "(torch.distributed.get_rank(group))")
    shape = check_shape(shape, L.size())
    from .algebra import check_region

    reg = check_region(region, shape)
    who, local = _peer(L, reg, shape, me)
    if world is not None and who >= world:
        raise LayoutError(f"peer_of: the layout places region {list(reg)} on rank {who}, outside a group of world = "
                          f"{world} ranks (0 .. {world - 1}); build the layout for this group (world={world})")
    return who, local


def _peer(L: TileLayout, reg, shape, me) -> tuple:
    """:func:`peer_of` after its argument checks (``reg`` a checked region of ``shape``). Element ``i`` of the
    sub-layout lies on the ranks ``b(i) + c``: ``b(i)`` its base rank (rank offset plus its shard rank digits),
    ``c`` any replica rank offset; a rank holds the whole region when it is in every element's set."""
    from .algebra import _slice

    sub, why = _slice(L, reg, shape)
    copies_named = any(it.axis is rank and it.extent > 1 and it.stride > 0 for it in L.replica)
    if sub is None:
        held = ranks_of(L, reg, shape)
        if len(held) > 1 and not copies_named:      # one rank per element: several ranks, none holds it all
            raise LayoutError(f"peer_of: region {list(reg)} spans ranks {held}; no one rank holds it all: split "
                              "the region at the shard boundary and read each part from its rank")
        raise LayoutError(f"peer_of: region {list(reg)} is not one strided box of the layout ({why})")
    if "rank" not in sub.axes():
        who = 0 if me is None else me
        return who, sub
    moving = [it for it in sub.shard if it.axis is rank and it.extent > 1 and it.stride > 0]
    copies = [it for it in sub.replica if it.axis is rank and it.extent > 1 and it.stride > 0]
    if moving and not copies:
        raise LayoutError(f"peer_of: region {list(reg)} spans ranks {ranks_of(L, reg, shape)}; no one rank holds "
                          "it all: split the region at the shard boundary and read each part from its rank")
    n = prod(it.extent for it in moving + copies)
    if n > MAX_ANSWER:
        raise LayoutError(f"peer_of: the region's rank digits and rank replicas make {n} combinations, past the "
                          f"limit of {MAX_ANSWER} (MAX_ANSWER); read a smaller region")
    offs = _ranks_closed(TileLayout.from_iters([], copies, {}))
    bases = _ranks_closed(TileLayout.from_iters(moving, [], {"rank": sub.offset.get("rank", 0)}))
    held = sorted(set.intersection(*({b + c for c in offs} for b in bases)))
    if not held:
        raise LayoutError(f"peer_of: region {list(reg)} lies on ranks {ranks_of(L, reg, shape)} but no one rank "
                          "holds all of it: split the region at the shard boundary and read each part from its rank")
    who = held[0]
    if me is not None and me in held:
        who = me
    return who, _drop_rank(sub)
