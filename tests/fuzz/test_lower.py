"""Fuzz cases for compiling and launching: the disk cache, register_intrinsic / arch / options, launch
configurations (T.launch and a compiled kernel's arguments) and allocation sizes."""
import os

import pytest
import torch
from harness import EXAMPLES, HOSTILE, Hostile, UnprintableInt, accept, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirxpy
from tirxpy import T
from tirxpy.intrinsics import Intrinsic, register_intrinsic
from tirxpy.lower import cache as C
from tirxpy.lower.nvrtc import compile_cuda
from tirxpy.lower.runtime import ArgPacker

SRC = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = %d; }'
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---------------------------------------------------------------------- disk cache
@pytest.fixture
def cdir(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRXPY_CACHE_DIR", str(tmp_path))
    C.clear_memory()
    yield tmp_path
    C.clear_memory()


def _entry(src):
    from tirxpy.lower import nvrtc

    key = C.make_key(src, nvrtc.key_options(nvrtc.build_options("sm_80")), (), False, nvrtc.nvrtc_version())
    return key, os.path.join(C.cache_dir(), key[:2], key + ".cubin")


def _plant_and_compile(src, plant):
    """Plant something at ``src``'s entry, then compile: the answer must be a fresh compile's cubin."""
    want = compile_cuda(src, "sm_80", cache=False).cubin
    key, path = _entry(src)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    plant(path)
    C.clear_memory()
    return lambda: compile_cuda(src, "sm_80"), lambda m: m.cubin == want and m.cached is None


def _sparse(path):
    with open(path, "wb") as f:
        f.truncate(12 << 30)


def _encoded(src) -> bytearray:
    """A valid entry for ``src`` (what the cache writes)."""
    return bytearray(C._encode(_entry(src)[0], compile_cuda(src, "sm_80", cache=False)))


def _write(data):
    def plant(path):
        with open(path, "wb") as f:
            f.write(bytes(data))
    return plant


def _flipped(src, at):
    data = _encoded(src)
    data[at] ^= 0x5A
    return _write(data)


_HEAD = len(C._MAGIC)
_HOSTILE = [
    ("fifo", lambda src: os.mkfifo), ("symlink to /dev/zero", lambda src: lambda p: os.symlink("/dev/zero", p)),
    ("dangling symlink", lambda src: lambda p: os.symlink("/nonexistent/tirxpy", p)),
    ("12 GB sparse file", lambda src: _sparse), ("empty file", lambda src: _write(b"")),
    ("swapped entry", lambda src: _write(_encoded(SRC % 999))),
    ("corrupted digest", lambda src: _flipped(src, _HEAD + 1)), ("corrupted key", lambda src: _flipped(src, _HEAD + 33)),
    ("corrupted payload", lambda src: _flipped(src, -1)),
    ("truncated", lambda src: _write(_encoded(src)[:200])),
]


@pytest.mark.parametrize("k", range(len(_HOSTILE)), ids=[h[0] for h in _HOSTILE])
def test_hostile_cache_entries_recompile(cdir, k):
    src = SRC % (900 + k)
    fn, check = _plant_and_compile(src, _HOSTILE[k][1](src))
    accept("disk cache", fn, check, seconds=20)


@FUZZ
@given(data=st.binary(max_size=400), keep_header=st.booleans())
def test_random_entry_bytes_are_never_read_back(cdir, data, keep_header):
    key, path = _entry(SRC % 950)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    head = (C._MAGIC + bytes(32) + key.encode()) if keep_header else b""
    with open(path, "wb") as f:
        f.write(head + data)
    C.clear_memory()
    refuse("disk cache", lambda: C.get(key), allow=lambda v: v is None)


@pytest.mark.parametrize("value", ["", "  ", "~nosuchuser_tirxpy/x", "$TIRXPY_FUZZ_UNSET/x", "${TIRXPY_FUZZ_UNSET}",
                                   "a\x00b"])
def test_bad_cache_dir_values(monkeypatch, value):
    monkeypatch.delenv("TIRXPY_FUZZ_UNSET", raising=False)
    if "\x00" in value:
        monkeypatch.setattr(os, "environ", {**os.environ, "TIRXPY_CACHE_DIR": value})
    else:
        monkeypatch.setenv("TIRXPY_CACHE_DIR", value)
    refuse("disk cache", C.cache_dir, names=["TIRXPY_CACHE_DIR"])


@FUZZ
@given(key=st.one_of(st.text(max_size=80), st.integers(), st.none(), st.binary(max_size=64), HOSTILE))
def test_malformed_cache_keys(key):
    refuse("disk cache", lambda: C.get(key), names=["cache key"])


# ---------------------------------------------------------------------- register_intrinsic, arch, options
_ODD = [None, 5, -1, 1.5, True, "", " ", "x y", "int", "class", "sm_91", "sm_100a", "sm_80", "grid", "thread",
        ["reg"], {"a": 1}, ("r",), b"r", 10**9, float("nan"), "r", "x", "w", "rw", "imm", "pred", "uint32", "reg"]
_FIELDS = ["operand", "template", "name", "ret", "scope", "lowest", "highest", "checks", "memory", "keyword",
           "replace", "doc", "cxx", "modifiers", "why_highest", "ptx=", "already exists"]


@st.composite
def _registration(draw):
    odd = st.one_of(st.sampled_from(_ODD), HOSTILE)     # (sampled_from hashes its values)
    name = draw(st.one_of(odd, st.text(max_size=12), st.just("fz_ok")))
    template = draw(st.one_of(odd, st.text(max_size=30), st.text(st.characters(blacklist_categories=()), max_size=30),
                              st.sampled_from(["popc.b32 {r}, {x};", "trap;", "x {y};", "@p", "@!p ;", "trap; \u00e9"])))
    op = st.one_of(odd, st.tuples(odd, odd), st.tuples(odd, odd, odd, odd, odd),
                   st.dictionaries(st.sampled_from(["name", "kind", "dtype", "access", "count", "values", "align",
                                                    "bad"]), st.one_of(odd, st.sampled_from([16, 3, 512, 0, "gmem_ptr",
                                                                                             "smem_addr"])),
                                   max_size=4))
    operands = draw(st.one_of(odd, st.lists(op, max_size=4)))
    kw = draw(st.dictionaries(st.sampled_from(["ret", "lowest", "highest", "scope", "checks", "memory", "doc", "cxx",
                                               "modifiers", "colour"]), odd, max_size=3))
    return name, template, operands, kw


@FUZZ
@given(_registration())
def test_random_register_intrinsic_specs(spec):
    name, template, operands, kw = spec
    refuse("register_intrinsic, arch, options", lambda: register_intrinsic(name, template, operands, replace=False, **kw),
           names=_FIELDS, allow=lambda v: isinstance(v, Intrinsic))


def test_register_intrinsic_fields_holding_a_hostile_value_are_named():
    for field in ("doc", "cxx", "why_highest", "checks", "modifiers", "ret", "lowest", "highest", "scope", "memory"):
        refuse("register_intrinsic, arch, options",
               lambda: register_intrinsic("fz_hostile", "trap;", [], replace=True, **{field: Hostile()}), names=[field])
    refuse("register_intrinsic, arch, options", lambda: register_intrinsic("fz_hostile", "trap;", Hostile()),
           names=["operands"])


@FUZZ
@given(arch=st.one_of(st.text(max_size=10), st.integers(), st.sampled_from(["sm_91", "sm_9", "sm_101a", "sm_90a ",
                                                                          "compute_90", "sm_70", "SM_90A"]),
                         HOSTILE))
def test_random_arch_strings(arch):
    from tirxpy.intrinsics.target import SUPPORTED_ARCHS

    refuse("register_intrinsic, arch, options", lambda: tirxpy.compile(_saxpy(), arch=arch), names=["target"],
           allow=lambda k: isinstance(arch, str) and arch in SUPPORTED_ARCHS, seconds=20)


@pytest.mark.parametrize("options", ["-lineinfo", ["--foo"], ["-arch=sm_80"], ["--gpu-architecture=sm_80"], [None],
                                     [b"-lineinfo"], {"-lineinfo": 1}, ["-I"], ["-D"], Hostile(), [Hostile()]],
                         ids=lambda v: type(v).__name__)
def test_bad_options(options):
    refuse("register_intrinsic, arch, options", lambda: tirxpy.compile(_saxpy(), arch="sm_90a", options=options),
           names=["option"])


# ---------------------------------------------------------------------- launch config
def _launch_src(launch):
    return f'@T.prim_func\ndef k(A: T.Tensor((128,), "float32")):\n    T.launch({launch})\n    A[0] = T.float32(1)\n'


def _launch_ok(grid, threads, cluster):
    if not all(isinstance(g, int) and not isinstance(g, bool) for g in grid):
        return False
    if not (1 <= threads <= 1024 and all(1 <= g <= hi for g, hi in zip(grid, (2**31 - 1, 65535, 65535)))):
        return False
    if cluster is None:
        return True
    c = tuple(cluster) + (1,) * (3 - len(cluster))
    g = tuple(grid) + (1,) * (3 - len(grid))
    n = c[0] * c[1] * c[2]
    return all(x >= 1 for x in c) and n <= 16 and all(a % b == 0 for a, b in zip(g, c))


_EXT = st.one_of(st.integers(-3, 40), st.sampled_from([2**31 - 1, 2**31, 2**40, 65535, 65536, 0]))


@FUZZ
@given(grid=st.lists(_EXT, min_size=1, max_size=3), threads=st.sampled_from([0, 1, 32, 128, 1024, 1025, -1]),
       cluster=st.one_of(st.none(), st.lists(st.integers(-2, 17), min_size=1, max_size=3)))
def test_random_launch_configs(grid, threads, cluster):
    launch = f"grid={tuple(grid)}, threads={threads}" + ("" if cluster is None else f", cluster={tuple(cluster)}")
    refuse("launch config", lambda: T.parse_script(_launch_src(launch)),
           names=["grid", "cluster", "threads", "T.launch"], allow=lambda k: _launch_ok(grid, threads, cluster))


@pytest.mark.parametrize("launch", ["grid=(4,), threads=128, cluster=(0,)", "grid=(4,), threads=128, cluster=(-2,)",
                                    "grid=(3,), threads=128, cluster=(2,)", "grid=(2**40,), threads=128",
                                    "grid=(1, 65536), threads=128", "grid=(1,), threads=128, smem=-1",
                                    "grid=(1,), threads=128, smem=232449", "grid=(4.0,), threads=128",
                                    "grid=(4,), threads=128.0", "grid=(64,), threads=128, cluster=(32,)"])
def test_bad_launch_configs(launch):
    refuse("launch config", lambda: T.parse_script(_launch_src(launch)), names=["grid", "cluster", "threads", "smem"])


def test_launch_configs_at_the_limits():
    for launch in ["grid=(2**31 - 1, 65535, 65535), threads=1024", "grid=(16,), threads=128, cluster=(16,)",
                   "grid=(1,), threads=1, smem=232448"]:
        accept("launch config", lambda: T.parse_script(_launch_src(launch)), lambda k: k.launch.threads >= 1)


_ALIAS_NAME = st.sampled_from(["A", "B", "n", "C", "", "A ", 3, None, b"A"])


@FUZZ
@given(pairs=st.one_of(st.lists(st.one_of(st.tuples(_ALIAS_NAME, _ALIAS_NAME), st.lists(_ALIAS_NAME, max_size=3),
                                          _ALIAS_NAME), max_size=3),
                       _ALIAS_NAME))
def test_random_may_alias(pairs):
    """``T.launch(may_alias=...)``: pairs of two different tensor parameter names are taken (sorted), anything
    else refused naming may_alias or the name."""
    src = ('@T.prim_func\ndef k(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32"), n: T.int32):\n'
           f"    T.launch(grid=(1,), threads=32, may_alias={pairs!r})\n    A[0] = B[1]\n")

    def ok(k):
        return all(isinstance(pr, (tuple, list)) and len(pr) == 2 and pr[0] != pr[1] and set(pr) <= {"A", "B"}
                   for pr in pairs) and isinstance(pairs, list) and k.launch.may_alias == tuple(
                       sorted({tuple(sorted(pr)) for pr in pairs}))

    refuse("launch config", lambda: T.parse_script(src), names=["may_alias", "tensor parameter"], allow=ok)


_SAXPY = []


def _saxpy():
    if not _SAXPY:
        @T.prim_func
        def saxpy(X: T.Tensor((4096,), "float32"), Y: T.Tensor((4096,), "float32"), a: T.float32, n: T.int32):
            T.launch(grid=(T.ceildiv(n, 256), 1), threads=256)
            i = T.cta_id(0) * 256 + T.thread_id()
            Y[i] = X[i] * a
        _SAXPY.append(saxpy)
    return _SAXPY[0]


@pytest.fixture(scope="module")
def kernel():
    return tirxpy.compile(_saxpy(), arch="sm_90a")


_BAD_TENSORS = [
    lambda: torch.zeros(4096, dtype=torch.float64), lambda: torch.zeros(4095), lambda: torch.zeros(8192)[::2],
    lambda: torch.zeros(64, 64), lambda: torch.zeros(4096).to_sparse(), lambda: torch.zeros(4096, requires_grad=True),
    lambda: "x", lambda: None, lambda: 3.0, lambda: torch.zeros(4096, device="meta"), lambda: [0.0] * 4096,
    lambda: __import__("numpy").zeros(4096, dtype="float32"), Hostile,
]
_BAD_SCALARS = [1e300, "a", None, [1], torch.zeros(3), __import__("numpy").arange(3), 1j, Hostile()]
_BAD_N = [0, -5, 2**40, 2**31, 4.5, "n", None, True, torch.zeros(2), Hostile(), UnprintableInt(2**40)]


@FUZZ
@given(slot=st.integers(0, 3), pick=st.integers(0, 100), extra=st.integers(-2, 1))
def test_random_bad_kernel_arguments(kernel, slot, pick, extra):
    kernel._checker = ArgPacker(kernel.specs, "cpu")      # CUDA tensors cannot exist without a GPU
    try:
        args = [torch.zeros(4096), torch.zeros(4096), 1.0, 4096]
        pool = _BAD_TENSORS if slot < 2 else _BAD_SCALARS if slot == 2 else _BAD_N
        bad = pool[pick % len(pool)]
        args[slot] = bad() if callable(bad) else bad
        if extra:
            args = args[:4 + extra] if extra < 0 else args + [0]
        refuse("launch config", lambda: kernel(*args), names=["parameter"])
    finally:
        kernel._checker = None


def test_hostile_and_unprintable_scalars_are_refused(kernel):
    """Each scalar slot with a Hostile, and the int slot with ints out of int32 whose own formatting raises."""
    kernel._checker = ArgPacker(kernel.specs, "cpu")
    try:
        for slot, bad in ((2, Hostile()), (3, Hostile()), (3, UnprintableInt(2**40)), (3, UnprintableInt(-2**40))):
            args = [torch.zeros(4096), torch.zeros(4096), 1.0, 4096]
            args[slot] = bad
            refuse("launch config", lambda: kernel(*args), names=["parameter"])
    finally:
        kernel._checker = None


@pytest.mark.parametrize("args", [
    (), (torch.zeros(4096),), (torch.zeros(4096), torch.zeros(4096), 1.0, 4096),      # last: a CPU tensor
    (torch.zeros(4096, dtype=torch.float16), torch.zeros(4096), 1.0, 4096),
    (torch.zeros(4096).to_sparse(), torch.zeros(4096), 1.0, 4096),
])
def test_bad_kernel_arguments_without_a_gpu(kernel, args):
    if torch.cuda.is_available():
        pytest.skip("the order of errors where no GPU exists")
    refuse("launch config", lambda: kernel(*args), names=["parameter"])


# ---------------------------------------------------------------------- allocations
_LIMITS = {"shared": 232448, "tmem": 512}
_BITS = {"float32": 32, "float16": 16, "int8": 8, "float64": 64}


def _alloc_ok(shape, dtype, scope):
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape):
        return False
    size = 1
    for n in shape:
        size *= n
    if scope == "shared":
        return size * _BITS[dtype] // 8 <= 232448
    return -(-size * _BITS[dtype] // 32) <= 255


_DIM = st.one_of(st.integers(-2, 300), st.sampled_from([2**28, 2**31, 2**40, 2**70, 58112, 58113, 1.0, 2.5, True]))


@FUZZ
@given(shape=st.lists(_DIM, min_size=1, max_size=4), dtype=st.sampled_from(sorted(_BITS)),
       scope=st.sampled_from(["shared", "local"]))
def test_random_allocation_shapes(shape, dtype, scope):
    fn = "T.alloc_shared" if scope == "shared" else "T.alloc_local"
    src = _launch_src("grid=(1,), threads=128").replace("    A[0]", f"    x = {fn}({tuple(shape)}, \"{dtype}\")\n    A[0]")
    refuse("allocations", lambda: T.parse_script(src), names=["shape", "extent", "limit", "dimension"],
           allow=lambda k: _alloc_ok(shape, dtype, scope))


@pytest.mark.parametrize("alloc", ['T.alloc_local((2**31,), "float32")', 'T.alloc_shared((2**28,), "float32")',
                                   'T.alloc_shared((2**62,), "int8")', 'T.alloc_tmem((128, 2**20), "float32")',
                                   'T.alloc_local((1,) * 100, "float32")', 'T.alloc_shared((3, 2**40), "float16")'])
def test_bad_allocations(alloc):
    src = _launch_src("grid=(1,), threads=128").replace("    A[0]", f"    x = {alloc}\n    A[0]")
    refuse("allocations", lambda: T.parse_script(src), names=["limit", "dimensions", "TCol", "elements"], seconds=3)


@pytest.mark.parametrize("alloc", ['T.alloc_shared((58112,), "float32")', 'T.alloc_shared((232448,), "int8")',
                                   'T.alloc_local((255,), "float32")', 'T.alloc_tmem((128, 512), "float32")'])
def test_allocations_at_the_limit(alloc):
    src = _launch_src("grid=(1,), threads=128").replace("    A[0]", f"    x = {alloc}\n    A[0]")
    accept("allocations", lambda: T.parse_script(src), lambda k: k.body is not None)
