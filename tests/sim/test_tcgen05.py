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
