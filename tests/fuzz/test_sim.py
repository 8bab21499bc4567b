"""Fuzz the CPU simulator (area "simulator").

- Bad ``sim.run`` calls over a few small ``@T.prim_func`` kernels (wrong kinds, dtypes, shapes of
  tensors; complex arrays; tensors that require grad; scalars out of range, non-integer, of the
  wrong kind; bad ``ctas=`` / ``arch=`` / ``seed=`` / ``max_steps=``; wrong argument counts; huge
  grids) are refused with a typed error naming the fault.
- Kernels that cannot finish (spin loops on a flag nobody sets, endless counters, loops longer than
  the budget, deadlocks) and kernels that read uninitialized registers / shared memory / tensor
  memory are reported as the right problem kind, within the time cap.
- Valid small kernels (random grids, block sizes, scalars, element types, divergent loops) match a
  numpy reference.
"""
from __future__ import annotations

import numpy as np
import torch
from harness import EXAMPLES, HOSTILE, Hostile, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy import T
from tirxpy.sim import SimReportError, run

A = "simulator"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@T.prim_func
def axpy(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"), a: T.float32, n: T.int32):
    T.launch(grid=(2,), threads=32)
    i = T.cta_id(0) * 32 + T.thread_id()
    if i < n:
        Y[i] = a * X[i] + Y[i]


@T.prim_func
def bcast(X: T.Tensor((4, 8), "int32"), Y: T.Tensor((4, 8), "int32"), g: T.int32):
    T.launch(grid=(g,), threads=32)
    r = T.thread_id() // 8
    c = T.thread_id() % 8
    Y[r, c] = X[r, c] * 2 + T.cta_id(0)


def _bad_tensor(draw_kind, shape, dtype):
    """A value that is not an acceptable tensor for a (shape, dtype) parameter, and the words its error names."""
    n = int(np.prod(shape))
    return {
        "dtype": (np.zeros(shape, np.float64 if dtype != "float64" else np.float32), ["dtype"]),
        "int-dtype": (np.zeros(shape, np.int8), ["dtype"]),
        "shape": (np.zeros((n + 1,), dtype), ["shape"]),
        "reshape": (np.zeros((1, n), dtype), ["shape"]),
        "complex": (np.zeros(shape, np.complex64), ["complex"]),
        "list": (list(range(n)), ["numpy array", "list"]),
        "none": (None, ["NoneType", "numpy array"]),
        "str": ("x" * n, ["str"]),
        "scalar": (1.0, ["float"]),
        "object": (np.array([object()] * n).reshape(shape), ["dtype"]),
        "torch-grad": (torch.zeros(shape, dtype=getattr(torch, dtype), requires_grad=dtype.startswith("float")),
                       ["grad", "dtype"]),
        "torch-dtype": (torch.zeros(shape, dtype=torch.float64), ["dtype"]),
        "torch-complex": (torch.zeros(shape, dtype=torch.complex64), ["complex"]),
        "hostile": (Hostile(), ["Hostile"]),
    }[draw_kind]


TENSOR_FAULTS = ["dtype", "int-dtype", "shape", "reshape", "complex", "list", "none", "str", "scalar", "object",
                 "torch-grad", "torch-dtype", "torch-complex", "hostile"]


@SETTINGS
@given(which=st.sampled_from([0, 1]), fault=st.sampled_from(TENSOR_FAULTS))
def test_bad_tensors_are_refused(which, fault):
    args = [np.zeros(64, np.float32), np.zeros(64, np.float32), 1.0, 64]
    bad, names = _bad_tensor(fault, (64,), "float32")
    if fault == "torch-grad":   # float32 requires grad; int dtypes cannot
        names = ["grad"]
    args[which] = bad
    refuse(A, lambda: run(axpy, *args), names=names + [f"parameter {'XY'[which]}"])


SCALAR_FAULTS = st.one_of(
    st.integers(min_value=2 ** 31, max_value=2 ** 70).map(lambda v: (v, "n", ["range"])),
    st.integers(max_value=-(2 ** 31) - 1, min_value=-(2 ** 70)).map(lambda v: (v, "n", ["range"])),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda v: (v, "n", ["int"])),
    st.sampled_from([True, False, "3", None, [1], (1,), 1j]).map(lambda v: (v, "n", ["parameter n"])),
    st.sampled_from([np.array([1]), np.zeros((2, 2)), torch.ones(1)]).map(lambda v: (v, "n", ["scalar"])),
    st.floats(min_value=3.5e38, max_value=1e308).map(lambda v: (v, "a", ["overflows"])),
    st.sampled_from(["1.0", None, 1j, [1.0], True]).map(lambda v: (v, "a", ["parameter a"])),
    HOSTILE.map(lambda v: (v, "n", ["parameter n"])), HOSTILE.map(lambda v: (v, "a", ["parameter a"])),
)


