"""Per-thread inversion of register layouts, checked against the layout's owners by brute force."""
import pytest

from tirxpy.ir import expr as E
from tirxpy.layout import (
    R, S, TCol, TileLayout, laneid, ldmatrix_layout, m, mma_m16n8k16_a, mma_m16n8k16_c, wgmma_accumulator, warpid,
)
from tirxpy.primitives.fragment import FragmentError, thread_fragment
from tirxpy.scope import ThreadSet


def ev(e, tid):
    if isinstance(e, (E.IntImm, E.BoolImm)):
        return e.value
    if isinstance(e, E.ScopeId):
        return {"lane_id": tid % 32, "warp_id": tid // 32, "warp_id_in_wg": (tid // 32) % 4,
                "thread_id": tid, "thread_id_in_wg": tid % 128, "warpgroup_id": tid // 128}[e.kind]
    a, b = ev(e.a, tid), (ev(e.b, tid) if hasattr(e, "b") else None)
    return {E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b, E.FloorDiv: lambda: a // b,
            E.FloorMod: lambda: a % b, E.LT: lambda: a < b, E.GE: lambda: a >= b, E.EQ: lambda: a == b,
            E.And: lambda: a and b}[type(e)]()


IDS = {"laneid": lambda t: t % 32, "warpid": lambda t: t // 32, "wid_in_wg": lambda t: (t // 32) % 4}


def expected(L, shape, tid):
    """{slot: coordinate} thread ``tid`` holds, straight from L.owners()."""
    from itertools import product
    out = {}
    for c in product(*[range(n) for n in shape]):
        for o in L.owners(*c, shape=shape):
            if all(IDS[a](tid) == v for a, v in o.items() if a != "m"):
                out[o.get("m", 0)] = c
    return out


CASES = [
    (wgmma_accumulator(16), (64, 16), 128),
    (mma_m16n8k16_c(), (16, 8), 32),
    (mma_m16n8k16_a(), (16, 16), 32),
    (ldmatrix_layout(4), (16, 16), 32),
    (TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid), (8, 16), 512),
    (TileLayout(S[(2, 4, 32, 8) : (8 @ m, 1 @ warpid, 1 @ laneid, 1 @ m)]), (2048,), 128),
    (TileLayout(S[(4, 8) : (1 @ laneid, 1)]), (4, 8), 32),
    (TileLayout(S[1 : 1 @ m] + R[32 : 1 @ laneid]), (1,), 32),
]


@pytest.mark.parametrize("L,shape,threads", CASES)
def test_closed_form_matches_owners(L, shape, threads):
    f = thread_fragment(L, shape, ThreadSet.full(threads))
    for tid in range(0, threads, 7 if threads > 128 else 1):
        want = expected(L, shape, tid)
        holds = f.guard is None or ev(f.guard, tid)
        assert holds == bool(want), tid
        if not holds:
            continue
        got = {s: tuple(ev(c, tid) for c in cs) for s, cs in zip(f.slots, f.coords)}
        assert got == want, tid


def test_wgmma_accumulator_formula():
    f = thread_fragment(wgmma_accumulator(16), (64, 16), ThreadSet.full(128))
    # DESIGN.md: row = 16*warp + 8*h + lane/4, col = 8*nb + 2*(lane%4) + c, register = 4*nb + 2*h + c
    for tid in (0, 37, 101, 127):
        w, l = tid // 32, tid % 32
        for s, cs in zip(f.slots, f.coords):
            nb, h, c = s // 4, (s // 2) % 2, s % 2
            assert tuple(ev(x, tid) for x in cs) == (16 * w + 8 * h + l // 4, 8 * nb + 2 * (l % 4) + c)


def test_rejects_swizzled_and_memory_axes():
    from tirxpy.layout import ComposeLayout, swizzle_128B
    with pytest.raises(FragmentError, match="cannot be swizzled"):
        thread_fragment(ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(8, 64)])), (8, 64), ThreadSet.full(32))
    with pytest.raises(FragmentError, match=r"uses axes \['TCol'\]"):
        thread_fragment(TileLayout(S[(4, 8) : (1 @ laneid, 1 @ TCol)]), (4, 8), ThreadSet.full(32))


def test_interleaved_lane_iterators_rejected():
    L = TileLayout(S[(4, 4) : (1 @ laneid, 2 @ laneid)])  # overlapping digits: lanes 2.. hold two elements
    with pytest.raises(FragmentError):
        thread_fragment(L, (4, 4), ThreadSet.full(32))


def test_unnamed_thread_axes_are_free_named_ones_pinned():
    """One meaning, shared with Layout.owners / elements_at: a thread axis the layout does not name is
    free (every thread holds its own copy); a named one at offset 0 is pinned (lane 0 only)."""
    from tirxpy.layout import Iter, S, TileLayout, laneid

    free = thread_fragment(TileLayout(S[(4, 8) : (8, 1)]), (4, 8), ThreadSet.full(64))
    assert len(free.holders) == 64 and free.guard is None
    pinned = thread_fragment(TileLayout(S[(4, 8) : (8, 1)] + 0 @ laneid), (4, 8), ThreadSet.full(64))
    assert sorted(pinned.holders) == [0, 32]                 # lane 0 of each warp (warpid is free)
    ext1 = TileLayout.from_iters([Iter(4, 8), Iter(8, 1), Iter(1, 0, "laneid"), Iter(1, 3, "laneid")])
    assert sorted(thread_fragment(ext1, (4, 8), ThreadSet.full(64)).holders) == [0, 32]
    with pytest.raises(FragmentError, match="puts 8 elements on one laneid at stride 0"):
        thread_fragment(TileLayout(S[(4, 8) : (1 @ laneid, 0 @ laneid)]), (4, 8), ThreadSet.full(64))


def test_the_owner_table_check_is_memoized_by_layout_value_and_thread_set():
    """thread_fragment checks its closed form against the owner table once per (layout value, shape, thread
    set, pins): an equal layout built anew reuses the entry and gives the same fragment; another thread set
    is checked on its own."""
    from tirxpy.primitives import fragment as F

    F._CHECKED.clear()
    warp = ThreadSet(32, range(32))
    a = thread_fragment(TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)]), (32, 4), warp)
    b = thread_fragment(TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)]), (32, 4), warp)
    assert len(F._CHECKED) == 1
    assert (a.slots, a.const_coords, a.holders) == (b.slots, b.const_coords, b.holders) and len(a.holders) == 32
    c = thread_fragment(TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)]), (32, 4), ThreadSet(64, range(64)))
    assert len(F._CHECKED) == 2 and c.holders == frozenset(range(64))     # no warpid: both warps hold the tile
