"""tirxpy.sim.tma: TMA box gather (out-of-range elements read as zero), loads completing bytes on an
mbarrier, stores back to global, and rank checks of the tensor map."""
from types import SimpleNamespace

import numpy as np
import pytest

from tirxpy import T
from tirxpy.ir.buffer import Buffer
from tirxpy.layout import S, TileLayout
from tirxpy.sim import SimReportError, run
from tirxpy.sim.tma import _box_coords


def test_box_coords_row_major_with_clamp_and_validity():
    # 4 x 5 tensor, 2 x 3 box at (col 3, row 1) (coordinates innermost first): rows 1..2, cols 3..5
    tm = SimpleNamespace(buffer=Buffer("A", (4, 5), "float32"), box=(2, 3))
    flat, ok = _box_coords(tm, [3, 1])
    # col 5 is outside the tensor: its element index is clamped to col 4, and it is marked invalid
    assert flat.tolist() == [1 * 5 + 3, 1 * 5 + 4, 1 * 5 + 4, 2 * 5 + 3, 2 * 5 + 4, 2 * 5 + 4]
    assert ok.tolist() == [True, True, False, True, True, False]


def test_box_coords_negative_start_is_invalid():
    tm = SimpleNamespace(buffer=Buffer("A", (8,), "float32"), box=(4,))
    flat, ok = _box_coords(tm, [-2])
    assert flat.tolist() == [0, 0, 0, 1] and ok.tolist() == [False, False, True, True]


def test_box_coords_follow_the_tensors_strides():
    """A box addresses elements through the tensor's layout, as a tensor map's strides do: in the overlapping view
    ``(5, 3)`` with strides ``(1, 1)`` element ``(k, x)`` is slot ``k + x``."""
    view = Buffer("V", (5, 3), "float32", layout=TileLayout(S[(5, 3) : (1, 1)]))
    flat, ok = _box_coords(SimpleNamespace(buffer=view, box=(3, 2)), [0, 2])     # rows 2..4, cols 0..1
    assert flat.tolist() == [2, 3, 3, 4, 4, 5] and ok.all()


