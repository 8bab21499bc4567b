"""GPU checks (marker gpu) of fill into shared / global memory (memory_fill), TMA store in
reduce-add mode (tma_store, cp.reduce.async.bulk.tensor .add) and the element-wise memory copy
(mem_mem_scalar) against torch on fresh random data, ragged shapes, outputs poisoned (NaN).
Each test also asserts which implementation dispatch chose. With ``--sim`` the kernels run in
tirxpy.sim (no GPU needed):

    python -m pytest -q -m gpu tests/primitives/test_gpu_fill_reduce.py          # on a GPU
    python -m pytest -q --sim -m gpu tests/primitives/test_gpu_fill_reduce.py    # anywhere
"""
import pytest

import tirxpy.intrinsics  # noqa: F401  (T.ptx.* names)
from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel
from tests.sim_plugin import device, launch
from tirxpy.primitives.explain import emitted_ops

DTYPES = ["float32", "bfloat16"]
# scope -> (guard picking the active threads, Tx namespace); kernels run with 256 threads
SCOPES = {"thread": ("if T.thread_id() == 200:", "Tx"), "warp": ("if T.warp_id() == 5:", "Tx.warp"),
          "wg": ("if T.warpgroup_id() == 1:", "Tx.wg"), "cta": ("if True:", "Tx.cta")}
RTOL = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}  # one ulp: a single rounding


def _arch(sim):
    if sim:
        return "sm_90a"
    from tirxpy.lower.runtime import device_arch

    return device_arch()


def _rand(*shape, dtype="float32", sim=False):
    import torch

    g = torch.Generator(device=device(sim)).manual_seed(torch.seed() % 2 ** 31)
    return torch.randn(*shape, device=device(sim), generator=g).to(getattr(torch, dtype))


def _nan(*shape, dtype, sim):
    import torch

    return torch.full(shape, float("nan"), device=device(sim), dtype=getattr(torch, dtype))


def _full(shape):
    return ", ".join(f"0:{n}" for n in shape)


# ------------------------------------------------------------------ kernels
def shared_fill_kernel(shape, dt, scope, layout=None):
    """Fill a shared tile with V[0] (cast to dt) at ``scope``, then the CTA copies it to O."""
    guard, ns = SCOPES[scope]
    lay = f", layout={layout}" if layout else ""
    return kernel(f'V: T.Tensor((1,), "float32"), O: T.Tensor({shape}, "{dt}")', f"""
    s = T.alloc_shared({shape}, "{dt}"{lay})
    {guard}
        {ns}.fill(s, V[0])
    T.evaluate(T.ptx.syncthreads())
    Tx.cta.copy(O[{_full(shape)}], s)""", threads=256)


