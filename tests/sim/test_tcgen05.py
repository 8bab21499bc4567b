"""tcgen05 under the simulator: the target comes from the kernel (no arch= needed), and tensor memory
read before anything wrote it since tcgen05.alloc is reported (``uninitialized_read``): an mma with
accumulate on into a fresh accumulator, a tcgen05.ld of never-written columns."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run
from tirxpy.sim.values import from_bits, to_bits

from .tcgen05_kernels import mma_kernel as _mma_kernel


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


def test_registers_of_a_tcgen05_ld_used_before_wait_ld_are_reported():
    """PTX: a tcgen05.ld's destination registers are defined only after tcgen05.wait::ld."""
    a, b, c = _inputs()
    with pytest.raises(SimReportError) as ei:
        run(_mma_kernel(wait_ld=False), a, b, c)
    assert ei.value.kinds() == {"tmem_ld_before_wait"}
    assert "read of register tile d while a tcgen05.ld loading it is not waited for" in str(ei.value)


def test_a_tcgen05_st_into_cells_an_mma_writes_is_reported_in_every_schedule():
    """Warp 1 stores into its quarter of the accumulator while the mma may run: unordered either way (the st before
    the mma runs, or after it with no commit -> wait between)."""
    a, b, c = _inputs()
    for seed in range(4):
        res = run(_mma_kernel(st_early=True), a, b, c, check=False, seed=seed)
        p = next(p for p in res.problems if p.kind == "race")
        assert "TMEM" in p.msg and "tcgen05" in " ".join(p.notes)


def test_dealloc_not_ordered_after_the_other_warps_ld_is_reported():
    a, b, c = _inputs()
    for seed in range(4):
        res = run(_mma_kernel(dealloc_sync=False), a, b, c, check=False, seed=seed)
        assert res.problems and {p.kind for p in res.problems} <= {"tmem_dealloc_in_use", "tmem_oob"}
    assert any(p.kind == "tmem_dealloc_in_use" for s in range(4)
               for p in run(_mma_kernel(dealloc_sync=False), a, b, c, check=False, seed=s).problems)
    assert run(_mma_kernel(), a, b, c, seed=0).problems == []


def test_dealloc_with_an_mma_pending_is_reported():
    """Warp 0 deallocates right after issuing the mma (no wait for its commit; the other warps never load)."""
    from tirxpy.intrinsics import descriptors as D
    from tirxpy.layout.atoms import mma_smem_layout

    SA = mma_smem_layout(128, 64, "bf16", "K", 128)
    SB = mma_smem_layout(32, 64, "bf16", "K", 128)
    IDESC = D.tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=32)

    @T.prim_func
    def k(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((32, 64), "bfloat16")):
        T.launch(grid=(1,), threads=128)
        sa = T.alloc_shared((128, 64), "bfloat16", layout=SA)
        sb = T.alloc_shared((32, 64), "bfloat16", layout=SB)
        bar = T.alloc_shared((1,), "uint64")
        taddr = T.alloc_shared((1,), "uint32")
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
            T.ptx.tcgen05_mma_cg1_f16_ss(taddr[0], sa[0:128, 0:16], sb[0:32, 0:16], T.uint32(IDESC), False)
            T.ptx.tcgen05_commit_cg1(bar[0])
        if T.warp_id() == 0:
            T.ptx.tcgen05_dealloc_cg1(taddr[0], T.uint32(32))
        T.ptx.mbarrier_wait_parity(bar[0], 0)

    a, b, _ = _inputs()
    for seed in range(4):
        res = run(k, a, b, check=False, seed=seed)
        assert "tmem_dealloc_in_use" in {p.kind for p in res.problems}, res.problems


def _fence_kinds(**kw):
    a, b, c = _inputs()
    return [{p.kind for p in run(_mma_kernel(**kw), a, b, c, check=False, seed=s).problems} for s in range(3)]


def test_ld_then_barrier_with_no_before_fence_then_dealloc_is_reported():
    """PTX ISA 9.7.16.6.4: the other warps' tcgen05.ld are ordered before warp 0's dealloc by the barrier only when
    each issued tcgen05.fence::before_thread_sync between its ld and the barrier."""
    assert all(k == {"missing_tcgen05_fence"} for k in _fence_kinds(fence_before=False))
    a, b, c = _inputs()
    p = run(_mma_kernel(fence_before=False), a, b, c, check=False, seed=0).problems[0]
    assert "tcgen05.dealloc" in p.msg and "fence::before_thread_sync" in p.msg and "before_thread_sync" in p.notes[0]
    assert all(k == set() for k in _fence_kinds())


def test_ld_then_barrier_with_no_before_fence_then_mma_overwriting_the_cells_is_reported():
    """An mma issued after the barrier overwrites the accumulator the other warps read: their reads are released to
    it only through their before-fences."""
    assert all(k == {"missing_tcgen05_fence"} for k in _fence_kinds(fence_before=False, remma=True))
    a, b, c = _inputs()
    p = run(_mma_kernel(fence_before=False, remma=True), a, b, c, check=False, seed=0).problems[0]
    assert "tcgen05_mma" in p.msg and "before_thread_sync" in p.msg
    assert all(k == set() for k in _fence_kinds(remma=True))


def test_dealloc_after_the_barrier_with_no_after_fence_is_reported():
    """The barrier orders the other warps' last tcgen05.ld before warp 0's dealloc only with
    tcgen05.fence::after_thread_sync between the barrier and the dealloc."""
    assert all(k == {"missing_tcgen05_fence"} for k in _fence_kinds(fence_dealloc=False))
    a, b, c = _inputs()
    p = run(_mma_kernel(fence_dealloc=False), a, b, c, check=False, seed=0).problems[0]
    assert "tcgen05.dealloc" in p.msg and "after_thread_sync" in p.msg


def test_tcgen05_cp_overwriting_cells_another_warps_ld_reads_is_reported():
    """A tcgen05.cp is checked like the mma when it runs: thread 0 copies into columns the other warps still read
    with tcgen05.ld, with no barrier ordering their reads first (``tmem_overwrite_before_read``, as for the mma); with
    the before-fence -> barrier -> after-fence between them it runs clean."""
    a, b, c = _inputs()
    for mma_kinds, cp_kinds in zip(_fence_kinds(remma=True, dealloc_sync=False),
                                   _fence_kinds(remma=True, recp=True, dealloc_sync=False)):
        assert mma_kinds == cp_kinds == {"tmem_overwrite_before_read"}
    p = run(_mma_kernel(remma=True, recp=True, dealloc_sync=False), a, b, c, check=False, seed=0).problems[0]
    assert "tcgen05_cp_cg1_32x128b_warpx4 overwrites TMEM" in p.msg and "tcgen05.ld" in p.msg
    assert all(k == set() for k in _fence_kinds(remma=True, recp=True))
    assert all(k == {"missing_tcgen05_fence"} for k in _fence_kinds(remma=True, recp=True, fence_before=False))
