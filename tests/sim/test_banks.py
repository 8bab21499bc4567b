"""Shared-memory bank conflicts in the simulator (tirxpy/sim/banks.py): the wavefront rule on hand-made warp
accesses, and ``SimResult.bank_conflicts`` on a wgmma accumulator staged into shared memory, against the counts
ncu gave for the same stores on an H100 (docs/performance.md: 8 wavefronts an 8-byte store into unswizzled
rows of 64 floats, 4 into 128-byte-swizzled rows of 32, where 2 are ideal)."""
import numpy as np
import pytest

from tirxpy import T, Tx
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_for
from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.sim import ArgumentError, run
from tirxpy.sim.banks import wavefronts

LANES = np.arange(32)


def test_eight_byte_accesses_are_served_by_half_warps():
    # lanes 0-15 and 16-31 each fill the 32 banks once: one wavefront a half
    assert wavefronts(LANES, 8 * LANES, 8) == (2, 2)
    # the two halves on the same words: still one wavefront each
    assert wavefronts(LANES, 8 * (LANES % 16), 8) == (2, 2)
    # 16 bytes a lane: quarters of 8 lanes
    assert wavefronts(LANES, 16 * LANES, 16) == (4, 4)
    assert wavefronts(LANES[:5], 16 * LANES[:5], 16) == (1, 1)


def test_distinct_words_of_one_bank_serialize_and_one_word_is_shared():
    assert wavefronts(LANES, 128 * (LANES % 4), 4) == (4, 1)         # 4 words of bank 0, 8 lanes each
    assert wavefronts(LANES, 256 * (LANES // 4) + 8 * (LANES % 4), 8) == (8, 2)


UNSWIZZLED = TileLayout(S[(64, 64) : (64, 1)])
SWIZZLED = ComposeLayout(swizzle_for(128, "float32"), TileLayout(S[(64, 2, 32) : (32, 2048, 1)]))


def _staging(layout):
    @T.prim_func
    def stage(X: T.Tensor((64, 64), "float32")):
        T.launch(grid=(1,), threads=128)
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator(64))
        sm = T.alloc_shared((64, 64), "float32", layout=layout)
        Tx.wg.fill(acc, T.float32(1))
        Tx.wg.copy(sm, acc)
    return stage


@pytest.mark.parametrize("layout,per_access", [(UNSWIZZLED, 8), (SWIZZLED, 4)])
def test_staging_an_accumulator_reports_the_wavefronts_ncu_counts(layout, per_access):
    res = run(_staging(layout), np.zeros((64, 64), np.float32))
    (c,) = res.bank_conflicts
    assert (c.wavefronts / c.accesses, c.ideal / c.accesses) == (per_access, 2)
    assert c.accesses == 4 * 16                     # 4 warps, 16 stores of 2 floats a thread
    assert "Tx.wg.copy(sm, acc)" in c.where.source_line() and "would do" in str(c)


def test_a_row_of_vectors_is_conflict_free_and_a_column_of_them_is_not():
    @T.prim_func
    def store(X: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=32)
        row = T.alloc_shared((128,), "float32")
        rows = T.alloc_shared((32, 32), "float32")
        v = T.alloc_local((128,), "float32", layout=TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)]))
        Tx.warp.fill(v, T.float32(2))
        Tx.warp.copy(row, v)                        # 16 bytes a lane, one after another
        Tx.warp.copy(rows[:, 0:4], v.alias((32, 4), layout=TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)])))
    res = run(store, np.zeros(128, np.float32))
    (c,) = res.bank_conflicts                       # the column: lane l at byte 128 l, 8 lanes a quarter in 4 banks
    assert "rows[:, 0:4]" in c.where.source_line()
    assert (c.accesses, c.wavefronts, c.ideal) == (1, 32, 4)


@pytest.mark.parametrize("lanes,offsets,width,match", [
    (LANES, 4 * LANES, 2, "width must be 4, 8 or 16 bytes"),
    (LANES, 4 * LANES, True, "width must be 4, 8 or 16 bytes"),
    (LANES, 4 * LANES, 8.0, "width must be 4, 8 or 16 bytes"),
    (LANES[:4], 4 * LANES, 4, "4 lanes for 32 offsets"),
    (LANES + 1, 4 * LANES, 4, "distinct lane ids 0 .. 31"),
    ([0, 0], [0, 4], 4, "distinct lane ids 0 .. 31"),
])
def test_bad_arguments_are_refused(lanes, offsets, width, match):
    with pytest.raises(ArgumentError, match=match):
        wavefronts(lanes, offsets, width)