def global_fill_kernel(shape, rows, cols, bm, dt, scope):
    """Each CTA fills rows [r0, r0 + bm) of O (r0 = rows[0] + bm * cta; the last block may cross
    the tensor's edge at rows[1]) and, for 2-D O, the constant columns ``cols``."""
    guard, ns = SCOPES[scope]
    view = f"r0:r0 + {bm}" + (f", {cols[0]}:{cols[1]}" if len(shape) == 2 else "")
    return kernel(f'V: T.Tensor((1,), "float32"), O: T.Tensor({shape}, "{dt}")', f"""
    r0 = {rows[0]} + T.cta_id(0) * {bm}
    {guard}
        {ns}.fill(O[{view}], V[0])""", threads=256, grid=-(-(rows[1] - rows[0]) // bm))


def tma_reduce_add_kernel(n, w, dt, load):
    """Y[box] += X[box] per (64, 64) box: X's box reaches shared by TMA or by a CTA copy (then a
    proxy fence), one thread reduce-adds it into Y; boxes at the edges are clipped by the TMA unit."""
    if load == "tma":
        ld = """if T.thread_id() == 0:
        T.evaluate(T.ptx.mbarrier_init(bar[0], 1))
        T.evaluate(T.ptx.fence_mbarrier_init())
    T.evaluate(T.ptx.syncthreads())
    if T.elect_one():
        Tx.copy_async(s, X[r0:r0 + 64, c0:c0 + 64], mbar=bar[0])
    T.evaluate(T.ptx.mbarrier_wait_parity(bar[0], 0))"""
    else:
        ld = """Tx.cta.copy(s, X[r0:r0 + 64, c0:c0 + 64])
    T.evaluate(T.ptx.fence_proxy_async())
    T.evaluate(T.ptx.syncthreads())"""
    return kernel(f'X: T.Tensor(({n}, {w}), "{dt}"), Y: T.Tensor(({n}, {w}), "{dt}")', f"""
    s = T.alloc_shared((64, 64), "{dt}")
    bar = T.alloc_shared((1,), "uint64")
    r0 = T.cta_id(0) * 64
    c0 = T.cta_id(1) * 64
    {ld}
    if T.elect_one():
        Tx.copy_async(Y[r0:r0 + 64, c0:c0 + 64], s, reduce="add")
        T.evaluate(T.ptx.bulk_wait_group(0))""", threads=128, grid=f"{-(-n // 64)}, {-(-w // 64)}")


def scalar_copy_kernel(n, src_dt):
    """A (n, 64) -> column-major bfloat16 shared tile -> B, 64 rows per CTA (no two row
    neighbours adjacent in shared memory: no vectors; a float32 A also converts per element)."""
    return kernel(f'A: T.Tensor(({n}, 64), "{src_dt}"), B: T.Tensor(({n}, 64), "bfloat16")', """
    s = T.alloc_shared((64, 64), "bfloat16", layout=TileLayout(S[(64, 64) : (1@m, 64@m)]))
    r0 = T.cta_id(0) * 64
    Tx.cta.copy(s, A[r0:r0 + 64, 0:64])
    T.evaluate(T.ptx.syncthreads())
    Tx.cta.copy(B[r0:r0 + 64, 0:64], s)""", threads=128, grid=-(-n // 64))


# ------------------------------------------------------------------ GPU tests
SHARED_CASES = [((64, 64), None), ((37, 24), None), ((3, 5, 7), None),
                ((37, 24), "TileLayout(S[(37, 24) : (1@m, 37@m)])")]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,layout", SHARED_CASES, ids=["64x64", "37x24", "3x5x7", "37x24_colmajor"])
@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("dt", DTYPES)
def test_fill_shared(shape, layout, scope, dt, sim_mode):
    import torch

    k = shared_fill_kernel(shape, dt, scope, layout)
    (fill, stmt), _ = choices(k, _arch(sim_mode))
    assert fill == "memory_fill" and intrinsics(stmt) == [] and emitted_ops(stmt)["st.shared"] == 1
    v = _rand(1, sim=sim_mode)
    o = _nan(*shape, dtype=dt, sim=sim_mode)
    launch(k, v, o, sim=sim_mode, arch=_arch(sim_mode))
    torch.testing.assert_close(o, v.to(o.dtype).expand(shape), rtol=0, atol=0)


GLOBAL_CASES = [((35, 40), (3, 35), (8, 24), 16), ((60, 40), (3, 60), (5, 40), 16), ((1000,), (3, 1000), None, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,rows,cols,bm", GLOBAL_CASES, ids=["35x40", "60x40_ragged", "1000_ragged"])
@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("dt", DTYPES)
def test_fill_global(shape, rows, cols, bm, scope, dt, sim_mode):
    import torch

    k = global_fill_kernel(shape, rows, cols, bm, dt, scope)
    (fill, stmt), = choices(k, _arch(sim_mode))
    assert fill == "memory_fill" and intrinsics(stmt) == [] and emitted_ops(stmt)["st.global"] == 1
    v = _rand(1, sim=sim_mode)
    o = _nan(*shape, dtype=dt, sim=sim_mode)
    launch(k, v, o, sim=sim_mode, arch=_arch(sim_mode))
    want = _nan(*shape, dtype=dt, sim=sim_mode)
    region = (slice(*rows),) + ((slice(*cols),) if cols else ())
    want[region] = v.to(want.dtype)
    torch.testing.assert_close(o, want, rtol=0, atol=0, equal_nan=True)  # outside the region: still NaN


@pytest.mark.gpu
@pytest.mark.parametrize("n,w", [(128, 64), (100, 72)], ids=["128x64", "100x72_ragged"])
@pytest.mark.parametrize("load", ["tma", "copy"])
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16"])
def test_tma_reduce_add(n, w, load, dt, sim_mode):
    import torch

    k = tma_reduce_add_kernel(n, w, dt, load)
    (ld, _), (red, stmt) = choices(k, _arch(sim_mode))
    assert (ld == "tma_load") if load == "tma" else ld.startswith("mem_mem"), ld
    assert red == "tma_store" and intrinsics(stmt) == ["tma_reduce_add_2d", "bulk_commit_group"]
    x, y = _rand(n, w, dtype=dt, sim=sim_mode), _rand(n, w, dtype=dt, sim=sim_mode)
    want = y.double() + x.double()
    launch(k, x, y, sim=sim_mode, arch=_arch(sim_mode))
    tiny = torch.finfo(y.dtype).tiny  # a subnormal sum may be flushed to zero
    torch.testing.assert_close(y.double(), want, rtol=RTOL[dt], atol=tiny)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [64, 100, 257])
@pytest.mark.parametrize("src_dt", ["bfloat16", "float32"])
def test_mem_mem_scalar_roundtrip(n, src_dt, sim_mode):
    import torch

    k = scalar_copy_kernel(n, src_dt)
    sites = choices(k, _arch(sim_mode))
    assert [v for v, _ in sites] == ["mem_mem_scalar", "mem_mem_scalar"]
    assert all(intrinsics(s) == [] for _, s in sites)
    a = _rand(n, 64, dtype=src_dt, sim=sim_mode)
    b = _nan(n, 64, dtype="bfloat16", sim=sim_mode)
    launch(k, a, b, sim=sim_mode, arch=_arch(sim_mode))
    torch.testing.assert_close(b, a.to(torch.bfloat16), rtol=0, atol=0)


# ------------------------------------------------------------------ CPU: every kernel compiles
def test_kernels_compile_for_sm90a():
    """Every GPU test configuration lowers and compiles through NVRTC for sm_90a (no GPU needed);
    no local-memory spills, except in the scalar fallback copy: NVRTC unrolls its 32-step
    float32 -> bfloat16 element loop and spills 4 bytes (a speed matter, not a correctness one)."""
    ks = [shared_fill_kernel(shape, dt, scope, lay) for shape, lay in SHARED_CASES for dt in DTYPES for scope in SCOPES]
    ks += [global_fill_kernel(*case, dt, scope) for case in GLOBAL_CASES for dt in DTYPES for scope in SCOPES]
    ks += [tma_reduce_add_kernel(n, w, dt, load) for n, w in ((128, 64), (100, 72))
           for dt in ("float32", "bfloat16", "float16") for load in ("tma", "copy")]
    for k in ks:
        compile_ok(k, "sm_90a")
    from tirxpy.lower.build import build

    for n in (64, 100, 257):
        for dt in ("bfloat16", "float32"):
            build(scalar_copy_kernel(n, dt), "sm_90a")
