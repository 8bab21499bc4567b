"""build(): pipeline, memoization, inspection, the host launch plan and its errors (CPU)."""
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tirxpy
import tirxpy.intrinsics  # noqa: F401
from tirxpy import T, Tx
from tirxpy.ir import Buffer
from tirxpy.layout import S, TileLayout
from tirxpy.lower import CodegenError, CompiledKernel, build
from tirxpy.lower.build import lower_primitives, tensor_strides
from tirxpy.lower.errors import LaunchError, ToolchainError


@T.prim_func
def saxpy(X: T.Tensor((4096,), "float32"), Y: T.Tensor((4096,), "float32"), a: T.float32, n: T.int32):
    T.launch(grid=(T.ceildiv(n, 256), 1), threads=256)
    i = T.cta_id(0) * 256 + T.thread_id()
    if i < n:
        Y[i] = a * X[i] + Y[i]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_build_inspect(arch):
    k = build(saxpy, arch)
    assert isinstance(k, CompiledKernel) and k.arch == arch and k.name == "saxpy"
    assert "Y[i] = a * X[i] + Y[i];" in k.cuda_source
    r = k.resources
    assert r.registers > 0 and r.spills == 0
    assert k.summary() == {"name": "saxpy", "arch": arch, "registers": r.registers, "spills": 0, "stack": 0,
                           "smem": 0, "threads": 256}
    assert f".target {arch}" in k.ptx
    assert repr(k).startswith(f"<CompiledKernel saxpy {arch}:")


def test_build_is_memoized_and_compile_alias(monkeypatch):
    import tirxpy.lower.nvrtc as nvrtc

    k1 = tirxpy.compile(saxpy, arch="sm_90a")

    def no_work(*a, **kw):
        raise AssertionError("a memoized build verified or compiled again")

    with monkeypatch.context() as m:      # a hit does no work (it used to be timed: < 2 ms)
        m.setattr(nvrtc, "compile_cuda", no_work)
        m.setattr(sys.modules["tirxpy.lower.build"], "verify", no_work)
        k2 = build(saxpy, "sm_90a")
    assert k1 is k2
    assert build(saxpy, "sm_90a", options=["-lineinfo"]) is not k1


def test_host_plan_specs_and_grid():
    k = build(saxpy, "sm_90a")
    assert [(s.name, s.kind, s.dtype, s.shape, s.strides) for s in k.specs] == [
        ("X", "tensor", "float32", (4096,), (1,)), ("Y", "tensor", "float32", (4096,), (1,)),
        ("a", "scalar", "float32", None, None), ("n", "scalar", "int32", None, None)]
    assert k._grid is None and k._grid_fn((None, None, 1.0, 1000)) == (4, 1, 1)