@SETTINGS
@given(case=SCALAR_FAULTS)
def test_bad_scalars_are_refused(case):
    v, which, names = case
    args = {"a": 1.0, "n": 64}
    args[which] = v
    refuse(A, lambda: run(axpy, np.zeros(64, np.float32), np.zeros(64, np.float32), args["a"], args["n"]),
           names=names)


OPTION_FAULTS = st.one_of(
    st.sampled_from([[], [(7,)], [(0, 3)], [(-1,)], "0", 3.5, [(0.5,)], [(0, 0, 0, 0)], [True], [None], object()])
    .map(lambda v: ({"ctas": v}, ["ctas="])),
    st.sampled_from(["sm_9", "hopper", "sm_70", "", 90, None.__class__, ("sm_90a",), "sm_90a; rm -rf /", "SM_90A"])
    .map(lambda v: ({"arch": v}, ["arch="])),
    st.sampled_from([-1, 1.5, "0", None, True, 2 ** 200 * -1]).map(lambda v: ({"seed": v}, ["seed="])),
    st.sampled_from([0, -5, 1.0, "10", None, True]).map(lambda v: ({"max_steps": v}, ["max_steps="])),
    st.sampled_from(["yes", None, 1, 0.0]).map(lambda v: ({"check": v}, ["check="])),
    st.sampled_from(["sm_100a"]).map(lambda v: ({"arch": v, "_kernel": "hopper"}, ["arch=", "wgmma"])),
    st.tuples(st.sampled_from(["ctas", "arch", "seed", "max_steps", "check"]), HOSTILE).map(
        lambda c: ({c[0]: c[1]}, [c[0] + "="])),
    HOSTILE.map(lambda v: ({"ctas": [v]}, ["ctas="])),
)

HOPPER = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((32,), "int32")):
    T.launch(grid=(1,), threads=128)
    T.ptx.wgmma_fence()
''')


@SETTINGS
@given(case=OPTION_FAULTS)
def test_bad_options_are_refused(case):
    kw, names = case
    kw = dict(kw)
    if kw.pop("_kernel", None) == "hopper":
        refuse(A, lambda: run(HOPPER, np.zeros(32, np.int32), **kw), names=names)
        return
    refuse(A, lambda: run(bcast, np.zeros((4, 8), np.int32), np.zeros((4, 8), np.int32), 2, **kw), names=names)


@SETTINGS
@given(n=st.integers(min_value=0, max_value=6).filter(lambda n: n != 4))
def test_wrong_argument_counts_are_refused(n):
    args = [np.zeros(64, np.float32), np.zeros(64, np.float32), 1.0, 64, 5, 6][:n]
    refuse(A, lambda: run(axpy, *args), names=["takes 4 arguments"])


@SETTINGS
@given(g=st.one_of(st.integers(min_value=4097, max_value=2 ** 31 - 1), st.integers(min_value=-(2 ** 31), max_value=0)))
def test_grids_too_large_or_empty_are_refused(g):
    refuse(A, lambda: run(bcast, np.zeros((4, 8), np.int32), np.zeros((4, 8), np.int32), g),
           names=["CTAs", "extent"], seconds=5)


# ---------------------------------------------------------------- kernels that cannot finish / read garbage
def _spin(flag_space, nwarps, form):
    """A kernel spinning on a flag nobody sets (global or shared)."""
    cond = {"eq": "F[0] == 0", "ne": "F[0] != 1", "lt": "F[0] < 1", "not": "not (F[0] > 0)"}[form]
    decl = '    F = T.alloc_shared((1,), "int32")\n    if T.thread_id() == 0:\n        F[0] = 0\n' \
           '    T.ptx.syncthreads()\n' if flag_space == "shared" else "    F = G\n"
    return T.parse_script(f'''
