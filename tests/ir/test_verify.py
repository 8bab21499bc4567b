"""Every verifier error, each with its message and the source line it points at."""
import pytest

from tirxpy import T, Tx
from tirxpy.ir import (EQ, Add, Buffer, BufferStore, Evaluate, For, IfThenElse, IntImm, IntrinsicCall,
                       Kernel, LaunchConfig, LetStmt, Select, Var, VerifyError, register_intrinsic_signature,
                       register_op_spec, verify)
from tirxpy.ir.errors import ParseError
from tirxpy.layout import S, TileLayout, laneid

register_intrinsic_signature("test_warp_sync_op", None, 0, scope="warp")
register_op_spec("test_wg_only", min_scope="warpgroup", n_operands=1)
register_op_spec("test_same_dtype", n_operands=2, same_dtype=True)


def script(body, params='A: T.Tensor((128,), "float32")', launch="grid=(1,), threads=256"):
    lines = "\n".join("    " + l for l in body.strip("\n").splitlines())
    return f"@T.prim_func\ndef k({params}):\n    T.launch({launch})\n{lines}\n"


def fails(src, match, line=None, hint=None):
    with pytest.raises(VerifyError, match=match) as e:
        T.parse_script(src)
    text = str(e.value)
    if line is not None:
        assert line in text and "^" in text, text
    if hint is not None:
        assert hint in text, text
    return text


# ---------------------------------------------------------------- scope
def test_warpgroup_op_in_single_thread_region():
    text = fails(script("""
acc = T.alloc_local((8,), "float32")
sm = T.alloc_shared((64, 16), "float16")
if T.elect_one():
    Tx.wg.gemm_async(acc, sm, sm)
"""), r"Tx.wg.gemm_async runs at warpgroup scope and needs whole warpgroups, but only 1 thread \(warp 0, lane 0\) is active here",
        line="Tx.wg.gemm_async(acc, sm, sm)", hint="move the call outside the branch")
    assert "narrowed by `if T.elect_one()`" in text


def test_cta_op_in_warpgroup_role():
    fails(script("""
if T.warpgroup_id() == 1:
    Tx.cta.fill(A, T.float32(0))
"""), r"Tx.cta.fill runs at cta scope and needs the whole CTA, but only warps 4..7 are active",
        line="Tx.cta.fill(A, T.float32(0))")


def test_warp_op_under_partial_warp():
    fails(script("""
if T.lane_id() < 16:
    Tx.warp.fill(A, T.float32(0))
"""), r"needs whole warps, but only 128 threads \(warps 0..7, some lanes\) are active")


def test_scope_unprovable_under_data_dependent_branch():
    fails(script("""
if T.thread_id() < n:
    Tx.wg.fill(A, T.float32(0))
""", params='A: T.Tensor((128,), "float32"), n: T.int32'), r"depends on run-time values, so the active threads \(at most")


def test_warpgroup_op_no_thread_can_reach():
    fails(script("""
if T.warpgroup_id() == 2:
    Tx.wg.fill(A, T.float32(0))
"""), r"Tx.wg.fill runs at warpgroup scope, but no thread can reach it \(narrowed by `if", hint="exclude every thread")


def test_warpgroup_uniform_data_branch_keeps_warpgroup_scope():
    # a condition that reads only T.warpgroup_id() of the thread ids (plus run-time data) keeps or drops
    # whole warpgroups, so a warpgroup op under it is fine (each consumer warpgroup of a kernel with its
    # own per-warpgroup bound)
    T.parse_script(script("""
if T.warpgroup_id() * 64 + 64 <= n:
    Tx.wg.fill(A, T.float32(0))
""", params='A: T.Tensor((128,), "float32"), n: T.int32'))


@pytest.mark.parametrize("cond,scope", [("T.warp_id() * 32 < n", "warpgroup"), ("T.lane_id() < n", "warp"),
                                        ("T.warpgroup_id() < n and T.lane_id() < 3", "warp")])
def test_finer_thread_data_branch_is_not_warpgroup_uniform(cond, scope):
    op = "Tx.wg.fill" if scope == "warpgroup" else "Tx.warp.fill"
    fails(script(f"""
if {cond}:
    {op}(A, T.float32(0))
""", params='A: T.Tensor((128,), "float32"), n: T.int32'), r"depends on run-time values, so the active threads \(at most")


def test_uniform_branch_keeps_scope():
    T.parse_script(script("""
for i in T.serial(4):
    if i > 0:
        Tx.cta.fill(A, T.float32(0))
"""))


