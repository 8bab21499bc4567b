"""tirxpy.sim.misc: elect.sync, shuffles (PTX clamping rules), atomics, special registers, trap, mapa."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _k(src):
    return T.parse_script(src)


def test_elect_sync_picks_the_lowest_lane_of_the_mask():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=32)
    A[T.lane_id()] = T.cast(T.ptx.elect_sync(T.uint32(0xfffffff0)), "int32")
''')
    a = np.full(32, 7, np.int32)
    run(k, a)
    assert a.tolist() == [1 if l == 4 else 0 for l in range(32)]


@pytest.mark.parametrize("mode,want", [
    ("up", lambda l, b: l - b if l - b >= 0 else l),
    ("down", lambda l, b: l + b if l + b <= 31 else l),
    ("bfly", lambda l, b: l ^ b),
    ("idx", lambda l, b: b),
])
def test_shuffle_source_lanes(mode, want):
    k = _k(f'''
@T.prim_func
def k(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = T.ptx.shfl_sync_{mode}_b32(A[T.lane_id()], T.uint32(5), T.uint32(0xffffffff))
''')
    a = np.arange(32, dtype=np.uint32) * 3 + 1
    b = np.zeros(32, np.uint32)
    run(k, a, b)
    assert b.tolist() == [int(a[want(l, 5)]) for l in range(32)]


def test_shuffle_from_an_inactive_lane_is_reported():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    if T.lane_id() < 16:
        A[T.lane_id()] = T.ptx.shfl_sync_down_b32(A[T.lane_id()], T.uint32(8), T.uint32(0xffff))
''')
    res = run(k, np.zeros(32, np.uint32), check=False)
    assert "shfl_inactive_source" in [p.kind for p in res.problems]


def test_global_atomic_add_from_every_thread_serializes():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "uint32"), Old: T.Tensor((64,), "uint32")):
    T.launch(grid=(1,), threads=64)
    Old[T.thread_id()] = T.ptx.atom_global_add_u32(A[0], T.cast(T.thread_id(), "uint32") + T.uint32(1))
''')
    a = np.array([1000], np.uint32)
    old = np.zeros(64, np.uint32)
    run(k, a, old)
    assert a[0] == 1000 + 64 * 65 // 2
    # each returned old value is the sum before that thread's add: sorted, consecutive olds differ by one addend
    order = np.argsort(old)
    assert old[order[0]] == 1000
    assert (np.diff(old[order]) == (order[:-1] + 1)).all()


def test_atomic_max_min_exch_cas():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((4,), "int32"), U: T.Tensor((1,), "uint32")):
    T.launch(grid=(1,), threads=32)
    v = T.cast(T.lane_id(), "int32") - 10
    T.evaluate(T.ptx.atom_global_max_s32(A[0], v))
    T.evaluate(T.ptx.atom_global_min_s32(A[1], v))
    if T.lane_id() == 3:
        T.evaluate(T.ptx.atom_global_cas_b32(U[0], T.uint32(5), T.uint32(99)))
''')
    a = np.array([0, 0, 0, 0], np.int32)
    u = np.array([5], np.uint32)
    run(k, a, u)
    assert a[:2].tolist() == [21, -10]
    assert u[0] == 99
    u = np.array([6], np.uint32)
    run(k, np.zeros(4, np.int32), u)
    assert u[0] == 6                      # compare failed: unchanged


def test_shared_atomic_add_f32():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "float32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((1,), "float32")
    if T.thread_id() == 0:
        s[0] = T.float32(0.5)
    T.ptx.syncthreads()
    T.evaluate(T.ptx.atom_shared_add_f32(s[0], T.float32(0.25)))
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        A[0] = s[0]
''')
    a = np.zeros(1, np.float32)
    run(k, a)
    assert a[0] == 0.5 + 64 * 0.25


HIST = '''
@T.prim_func
def k(X: T.Tensor((256,), "int32"), H: T.Tensor((8,), "uint32")):
    T.launch(grid=(1,), threads=128)
    bins = T.alloc_shared((8,), "uint32")
    if T.thread_id() < 8:
        bins[T.thread_id()] = T.uint32(0)
    SYNC_ZERO
    for it in T.serial(2):
        T.evaluate(T.ptx.atom_shared_add_u32(bins[X[it * 128 + T.thread_id()]], T.uint32(1)))
    SYNC_READ
    if T.thread_id() < 8:
        H[T.thread_id()] = bins[T.thread_id()]
'''


@pytest.mark.parametrize("zero, read, lines", [(True, True, None), (False, True, {7, 10}), (True, False, {10, 13})])
def test_shared_atomics_race_with_unordered_plain_accesses_but_not_each_other(zero, read, lines):
    """Atomics of many warps on one bin are fine together; the zeroing store before them and the plain read of
    the totals after them must each be ordered with every atomic (a missing barrier is a wrong count)."""
    src = HIST.replace("SYNC_ZERO", "T.ptx.syncthreads()" if zero else "T.evaluate(0)")
    src = src.replace("SYNC_READ", "T.ptx.syncthreads()" if read else "T.evaluate(0)")
    x = (np.arange(256) * 5 % 8).astype(np.int32)
    h = np.zeros(8, np.uint32)
    res = run(_k(src), x, h, check=False)
    if lines is None:
        assert res.problems == [] and (h == np.bincount(x, minlength=8)).all()
        return
    races = [p for p in res.problems if p.kind == "race"]     # either side of the pair, as the warps interleave
    assert races and races[0].span.line in lines and "atomic update" in races[0].msg, res.problems


def test_lane_and_warp_ids():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((96,), "uint32")):
    T.launch(grid=(1,), threads=96)
    A[T.thread_id()] = T.ptx.warpid() * T.uint32(100) + T.ptx.laneid()
''')
    a = np.zeros(96, np.uint32)
    run(k, a)
    t = np.arange(96)
    assert a.tolist() == ((t // 32) * 100 + t % 32).tolist()


def test_trap_is_reported():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads=32)
    T.ptx.trap()
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(1, np.int32))
    assert "trap" in ei.value.kinds()


@pytest.mark.parametrize("op", ["T.evaluate(T.ptx.ld_shared_cluster_u32(T.uint32(0x1000000)))",
                                "T.ptx.st_shared_cluster_u32(T.uint32(0x1000004), T.uint32(1))",
                                "T.evaluate(T.ptx.mapa_shared(T.uint32(0x1000000), T.uint32(0)))"])
def test_shared_addresses_past_24_bits_are_reported_not_wrapped(op):
    """A shared::cta address keeps every bit: 0x1000000 is past the CTA's shared memory, not byte 0 (the cluster
    form keeps 24 bits of offset, so mapa of such an address is reported too)."""
    k = _k(f'''
@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((32,), "uint32")
    s[T.lane_id()] = T.uint32(0)
    T.ptx.syncthreads()
    {op}
''')
    res = run(k, np.zeros(32, np.uint32), check=False)
    assert "oob_shared" in [p.kind for p in res.problems]


def test_plain_global_load_reads_each_lanes_element():
    """``ld.global.f32`` (T.ptx.ld_global_f32) reads the float32 at each lane's own address."""
    k = _k('''
@T.prim_func
def k(A: T.Tensor((40,), "float32"), B: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = T.ptx.ld_global_f32(T.address_of(A[39 - T.lane_id()]))
''')
    a = np.random.default_rng().standard_normal(40).astype(np.float32)
    b = np.full(32, np.nan, np.float32)
    run(k, a, b)
    assert (b == a[39 - np.arange(32)]).all()


