"""tcgen05 under the simulator: the target comes from the kernel (no arch= needed), and tensor memory
read before anything wrote it since tcgen05.alloc is reported (``uninitialized_read``): an mma with
accumulate on into a fresh accumulator, a tcgen05.ld of never-written columns."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits


def _mma_kernel(first_accumulates=False, mma=True):
    from tirxpy.intrinsics import descriptors as D
    from tirxpy.intrinsics import tcgen05_ld
    from tirxpy.layout.atoms import mma_smem_layout

    LD = tcgen05_ld.get(shape="32x32b", rep=32)
    SA = mma_smem_layout(128, 64, "bf16", "K", 128)
    SB = mma_smem_layout(32, 64, "bf16", "K", 128)
    IDESC = D.tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=32)
    FIRST = first_accumulates
    MMA = mma

    @T.prim_func
    def k(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((32, 64), "bfloat16"), C: T.Tensor((128, 32), "uint32")):
        T.launch(grid=(1,), threads=128)
        sa = T.alloc_shared((128, 64), "bfloat16", layout=SA)
        sb = T.alloc_shared((32, 64), "bfloat16", layout=SB)
        bar = T.alloc_shared((1,), "uint64")
        taddr = T.alloc_shared((1,), "uint32")
        d = T.alloc_local((32,), "uint32")
        t = T.thread_id()
        for j in T.serial(64):
            sa[t, j] = A[t, j]
            if t < 32:
                sb[t, j] = B[t, j]
        T.ptx.fence_proxy_async()
        if T.warp_id() == 0:
            T.ptx.tcgen05_alloc_cg1(taddr[0], T.uint32(32))
        if t == 0:
            T.ptx.mbarrier_init(bar[0], 1)
        T.ptx.syncthreads()
        if t == 0:
            if MMA:
                for kk in T.serial(4):
                    T.ptx.tcgen05_mma_cg1_f16_ss(taddr[0], sa[0:128, kk * 16:kk * 16 + 16],
                                                 sb[0:32, kk * 16:kk * 16 + 16], T.uint32(IDESC), kk > 0 or FIRST)
            T.ptx.tcgen05_commit_cg1(bar[0])
        T.ptx.mbarrier_wait_parity(bar[0], 0)
        T.ptx.tcgen05_fence_after_thread_sync()
        LD(taddr[0] + T.cast((T.warp_id() * 32) << 16, "uint32"), d)
        T.ptx.tcgen05_wait_ld()
        for j in T.serial(32):
            C[t, j] = d[j]
        T.ptx.syncthreads()
        if T.warp_id() == 0:
            T.ptx.tcgen05_dealloc_cg1(taddr[0], T.uint32(32))
    return k


def _inputs():
    rng = np.random.default_rng(3)
    a = to_bits(rng.standard_normal((128, 64)).astype(np.float32), "bfloat16")
    b = to_bits(rng.standard_normal((32, 64)).astype(np.float32), "bfloat16")
    return a, b, np.zeros((128, 32), np.uint32)


def test_blackwell_kernel_runs_without_arch():
    a, b, c = _inputs()
    run(_mma_kernel(), a, b, c)
    ref = from_bits(a, "bfloat16").astype(np.float64) @ from_bits(b, "bfloat16").astype(np.float64).T
    np.testing.assert_allclose(c.view(np.float32), ref, rtol=1e-5, atol=1e-4)


def test_accumulate_into_fresh_tmem_is_reported():
    a, b, c = _inputs()
    with pytest.raises(SimReportError) as ei:
        run(_mma_kernel(first_accumulates=True), a, b, c)
    assert ei.value.kinds() == {"uninitialized_read"}
    msg = str(ei.value)
    assert "accumulate" in msg and "tcgen05.alloc" in msg and "accumulate=False" in msg


def test_ld_of_never_written_tmem_is_reported():
    a, b, c = _inputs()
    with pytest.raises(SimReportError) as ei:
        run(_mma_kernel(mma=False), a, b, c)
    assert ei.value.kinds() == {"uninitialized_read"}
    assert "tcgen05_ld_32x32b_x32 reads tensor memory never written" in str(ei.value)
