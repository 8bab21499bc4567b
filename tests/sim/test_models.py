"""Simulator models and checks on small intrinsics-only kernels (float64 / exact references)."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, has_model, register_model, run
from tirxpy.sim.values import from_bits, to_bits

from .tcgen05_kernels import mma_kernel


def _k(src):
    return T.parse_script(src)


def test_divergent_branches_and_loops_per_lane():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=64)
    t = T.thread_id()
    if t % 3 == 0:
        A[t] = t * 2
    else:
        for i in T.serial(t % 5):
            A[t] = A[t] + i
''')
    a = np.zeros(64, np.int32)
    run(k, a)
    t = np.arange(64)
    want = np.where(t % 3 == 0, 2 * t, [sum(range(x % 5)) for x in t])
    assert (a == want).all()


def test_shuffle_butterfly_sum_is_exact():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    v0 = A[T.lane_id()]
    v1 = v0 + T.ptx.shfl_sync_bfly_b32(v0, T.uint32(16), T.uint32(0xffffffff))
    v2 = v1 + T.ptx.shfl_sync_bfly_b32(v1, T.uint32(8), T.uint32(0xffffffff))
    B[T.lane_id()] = v2
''')
    a = np.random.default_rng(0).integers(0, 1000, 32).astype(np.uint32)
    b = np.zeros(32, np.uint32)
    run(k, a, b)
    l = np.arange(32)
    want = a + a[l ^ 16]
    want = want + want[l ^ 8]
    assert (b == want).all()


def test_deadlock_names_every_waiting_warp():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads=64)
    bar = T.alloc_shared((1,), "uint64")
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 2)
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
    T.ptx.mbarrier_wait_parity(bar[0], 0)
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(1, np.int32))
    assert "deadlock" in ei.value.kinds()
    text = str(ei.value)
    assert "warp 0" in text and "warp 1" in text and "1 of 2 arrivals pending" in text


def test_stale_parity_wait_is_reported():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads=32)
    bar = T.alloc_shared((1,), "uint64")
    if T.elect_one():
        T.ptx.mbarrier_init(bar[0], 1)
    if T.elect_one():
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
    for i in T.serial(2):
        T.ptx.mbarrier_wait_parity(bar[0], 0)
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(1, np.int32))
    assert "mbarrier_stale_wait" in ei.value.kinds()


def test_smem_race_without_barrier_and_clean_with_it():
    src = '''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((64,), "float32")
    s[T.thread_id()] = T.cast(T.thread_id(), "float32")
    SYNC
    A[T.thread_id()] = s[63 - T.thread_id()]
'''
    a = np.zeros(64, np.float32)
    run(_k(src.replace("SYNC", "T.ptx.syncthreads()")), a)
    assert (a == np.arange(64)[::-1]).all()
    with pytest.raises(SimReportError) as ei:
        run(_k(src.replace("SYNC", "T.evaluate(0)")), a)
    assert "race" in ei.value.kinds() and "warp" in str(ei.value)


def test_out_of_bounds_global_and_unsupported_intrinsic_are_named():
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=64)
    A[T.thread_id()] = T.float32(1)
''')
    with pytest.raises(SimReportError) as ei:
        run(k, np.zeros(32, np.float32))
    assert "oob_global" in ei.value.kinds()
    k2 = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    T.ptx.tcgen05_shift_cg1(T.uint32(0))
''')
    with pytest.raises(SimReportError) as ei:
        run(k2, np.zeros(32, np.uint32), arch="sm_100a")
    assert "unsupported" in ei.value.kinds() and "tcgen05_shift_cg1" in str(ei.value)


def test_register_model_attaches_semantics():
    from tirxpy.intrinsics import register_intrinsic

    register_intrinsic("sim_demo_popc", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                       ret="r", memory=False, replace=True)
    assert not has_model("sim_demo_popc")
    register_model("sim_demo_popc", lambda ctx: np.array([bin(int(v)).count("1") for v in ctx.arg("x")], np.uint32))
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    B[T.lane_id()] = T.ptx.sim_demo_popc(A[T.lane_id()])
''')
    a = np.random.default_rng(1).integers(0, 2**31, 32).astype(np.uint32)
    b = np.zeros(32, np.uint32)
    run(k, a, b)
    assert b.tolist() == [bin(int(x)).count("1") for x in a]


def test_ldmatrix_then_mma_sync_m16n8k16_matches_float64():
    from tirxpy.layout import S, TileLayout

    k = _k('''
@T.prim_func
def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((8, 16), "float16"), C: T.Tensor((16, 8), "float32")):
    T.launch(grid=(1,), threads=32)
    sa = T.alloc_shared((16, 16), "float16")
    sb = T.alloc_shared((8, 16), "float16")
    a = T.alloc_local((4,), "uint32")
    b = T.alloc_local((2,), "uint32")
    c = T.alloc_local((4,), "float32")
    d = T.alloc_local((4,), "float32")
    l = T.lane_id()
    for j in T.serial(16):
        if l < 16:
            sa[l, j] = A[l, j]
        if l < 8:
            sb[l, j] = B[l, j]
    T.ptx.syncthreads()
    for i in T.serial(4):
        c[i] = T.float32(0)
    T.ptx.ldmatrix_x4(a, sa[l % 16, (l // 16) * 8])
    T.ptx.ldmatrix_x2(b, sb[l % 8, ((l // 8) % 2) * 8])
    T.ptx.mma_sync_m16n8k16_f32_f16_f16_f32(d, a, b, c)
    for i in T.serial(4):
        C[l // 4 + 8 * (i // 2), 2 * (l % 4) + i % 2] = d[i]
''')
    rng = np.random.default_rng(2)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((8, 16)).astype(np.float16)
    C = np.zeros((16, 8), np.float32)
    run(k, A, B, C)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64).T, rtol=1e-5, atol=1e-5)


def test_tcgen05_alloc_mma_commit_ld_matches_float64_and_read_before_commit_is_reported():
    def make(wait):
        return mma_kernel(wait=wait)

    rng = np.random.default_rng(3)
    a = to_bits(rng.standard_normal((128, 64)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((32, 64)).astype(np.float32), "bfloat16")
    c = np.zeros((128, 32), np.uint32)
    run(make(True), a, b, c, arch="sm_100a")
    ref = from_bits(a, "bfloat16").astype(np.float64) @ from_bits(b, "bfloat16").astype(np.float64).T
    got = c.view(np.float32)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    with pytest.raises(SimReportError) as ei:
        run(make(False), a, b, np.zeros((128, 32), np.uint32), arch="sm_100a", seed=1)
    assert "tmem_read_before_commit" in ei.value.kinds()


def test_nsmid_is_the_targets_sm_count():
    """%nsmid reads tirxpy.target.Target.sm_count of the simulated target; a target without a known count
    is reported, not given a made-up number."""
    k = _k('''
@T.prim_func
def k(A: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    A[T.thread_id()] = T.ptx.nsmid()
''')
    a = np.zeros(32, np.uint32)
    run(k, a)
    assert (a == 132).all()
    run(k, a, arch="sm_100a")
    assert (a == 148).all()
    res = run(k, a, arch="sm_89", check=False)
    assert [p.kind for p in res.problems] == ["unsupported"] and "no SM count for sm_89" in res.problems[0].msg


def test_descriptor_swizzles_without_a_model_are_reported():
    from tirxpy.intrinsics import descriptors as D
    from tirxpy.sim.errors import UnsupportedError
    from tirxpy.sim.smem_matrix import decode

    assert decode(D.tcgen05_smem_desc(0x400, 16, 1024, 128), "tcgen05") == (0x400, 16, 1024, 128)
    with pytest.raises(UnsupportedError, match="128B with 32B atoms"):
        decode(D.tcgen05_smem_desc(0, 16, 16, "128B_base32B"), "tcgen05")
    with pytest.raises(UnsupportedError, match="reserved code"):
        decode(7 << 61, "tcgen05")