@T.prim_func
def spin(G: T.Tensor((1,), "int32"), O: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads={32 * nwarps})
{decl}    while {cond}:
        T.evaluate(0)
    O[0] = 1
''')


def _expect(k, args, kind, **kw):
    def go():
        run(k, *args, **kw)
    refuse(A, go, names=[kind], seconds=5)


@SETTINGS
@given(space=st.sampled_from(["global", "shared"]), nwarps=st.integers(1, 4),
       form=st.sampled_from(["eq", "ne", "lt", "not"]), seed=st.integers(0, 50))
def test_spin_loops_are_no_progress(space, nwarps, form, seed):
    src_args = (np.zeros(1, np.int32), np.zeros(1, np.int32))
    _expect(_spin(space, nwarps, form), src_args, "no_progress", seed=seed)


@SETTINGS
@given(n=st.integers(min_value=500_000, max_value=2 ** 31 - 1), nested=st.booleans())
def test_loops_longer_than_the_budget_are_no_progress(n, nested):
    inner = "        for j in T.serial(n):\n            O[0] = j\n" if nested else "        O[0] = i\n"
    k = T.parse_script(f'''
@T.prim_func
def k(O: T.Tensor((1,), "int32"), n: T.int32):
    T.launch(grid=(1,), threads=32)
    for i in T.serial(n):
{inner}''')
    _expect(k, (np.zeros(1, np.int32), n), "no_progress")


@SETTINGS
@given(step=st.integers(1, 7), steps=st.integers(500, 4000))
def test_endless_counters_are_no_progress(step, steps):
    k = T.parse_script(f'''
@T.prim_func
def k(O: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads=32)
    c = T.alloc_local((1,), "int32")
    c[0] = 0
    while c[0] >= 0:
        c[0] = (c[0] + {step}) % 1000
    O[0] = c[0]
''')
    _expect(k, (np.zeros(1, np.int32),), "no_progress", max_steps=steps)


@SETTINGS
@given(count=st.integers(2, 5), arrivals=st.integers(0, 1), nwarps=st.integers(1, 3))
def test_mbarrier_waits_nobody_completes_are_deadlocks(count, arrivals, nwarps):
    k = T.parse_script(f'''
@T.prim_func
def k(O: T.Tensor((1,), "int32")):
    T.launch(grid=(1,), threads={32 * nwarps})
    bar = T.alloc_shared((1,), "uint64")
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], {count})
    T.ptx.syncthreads()
    if T.thread_id() < {arrivals}:
        T.evaluate(T.ptx.mbarrier_arrive(bar[0]))
    T.ptx.mbarrier_wait_parity(bar[0], 0)
''')
    _expect(k, (np.zeros(1, np.int32),), "deadlock")


@SETTINGS
@given(where=st.sampled_from(["local", "shared"]), written=st.integers(0, 31), n=st.integers(1, 4))
def test_uninitialized_reads_are_reported(where, written, n):
    alloc = f'T.alloc_local(({n},), "float32")' if where == "local" else f'T.alloc_shared((32, {n}), "float32")'
    at = "[{}]" if where == "local" else "[T.lane_id(), {}]"
    k = T.parse_script(f'''
