import warnings

import pytest

from tirxpy.intrinsics import TargetError
from tirxpy.lower.errors import CompileError
from tirxpy.lower.nvrtc import compile_cuda, nvrtc_version, parse_ptxas_log

SRC = r'''
#include <cuda_bf16.h>
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void k_smem(float* x) { __shared__ float s[256]; s[threadIdx.x] = x[threadIdx.x];
  __syncthreads(); x[threadIdx.x] = s[255 - threadIdx.x]; }
template <int N> __global__ void k_tmpl(__nv_bfloat16* x, const __grid_constant__ CUtensorMap tm) {
  x[threadIdx.x] = __float2bfloat16((float)N + (float)tm.opaque[0]); }
'''


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_compiles_for_each_target(arch):
    mod = compile_cuda(SRC, arch, name_expressions=["k_tmpl<4>"], cache=False)
    assert mod.cubin[:4] == b"\x7fELF"
    low = mod.kernel_name("k_tmpl<4>")
    assert low.startswith("_Z") and low in mod.resources
    r = mod.resources_of("k_smem")
    assert r.static_smem == 1024 and r.registers > 0 and r.spills == 0 and r.barriers == 1
    assert mod.ptx is None and mod.cached is None


def test_ptx_on_request():
    mod = compile_cuda(SRC, "sm_90a", emit_ptx=True, cache=False)
    assert ".target sm_90a" in mod.ptx and ".entry k_smem" in mod.ptx


def test_compile_error_carries_log():
    with pytest.raises(CompileError, match="NVRTC could not compile .* for sm_90a") as ei:
        compile_cuda('extern "C" __global__ void k() { undefined_thing(); }', "sm_90a", cache=False)
    assert "undefined_thing" in ei.value.log and "undefined_thing" in str(ei.value)


def test_bad_arch_and_source():
    with pytest.raises(TargetError, match="unknown target"):
        compile_cuda("", "sm_90x")
    with pytest.raises(TypeError, match="source must be a str"):
        compile_cuda(b"x", "sm_90a")


def test_unknown_kernel_resources():
    mod = compile_cuda(SRC, "sm_80")
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        mod.resources_of("nope")


def test_parse_ptxas_log_spills():
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
"""
    r = parse_ptxas_log(log)["k"]
    assert (r.registers, r.barriers, r.static_smem, r.stack_bytes, r.spill_stores, r.spill_loads) == (255, 1, 2048, 24, 8, 12)
    assert r.spills == 20


def test_parse_ptxas_log_performance_remarks():
    # the line ptxas 13.0 printed for a kernel whose wgmmas it serialized
    log = """ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma \
instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'k'
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Used 32 registers
"""
    res = parse_ptxas_log(log)
    (remark,) = res["k"].perf_warnings
    assert remark.startswith("(C7515) wgmma.mma_async instructions are serialized due to non wgmma instructions")
    assert res["k"].registers == 168 and res["other"].perf_warnings == ()


def test_parse_ptxas_log_remark_without_a_function_goes_to_the_entries():
    # ptxas 13.0 prints this before the entry when a kernel's register count at entry is not pinned
    log = """ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Used 168 registers, used 16 barriers
"""
    (remark,) = parse_ptxas_log(log)["k"].perf_warnings
    assert remark == "(C7508) 'setmaxnreg' ignored; unable to determine register count at entry."


def test_build_warns_on_performance_remarks():
    from types import SimpleNamespace

    from tirxpy.lower.build import _warn_performance
    from tirxpy.lower.errors import PerformanceWarning
    from tirxpy.lower.nvrtc import KernelResources

    ck = SimpleNamespace(name="k", resources=KernelResources("k", perf_warnings=("(C7515) wgmma.mma_async "
                                                                                 "instructions are serialized",)))
    with pytest.warns(PerformanceWarning, match=r"k: ptxas: \(C7515\) wgmma.mma_async instructions are serialized "
                                                r".*ptxas waits after every wgmma"):
        _warn_performance(ck)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_performance(SimpleNamespace(name="k", resources=KernelResources("k")))   # no remark, no warning


def test_version():
    assert nvrtc_version()[0] >= 12


def test_parse_ptxas_log_injected_wait_is_a_remark():
    # the note ptxas 13.0 printed for the attention backward kernel before its dQ staging was changed
    log = """ptxas info    : (C7517) warpgroup.wait is injected in around line 425 by compiler to allow use of registers \
