"""Small kernels written as a new user would, with the public API only, each run in the simulator against a
float64 / exact-integer torch reference on random inputs, outputs poisoned first, at ragged sizes; and the
mutation each one invites (a missing barrier, a release from one thread, a wrong parity) reported by name.

Covered: an mma.sync GEMM over ldmatrix whose problem is smaller than one tile; a warp-specialized column
scan over a StageRing filled by ordinary stores; a cp.async pipeline completing on mbarriers (noinc); a TMA
load + store of a tile larger than its tensor; an ldmatrix fragment checked against ``ldmatrix_layout``'s
owners, next to a user-registered intrinsic with a simulator model."""
import numpy as np
import pytest
import torch

from tirxpy import T, Tx, sim
from tirxpy.intrinsics import register_intrinsic
from tirxpy.lang import StageRing, WarpRoles, setup_barriers
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid, m, swizzle_128B
from tirxpy.layout.atoms import ldmatrix_layout
from tirxpy.lower.build import build
from tirxpy.sim import SimReportError

CL = TileLayout(S[(2, 2, 8, 2, 4, 2) : (8 @ m, 2 @ m, 4 @ laneid, 4 @ m, 1 @ laneid, 1 @ m)])        # C 32 x 16
AL = TileLayout(S[(2, 2, 8, 2, 2, 4, 2) : (16 @ m, 2 @ m, 4 @ laneid, 8 @ m, 4 @ m, 1 @ laneid, 1 @ m)])  # A 32 x 32
BL = TileLayout(S[(2, 2, 4, 2, 2, 8) : (8 @ m, 2 @ m, 1 @ laneid, 1 @ m, 4 @ m, 4 @ laneid)])        # B 32 x 16