@T.prim_func
def tma_copy(A: T.Tensor((256, 64), "bfloat16"), n: T.int32):
    T.launch(grid=(n // 64,), threads=128)
    s = T.alloc_shared((64, 64), "bfloat16")
    bar = T.alloc_shared((1,), "uint64")
    if T.thread_id() == 0:
        T.ptx.tma_load_2d(s, A[T.cta_id(0) * 64:T.cta_id(0) * 64 + 64, 0:64], 0, 0, bar[0])


def test_call_appends_tensor_maps_and_evaluates_the_grid():
    k = build(tma_copy, "sm_90a")
    assert k.specs[-1].kind == "tensormap" and k.specs[-1].box == (64, 64) and k.specs[-1].swizzle == 0
    assert k.smem_bytes == 64 * 64 * 2 + 8
    seen = []
    k._launcher = lambda grid, block, args, **kw: seen.append((grid, args, kw["smem_bytes"]))
    try:
        k("A", 256)
    finally:
        k._launcher = None
    assert seen == [((4, 1, 1), ("A", 256, "A"), 8200)]


def test_tensor_strides_from_layouts():
    assert tensor_strides(Buffer("A", (4, 8), "float32")) == ((4, 8), (8, 1))
    assert tensor_strides(Buffer("B", (4, 8), "float32", layout=TileLayout(S[(4, 8) : (1, 4)]))) == ((4, 8), (1, 4))
    assert tensor_strides(Buffer("C", (4, 8), "float32", layout=TileLayout(S[(4, 8) : (16, 1)]))) == ((4, 8), (16, 1))
    odd = Buffer("D", (4, 8), "float32", layout=TileLayout(S[(2, 2, 8) : (8, 32, 1)]))
    assert tensor_strides(odd) == ((48,), (1,))  # rows split 2 x 2 with strides 8, 32: not one stride per dim


def test_wrapper_checks_argument_count_and_grid(monkeypatch):
    k = build(saxpy, "sm_90a")
    calls = []
    k._launcher = lambda grid, block, args, **kw: calls.append((grid, block, args, kw))
    try:
        k("x", "y", 2.0, 1000)
        assert calls == [((4, 1, 1), (256, 1, 1), ("x", "y", 2.0, 1000), {"smem_bytes": 0, "cluster": None, "pdl": False})]
        with pytest.raises(LaunchError, match=r"saxpy takes 4 arguments \(X, Y, a, n\), got 2"):
            k("x", "y")
        with pytest.raises(LaunchError, match=r"parameter 'n': expects an integer \(int32\), got str"):
            k("x", "y", 2.0, "many")
    finally:
        k._launcher = None


def test_grid_is_computed_from_numpy_and_torch_ints_and_refuses_non_ints():
    import numpy as np
    import torch

    k = build(saxpy, "sm_90a")
    calls = []
    k._launcher = lambda grid, block, args, **kw: calls.append(grid)
    try:
        for n in (np.int64(1000), np.int32(1000), torch.tensor(1000)):
            k("x", "y", 2.0, n)
        assert calls == [(4, 1, 1)] * 3
        for n, msg in ((1000.0, "got float"), (True, "got bool"), (2**40, "does not fit int32")):
            with pytest.raises(LaunchError, match=f"parameter 'n': .*{msg}"):
                k("x", "y", 2.0, n)
    finally:
        k._launcher = None


def test_build_errors():
    with pytest.raises(CodegenError, match=r"build\(\) takes a kernel \(a @T.prim_func\), got function"):
        build(lambda: None)

    @tirxpy.jit
    def factory(n):
        return saxpy

    with pytest.raises(CodegenError, match="call the @tirxpy.jit factory with its arguments first"):
        build(factory)


def test_sass_needs_a_disassembler(monkeypatch):
    B = sys.modules["tirxpy.lower.build"]

    k = build(saxpy, "sm_90a")
    monkeypatch.setattr(B, "find_disassembler", lambda: None)
    k._sass = None
    with pytest.raises(ToolchainError, match="no SASS disassembler found: put the CUDA toolkit's nvdisasm .*"
                                             "pip install nvidia-cuda-nvdisasm"):
        k.sass


def test_cuobjdump_without_nvdisasm_says_what_to_install(monkeypatch, tmp_path):
    """CUDA 13's ``cuobjdump -sass`` runs ``nvdisasm``; without it the error names what to install."""
    B = sys.modules["tirxpy.lower.build"]

    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\necho \"cuobjdump fatal   : Could not find executable file 'nvdisasm'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    k = build(saxpy, "sm_90a")
    monkeypatch.setattr(B, "find_disassembler", lambda: str(fake))
    k._sass = None
    with pytest.raises(ToolchainError, match="cuobjdump failed \\(1\\): .*nvdisasm.*pip install nvidia-cuda-nvdisasm"):
        k.sass


def test_nvdisasm_comes_before_cuobjdump(monkeypatch, tmp_path):
    """Where both are on PATH, nvdisasm is taken: it reads a cubin by itself."""
    B = sys.modules["tirxpy.lower.build"]

    for tool in ("cuobjdump", "nvdisasm"):
        (tmp_path / tool).write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert B.find_disassembler() == str(tmp_path / "nvdisasm")


@T.prim_func
def with_copy(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    T.launch(grid=(1,), threads=128)
    s = T.alloc_shared((128,), "float32")
    Tx.cta.copy(s, A)
    Tx.cta.copy(B, s)


def test_primitive_lowering_is_required(monkeypatch):
    import tirxpy.primitives as P

    monkeypatch.setattr(P, "lower_calls", lambda k, arch: k)
    with pytest.raises(CodegenError, match=r"test_build.py:\d+:\d+: error: Tx.cta.copy\(...\) is a tile primitive "
                                           r"that was not lowered"):
        lower_primitives(with_copy, "sm_90a")
    monkeypatch.setitem(sys.modules, "tirxpy.primitives", None)
    with pytest.raises(CodegenError, match=r"Tx.cta.copy\(...\) needs the tile-primitive lowering"):
        lower_primitives(with_copy, "sm_90a")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8]), min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_merged_strides_closed_form_agrees_with_enumeration(dims, rnd):
    """_merged_strides either declines (None) or returns exactly the strides an element-by-element
    walk of the layout finds; a row-major layout (split into factors or not) is always decided."""
    import numpy as np

    from tirxpy.layout import S, TileLayout
    from tirxpy.lower.build import _merged_strides

    shape = tuple(dims)
    extents = []
    for n in shape:                        # split each dimension into 1-2 factors
        f = rnd.choice([d for d in range(1, n + 1) if n % d == 0])
        extents += [n // f, f]
    dense = []
    acc = 1
    for e in reversed(extents):
        dense.append(acc)
        acc *= e
    dense = list(reversed(dense))
    strides = dense if rnd.random() < 0.5 else rnd.sample(dense, len(dense))   # row-major or permuted
    lay = TileLayout(S[tuple(extents) : tuple(strides)])
    got = _merged_strides(lay, shape)
    if strides == dense:
        assert got is not None
    if got is not None:
        table = lay.owner_table()[1][:, 0, 0]
        idx = np.indices(shape).reshape(len(shape), -1)
        assert np.array_equal(table, sum(idx[d] * (s or 0) for d, s in enumerate(got)))


# ---------------------------------------------------------------------- arguments before the GPU
def _on_cpu(k):
    """The kernel's argument checks with "cpu" as the device (CUDA tensors cannot exist without a GPU)."""
    from tirxpy.lower.runtime import ArgPacker

    k._checker = ArgPacker(k.specs, "cpu")
    return k


def _bad_calls():
    import torch

    x, y, big = torch.zeros(4096), torch.zeros(4096), torch.zeros(8192)
    return [
        ((x,), r"'args': saxpy takes 4 arguments \(X, Y, a, n\), got 1"),
        ((x, y, 1.0, 4096, 7), r"takes 4 arguments"),
        (("x", x, 1.0, 4096), r"'X': expects a torch.Tensor, got str"),
        ((x.double(), x, 1.0, 4096), r"'X': dtype is float64, the kernel expects float32"),
        ((x, torch.zeros(4095), 1.0, 4096), r"'Y': shape is \(4095,\), the kernel expects \(4096,\)"),
        ((torch.zeros(8192)[::2], x, 1.0, 4096), r"'X': strides are \(2,\), the kernel expects \(1,\)"),
        ((x.to_sparse(), x, 1.0, 4096), r"'X': is a sparse_coo tensor"),
        ((torch.zeros(4096, requires_grad=True), x, 1.0, 4096), r"'X': tensor requires grad"),
        ((x, y, 1e300, 4096), r"'a': value 1e\+300 does not fit float32"),
        ((x, y, "a", 4096), r"'a': expects a number \(float32\), got str"),
        ((x, y, 1.0, 2**40), r"'n': value 1099511627776 does not fit int32"),
        ((x, y, 1.0, 4.5), r"'n': expects an integer \(int32\), got float"),
        ((x, y, 1.0, 0), r"'grid': the arguments give grid extent 0 in dimension x, outside \[1, 2147483647\]"),
        ((x, y, 1.0, -300), r"grid extent -1 in dimension x"),
        # Y is written: it may share no memory with X (the same tensor, or a view of X's storage)
        ((x, x, 1.0, 4096), r"'Y': shares memory with parameter 'X', which the kernel reads while it writes 'Y'"),
        ((big[:4096], big[2048:6144], 1.0, 4096), r"'Y': shares memory with parameter 'X'"),
    ]


def test_wrong_arguments_are_reported_before_the_missing_gpu():
    import torch

    from tirxpy.lower.errors import DriverError

    k = build(saxpy, "sm_90a")
    x, y = torch.zeros(4096), torch.zeros(4096)
    if torch.cuda.is_available():
        pytest.skip("checks the order of errors where no GPU exists")
    with pytest.raises(LaunchError, match=r"'X': tensor is on cpu, the kernel runs on cuda:0"):
        k(x, x, 1.0, 4096)          # the real device check: a CPU tensor
    with pytest.raises(LaunchError, match=r"'X': tensor is on cpu"):
        k.bind(x, x, 1.0, 4096)
    _on_cpu(k)
    try:
        for args, msg in _bad_calls():
            with pytest.raises(LaunchError, match=msg):
                k(*args)
        with torch.no_grad():       # under no_grad a tensor that requires grad is fine
            with pytest.raises(DriverError, match="no CUDA GPU is available"):
                k(torch.zeros(4096, requires_grad=True), y, 1.0, 4096)
        with pytest.raises(DriverError, match="no CUDA GPU is available"):
            k(x, y, 1.0, 4096)      # right arguments: now the missing GPU
        assert k.check(x, y, 2.0, 1000) == (4, 1, 1)
    finally:
        k._checker = None


def test_dynamic_grid_must_be_a_multiple_of_the_cluster():
    from tirxpy.lower.build import check_grid

    check_grid((4, 1, 1), (2, 1, 1))
    with pytest.raises(LaunchError, match="grid extent 3 in dimension x, not a multiple of the cluster extent 2"):
        check_grid((3, 1, 1), (2, 1, 1))
    with pytest.raises(LaunchError, match=r"grid extent 65536 in dimension y, outside \[1, 65535\]"):
        check_grid((1, 65536, 1))


@pytest.mark.parametrize("arch", ["sm_91", 90, "sm_90a\n", "sm_101a", "SM_90A", None, ["sm_90a"]])
def test_build_refuses_targets_nvrtc_cannot_compile_for(arch):
    from tirxpy.intrinsics.errors import TargetError

    with pytest.raises(TargetError, match=r"unknown target .*sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100a"):
        build(saxpy, arch)


@pytest.mark.parametrize("options, msg", [
    ("-lineinfo", r"options= takes a list of NVRTC option strings, got str"),
    (["--no-such-option"], r"unknown or unsupported NVRTC option '--no-such-option'; valid: -lineinfo"),
    (["--gpu-architecture=sm_80"], r"the target is build\(..., arch=...\)"),
    ([5], r"NVRTC option 5 is not an option string"),
    (["lineinfo"], r"NVRTC option 'lineinfo' is not an option string"),
])
def test_build_refuses_unknown_options(options, msg):
    from tirxpy.lower.errors import CompileOptionError

    with pytest.raises(CompileOptionError, match=msg):
        build(saxpy, "sm_90a", options=options)


def test_build_takes_listed_options():
    k = build(saxpy, "sm_90a", options=("-lineinfo", "--maxrregcount=64", "-DUNUSED=1"))
    assert k.options == ("-lineinfo", "--maxrregcount=64", "-DUNUSED=1") and k.resources.registers <= 64


# ---------------------------------------------------------------------- compile errors name the intrinsic and line
def _kernel_calling(entry):
    @T.prim_func
    def k(A: T.Tensor((128,), "uint32"), B: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        i = T.thread_id()
        B[i] = entry(A[i])
    return k


def test_ptxas_error_names_the_intrinsic_and_the_kernel_line():
    from tirxpy.intrinsics import register_intrinsic
    from tirxpy.lower.errors import CompileError

    bad = register_intrinsic("t_bad_ptx_b99", "popc.b99 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                             ret="r", memory=False, replace=True)
    with pytest.raises(CompileError) as e:
        build(_kernel_calling(bad), "sm_90a")
    msg = str(e.value)
    assert "intrinsic t_bad_ptx_b99 does not compile for sm_90a" in msg and "B[i] = entry(A[i])" in msg
    assert "Unknown modifier '.b99'" in msg and e.value.intrinsic == "t_bad_ptx_b99"
    assert e.value.span.file == __file__


def test_front_end_error_in_a_helper_names_the_intrinsic():
    from tirxpy.intrinsics import register_intrinsic
    from tirxpy.lower.errors import CompileError

    bad = register_intrinsic("t_bad_cxx", "add.u32 {r}, {x}, 1;", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                             ret="r", memory=False, cxx="{x} + undeclared_name", replace=True)
    with pytest.raises(CompileError) as e:
        build(_kernel_calling(bad), "sm_90a")
    assert "intrinsic t_bad_cxx does not compile for sm_90a" in str(e.value) and "B[i] = entry(A[i])" in str(e.value)
    assert "undeclared_name" in str(e.value)


def test_locate_maps_generated_lines_to_statements():
    from tirxpy.lower.locate import locate

    unit = build(saxpy, "sm_90a").unit
    line, stmt = next(iter(sorted(unit.origins.items())))
    assert stmt.span is not None and stmt.span.file == __file__
    assert locate(unit, f"k.cu({line}): error: something") == (None, stmt)
    assert locate(unit, "no line here") == (None, None)


def test_build_parses_the_target_once_and_passes_the_object_down(monkeypatch):
    from tirxpy.target import Target, as_target

    build_mod = sys.modules["tirxpy.lower.build"]

    seen = {}
    real_verify, real_generate = build_mod.verify, build_mod.generate
    monkeypatch.setattr(build_mod, "verify", lambda k, t: seen.setdefault("verify", t) and real_verify(k, t))
    monkeypatch.setattr(build_mod, "generate", lambda k, t: seen.setdefault("generate", t) and real_generate(k, t))
    ck = build(saxpy.__class__(saxpy.name, saxpy.params, saxpy.launch, saxpy.body), "sm_90a")
    assert ck.arch == "sm_90a"
    assert seen["verify"] is seen["generate"] is as_target("sm_90a") and isinstance(seen["verify"], Target)


def test_a_kernel_over_the_targets_shared_memory_fails_at_verify_not_at_launch():
    from tirxpy.ir import VerifyError

    k = T.parse_script('''
@T.prim_func
def big(A: T.Tensor((128,), "float32")):
    T.launch(grid=(1,), threads=128)
    s = T.alloc_shared((51200,), "float32")
    A[T.thread_id()] = T.float32(0.0)
''')
    with pytest.raises(VerifyError, match=r"204800 bytes by s, over the 101376 B \(99 KB\) per-CTA limit on sm_86"):
        build(k, "sm_86")


def test_setmaxnreg_ignored_by_ptxas_is_built_again_with_the_register_count_pinned():
    """A setmaxnreg kernel whose own register count comes out below its launch bound has no fixed count at entry,
    and ptxas drops its setmaxnreg (C7508); build generates it again with one CTA per SM declared, and the remark
    is gone."""
    from tests.lower.codegen.test_kernel import roles as few_registers_with_roles      # a few registers, setmaxnreg
    from tirxpy.lower.codegen.kernel import generate
    from tirxpy.lower.nvrtc import compile_cuda

    plain = generate(few_registers_with_roles, "sm_90a")
    remarks = compile_cuda(plain.source, "sm_90a").resources_of(plain.name).perf_warnings
    assert any(r.startswith("(C7508)") for r in remarks)        # the case this guards against
    k = build(few_registers_with_roles, "sm_90a")
    assert k.unit.pinned and "__launch_bounds__(256, 1)" in k.cuda_source
    assert not any(r.startswith("(C7508)") for r in k.resources.perf_warnings)
    assert not build(saxpy, "sm_90a").unit.pinned
