"""StageRing's arithmetic against a direct model, and small kernels on the ring under the simulator.

The model walks a ring one position at a time: a cursor that steps over the stages and wraps, and per stage the
number of rounds it has served. Position ``g`` of the walk uses the stage under the cursor in that stage's round
``r``; a consumer waits for ``full``'s phase ``r`` to complete (parity ``r % 2``); before round ``r >= 1`` the
producer waits for ``empty``'s phase ``r - 1`` (parity ``(r - 1) % 2``), and in round 0 it does not wait."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy import T, sim
from tirxpy.lang import StageRing

from .ring_kernels import expected, ring_copy


class RingModel:
    """A ring walked position by position, with no closed form: a wrapping cursor and a round count per stage."""

    def __init__(self, stages):
        self.stages, self.cursor, self.rounds = stages, 0, [0] * stages

    def step(self):
        """``(stage, round)`` of the next position."""
        s = self.cursor
        r = self.rounds[s]
        self.rounds[s] += 1
        self.cursor = 0 if s + 1 == self.stages else s + 1
        return s, r


_WAIT = re.compile(r"mbarrier_wait_parity\((full|empty)\[(\d+)\], (\d+)\)")


def _waits(stages, g):
    """``{barrier: (index, parity)}`` of the waits ``wait_empty(g)`` and ``wait_full(g)`` emit for a Python ``g``."""
    @T.prim_func
    def k(A: T.Tensor((1,), "float32")):
        T.launch(grid=(1,), threads=32)
        full = T.alloc_shared((stages,), "uint64")
        empty = T.alloc_shared((stages,), "uint64")
        ring = StageRing(full, empty, stages)
        ring.wait_empty(g)
        ring.wait_full(g)
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _WAIT.finditer(str(k))}


@settings(max_examples=40, deadline=None)
@given(stages=st.integers(1, 9), n=st.integers(1, 120))
def test_stage_and_parity_of_every_position_match_the_walk(stages, n):
    ring = StageRing.__new__(StageRing)
    ring.stages = stages
    model = RingModel(stages)
    for g in range(n):
        s, r = model.step()
        assert (ring.stage(g), ring.parity(g)) == (s, r % 2), (stages, g)


@settings(max_examples=25, deadline=None)
@given(stages=st.integers(1, 6), g=st.integers(0, 400))
def test_the_emitted_waits_are_the_models(stages, g):
    model = RingModel(stages)
    for _ in range(g + 1):
        s, r = model.step()
    want = {"full": (s, r % 2)}
    if r >= 1:
        want["empty"] = (s, (r - 1) % 2)
    assert _waits(stages, g) == want


@settings(max_examples=40, deadline=None)
@given(stages=st.integers(1, 7), kt=st.integers(1, 9), tiles=st.integers(1, 12))
def test_a_persistent_walk_carries_the_ring_across_tiles(stages, kt, tiles):
    """Position ``i * kt + k`` of tile ``i``, k-block ``k``: the ring continues where the last tile left it."""
    ring = StageRing.__new__(StageRing)
    ring.stages = stages
    model = RingModel(stages)
    for i in range(tiles):
        for k in range(kt):
            s, r = model.step()
            assert (ring.stage(i * kt + k), ring.parity(i * kt + k)) == (s, r % 2)


@settings(max_examples=40, deadline=None)
@given(stages=st.lists(st.integers(1, 6), min_size=2, max_size=4), data=st.data())
def test_several_rings_each_follow_their_own_walk(stages, data):
    """Interleaved steps on several rings (Q, K, V of attention): each ring's position counts its own steps."""
    rings = []
    for n in stages:
        ring = StageRing.__new__(StageRing)
        ring.stages = n
        rings.append(ring)
    models = [RingModel(n) for n in stages]
    counts = [0] * len(stages)
    for j in data.draw(st.lists(st.integers(0, len(stages) - 1), max_size=200)):
        s, r = models[j].step()
        g = counts[j]
        counts[j] += 1
        assert (rings[j].stage(g), rings[j].parity(g)) == (s, r % 2)


@pytest.mark.parametrize("stages", [1, 2, 3, 5])
def test_device_stage_and_parity_match_the_walk(stages):
    """The expressions the ring builds for a device position compute the walk on the device (the simulator)."""
    n = 4 * stages + 3

    @T.prim_func
    def k(S: T.Tensor((n,), "int32"), P: T.Tensor((n,), "int32")):
        T.launch(grid=(1,), threads=32)
        full = T.alloc_shared((stages,), "uint64")
        empty = T.alloc_shared((stages,), "uint64")
        ring = StageRing(full, empty, stages)
        if T.thread_id() == 0:
            for g in T.serial(n):
                S[g] = ring.stage(g)
                P[g] = ring.parity(g)

    s_out, p_out = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
    sim.run(k, s_out, p_out)
    model = RingModel(stages)
    walk = [model.step() for _ in range(n)]
    assert s_out.tolist() == [s for s, _ in walk] and p_out.tolist() == [r % 2 for _, r in walk]


def _run(k, consumers, n, seed=0):
    a = np.random.default_rng(seed).random(n * 32, dtype=np.float32)
    b = np.full((consumers, n * 32), np.nan, np.float32)
    res = sim.run(k, a, b, check=False, seed=seed)
    return a, b, [p.kind for p in res.problems]


@pytest.mark.parametrize("stages, tiles, kt, consumers, read_every", [
    (1, 1, 5, 1, 1),        # one stage: every position waits the previous one's release
    (2, 1, 9, 1, 1),        # 4.5 laps
    (3, 1, 10, 1, 1),
    (3, 4, 5, 1, 1),        # persistent: 4 tiles of 5 positions, the ring carried across tiles (6.7 laps)
    (2, 3, 3, 2, 1),        # two consumers release every stage: empty expects 64 arrivals
    (3, 2, 5, 1, 2),        # a consumer that reads every other position (it still waits and releases each)
    (2, 2, 4, 2, 3),
])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_producer_and_consumers_on_the_ring_run_clean_and_copy(stages, tiles, kt, consumers, read_every, seed):
    k = ring_copy(stages, tiles, kt, consumers, read_every)
    a, b, problems = _run(k, consumers, tiles * kt, seed)
    assert problems == []
    assert np.array_equal(b, expected(a, consumers, read_every))