def _load_kernel(col0, rows=8, cols=16, layout=None):
    """TMA-loads A's box at column ``col0`` and stores it element by element into C (both of ``layout``: None for
    the dense one)."""
    BYTES = rows * cols * 4

    @T.prim_func
    def k(A: T.Tensor((rows, cols), "float32", layout=layout), C: T.Tensor((rows, cols), "float32", layout=layout)):
        T.launch(grid=(1,), threads=32)
        As = T.alloc_shared((rows, cols), "float32")
        bar = T.alloc_shared((1,), "uint64")
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.mbarrier_arrive_expect_tx(bar[0], BYTES)
            T.ptx.tma_load_2d(As, A[0:rows, 0:cols], col0, 0, bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        for i in T.serial(rows * cols // 32):
            r = (i * 32 + T.lane_id()) // cols
            c = (i * 32 + T.lane_id()) % cols
            C[r, c] = As[r, c]

    return k


def test_tma_load_copies_the_box():
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    c = np.zeros_like(a)
    res = run(_load_kernel(0), a, c, seed=0)
    assert res.problems == []
    np.testing.assert_array_equal(c, a)


def test_tma_load_past_the_tensor_fills_zero():
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) + 1
    c = np.full_like(a, -1)
    run(_load_kernel(4), a, c, seed=1)
    want = np.zeros_like(a)
    want[:, :12] = a[:, 4:]  # the box starts at column 4: its last 4 columns are outside A
    np.testing.assert_array_equal(c, want)


def test_tma_store_writes_shared_tile_to_global():
    @T.prim_func
    def k(C: T.Tensor((4, 8), "float32")):
        T.launch(grid=(1,), threads=32)
        Cs = T.alloc_shared((4, 8), "float32")
        Cs[T.lane_id() // 8, T.lane_id() % 8] = T.cast(T.lane_id(), "float32") * T.float32(2)
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.tma_store_2d(C[0:4, 0:8], 0, 0, Cs)
            T.ptx.bulk_commit_group()
            T.ptx.bulk_wait_group(0)

    c = np.zeros((4, 8), np.float32)
    res = run(k, c, seed=0)
    assert res.problems == []
    np.testing.assert_array_equal(c, (np.arange(32, dtype=np.float32) * 2).reshape(4, 8))


def test_tma_rank_mismatch_is_reported():
    @T.prim_func
    def k(A: T.Tensor((8, 16), "float32")):
        T.launch(grid=(1,), threads=32)
        As = T.alloc_shared((8, 16), "float32")
        bar = T.alloc_shared((1,), "uint64")
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
            T.ptx.tma_load_1d(As, A[0:8, 0:16], 0, bar[0])

    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros((8, 16), np.float32), seed=0)
    assert "tma_misuse" in ei.value.kinds(), str(ei.value)


def _store_kernel(col0):
    @T.prim_func
    def k(C: T.Tensor((4, 16), "float32")):
        T.launch(grid=(1,), threads=32)
        Cs = T.alloc_shared((4, 8), "float32")
        Cs[T.lane_id() // 8, T.lane_id() % 8] = T.cast(T.lane_id(), "float32")
        T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.tma_store_2d(C[0:4, 0:8], col0, 0, Cs)
            T.ptx.bulk_commit_group()
            T.ptx.bulk_wait_group(0)

    return k


@pytest.mark.parametrize("col0, ok", [(4, True), (8, True), (2, False), (6, False), (1, False)])
def test_a_box_must_start_16_byte_aligned_in_its_innermost_dimension(col0, ok):
    """The TMA unit faults (illegal instruction, on an H100) on a load or store whose box starts off a 16-byte boundary
    in the innermost dimension: float32 columns 1, 2, 6 are reported, 4 and 8 are not."""
    a, c = np.arange(8 * 16, dtype=np.float32).reshape(8, 16), np.zeros((8, 16), np.float32)
    for kern, args, name in ((_load_kernel(col0), (a, c), "tma_load_2d: the box of A"),
                             (_store_kernel(col0), (np.zeros((4, 16), np.float32),), "tma_store_2d: the box of C")):
        if ok:
            assert run(kern, *args, seed=0).problems == []
            continue
        with pytest.raises(SimReportError) as ei:
            run(kern, *args, seed=0)
        assert ei.value.kinds() == {"tma_misuse"}
        assert f"{name} starts at element {col0} of its innermost dimension ({col0 * 4} bytes), not a multiple of " \
               "16 bytes" in str(ei.value) and "a multiple of 4 elements" in str(ei.value)


def test_strided_views_hold_each_element_at_its_layout_offset():
    """A tensor whose layout reaches past its element count (rows 24 elements apart, 8 used) is held as that reach,
    each element at its offset: TMA boxes and element stores see the tensor's own elements, and the results come
    back in its logical shape, whether it is passed as a torch view or as a plain array."""
    import torch

    from tirxpy.sim.run import spread_offsets

    wide = torch.arange(8 * 24, dtype=torch.float32).reshape(8, 24)
    a, c = wide[:, 8:16], torch.full((8, 24), -1.0)[:, :8]
    kern = _load_kernel(0, 8, 8, TileLayout(S[(8, 8) : (24, 1)]))
    assert spread_offsets(kern.params[0]).tolist() == [24 * r + x for r in range(8) for x in range(8)]
    res = run(kern, a, c, seed=0)
    assert res.problems == []
    torch.testing.assert_close(c, a)
    np.testing.assert_array_equal(res[1], a.numpy())
    c2 = np.zeros((8, 8), dtype=np.float32)
    run(kern, a.contiguous().numpy(), c2, seed=1)
    np.testing.assert_array_equal(c2, a.numpy())


def test_a_far_reaching_layout_without_strides_is_refused():
    """A layout that reaches past the tensor's elements but is no strided map of its dimensions (a dimension split
    into iterators that do not merge) cannot be held element by element at its offsets: a typed error says so."""
    from tirxpy.sim import ArgumentError

    lay = TileLayout(S[(2, 2, 4) : (100, 1, 2)])         # rows 0, 1 one element apart, rows 2, 3 a hundred further
    kern = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((4, 4), "float32", layout=LAY), B: T.Tensor((4, 4), "float32")):
    T.launch(grid=(1,), threads=32)
    if T.thread_id() < 4:
        B[0, T.thread_id()] = A[0, T.thread_id()]
''', {"LAY": lay})
    with pytest.raises(ArgumentError, match="not a strided map of its dimensions"):
        run(kern, np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32))


def _bulk_kernel(nbytes, off):
    return T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((72,), "int32")
    bar = T.alloc_shared((1,), "uint64")
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        T.ptx.mbarrier_arrive_expect_tx(bar[0], T.uint32({nbytes}))
        T.ptx.bulk_copy_g2s(s[{off}], A[0], T.uint32({nbytes}), bar[0])
    T.ptx.mbarrier_wait_parity(bar[0], 0)
    if T.lane_id() < {nbytes // 4}:
        B[T.lane_id()] = s[T.lane_id() + {off}]
''')