@T.prim_func
def k(O: T.Tensor((32,), "float32")):
    T.launch(grid=(1,), threads=32)
    r = {alloc}
    if T.lane_id() < {written}:
        r{at.format(n - 1)} = T.float32(1)
    T.ptx.syncthreads()
    O[T.lane_id()] = r{at.format(n - 1)}
''')
    _expect(k, (np.zeros(32, np.float32),), "uninitialized_read")


GLOBAL_OPS = {
    "atom": "T.evaluate(T.ptx.atom_global_add_u32(P, T.uint32(1)))",
    "cas": "T.evaluate(T.ptx.atom_global_cas_b32(P, T.uint32(0), T.uint32(1)))",
    "ld.acquire": "T.evaluate(T.ptx.ld_acquire_gpu_u32(P))",
    "ld.global": "T.evaluate(T.ptx.ld_global_f32(P))",
    "red": "T.ptx.red_global_add_u32(P, T.uint32(1))",
    "bulk g2s": "T.ptx.bulk_copy_g2s(T.uint32(16), P, T.uint32(16), bar[0])",
    "bulk s2g": "T.ptx.bulk_copy_s2g(P, T.uint32(16), T.uint32(16))",
    "cp.async": "T.ptx.cp_async_ca_4(T.uint32(16), P)",
}
SHARED_OPS = {
    "ld.shared::cluster": "T.evaluate(T.ptx.ld_shared_cluster_u32(T.uint32(ADDR)))",
    "st.shared::cluster": "T.ptx.st_shared_cluster_u32(T.uint32(ADDR), T.uint32(1))",
    "atom.shared": "T.evaluate(T.ptx.atom_shared_add_u32(T.uint32(ADDR), T.uint32(1)))",
    "stmatrix": "T.ptx.stmatrix_x1(T.uint32(ADDR), r[0])",
    "ldmatrix": "T.ptx.ldmatrix_x1(r[0], T.uint32(ADDR))",
    "bulk g2s": "T.ptx.bulk_copy_g2s(T.uint32(ADDR), T.address_of(A[0]), T.uint32(16), bar[0])",
    "cp.async": "T.ptx.cp_async_ca_4(T.uint32(ADDR), T.address_of(A[0]))",
    "clusterlaunchcontrol.try_cancel": "T.ptx.clusterlaunchcontrol_try_cancel(T.uint32(ADDR), bar[0])",
    "clusterlaunchcontrol.query_cancel": "T.evaluate(T.ptx.clusterlaunchcontrol_query_is_canceled(T.uint32(ADDR)))",
}


def _device_kernel(body):
    return T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((64,), "uint32")):
    T.launch(grid=(1,), threads=32)
    bar = T.alloc_shared((8,), "uint64")
    r = T.alloc_local((1,), "uint32")
    r[0] = T.uint32(0)
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
    T.ptx.syncthreads()
    if T.warp_id() == 0:
        {body}
''')


BAD_POINTERS = st.one_of(
    st.integers(0, (1 << 40) - 1).map(lambda v: f"T.uint64({v})"),                     # no tensor's tag
    # past A's end
    st.integers(64, 1 << 30).map(lambda i: f"T.cast(T.address_of(A[0]), \"uint64\") + T.uint64({4 * i})"),
    st.integers(2, 1000).map(lambda t: f"T.uint64({t << 40})"),                         # an unknown tensor tag
)
BAD_SHARED = st.one_of(st.integers(1 << 12, (1 << 31) - 1), st.integers(1, 127).map(lambda r: (1 << 31) | (r << 24)))


@SETTINGS
@given(op=st.sampled_from(sorted(GLOBAL_OPS)), ptr=BAD_POINTERS)
def test_bad_global_pointers_are_reported(op, ptr):
    k = _device_kernel(GLOBAL_OPS[op].replace("P", ptr))
    _expect(k, (np.zeros(64, np.uint32),), "oob_global")


@SETTINGS
@given(op=st.sampled_from(sorted(SHARED_OPS)), addr=BAD_SHARED)
def test_bad_shared_addresses_are_reported(op, addr):
    k = _device_kernel(SHARED_OPS[op].replace("ADDR", str(addr)))
    _expect(k, (np.zeros(64, np.uint32),), "oob_shared")