def mma_gemm(M, N, K):
    """C = A @ B, one warp per 32 x 16 tile of C; the tiles' views may pass the edges (or the whole problem)."""
    BM, BN, BK = 32, 16, 32

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=32)
        m0 = T.cta_id(1) * BM
        n0 = T.cta_id(0) * BN
        As = T.alloc_shared((BM, BK), "bfloat16")
        Bs = T.alloc_shared((BK, BN), "bfloat16")
        a = T.alloc_local((BM, BK), "bfloat16", layout=AL)
        b = T.alloc_local((BK, BN), "bfloat16", layout=BL)
        acc = T.alloc_local((BM, BN), "float32", layout=CL)
        Tx.warp.fill(acc, T.float32(0))
        for kb in T.serial(K // BK):
            Tx.warp.copy(As, A[m0:m0 + BM, kb * BK:kb * BK + BK])
            Tx.warp.copy(Bs, B[kb * BK:kb * BK + BK, n0:n0 + BN])
            T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
            Tx.warp.copy(a, As)
            Tx.warp.copy(b, Bs)
            Tx.warp.gemm(acc, a, b)
            T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
        Tx.warp.copy(C[m0:m0 + BM, n0:n0 + BN], acc)

    return gemm


@pytest.mark.parametrize("M, N", [(50, 24), (20, 8)])
def test_mma_sync_gemm_over_ldmatrix_at_ragged_sizes_and_smaller_than_a_tile(M, N):
    K = 64
    k = mma_gemm(M, N, K)
    a, b = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()
    c = torch.full((M, N), float("nan"))
    sim.run(k, a, b, c)
    ref = a.double() @ b.double()
    assert (c.double() - ref).abs().max().item() < 1e-4
    src = build(k, "sm_90a").cuda_source
    assert "tx_ldmatrix_x4_trans" in src and "tx_mma_sync_m16n8k16_f32_bf16_bf16_f32" in src


def column_scan(R, W, release_from_one=False):
    """Y = cumsum(X, 0) over int32 rows: a producer warpgroup stores 4-row chunks into a 3-stage ring with ordinary
    stores (128 arrivals on ``full``), two consumer warpgroups of 128 columns each carry running sums; every
    consumer thread releases its stage (256 arrivals), or, mutated, only thread 0 of each (2 arrivals)."""
    RB, STAGES = 4, 3
    chunks = (R + RB - 1) // RB
    roles = WarpRoles(384, 40, 232)
    empty_arrivals = 2 if release_from_one else 256

    @T.prim_func
    def colscan(X: T.Tensor((R, W), "int32"), Y: T.Tensor((R, W), "int32")):
        T.launch(grid=(1,), threads=384)
        st = T.alloc_shared((STAGES, RB, W), "int32")
        full = T.alloc_shared((STAGES,), "uint64")
        empty = T.alloc_shared((STAGES,), "uint64")
        ring = StageRing(full, empty, STAGES)
        setup_barriers([(ring, 128, empty_arrivals)], 1, False)
        wg = T.warpgroup_id()
        t = T.thread_id_in_wg()
        if wg == 0:
            roles.enter_producer()
            for g in T.serial(chunks):
                ring.wait_empty(g)
                for j in T.unroll(RB * W // 128):
                    e = j * 128 + t
                    row = g * RB + e // W
                    st[ring.stage(g), e // W, e % W] = T.select(row < R, X[T.min(row, R - 1), e % W], 0)
                ring.arrive_full(g)
        else:
            roles.enter_consumer()
            col = (wg - 1) * 128 + t
            run = T.alloc_local((1,), "int32")
            run[0] = 0
            for g in T.serial(chunks):
                ring.wait_full(g)
                for r in T.unroll(RB):
                    run[0] = run[0] + st[ring.stage(g), r, col]
                    if g * RB + r < R:
                        Y[g * RB + r, col] = run[0]
                if release_from_one:
                    if t == 0:
                        ring.release(g)
                else:
                    ring.release(g)

    return colscan


def test_warp_specialized_stage_ring_over_ordinary_stores():
    x = torch.randint(-100, 100, (37, 256), dtype=torch.int32)
    y = torch.full((37, 256), -(1 << 30), dtype=torch.int32)
    sim.run(column_scan(37, 256), x, y)
    assert torch.equal(y, x.cumsum(0).int())


def test_a_stage_released_by_one_thread_of_each_consumer_is_refilled_while_read():
    x = torch.randint(-100, 100, (13, 256), dtype=torch.int32)
    with pytest.raises(SimReportError) as e:
        sim.run(column_scan(13, 256, release_from_one=True), x, torch.zeros(13, 256, dtype=torch.int32))
    assert e.value.kinds() == {"race"}


def cp_async_pipe(N, parity_off=False):
    """Y = 2 X through two shared stages of 128 floats: lane l copies 16 bytes with cp.async (zero-filled past N)
    and arrives on ``full`` when they land (noinc, 32 arrivals); lanes read other lanes' bytes, then arrive on
    ``empty``, which the refill of the stage waits for; ``parity_off`` waits a round late."""
    TILE = 128
    tiles = (N + TILE - 1) // TILE

    @T.prim_func
    def pipe(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        T.launch(grid=(1,), threads=32)
        buf = T.alloc_shared((2, TILE), "float32")
        full = T.alloc_shared((2,), "uint64")
        empty = T.alloc_shared((2,), "uint64")
        lane = T.lane_id()
        if T.elect_one():
            for s in T.serial(2):
                T.ptx.mbarrier_init(full[s], 32)
                T.ptx.mbarrier_init(empty[s], 32)
            T.ptx.fence_mbarrier_init()
        T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
        for t in T.serial(tiles + 1):
            if t < tiles:                       # issue tile t into stage t % 2
                if t >= 2:
                    T.ptx.mbarrier_wait_parity(empty[t % 2], (t // 2 - (0 if parity_off else 1)) % 2)
                e = t * TILE + lane * 4
                T.ptx.cp_async_cg_16_zfill(buf[t % 2, lane * 4], X[T.min(e, N - 4)],
                                           T.cast(T.max(T.min(N - e, 4), 0) * 4, "uint32"))
                T.ptx.cp_async_mbarrier_arrive_noinc(full[t % 2])
            if t >= 1:                          # consume tile t - 1
                c = t - 1
                T.ptx.mbarrier_wait_parity(full[c % 2], (c // 2) % 2)
                for j in T.unroll(4):
                    if c * TILE + j * 32 + lane < N:
                        Y[c * TILE + j * 32 + lane] = buf[c % 2, j * 32 + lane] * T.float32(2)
                T.ptx.mbarrier_arrive(empty[c % 2])

    return pipe


def test_cp_async_pipeline_on_mbarriers_and_a_late_parity_deadlocks():
    x = torch.randn(1000)
    y = torch.full((1000,), float("nan"))
    sim.run(cp_async_pipe(1000), x, y)
    assert torch.equal(y, x * 2)
    with pytest.raises(SimReportError) as e:
        sim.run(cp_async_pipe(1000, parity_off=True), x, y)
    assert e.value.kinds() == {"deadlock"}


def tma_tile(M, N, fence=True):
    """B = A + 1 through one 64 x 32 swizzled shared tile per CTA: TMA load on an mbarrier, ordinary read-modify-
    write, fence.proxy.async, TMA store."""
    BM, BN = 64, 32
    sw = ComposeLayout(swizzle_128B("float32"), TileLayout(S[(BM, BN)]))

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        T.launch(grid=((N + BN - 1) // BN, (M + BM - 1) // BM), threads=128)
        s = T.alloc_shared((BM, BN), "float32", layout=sw)
        bar = T.alloc_shared((1,), "uint64")
        r0 = T.cta_id(1) * BM
        c0 = T.cta_id(0) * BN
        if T.thread_id() == 0:
            T.ptx.mbarrier_init(bar[0], 1)
            T.ptx.fence_mbarrier_init()
        T.ptx.syncthreads()
        if T.warp_id() == 0:
            if T.elect_one():
                Tx.copy_async(s, A[r0:r0 + BM, c0:c0 + BN], mbar=bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        for j in T.serial(BM * BN // 128):
            e = j * 128 + T.thread_id()
            s[e // BN, e % BN] = s[e // BN, e % BN] + T.float32(1)
        if fence:
            T.ptx.fence_proxy_async()
        T.ptx.syncthreads()
        if T.thread_id() == 0:
            Tx.copy_async(B[r0:r0 + BM, c0:c0 + BN], s)
            T.ptx.bulk_wait_group(0)

    return k


@pytest.mark.parametrize("M, N", [(100, 72), (20, 24)])
def test_tma_load_and_store_of_a_ragged_tile(M, N):
    a = torch.randn(M, N)
    b = torch.full((M, N), float("nan"))
    sim.run(tma_tile(M, N), a, b)
    assert torch.equal(b, a + 1)
    assert [s.box for s in build(tma_tile(M, N), "sm_90a").specs if s.kind == "tensormap"] == [(64, 32)] * 2


def test_tma_store_of_ordinary_stores_without_the_proxy_fence_is_reported():
    with pytest.raises(SimReportError) as e:
        sim.run(tma_tile(20, 24, fence=False), torch.randn(20, 24), torch.zeros(20, 24))
    assert e.value.kinds() == {"missing_fence_proxy_async"}


brev = register_intrinsic("nu_example_brev", "brev.b32 {r}, {x};", [("r", "reg", "uint32", "w"),
                          ("x", "reg", "uint32")], ret="r", memory=False, replace=True)
sim.register_model("nu_example_brev", lambda ctx: np.array(
    [int(f"{int(v):032b}"[::-1], 2) for v in ctx.arg("x")], np.uint32))


@T.prim_func
def ldmatrix_probe(A: T.Tensor((16, 16), "uint16"), Frag: T.Tensor((32, 8), "uint16"),
                   Rev: T.Tensor((32, 4), "uint32")):
    T.launch(grid=(1,), threads=32)
    sA = T.alloc_shared((16, 16), "uint16")
    frag = T.alloc_local((8,), "uint16")
    lane = T.lane_id()
    for j in T.unroll(8):
        sA[(j * 32 + lane) // 16, (j * 32 + lane) % 16] = A[(j * 32 + lane) // 16, (j * 32 + lane) % 16]
    T.ptx.bar_warp_sync(T.uint32(0xFFFFFFFF))
    q = lane // 8
    T.ptx.ldmatrix_x4(frag, sA[q % 2 * 8 + lane % 8, q // 2 * 8])
    for j in T.unroll(8):
        Frag[lane, j] = frag[j]
    for j in T.unroll(4):
        Rev[lane, j] = brev(T.cast(frag[2 * j], "uint32") | (T.cast(frag[2 * j + 1], "uint32") << 16))


def test_ldmatrix_registers_hold_what_ldmatrix_layout_says_and_a_registered_intrinsic_runs():
    """Element (i, j) of the four matrices (row addresses as for the mma A fragment) is in the lane and register
    ``ldmatrix_layout(4, grid=(2, 2)).apply(i, j)`` names; ``brev`` of each packed register pair as in Python."""
    a = torch.randint(0, 1 << 16, (16, 16), dtype=torch.int32).to(torch.uint16)
    frag = torch.full((32, 8), 0xDEAD, dtype=torch.uint16)
    rev = torch.zeros(32, 4, dtype=torch.uint32)
    sim.run(ldmatrix_probe, a, frag, rev)
    L = ldmatrix_layout(4, grid=(2, 2))
    f = frag.to(torch.int64)
    for i in range(16):
        for j in range(16):
            o = L.apply(i, j, shape=(16, 16))
            assert f[o["laneid"], o["m"]].item() == a[i, j].item(), (i, j, o)
    words = f[:, 0::2] | (f[:, 1::2] << 16)
    want = [[int(f"{int(w):032b}"[::-1], 2) for w in row] for row in words.tolist()]
    assert rev.to(torch.int64).tolist() == want
    assert "brev.b32" in build(ldmatrix_probe, "sm_90a").cuda_source