def test_cluster_op_needs_cluster_launch():
    fails(script("Tx.cluster.fill(A, T.float32(0))"), "runs at cluster scope but the kernel is not launched with a cluster",
          hint="cluster=(n,)")


def test_warp_intrinsic_in_single_thread():
    fails(script("""
if T.elect_one():
    T.ptx.test_warp_sync_op()
"""), r"intrinsic test_warp_sync_op runs at warp scope and needs whole warps, but only 1 thread", line="T.ptx.test_warp_sync_op()")


def test_op_below_min_scope():
    fails(script("Tx.test_wg_only(A)"), r"Tx.test_wg_only: primitive test_wg_only runs at warpgroup to cluster scope, not thread",
          hint="write Tx.wg.test_wg_only(...)")


def test_unknown_primitive_suggests():
    fails(script("Tx.copyy(A, A)"), r"unknown primitive 'copyy' in Tx.copyy\(...\); did you mean copy", hint="register_op_spec")


def test_operand_count():
    fails(script("Tx.copy(A)"), r"Tx.copy takes 2 operands, got 1")


# ---------------------------------------------------------------- storage and shapes
def test_wrong_storage_scope():
    fails(script("""
r = T.alloc_local((128,), "float32")
Tx.copy_async(r, A)
"""), r"Tx.copy_async: operand 0 \(r\) is in local memory, but copy_async needs it in shared or shared::cluster or global",
        line="Tx.copy_async(r, A)", hint="T.alloc_shared")


def test_primitive_shape_mismatch():
    fails(script("""
sm = T.alloc_shared((64,), "float32")
Tx.cta.copy(sm, A)
"""), r"Tx.cta.copy: operand shapes differ: sm \(64,\), A \(128,\)", hint="A[m0:m0 + 128, k0:k0 + 64]")


def test_primitive_dtype_mismatch():
    fails(script("""
sm = T.alloc_shared((128,), "float16")
Tx.test_same_dtype(sm, A)
"""), r"operand dtypes differ: sm float16, A float32")


def test_global_allocation():
    fails(script('g = T.alloc_buffer((4,), "float32", scope="global")'), "kernels cannot allocate global memory",
          hint="pass global tensors as kernel parameters")


# ---------------------------------------------------------------- limits
def test_threads_limit():
    fails(script("pass", launch="grid=(1,), threads=2048"), r"T.launch\(threads=2048\): a CTA has 1 to 1024 threads")


def test_cluster_limit():
    fails(script("pass", launch="grid=(1,), threads=128, cluster=(4, 8)"), r"32 CTAs per cluster exceeds the limit of 16")


def test_shared_memory_limit():
    text = fails(script("""
a = T.alloc_shared((64, 512), "float32")
b = T.alloc_shared((64, 512), "float32")
"""), r"shared memory allocations need 262144 bytes by b, over the 232448 B \(227 KB\) per-CTA limit",
        line='b = T.alloc_shared((64, 512), "float32")')
    assert "a 131072 B, b 131072 B" in text


def test_pdl_launch_needs_griddepcontrol_wait():
    """``T.launch(pdl=True)`` lets the kernel overlap the previous one in the stream; without a
    ``griddepcontrol.wait`` it could read data that kernel has not written yet."""
    register_intrinsic_signature("griddepcontrol_wait", None, 0)     # as tirxpy.intrinsics registers it
    fails(script("A[0] = T.float32(1)", launch="grid=(1,), threads=128, pdl=True"),
          r"T.launch\(pdl=True\) lets the kernel start before the previous kernel .* never calls "
          r"T.ptx.griddepcontrol_wait\(\)", hint="or drop pdl=True")
    k = T.parse_script(script("T.ptx.griddepcontrol_wait()\nA[0] = T.float32(1)",
                              launch="grid=(1,), threads=128, pdl=True"))
    assert k.launch.pdl is True
    assert T.parse_script(script("A[0] = T.float32(1)", launch="grid=(1,), threads=128")).launch.pdl is False
    with pytest.raises(ParseError, match=r"T.launch pdl= must be True or False, got 1"):
        T.parse_script(script("pass", launch="grid=(1,), threads=128, pdl=1"))


