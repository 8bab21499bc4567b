"""The GPU test kernels (tests/lower/test_kernels_gpu.py) compile on CPU for sm_90a and sm_100a."""
import importlib.util
import pathlib

import pytest

import tirxpy
from tirxpy.lower import CodegenError

_spec = importlib.util.spec_from_file_location("_gpu_kernels", pathlib.Path(__file__).with_name("test_kernels_gpu.py"))
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_tma_ldmatrix_kernel_compiles(arch):
    k = tirxpy.compile(G.tma_ldmatrix_kernel(128, 192), arch=arch)
    src = k.cuda_source
    assert "const __grid_constant__ CUtensorMap tmap_A" in src
    assert 'extern "C" __global__ void __launch_bounds__(128) tma_ldmatrix(' in src
    assert "extern __shared__ __align__(1024) unsigned char tx_smem[]" in src
    assert src.count("__device__ __forceinline__ void tx_tma_load_2d(") == 1
    assert "tx_tma_load_2d(tx_smem_addr(&sA[0]), &tmap_A, c0, r0, tx_smem_addr(&bar[0]));" in src
    assert "^ (lane & 7) * 8]" in src  # the 128B swizzle of the ldmatrix row address
    r = k.resources
    assert r.spills == 0 and r.stack_bytes == 0 and r.registers <= 64
    assert k.smem_bytes == 8200 == tirxpy.ir.shared_bytes(k.kernel)
    tm = k.specs[-1]
    assert (tm.kind, tm.box, tm.swizzle, tm.shape, tm.strides) == ("tensormap", (64, 64), 128, (128, 192), (192, 1))
    assert k._grid == (3, 2, 1)


def test_tma_kernel_ptx_has_the_instructions():
    k = tirxpy.compile(G.tma_ldmatrix_kernel(64, 64), arch="sm_90a")
    ptx = k.ptx
    for ins in ("cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "ldmatrix.sync.aligned.m8n8.x4", "elect.sync"):
        assert ins in ptx


@pytest.mark.parametrize("n", [8, 64, 256])
def test_wgmma_kernel_compiles_for_hopper(n):
    k = tirxpy.compile(G.wgmma_kernel(n), arch="sm_90a")
    assert k.resources.spills == 0 and k.resources.stack_bytes == 0
    src = k.cuda_source
    # 128B swizzle (bit 62), SBO 1024 B, LBO 16 B folded at compile time; start address at run time
    assert "0x4000004000010000ull + (uint64_t)(((tx_smem_addr(sA)) & 0x3FFFFu) >> 4)" in src
    assert f"tx_wgmma_m64n{n}k16_f32_bf16_bf16_ss<1, 1, 0, 0>(acc, " in src
    assert f"float acc[{n // 2}];" in src


def test_wgmma_kernel_is_rejected_on_blackwell():
    with pytest.raises(CodegenError, match=r"wgmma.* exists only on sm_90a .*the kernel targets sm_100a") as ei:
        tirxpy.compile(G.wgmma_kernel(16), arch="sm_100a")
    assert "test_kernels_gpu.py" in str(ei.value)
