"""tirxpy_kernels/attention_walk.py: the persistent walks visit every tile once. The walk functions build the
device expressions the kernel runs; these tests evaluate those very expressions (tirxpy.sim's
expression compiler, with ``T.cta_id(0)`` bound to each CTA in turn), not a host re-implementation."""
import collections
import functools
import itertools
import types

import numpy as np
import pytest

from tirxpy_kernels.attention_walk import causal_steps, causal_tail, key_blocks, next_step, tile_of
from tirxpy.lang.schedule import tiles_of_unit
from tirxpy.ir import expr as E
from tirxpy.sim.expr import compile_expr


def _value(x, u):
    """``x`` (a Python int / bool or a device expression) on CTA ``u``."""
    if not isinstance(x, E.Expr):
        return int(x)
    w = types.SimpleNamespace(cta=types.SimpleNamespace(cta_id=(u, 0, 0)), env={})
    return int(compile_expr(x)(w, np.ones(32, bool))[0])


@functools.lru_cache(maxsize=None)
def _walk(B, H, MT, units, causal, tail):
    """``{(query tile, head, batch): visits}`` over every CTA's steps, and each CTA's list of steps (callers
    only read them: one walk serves every test of its arguments). Step ``t``'s expressions are built once
    and evaluated on every CTA (they read the CTA from ``T.cta_id(0)``)."""
    seen, steps, exprs = collections.Counter(), [], {}
    for u in range(units):
        if causal:
            n = _value(causal_steps(MT, H, B, units, tail), u)
        else:
            n = _value(tiles_of_unit(u, units, MT * H * B), u)
        mine = []
        for t in range(n):
            if t not in exprs:
                exprs[t] = tile_of(t, True, units, MT, H, causal, B, tail)
            mt, h, b, valid = (_value(x, u) for x in exprs[t])
            if valid:
                seen[(mt, h, b)] += 1
                mine.append((t, mt))
        steps.append(mine)
    return seen, steps


CASES = [(2, 3, 3, 5), (2, 2, 5, 3), (1, 4, 4, 3), (1, 2, 4, 3), (32, 16, 8, 132), (2, 16, 32, 132), (3, 5, 7, 11),
         (1, 1, 1, 4)]


@pytest.mark.parametrize("B,H,MT,units", CASES)
@pytest.mark.parametrize("causal,tail", [(True, False), (True, True), (False, False)])
def test_persistent_walk_takes_every_tile_once(B, H, MT, units, causal, tail):
    """Pairs of query tiles (causal), pairs then the dealt tail (``TAIL``), or plain round robin: every
    ``(query tile, head, batch)`` exactly once, for even and odd query-tile counts and CTA counts that do
    and do not divide the work."""
    seen, _ = _walk(B, H, MT, units, causal, tail)
    assert set(seen) == {(mt, h, b) for mt in range(MT) for h in range(H) for b in range(B)}
    assert set(seen.values()) == {1}


@pytest.mark.parametrize("B,H,MT,units", [c for c in CASES if c[2] > 1])
def test_causal_pairs_are_balanced_and_heavy_first(B, H, MT, units):
    """Without the tail, a CTA takes whole pairs ``(MT - 1 - j, j)``, the heavier tile first: the key blocks
    of a pair sum to ``MT + 1`` tiles' worth (bar the lone middle tile of an odd ``MT``)."""
    _, steps = _walk(B, H, MT, units, True, False)
    for mine in steps:
        for (t0, a), (t1, b) in itertools.pairwise(mine):
            if t0 % 2 == 0 and t1 == t0 + 1:
                assert a + b == MT - 1 and a >= b


def test_tail_deals_heaviest_tiles_first():
    """In the dealt tail, the query tiles each CTA takes never get heavier from step to step."""
    B, H, MT, units = 32, 16, 8, 132
    S0, _ = causal_tail(MT, H, B, units)
    _, steps = _walk(B, H, MT, units, True, True)
    for u, mine in enumerate(steps):
        tail = [mt for t, mt in mine if t >= 2 * tiles_of_unit(u, units, S0)]
        assert tail == sorted(tail, reverse=True)


@pytest.mark.parametrize("MT,units", [(5, 3), (7, 11), (3, 5)])
def test_next_step_skips_the_missing_middle_tile(MT, units):
    """``next_step`` of a step that holds a tile is the next step that holds one (odd ``MT``: the lone
    middle pair's second step is skipped)."""
    B, H = 2, 2
    for u in range(units):
        n = _value(causal_steps(MT, H, B, units, False), u)
        valid = [_value(tile_of(t, True, units, MT, H, True, B)[3], u) for t in range(n + 2)]
        for t in range(n):
            if valid[t]:
                nt = _value(next_step(t, units, MT, H, True, B), u)
                assert nt > t and (nt >= n or valid[nt]) and not any(valid[t + 1:nt])


def test_key_blocks_reach_the_diagonal():
    """A causal query tile at row ``m0`` reads the key blocks up to its last row (capped by SQ); without a
    mask, all of them."""
    for m0, BM, BN, SQ, NKV, want in [(0, 128, 128, 1024, 8, 1), (896, 128, 128, 1024, 8, 8), (128, 128, 80, 1000, 13, 4),
                                      (896, 128, 128, 900, 8, 8), (0, 128, 64, 50, 1, 1)]:
        assert _value(key_blocks(m0, NKV, BM, BN, SQ, True), 0) == want
        assert key_blocks(m0, NKV, BM, BN, SQ, False) == NKV