# ---------------------------------------------------------------- valid kernels vs numpy
@SETTINGS
@given(n=st.integers(1, 300), threads=st.sampled_from([32, 64, 96, 128, 256]), a=st.floats(-4, 4, width=32),
       seed=st.integers(0, 2 ** 16))
def test_axpy_matches_numpy(n, threads, a, seed):
    grid = -(-n // threads)

    @T.prim_func
    def k(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), s: T.float32):
        T.launch(grid=(grid,), threads=threads)
        i = T.cta_id(0) * threads + T.thread_id()
        if i < n:
            Y[i] = s * X[i] + Y[i]

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = np.float32(a) * x + y
    accept(A, lambda: (run(k, x, y.copy(), float(a), seed=seed % 7)[1]), lambda got: np.array_equal(got, want))


@SETTINGS
@given(dtype=st.sampled_from(["int32", "uint32", "int16", "float32", "float16", "bfloat16"]),
       rows=st.integers(1, 8), seed=st.integers(0, 2 ** 16))
def test_per_lane_loops_match_numpy(dtype, rows, seed):
    """Each lane sums a different number of rows (divergent loop trip counts), in the element type."""
    @T.prim_func
    def k(X: T.Tensor((rows, 32), dtype), Y: T.Tensor((32,), dtype)):
        T.launch(grid=(1,), threads=32)
        acc = T.alloc_local((1,), dtype)
        acc[0] = T.cast(0, dtype)
        for i in T.serial(T.lane_id() % (rows + 1)):
            acc[0] = acc[0] + X[i, T.lane_id()]
        Y[T.lane_id()] = acc[0]

    rng = np.random.default_rng(seed)
    if dtype == "bfloat16":
        xt = torch.randint(-8, 8, (rows, 32)).to(torch.bfloat16)
        x, y = xt, torch.zeros(32, dtype=torch.bfloat16)
        xs = xt.float().numpy()
    else:
        x = rng.integers(0 if dtype.startswith("uint") else -8, 8, (rows, 32)).astype(dtype)
        y = np.zeros(32, dtype)
        xs = x.astype(np.float64)
    want = np.array([xs[:l % (rows + 1), l].sum() for l in range(32)])
    accept(A, lambda: run(k, x, y)[1], lambda got: np.array_equal(np.asarray(got, np.float64), want))


@SETTINGS
@given(g=st.integers(1, 6), seed=st.integers(0, 100))
def test_grid_from_a_scalar_matches_numpy(g, seed):
    @T.prim_func
    def k(X: T.Tensor((4, 8), "int32"), Y: T.Tensor((6, 4, 8), "int32"), n: T.int32):
        T.launch(grid=(n,), threads=32)
        r = T.thread_id() // 8
        c = T.thread_id() % 8
        Y[T.cta_id(0), r, c] = X[r, c] * 2 + T.cta_id(0)

    x = np.arange(32, dtype=np.int32).reshape(4, 8)
    want = np.zeros((6, 4, 8), np.int32)
    for c in range(g):
        want[c] = x * 2 + c
    accept(A, lambda: run(k, x, np.zeros((6, 4, 8), np.int32), g, seed=seed)[1], lambda y: np.array_equal(y, want))


def test_spin_released_by_another_warp_finishes():
    @T.prim_func
    def k(F: T.Tensor((1,), "int32"), O: T.Tensor((64,), "int32")):
        T.launch(grid=(1,), threads=64)
        if T.warp_id() == 0:
            for i in T.serial(10):
                O[T.lane_id()] = O[T.lane_id()] + i
            F[0] = 1
        else:
            while F[0] == 0:
                T.evaluate(0)
            O[T.thread_id()] = 7

    for seed in range(5):
        accept(A, lambda: run(k, np.zeros(1, np.int32), np.zeros(64, np.int32), seed=seed)[1],
               lambda o: (o[:32] == 45).all() and (o[32:] == 7).all())