@pytest.mark.parametrize("nbytes,off,kinds", [(64, 4, set()), (20, 4, {"tma_misuse"}), (64, 1, {"misaligned"})])
def test_a_bulk_copy_is_16_byte_aligned_and_sized(nbytes, off, kinds):
    """PTX cp.async.bulk: both addresses 16-byte aligned and the size a multiple of 16; the GPU faults otherwise."""
    a = np.arange(64, dtype=np.int32)
    b = np.zeros(64, np.int32)
    res = run(_bulk_kernel(nbytes, off), a, b, check=False)
    assert {p.kind for p in res.problems} == kinds, res.problems
    assert (b[:nbytes // 4] == a[:nbytes // 4]).all()
    if kinds == {"misaligned"}:
        assert "bulk copy (global -> shared) (shared side): shared address 0x4" in str(res.problems[0])
    if kinds == {"tma_misuse"}:
        assert "20 bytes: the size of a bulk copy is a multiple of 16 bytes" in str(res.problems[0])


def _offset_load_kernel(row0):
    """TMA-loads a 4 x 16 float32 box into rows ``row0 ..`` of a shared tile (row ``r`` starts at byte 64 r)."""
    @T.prim_func
    def k(A: T.Tensor((4, 16), "float32"), C: T.Tensor((4, 16), "float32")):
        T.launch(grid=(1,), threads=32)
        As = T.alloc_shared((6, 16), "float32")
        bar = T.alloc_shared((1,), "uint64")
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            T.ptx.mbarrier_arrive_expect_tx(bar[0], 256)
            T.ptx.tma_load_2d(As[row0:row0 + 4, 0:16], A[0:4, 0:16], 0, 0, bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        for i in T.serial(2):
            r = (i * 32 + T.lane_id()) // 16
            c = (i * 32 + T.lane_id()) % 16
            C[r, c] = As[row0 + r, c]

    return k


def test_tma_load_into_shared_memory_off_128_bytes_is_misaligned():
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    with pytest.raises(SimReportError) as e:
        run(_offset_load_kernel(1), a, np.zeros_like(a), seed=0)       # row 1: byte 64
    p = next(p for p in e.value.problems if p.kind == "misaligned")
    assert "destination (dstMem) of a TMA tensor copy" in p.msg and "128-byte aligned" in p.msg
    c = np.zeros_like(a)
    assert run(_offset_load_kernel(2), a, c, seed=0).problems == []    # row 2: byte 128
    np.testing.assert_array_equal(c, a)


def _offset_store_kernel(row0):
    @T.prim_func
    def k(A: T.Tensor((4, 16), "float32")):
        T.launch(grid=(1,), threads=32)
        As = T.alloc_shared((6, 16), "float32")
        for i in T.serial(2):
            r = (i * 32 + T.lane_id()) // 16
            c = (i * 32 + T.lane_id()) % 16
            As[row0 + r, c] = T.float32(1)
        T.ptx.fence_proxy_async()
        T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
        if T.thread_id() == 0:
            T.ptx.tma_store_2d(A[0:4, 0:16], 0, 0, As[row0:row0 + 4, 0:16])
            T.ptx.bulk_commit_group()
            T.ptx.bulk_wait_group(0)

    return k


def test_tma_store_from_shared_memory_off_128_bytes_is_misaligned():
    with pytest.raises(SimReportError) as e:
        run(_offset_store_kernel(1), np.zeros((4, 16), np.float32), seed=0)
    assert any(p.kind == "misaligned" and "source (srcMem)" in p.msg for p in e.value.problems)
    a = np.zeros((4, 16), np.float32)
    assert run(_offset_store_kernel(2), a, seed=0).problems == []
    assert (a == 1).all()