def test_may_alias_names_pairs_of_tensor_parameters():
    """``T.launch(may_alias=...)`` pairs tensor parameters that may share memory: each pair two different names of
    the kernel's tensors; anything else is refused, naming it."""
    two = 'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), n: T.int32'
    k = T.parse_script(script("A[0] = B[1]", params=two, launch='grid=(1,), threads=32, may_alias=(("B", "A"),)'))
    assert k.launch.may_alias == (("A", "B"),)
    fails(script("A[0] = B[1]", params=two, launch='grid=(1,), threads=32, may_alias=(("A", "C"),)'),
          r"T.launch\(may_alias=\('A', 'C'\)\): 'C' is not a tensor parameter of k", hint="['A', 'B']")
    fails(script("A[0] = B[1]", params=two, launch='grid=(1,), threads=32, may_alias=(("A", "n"),)'),
          r"'n' is not a tensor parameter of k")
    for bad, msg in (('(("A",),)', "is not a pair of parameter names"), ('(("A", "A"),)', "pairs 'A' with itself"),
                     ('"AB"', "must be a tuple of \\(name, name\\) pairs")):
        with pytest.raises(ParseError, match=msg):
            T.parse_script(script("pass", params=two, launch=f"grid=(1,), threads=32, may_alias={bad}"))


def test_launch_smem_too_small_and_too_large():
    fails(script('a = T.alloc_shared((1024,), "float32")', launch="grid=(1,), threads=128, smem=1000"),
          r"T.launch\(smem=1000\) is smaller than the 4096 B", hint="give smem=4096")
    fails(script("pass", launch="grid=(1,), threads=128, smem=300000"), r"over the 232448 B \(227 KB\) per-CTA limit")


def test_tmem_columns():
    fails(script("""
t0 = T.alloc_tmem((128, 256), "float32")
t1 = T.alloc_tmem((128, 512), "float32")
"""), r"tensor memory allocations need 768 columns by t1, over the 512-column limit")


def test_registers():
    fails(script('r = T.alloc_local((16, 32), "float32")'), r"local allocations need 512 32-bit registers per thread by r, over the 255-register limit",
          hint="layout on laneid / warpid")


def test_registers_spread_over_lanes_fit():
    L = TileLayout(S[(32, 4, 32) : (1@laneid, 32, 1)])  # 128 registers per thread
    k = T.parse_script(script("r = T.alloc_local((32, 4, 32), \"float32\", layout=L)"), env={"L": L})
    assert k.body.stmts[0].buffer.layout.identical(L)


# ---------------------------------------------------------------- hand-built IR: names, dtypes, shapes
def kernel(body, params=()):
    return Kernel("k", list(params), LaunchConfig(grid=(1,), threads=128), body)


A = Buffer("A", (8,), "float32")
i = Var("i")


@pytest.mark.parametrize("build,match", [
    (lambda: kernel([BufferStore(A, [i], A[0])], [A]), r"variable 'i' is used but not defined here"),
    (lambda: kernel([BufferStore(A, [IntImm(0)], A[1])]), r"tensor 'A' is used but not defined here"),
    (lambda: kernel([BufferStore(A, [IntImm(0)], IntImm(1))], [A]), r"cannot store a int32 value into A \(float32\)"),
    (lambda: kernel([LetStmt(i, Add(IntImm(1), IntImm(2, "int64")))]), r"operands of `1 \+ T.int64\(2\)` have different dtypes: int32 and int64"),
    (lambda: kernel([LetStmt(Var("x", "int64"), IntImm(1))]), r"x is declared int64 but bound to a int32 value"),
    (lambda: kernel([IfThenElse(IntImm(1), [])]), r"the condition `1` is int32, not bool"),
    (lambda: kernel([For(i, IntImm(0, "int64"), IntImm(4, "int64"), "serial", [])]), r"loop i is int32 but a bound is int64"),
    (lambda: kernel([BufferStore(A, [IntImm(0)], Add(A[0], IntrinsicCall("test_fence_v", [], None)))], [A]),
     r"returns nothing but is used as a value"),
    (lambda: kernel([Evaluate(IntrinsicCall("never_registered", [], None))]), r"intrinsic 'never_registered' has no registered signature"),
    (lambda: kernel([BufferStore(A, [IntImm(0), IntImm(0)], A[0])], [A]), r"A has shape \(8,\) \(1 dimensions\) but is indexed with 2"),
    (lambda: kernel([BufferStore(A, [IntImm(9)], A[0])], [A]), r"index 9 is out of range \[0, 8\) in dimension 0 of A"),
    (lambda: kernel([BufferStore(A, [IntImm(0)], Select(EQ(IntImm(0), IntImm(1)), A[0], IntImm(1)))], [A]),
     r"T.select branches have different dtypes: float32 and int32"),
])
def test_hand_built_ir_errors(build, match):
    with pytest.raises(VerifyError, match=match):
        verify(build())


