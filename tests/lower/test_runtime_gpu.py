"""GPU tests (marker gpu): load + launch raw CUDA C++ built from the rendered helpers.

Run on the GPU machine with: python -m pytest -q -m gpu tests/lower/test_runtime_gpu.py
Fresh random inputs every run; outputs poisoned before launch.
"""
import pytest
import torch

pytestmark = pytest.mark.gpu


def _arch():
    major, minor = torch.cuda.get_device_capability()
    return {9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}")


def _build(src, name, **kw):
    from tirxpy.lower.nvrtc import compile_cuda
    from tirxpy.lower.runtime import load_module

    mod = compile_cuda(src, _arch(), **kw)
    return load_module(mod).function(name)


def test_helpers_axpy_and_warp_sum():
    from tirxpy.intrinsics import get, render_helpers
    from tirxpy.lower.runtime import ParamSpec, launch

    src = render_helpers([get("laneid"), get("shfl_sync_bfly_f32"), get("atom_global_add_f32")]) + r'''
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float* total, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0.f;
  if (i < n) { v = a * x[i] + y[i]; out[i] = v; }
  for (int o = 16; o > 0; o >>= 1) v += tx_shfl_sync_bfly_f32(v, o, 0xffffffffu);
  if (tx_laneid() == 0) tx_atom_global_add_f32(total, v);
}
'''
    k = _build(src, "axpy")
    n = 10_000 + int(torch.randint(0, 1000, (1,)))
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    total = torch.zeros(1, device="cuda")
    a = float(torch.randn(()))
    specs = [ParamSpec("x", dtype="float32", shape=(n,)), ParamSpec("y", dtype="float32", shape=(n,)),
             ParamSpec("out", dtype="float32", shape=(n,)), ParamSpec("total", dtype="float32", shape=(1,)),
             ParamSpec("a", "scalar", "float32"), ParamSpec("n", "scalar", "int32")]
    launch(k, grid=((n + 255) // 256,), block=(256,), args=[x, y, out, total, a, n], specs=specs)
    torch.cuda.synchronize()
    ref = a * x.double() + y.double()
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(total.double()[0], ref.sum(), rtol=1e-4, atol=1e-2)


def test_launch_argument_errors_on_gpu():
    from tirxpy.lower.errors import LaunchError
    from tirxpy.lower.runtime import ParamSpec, launch

    k = _build('extern "C" __global__ void touch(float* x) { x[threadIdx.x] = 1.f; }', "touch")
    with pytest.raises(LaunchError, match=r"parameter 'x': tensor is on cpu, the kernel runs on cuda:\d"):
        launch(k, 1, 32, [torch.zeros(32)], specs=[ParamSpec("x", dtype="float32")])
    with pytest.raises(LaunchError, match="parameter 'x': dtype is float16"):
        launch(k, 1, 32, [torch.zeros(32, device="cuda", dtype=torch.float16)], specs=[ParamSpec("x", dtype="float32")])


def test_dynamic_smem_above_48k():
    from tirxpy.lower.runtime import ParamSpec, launch

    src = r'''
extern "C" __global__ void big(const int* x, int* out, int n) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[n - 1 - i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[i];
}'''
    k = _build(src, "big")
    n = 100 * 1024 // 4
    x = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    out = torch.full((n,), -7, device="cuda", dtype=torch.int32)
    launch(k, 1, 256, [x, out, n], smem_bytes=n * 4,
           specs=[ParamSpec("x", dtype="int32"), ParamSpec("out", dtype="int32"), ParamSpec("n", "scalar", "int32")])
    torch.cuda.synchronize()
    assert torch.equal(out, x.flip(0))


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9, reason="needs sm_90+")
def test_cluster_launch_ctarank_and_dsmem():
    from tirxpy.intrinsics import get, render_helpers
    from tirxpy.lower.runtime import ParamSpec, launch

    used = [get(n) for n in ("cluster_ctarank", "cluster_nctarank", "cluster_sync", "mapa_shared", "st_shared_cluster_u32")]
    src = render_helpers(used) + r'''
extern "C" __global__ void ranks(unsigned* rank, unsigned* nrank, unsigned* peer) {
  __shared__ unsigned v;
  unsigned r = tx_cluster_ctarank();
  if (threadIdx.x == 0) { rank[blockIdx.x] = r; nrank[blockIdx.x] = tx_cluster_nctarank(); v = 0xdeadu; }
  tx_cluster_sync();
  if (threadIdx.x == 0) tx_st_shared_cluster_u32(tx_mapa_shared(tx_smem_addr(&v), r ^ 1u), blockIdx.x + 100u);
  tx_cluster_sync();
  if (threadIdx.x == 0) peer[blockIdx.x] = v;
}'''
    k = _build(src, "ranks")
    g = 2 * int(torch.randint(2, 9, (1,)))
    outs = [torch.full((g,), 0xFFFFFFF, device="cuda", dtype=torch.int32) for _ in range(3)]
    launch(k, g, 64, outs, cluster=(2, 1, 1), specs=[ParamSpec(n, dtype="int32") for n in ("rank", "nrank", "peer")])
    torch.cuda.synchronize()
    b = torch.arange(g, device="cuda", dtype=torch.int32)
    assert torch.equal(outs[0], b % 2)
    assert torch.equal(outs[1], torch.full_like(b, 2))
    assert torch.equal(outs[2], (b ^ 1) + 100)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9, reason="needs sm_90+")