defined by GMMA in function 'k'
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Used 168 registers, used 16 barriers
"""
    (remark,) = parse_ptxas_log(log)["k"].perf_warnings
    assert remark == ("(C7517) warpgroup.wait is injected in around line 425 by compiler to allow use of registers "
                      "defined by GMMA")


def _wgmma(acc):
    regs = ", ".join(f"%{i}" for i in range(32))
    outs = ", ".join(f'"+f"({acc}[{i}])' for i in range(32))
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %34, 0;\\n'
            f'wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{{regs}}}, %32, %33, p, 1, 1, 0, 0;\\n}}\\n"'
            f' : {outs} : "l"(da), "l"(db), "r"(0) : "memory");')


def test_a_read_of_a_wgmma_accumulator_under_another_wgmma_is_reported():
    """A loop that stores accumulator ``a`` (written by the previous iteration's wgmma) while the wgmma into ``b``
    is in flight: ptxas waits for ``b`` first and says so (C7517), and the remark reaches ``perf_warnings``."""
    src = f"""
extern "C" __global__ void __launch_bounds__(128, 1) k(float* out, unsigned long long da, unsigned long long db, int n) {{
  float a[32], b[32];
  for (int t = 0; t < n; ++t) {{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    {_wgmma("b")}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    if (t > 0) {{
      for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = a[i];
    }}
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    {_wgmma("a")}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }}
}}
"""
    remarks = compile_cuda(src, "sm_90a", cache=False).resources_of("k").perf_warnings
    assert any(r.startswith("(C7517) warpgroup.wait is injected") for r in remarks), remarks


def test_an_injected_wait_warns_with_what_to_look_at():
    from types import SimpleNamespace

    from tirxpy.lower.build import _warn_performance
    from tirxpy.lower.errors import PerformanceWarning
    from tirxpy.lower.nvrtc import KernelResources

    remark = "(C7517) warpgroup.wait is injected in around line 425 by compiler to allow use of registers defined by GMMA"
    ck = SimpleNamespace(name="k", resources=KernelResources("k", perf_warnings=(remark,)))
    with pytest.warns(PerformanceWarning, match=r"k: ptxas: \(C7517\) .* line is the PTX's .*plain definition"):
        _warn_performance(ck)


def test_each_program_has_a_name_of_its_own_so_a_twin_still_logs(monkeypatch):
    """NVRTC 13.0 can hand back an earlier program's cubin, with an empty log, for a program of the same name and
    the same code comments aside; then the registers and ptxas remarks (C7508, which decides the register pin) would
    be missing. Each program gets a name of its own, and both twins here report their resources."""
    from tirxpy.lower import nvrtc as tn

    lib = tn._nvrtc()
    names = []

    def create(src, name, *rest):
        names.append(name)
        return real(src, name, *rest)

    real = lib.nvrtcCreateProgram
    monkeypatch.setattr(lib, "nvrtcCreateProgram", create)
    a = compile_cuda(SRC, "sm_90a", cache=False)
    b = compile_cuda("// the same kernels, another comment\n" + SRC, "sm_90a", cache=False)
    assert len(names) == 2 and names[0] != names[1]
    assert a.resources_of("k_smem").registers > 0 and b.resources_of("k_smem").registers > 0


@pytest.mark.parametrize("log,compiles", [("", 2), ("ptxas info    : Used 8 registers", 1)])
def test_a_cached_module_without_a_log_is_compiled_again(monkeypatch, log, compiles):
    """A cache entry whose ptxas log is empty came from a compile NVRTC did not log (its register pin could not be
    decided from it): :func:`compile_cuda` compiles such an entry again and stores the new module; an entry with a log
    is returned as it is."""
    from tirxpy.lower import nvrtc as tn

    store, calls = {}, []
    monkeypatch.setattr(tn._cache, "get", store.get)
    monkeypatch.setattr(tn._cache, "put", store.__setitem__)

    def compile_(*args):
        calls.append(args)
        return tn.CompiledModule(cubin=b"c%d" % len(calls), arch="sm_90a", log=log)

    monkeypatch.setattr(tn, "_compile", compile_)
    first = compile_cuda(SRC, "sm_90a")
    again = compile_cuda(SRC, "sm_90a")
    assert len(calls) == compiles
    assert (again is first) == (compiles == 1)
    assert list(store.values()) == [again]