def test_grid_extent():
    with pytest.raises(VerifyError, match=r"T.launch grid extent 0 in dimension x is outside \[1, 2147483647\]"):
        verify(Kernel("k", [], LaunchConfig(grid=(0,), threads=32), []))


# ---------------------------------------------------------------- launch configuration
@pytest.mark.parametrize("launch, match", [
    ("grid=(4,), threads=128, cluster=(0,)", r"cluster=\(0,\)\): cluster extent 0 in dimension x must be >= 1"),
    ("grid=(4,), threads=128, cluster=(-2,)", r"cluster extent -2 in dimension x must be >= 1"),
    ("grid=(4, 2), threads=128, cluster=(1, 0)", r"cluster extent 0 in dimension y must be >= 1"),
    ("grid=(3,), threads=128, cluster=(2,)", r"does not divide the grid: 3 CTAs in dimension x are not a multiple of "
                                            r"the cluster extent 2"),
    ("grid=(2, 3), threads=128, cluster=(2, 2)", r"3 CTAs in dimension y"),
    ("grid=(2**40,), threads=128", r"grid extent 1099511627776 in dimension x is outside \[1, 2147483647\]"),
    ("grid=(2**31,), threads=128", r"grid extent 2147483648 in dimension x"),
    ("grid=(1, 65536), threads=128", r"grid extent 65536 in dimension y is outside \[1, 65535\]"),
    ("grid=(1, 1, 70000), threads=128", r"dimension z is outside \[1, 65535\]"),
    ("grid=(-1,), threads=128", r"grid extent -1 in dimension x"),
    ("grid=(1,), threads=0", r"threads=0\): a CTA has 1 to 1024 threads"),
    ("grid=(32,), threads=128, cluster=(32,)", r"32 CTAs per cluster exceeds the limit of 16"),
    ("grid=(1,), threads=128, smem=-5", r"smem=-5\): dynamic shared memory is a byte count >= 0"),
])
def test_bad_launch_configs_point_at_the_launch(launch, match):
    fails(script("pass", launch=launch), match, line=f"T.launch({launch})")


@pytest.mark.parametrize("launch", [
    "grid=(2**31 - 1,), threads=1024", "grid=(1, 65535, 65535), threads=1", "grid=(16,), threads=128, cluster=(16,)",
    "grid=(8, 4), threads=128, cluster=(2, 4)", "grid=(1,), threads=128, smem=232448",
])
def test_launch_configs_at_the_limits_verify(launch):
    assert T.parse_script(script("pass", launch=launch)).launch is not None


def test_dynamic_grid_with_a_cluster_is_left_to_the_launch():
    src = script("pass", params='A: T.Tensor((128,), "float32"), n: T.int32', launch="grid=(n,), threads=128, cluster=(2,)")
    assert T.parse_script(src).launch.cluster == (2,)


def test_verify_reads_the_target_object():
    from tirxpy.ir.verify import Verifier
    from tirxpy.target import TargetError, as_target

    t = as_target("sm_90a")
    assert Verifier(T.parse_script(script("pass")), t).target is t                  # parsed once, passed down
    assert Verifier(T.parse_script(script("pass")), "sm_100a").target == as_target("sm_100a")
    with pytest.raises(TargetError, match="unknown target 'sm_9'"):
        verify(T.parse_script(script("pass")), "sm_9")


def test_a_kernel_too_big_for_a_smaller_part_fails_at_verify():
    k = T.parse_script(script('a = T.alloc_shared((51200,), "float32")'))     # 200 KiB: fits sm_90a, not sm_86
    verify(k, "sm_90a")
    with pytest.raises(VerifyError, match=r"need 204800 bytes by a, over the 101376 B \(99 KB\) per-CTA limit on sm_86"):
        verify(k, "sm_86")


def test_target_limits():
    from tirxpy.ir.verify import Verifier

    k = T.parse_script(script('a = T.alloc_shared((45000,), "float32")'))     # 180000 B: fits sm_90a, not sm_80
    verify(k, "sm_90a")
    with pytest.raises(VerifyError, match=r"need 180000 bytes by a, over the 166912 B \(163 KB\) per-CTA limit on sm_80"):
        verify(k, "sm_80")
    k = T.parse_script(script("pass", launch="grid=(2,), threads=128, cluster=(2,)"))
    with pytest.raises(VerifyError, match="sm_80 has no thread-block clusters"):
        verify(k, "sm_80")
    k = T.parse_script(script("pass", launch="grid=(16,), threads=128, cluster=(16,)"))
    with pytest.raises(VerifyError, match="16 CTAs per cluster exceeds the limit of 8 on sm_120a"):
        verify(k, "sm_120a")
    k = T.parse_script(script('t = T.alloc_tmem((128, 32), "float32")'))
    with pytest.raises(VerifyError, match="t: sm_90a has no tensor memory"):
        verify(k, "sm_90a")
    verify(k, "sm_100a")
    assert Verifier(k, None).target is None