def test_tma_2d_load_128b_swizzle_on_mbarrier():
    from tirxpy.intrinsics import get, render_helpers
    from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_for
    from tirxpy.lower.runtime import ParamSpec, launch

    used = [get(n) for n in ("mbarrier_init", "fence_mbarrier_init", "mbarrier_arrive_expect_tx", "tma_load_2d",
                             "mbarrier_wait_parity", "mbarrier_inval")]
    src = render_helpers(used) + r'''
extern "C" __global__ void tma2d(const __grid_constant__ CUtensorMap tmap, unsigned short* out, int c0, int c1) {
  __shared__ alignas(1024) unsigned short tile[64 * 64];
  __shared__ alignas(8) unsigned long long bar;
  unsigned b = tx_smem_addr(&bar);
  if (threadIdx.x == 0) { tx_mbarrier_init(b, 1u); tx_fence_mbarrier_init(); }
  __syncthreads();
  if (threadIdx.x == 0) {
    tx_mbarrier_arrive_expect_tx(b, 64u * 64u * 2u);
    tx_tma_load_2d(tx_smem_addr(tile), &tmap, c0, c1, b);
  }
  tx_mbarrier_wait_parity(b, 0u);
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) out[i] = tile[i];
  __syncthreads();
  if (threadIdx.x == 0) tx_mbarrier_inval(b);
}'''
    k = _build(src, "tma2d")
    g = torch.randn(256, 512, device="cuda").to(torch.bfloat16)
    out = torch.full((64 * 64,), -1, device="cuda", dtype=torch.int16).view(torch.bfloat16)  # NaN poison
    sw = swizzle_for(128, "bfloat16")
    L = ComposeLayout(sw.per_element, sw.swizzle_len, sw.atom_len, TileLayout(S[(64, 64) : (64, 1)]))
    row0, col0 = 64 * int(torch.randint(0, 4, (1,))), 64 * int(torch.randint(0, 8, (1,)))
    specs = [ParamSpec("tmap", "tensormap", dtype="bfloat16", box=(64, 64), layout=L),
             ParamSpec("out", dtype="bfloat16", shape=(4096,)), ParamSpec("c0", "scalar", "int32"),
             ParamSpec("c1", "scalar", "int32")]
    launch(k, 1, 128, [g, out, col0, row0], specs=specs)
    torch.cuda.synchronize()
    tile = g[row0:row0 + 64, col0:col0 + 64].cpu()
    got = out.cpu()
    # 128B swizzle on byte addresses: 16-byte chunk index ^= (row within 8) -> element offset formula
    for r in range(64):
        for c in range(64):
            byte = r * 128 + c * 2
            sbyte = byte ^ (((byte >> 7) & 7) << 4)
            assert got[sbyte // 2].item() == tile[r, c].item() or (got[sbyte // 2].isnan() and tile[r, c].isnan()), (r, c)
    # the same permutation, from the layout library's swizzle
    perm = torch.tensor([L.apply(r, c, shape=(64, 64))["m"] for r in range(64) for c in range(64)])
    assert torch.equal(got[perm].view(torch.int16), tile.reshape(-1).view(torch.int16))


def test_compile_cache_hit_in_process():
    from tirxpy.lower.nvrtc import compile_cuda

    src = 'extern "C" __global__ void cached_k(int* x) { x[0] = 42; }'
    compile_cuda(src, _arch())
    assert compile_cuda(src, _arch()).cached == "memory"


def test_spec_less_launch_with_ctypes():
    import ctypes

    from tirxpy.lower.runtime import launch

    k = _build('extern "C" __global__ void fill(int* x, int v) { x[threadIdx.x] = v; }', "fill")
    x = torch.full((32,), -1, device="cuda", dtype=torch.int32)
    v = int(torch.randint(0, 1 << 30, (1,)))
    launch(k, 1, 32, [x, ctypes.c_int32(v)])
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, v))


@pytest.mark.parametrize("backend", ["ctypes", "bindings"])
def test_pdl_launch_waits_for_the_previous_kernel(backend):
    """A kernel launched with ``pdl=True`` starts before the previous one has finished; after
    ``griddepcontrol.wait`` it sees everything that kernel wrote. The producer (tests/kernels/late_copy.py)
    lets its dependents launch at once, spins ~200 us, then writes; the consumer copies what it reads after
    the wait (without the wait it copied the NaN the buffer held)."""
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs sm_90")
    from tests.kernels.late_copy import late_copy
    from tirxpy.lower.runtime import ParamSpec

    src = r'''
extern "C" __global__ void consume(const float* x, float* y, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = x[i];
}
'''
    lc = _build(src, "consume").launcher([ParamSpec("x", dtype="float32"), ParamSpec("y", dtype="float32"),
                                          ParamSpec("n", "scalar", "int32")], backend=backend)
    n = 1 << 16
    ref = torch.randn(n, device="cuda")
    x = torch.full((n,), float("nan"), device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    late_copy(ref, x)
    lc(64, 256, (x, y, n), pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(x, ref) and torch.equal(y, ref)
