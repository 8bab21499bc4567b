"""GPU checks (marker gpu) of the sm_80 / sm_90a primitive implementations against torch on fresh
random data, several shapes, ragged edges, poisoned outputs.

    python -m pytest -q -m gpu tests/primitives/test_gpu.py
"""
import pytest

from tests.primitives.helpers import choices, kernel

BUILT = None  # set by test_gpu_kernels_build_on_cpu: compile only, for sm_90a, and do not launch


def _build(k):
    from tirxpy.lower.build import build

    if BUILT is not None:
        BUILT.append(build(k, "sm_90a"))
        raise _Built
    from tirxpy.lower.runtime import device_arch

    return build(k, device_arch())


class _Built(Exception):
    pass


def _rand(*shape, dtype="bfloat16"):
    import torch

    g = torch.Generator(device="cuda").manual_seed(torch.seed() % 2 ** 31)
    return torch.randn(*shape, device="cuda", generator=g).to(getattr(torch, dtype))


def _poison(t):
    import torch

    return torch.full_like(t, float("nan")) if t.dtype.is_floating_point else torch.full_like(t, -7)


@pytest.mark.gpu
@pytest.mark.parametrize("n,d,dt", [(100, 512, "bfloat16"), (7, 256, "float32"), (33, 1024, "float16")])
@pytest.mark.parametrize("layout", ["vec", "strided"])
def test_reg_mem_row_copy(n, d, dt, layout):
    import torch

    v = 16 // (2 if dt != "float32" else 4)
    lay = (f"TileLayout(S[({d // (32 * v)}, 32, {v}) : ({v}@m, 1@laneid, 1@m)])" if layout == "vec"
           else f"TileLayout(S[({d // 32}, 32) : (1@m, 1@laneid)])")
    k = kernel(f'X: T.Tensor(({n}, {d}), "{dt}"), Y: T.Tensor(({n}, {d}), "{dt}")', f"""
    row = T.cta_id(0) * 4 + T.warp_id()
    x = T.alloc_local(({d},), "{dt}", layout={lay})
    Tx.warp.copy(x, X[row, :])
    Tx.warp.copy(Y[row, :], x)""", threads=128, grid=-(-n // 4))
    assert choices(k)[0][0] == ("reg_mem_vec" if layout == "vec" else "reg_mem_scalar")
    x = _rand(n, d, dtype=dt)
    y = _poison(x)
    _build(k)(x, y)
    torch.testing.assert_close(y, x, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [64, 100, 257])
@pytest.mark.parametrize("how", ["copy", "copy_async"])
def test_global_shared_roundtrip_swizzled(n, how):
    import torch

    sync = "T.evaluate(T.ptx.cp_async_wait_group(0))\n    T.evaluate(T.ptx.syncthreads())" if how == "copy_async" \
        else "T.evaluate(T.ptx.syncthreads())"
    k = kernel(f'A: T.Tensor(({n}, 64), "bfloat16"), B: T.Tensor(({n}, 64), "bfloat16")', f"""
    s = T.alloc_shared((64, 64), "bfloat16", layout=mma_smem_layout(64, 64, "bfloat16", "K", 128))
    r0 = T.cta_id(0) * 64
    Tx.cta.{how}(s, A[r0:r0 + 64, 0:64])
    {sync}
    Tx.cta.copy(B[r0:r0 + 64, 0:64], s)""", threads=128, grid=-(-n // 64))
    a = _rand(n, 64)
    b = _poison(a)
    _build(k)(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [128, 200])
def test_tma_load_store(n):
    import torch

    k = kernel(f'A: T.Tensor(({n}, 128), "bfloat16"), B: T.Tensor(({n}, 128), "bfloat16")', """
    s = T.alloc_shared((2, 64, 64), "bfloat16", layout=ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(2, 64, 64)])))
    bar = T.alloc_shared((1,), "uint64")
    r0 = T.cta_id(0) * 64
    c0 = T.cta_id(1) * 64
    if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_init(bar[0], 1))
        T.evaluate(T.ptx.fence_mbarrier_init())
    T.evaluate(T.ptx.syncthreads())
    if T.elect_one():
        Tx.copy_async(s[1], A[r0:r0 + 64, c0:c0 + 64], mbar=bar[0])
    T.evaluate(T.ptx.mbarrier_wait_parity(bar[0], 0))
    if T.elect_one():
        Tx.copy_async(B[r0:r0 + 64, c0:c0 + 64], s[1])
        T.evaluate(T.ptx.bulk_wait_group(0))""", threads=128, grid=f"{-(-n // 64)}, 2")
    a = _rand(n, 128)
    b = _poison(a)
    _build(k)(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("op,ref", [
    ("Tx.warp.fma(o, a, b, v)", lambda a, b, v: a * b + v), ("Tx.warp.silu(o, a)", lambda a, b, v: a * torch_sig(a)),
    ("Tx.warp.exp2(o, b)", lambda a, b, v: 2 ** b), ("Tx.warp.mul(o, a, v)", lambda a, b, v: a * v),
    ("Tx.warp.maximum(o, a, b)", lambda a, b, v: a.maximum(b)),
])
def test_elementwise(op, ref):
    import torch

    L = "TileLayout(S[(32, 4) : (1@laneid, 1@m)])"
    k = kernel('A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32"), V: T.Tensor((32, 1), "float32"), '
               'O: T.Tensor((32, 4), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    b = T.alloc_local((32, 4), "float32", layout={L})
    v = T.alloc_local((32, 1), "float32", layout=TileLayout(S[(32, 1) : (1@laneid, 1@m)]))
    o = T.alloc_local((32, 4), "float32", layout={L})
    Tx.warp.copy(a, A[0:32, 0:4])
    Tx.warp.copy(b, B[0:32, 0:4])
    Tx.warp.copy(v, V[0:32, 0:1])
    {op}
    Tx.warp.copy(O[0:32, 0:4], o)""", threads=32)
    a, b, v = _rand(32, 4, dtype="float32"), _rand(32, 4, dtype="float32"), _rand(32, 1, dtype="float32")
    o = _poison(a)
    _build(k)(a, b, v, o)
    want = ref(a.double(), b.double(), v.double())
    torch.testing.assert_close(o.double(), want, rtol=1e-5, atol=1e-5)


def torch_sig(x):
    import torch

    return torch.sigmoid(x)


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_row_reduce_on_wgmma_accumulator(op):
    import torch

    k = kernel('A: T.Tensor((64, 16), "float32"), O: T.Tensor((64,), "float32")', f"""
    acc = T.alloc_local((64, 16), "float32", layout=wgmma_accumulator(16))
    r = T.alloc_local((64,), "float32", layout=TileLayout(S[(4, 2, 8) : (1@wid_in_wg, 1@m, 4@laneid)] + R[4 : 1@laneid]))
    Tx.wg.copy(acc, A[0:64, 0:16])
    Tx.wg.{op}(r, acc, axis=1)
    Tx.wg.copy(O[0:64], r)""", threads=128)
    a = _rand(64, 16, dtype="float32")
    o = _poison(a[:, 0].contiguous())
    _build(k)(a, o)
    want = {"sum": a.double().sum(1), "max": a.double().amax(1), "min": a.double().amin(1)}[op]
    torch.testing.assert_close(o.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_cta_max(n):
    import torch

    per = n // 128
    k = kernel(f'X: T.Tensor(({n},), "float32"), O: T.Tensor((1,), "float32")', f"""
    x = T.alloc_local(({n},), "float32", layout=TileLayout(S[(4, 32, {per}) : (1@warpid, 1@laneid, 1@m)]))
    s = T.alloc_local((1,), "float32", layout=TileLayout(S[1 : 1@m] + R[(4, 32) : (1@warpid, 1@laneid)]))
    Tx.cta.copy(x, X[0:{n}])
    Tx.cta.max(s, x, axis=0)
    Tx.cta.copy(O[0:1], s)""", threads=128)
    x = _rand(n, dtype="float32")
    o = _poison(x[:1].clone())
    _build(k)(x, o)
    assert o.item() == x.max().item()


@pytest.mark.gpu
def test_ldmatrix_stmatrix_roundtrip():
    import torch

    k = kernel('A: T.Tensor((16, 16), "bfloat16"), O: T.Tensor((16, 16), "bfloat16"), P: T.Tensor((16, 16), "bfloat16")', """
    s = T.alloc_shared((16, 16), "bfloat16")
    s2 = T.alloc_shared((16, 16), "bfloat16")
    a = T.alloc_local((16, 16), "bfloat16", layout=mma_m16n8k16_a("bf16"))
    b = T.alloc_local((16, 16), "bfloat16", layout=ldmatrix_layout(4, trans=True, grid=(2, 2)))
    Tx.warp.copy(s, A[0:16, 0:16])
    T.evaluate(T.ptx.bar_warp_sync(T.uint32(4294967295)))
    Tx.warp.copy(a, s)
    Tx.warp.copy(b, s)
    Tx.warp.copy(s2, a)
    T.evaluate(T.ptx.bar_warp_sync(T.uint32(4294967295)))
    Tx.warp.copy(O[0:16, 0:16], s2)
    Tx.warp.copy(P[0:16, 0:16], b)""", threads=32)
    assert [c[0] for c in choices(k)][1:4] == ["ldmatrix", "ldmatrix", "stmatrix"]
    a = _rand(16, 16)
    o, p = _poison(a), _poison(a)
    _build(k)(a, o, p)
    torch.testing.assert_close(o, a, rtol=0, atol=0)
    torch.testing.assert_close(p, a, rtol=0, atol=0)


class _FakeTensor:
    """Stands in for CUDA tensors when the GPU tests' kernels are only compiled."""

    def __getattr__(self, name):
        return lambda *a, **k: self

    def __getitem__(self, key):
        return self


def test_gpu_kernels_build_on_cpu(monkeypatch):
    """Every kernel the GPU tests launch lowers and compiles through NVRTC (no GPU needed)."""
    from tests.primitives.helpers import has_build

    if not has_build():
        pytest.skip("tirxpy.lower.build is not available yet")
    global BUILT
    BUILT = []
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "_rand", lambda *a, **k: _FakeTensor())
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "_poison", lambda t: _FakeTensor())
    try:
        import inspect

        mod = __import__(__name__, fromlist=["x"])
        for name, fn in list(vars(mod).items()):
            if not name.startswith("test_") or name == "test_gpu_kernels_build_on_cpu":
                continue
            marks = getattr(fn, "pytestmark", [])
            params = [m for m in marks if m.name == "parametrize"]
            combos = [{}]
            for m in params:
                names = [x.strip() for x in m.args[0].split(",")]
                combos = [{**c, **dict(zip(names, v if len(names) > 1 else (v,)))} for c in combos for v in m.args[1]]
            for c in combos:
                args = {k: v for k, v in c.items() if k in inspect.signature(fn).parameters}
                try:
                    fn(**args)
                except _Built:
                    pass
        assert len(BUILT) == 26
        assert all(b.resources.spill_stores == 0 for b in BUILT)
    finally:
        BUILT = None