def test_report_error_is_typed():
    try:
        run(_spin("global", 1, "eq"), np.zeros(1, np.int32), np.zeros(1, np.int32))
    except SimReportError as e:
        assert e.kinds() == {"no_progress"}
    else:
        raise AssertionError("a spin loop on a flag nobody sets ran to completion")


@SETTINGS
@given(t=st.integers(0, 32), seed=st.integers(0, 20))
def test_warp_scope_user_intrinsic_under_divergence(t, seed):
    from tirxpy.intrinsics import register_intrinsic
    from tirxpy.sim import register_model

    register_intrinsic("fuzz_sim_wneg", "not.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                       ret="r", memory=False, scope="warp", replace=True)
    register_model("fuzz_sim_wneg", lambda ctx: ~ctx.arg("x"))
    k = T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor((32,), "uint32"), B: T.Tensor((32,), "uint32")):
    T.launch(grid=(1,), threads=32)
    if A[T.lane_id()] < T.uint32({t}):
        B[T.lane_id()] = T.ptx.fuzz_sim_wneg(A[T.lane_id()])
''')
    a = np.random.default_rng(seed).permutation(32).astype(np.uint32)
    if 0 < t < 32:
        _expect(k, (a, np.zeros(32, np.uint32)), "divergent_collective", seed=seed)
    else:
        want = np.where(a < t, ~a, 0).astype(np.uint32)
        accept(A, lambda: run(k, a, np.zeros(32, np.uint32), seed=seed)[1], lambda b: np.array_equal(b, want))


junk = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3),
                 st.integers(-2**70, 2**70), st.lists(st.integers(-40, 40), max_size=40), HOSTILE,
                 st.lists(HOSTILE, min_size=1, max_size=2))


@st.composite
def _warp_access(draw):
    """Distinct lanes of one warp with one byte offset each (aligned or not), or junk in any of the three."""
    lanes = draw(st.lists(st.integers(0, 31), max_size=32, unique=True))
    offsets = draw(st.lists(st.integers(0, 2**20), min_size=len(lanes), max_size=len(lanes)))
    return (draw(st.one_of(st.just(lanes), junk, st.lists(st.integers(-2, 33), max_size=34))),
            draw(st.one_of(st.just(offsets), junk)), draw(st.one_of(st.sampled_from([4, 8, 16]), junk)))


@SETTINGS
@given(case=_warp_access())
def test_bank_wavefronts_on_any_input(case):
    """``tirxpy.sim.banks.wavefronts``: a typed refusal, or a count between the ideal and 32 words a bank for
    every phase."""
    from tirxpy.sim.banks import wavefronts

    lanes, offsets, width = case

    def sane(v):
        got, ideal = v
        return 0 <= ideal <= got <= 32 * ideal and ideal <= 4

    refuse(A, lambda: wavefronts(lanes, offsets, width), names=["wavefronts"], allow=sane)


@SETTINGS
@given(stride=st.integers(min_value=2 ** 28, max_value=2 ** 60), rows=st.integers(2, 8))
def test_strided_tensors_reaching_past_the_limit_are_refused(stride, rows):
    """A tensor whose layout reaches far past its elements (rows ``stride`` elements apart) would need that reach held:
    past the simulator's limit it is refused with a typed error, within the memory cap, never allocated."""
    from tirxpy.layout import S, TileLayout

    lay = TileLayout(S[(rows, 8) : (stride, 1)])
    kern = T.parse_script(f'''
@T.prim_func
def k(A: T.Tensor(({rows}, 8), "float32", layout=LAY), B: T.Tensor(({rows}, 8), "float32")):
    T.launch(grid=(1,), threads=32)
    if T.thread_id() < 8:
        B[0, T.thread_id()] = A[0, T.thread_id()]
''', {"LAY": lay})
    refuse(A, lambda: run(kern, np.zeros((rows, 8), np.float32), np.zeros((rows, 8), np.float32)),
           names=["reaches", "parameter A"])