# ---------------------------------------------------------------- allocations (closed form, nothing materialized)
@pytest.mark.parametrize("alloc, match", [
    ('T.alloc_local((2**31,), "float32")', r"local allocations need 2147483648 32-bit registers per thread by x, over "
                                           r"the 255-register limit"),
    ('T.alloc_local((2**40, 4), "float16")', r"need 2199023255552 32-bit registers"),
    ('T.alloc_shared((2**28,), "float32")', r"x \(268435456,\) float32 in shared memory needs 1073741824 bytes of "
                                            r"shared memory per CTA, over the limit of 232448"),
    ('T.alloc_shared((58113,), "float32")', r"needs 232452 bytes of shared memory per CTA, over the limit of 232448"),
    ('T.alloc_local((256,), "float32")', r"need 256 32-bit registers per thread by x, over the 255-register limit"),
    ('T.alloc_local((2.0,), "float32")', r"has the float 2.0; extents are ints >= 1"),
    ('T.alloc_local((True, 4), "float32")', r"has the bool True; extents are ints >= 1"),
    ('T.alloc_local((-1,), "float32")', r"has extent -1; extents must be >= 1"),
    ('T.alloc_shared((0, 4), "float32")', r"has extent 0; extents must be >= 1"),
    ('T.alloc_shared((2**70,), "float32")', r"elements, over the 4611686018427387904 \(2\*\*62\)"),
    ('T.alloc_shared((1,) * 17, "float32")', r"at most 16 dimensions, got 17"),
])
def test_bad_allocations_are_refused_in_closed_form(alloc, match):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:      # at most 2 GiB more address space than now
        cap = int(f.read().split()[0]) * resource.getpagesize() + (2 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        with pytest.raises((VerifyError, ParseError), match=match) as e:
            T.parse_script(script(f"x = {alloc}"))
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert "x = T.alloc" in str(e.value)


@pytest.mark.parametrize("alloc", ['T.alloc_shared((58112,), "float32")', 'T.alloc_local((255,), "float32")',
                                   'T.alloc_tmem((128, 512), "float32")', 'T.alloc_shared((232448,), "uint8")'])
def test_allocations_exactly_at_the_limit_verify(alloc):
    assert T.parse_script(script(f"x = {alloc}")).body is not None


@pytest.mark.parametrize("grid", ["(T.thread_id(),)", "(T.cta_id(0) + 1,)", "(4, T.lane_id())"])
def test_a_grid_that_reads_a_device_value_is_refused(grid):
    src = f'''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid={grid}, threads=32)
    A[0] = T.float32(1)
'''
    with pytest.raises(VerifyError, match="exists only on the device") as e:
        T.parse_script(src)
    assert "T.launch" in str(e.value) and "scalar parameters" in str(e.value)


def test_a_grid_from_a_scalar_parameter_verifies():
    k = T.parse_script('''
@T.prim_func
def k(A: T.Tensor((64,), "float32"), n: T.int32):
    T.launch(grid=((n + 31) // 32,), threads=32)
    A[0] = T.float32(1)
''')
    assert k.launch.grid[0] is not None


def test_a_shape_entry_whose_index_raises_is_refused():
    from tirxpy.ir.errors import IRError

    class RaisingIndex:
        def __index__(self):
            raise RuntimeError("no index")

    with pytest.raises(IRError, match=r"has the RaisingIndex .*; extents are ints >= 1"):
        T.Tensor((RaisingIndex(), 4), "float32")


class _RaisingIndex:
    def __index__(self):
        raise RuntimeError("no index")


def test_a_captured_value_whose_index_raises_is_refused_where_it_is_used():
    from tirxpy.ir import ops
    from tirxpy.ir.errors import IRError

    bad = _RaisingIndex()
    with pytest.raises(IRError, match=r"expected an expression or a Python number, got .*_RaisingIndex"):
        ops.const(bad)
    with pytest.raises(ParseError, match=r"expected an expression or a Python number, got .*_RaisingIndex"):
        @T.prim_func
        def k(A: T.Tensor((8,), "float32")):
            T.launch(grid=(1,), threads=32)
            A[bad] = T.float32(1)