def test_plain_global_load_past_its_buffer_is_reported():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = T.ptx.ld_global_f32(T.address_of(A[T.lane_id() + 1]))
''')
    res = run(k, np.zeros(32, np.float32), np.zeros(32, np.float32), check=False)
    assert res.problems and all(p.kind.startswith("oob") for p in res.problems)



def _regs_kernel(case):
    """384 threads (168 registers each at entry): warpgroup 0 is the producer, the others consumers; each thread then
    writes its id to A. ``case``: "split" (dec 40 / inc 232, which fits), "short" (dec 48 / inc 232: 15 x 128 x 8
    registers short), "both" (the producer decs and incs), "raise" (a dec above the current count)."""
    @T.prim_func
    def k(A: T.Tensor((384,), "int32")):
        T.launch(grid=(1,), threads=384)
        if T.thread_id() // 128 == 0:
            if case == "short":
                T.ptx.setmaxnreg_dec(48)
            else:
                T.ptx.setmaxnreg_dec(40)
            if case == "both":
                T.ptx.setmaxnreg_inc(232)
            if case == "raise":
                T.ptx.setmaxnreg_dec(56)
        else:
            T.ptx.setmaxnreg_inc(232)
        A[T.thread_id()] = T.thread_id()

    return k


def test_setmaxnreg_inc_paid_for_by_the_dec_runs_clean():
    a = np.zeros(384, np.int32)
    for seed in range(3):
        assert run(_regs_kernel("split"), a, seed=seed).problems == []
    assert (a == np.arange(384)).all()


@pytest.mark.parametrize("case", ["short", "both"])
def test_setmaxnreg_inc_beyond_the_pool_deadlocks(case):
    for seed in range(3):
        with pytest.raises(SimReportError) as e:
            run(_regs_kernel(case), np.zeros(384, np.int32), seed=seed)
        p = next(p for p in e.value.problems if p.kind == "deadlock")
        assert any("register pool" in n and "lower the .inc count" in n for n in p.notes)


def test_setmaxnreg_dec_above_the_current_count_is_misuse():
    with pytest.raises(SimReportError) as e:
        run(_regs_kernel("raise"), np.zeros(384, np.int32), seed=0)
    assert any(p.kind == "setmaxnreg_misuse" and ".dec must not raise" in p.msg for p in e.value.problems)
