"""tirxpy/lower/codegen/kernel.py: one CUDA unit per kernel (signature, shared memory, origins)."""
import pytest

from tirxpy import T
from tirxpy.ir import Buffer, Kernel, LaunchConfig, PrimitiveCall
from tirxpy.lower.codegen.errors import CodegenError
from tirxpy.lower.codegen.kernel import (first_primitive_call, generate, has_primitive_calls, smem_plan,
                                         unlowered)


@T.prim_func
def axpy(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32"), a: T.float32):
    T.launch(grid=(1,), threads=128)
    t = T.thread_id()
    Y[t] = a * X[t] + Y[t]


@T.prim_func
def staged(X: T.Tensor((64,), "float16"), Y: T.Tensor((64,), "float16")):
    T.launch(grid=(1,), threads=64)
    s = T.alloc_shared((64,), "float16")
    s[T.thread_id()] = X[T.thread_id()]
    T.ptx.syncthreads()
    Y[T.thread_id()] = s[63 - T.thread_id()]


def test_signature_constness_and_launch_bounds():
    u = generate(axpy, "sm_90a")
    assert u.name == "axpy" and u.arch == "sm_90a" and u.smem_bytes == 0 and u.tmaps == []
    assert 'extern "C" __global__ void __launch_bounds__(128) axpy(' in u.source
    assert "const float* __restrict__ X" in u.source and "float* __restrict__ Y" in u.source
    assert "const float* __restrict__ Y" not in u.source and "const float a" in u.source
    assert u.written == frozenset({"Y"})
    assert "tx_smem[]" not in u.source


@T.prim_func
def tma_copy(A: T.Tensor((4, 8), "float32"), C: T.Tensor((4, 8), "float32")):
    T.launch(grid=(1,), threads=32)
    s = T.alloc_shared((4, 8), "float32")
    bar = T.alloc_shared((1,), "uint64")
    if T.thread_id() == 0:
        T.ptx.mbarrier_init(bar[0], 1)
        T.ptx.fence_mbarrier_init()
    T.ptx.syncthreads()
    if T.thread_id() == 0:
        T.ptx.mbarrier_arrive_expect_tx(bar[0], 128)
        T.ptx.tma_load_2d(s, A[0:4, 0:8], 0, 0, bar[0])
    T.ptx.mbarrier_wait_parity(bar[0], 0)
    if T.thread_id() == 0:
        T.ptx.tma_store_2d(C[0:4, 0:8], 0, 0, s)
        T.ptx.bulk_commit_group()
        T.ptx.bulk_wait_group(0)


def test_a_tensor_stored_through_its_tensor_map_is_written():
    """A TMA store writes C through its tensor map, not its pointer: C is written (the launch checks that it shares
    no memory with A), while its pointer parameter stays ``const`` like A's (nothing dereferences it)."""
    u = generate(tma_copy, "sm_90a")
    assert u.written == frozenset({"C"})
    assert "const float* __restrict__ A" in u.source and "const float* __restrict__ C" in u.source


def test_a_tensor_map_operand_declares_what_its_instruction_does_to_the_tensor():
    """Whether an instruction writes the tensor behind a tensor map is its ``tensormap`` operand's access: a
    registered TMA reduction declared ``"w"`` makes its tensor written, an L2 prefetch (``"r"``) does not."""
    from tirxpy.intrinsics import register_intrinsic

    register_intrinsic("test_tma_reduce_min_2d", "cp.reduce.async.bulk.tensor.2d.global.shared::cta.min.tile."
                       "bulk_group [{tmap}, {{c0}, {c1}}], [{src}];",
                       [("tmap", "tensormap", None, "w"), ("c0", "reg", "int32"), ("c1", "reg", "int32"),
                        ("src", "smem_addr")], lowest="sm_90", replace=True)

    @T.prim_func
    def reduce_and_prefetch(A: T.Tensor((4, 8), "float32"), C: T.Tensor((4, 8), "float32")):
        T.launch(grid=(1,), threads=32)
        s = T.alloc_shared((4, 8), "float32")
        if T.thread_id() == 0:
            T.ptx.tma_prefetch_2d(A[0:4, 0:8], 0, 0)
            T.ptx.test_tma_reduce_min_2d(C[0:4, 0:8], 0, 0, s)
            T.ptx.bulk_commit_group()
            T.ptx.bulk_wait_group(0)

    u = generate(reduce_and_prefetch, "sm_90a")
    assert u.written == frozenset({"C"})
    assert "const float* __restrict__ C" in u.source      # the map, not the pointer, carries the store


def test_an_address_taken_for_a_read_is_not_a_store():
    """A vector load through ``T.address_of(X[i])`` leaves X's pointer non-const (the address could be written
    through) but X is not written; the vector store through ``T.address_of(Y[i])`` writes Y."""
    import tirxpy.primitives.copy.common  # noqa: F401  (registers the vector loads and stores)

    @T.prim_func
    def vcopy(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        r = T.alloc_local((1,), "uint32")
        T.ptx.vld_global_v1_b32(r[0], T.address_of(X[T.thread_id()]))
        T.ptx.vst_global_v1_b32(T.address_of(Y[T.thread_id()]), r[0])

    u = generate(vcopy, "sm_90a")
    assert u.written == frozenset({"Y"}) and "const float* __restrict__ X" not in u.source


@T.prim_func
def roles(Y: T.Tensor((256,), "float32")):
    T.launch(grid=(1,), threads=256)
    if T.warpgroup_id() == 0:
        T.ptx.setmaxnreg_dec(40)
    else:
        T.ptx.setmaxnreg_inc(232)
    Y[T.thread_id()] = 1.0


def test_pin_registers_declares_one_cta_per_sm_for_setmaxnreg_kernels():
    """ptxas honours setmaxnreg only when the register count at entry is fixed (else C7508: 'setmaxnreg' ignored);
    a minimum of one CTA per SM fixes it. Kernels without setmaxnreg keep their plain launch bounds."""
    u = generate(roles, "sm_90a", pin_registers=True)
    assert 'extern "C" __global__ void __launch_bounds__(256, 1) roles(' in u.source and u.pinned
    u = generate(roles, "sm_90a")
    assert "__launch_bounds__(256) roles(" in u.source and not u.pinned
    u = generate(axpy, "sm_90a", pin_registers=True)
    assert "__launch_bounds__(128) axpy(" in u.source and not u.pinned


def test_origins_point_at_the_statement_lines():
    u = generate(axpy, "sm_90a")
    lines = u.source.splitlines()
    assert u.origins
    texts = [lines[n - 1] for n in u.origins]
    assert any("Y[" in t and "=" in t for t in texts)


def test_shared_memory_plan_and_helpers():
    u = generate(staged, "sm_90a")
    offsets, total = smem_plan(staged)
    assert total == u.smem_bytes and total >= 64 * 2
    assert "extern __shared__ __align__(1024) unsigned char tx_smem[];" in u.source
    assert [e.name for e in u.intrinsics] == ["syncthreads"]
    assert u.source.count("tx_syncthreads(") >= 2      # the helper and the call


def test_primitive_calls_are_found_and_refused():
    A = Buffer("A", (4,), "float32")
    call = PrimitiveCall("fill", [A], "cta", {"value": 0.0})
    k = Kernel("k", [A], LaunchConfig(threads=32), [call])
    assert has_primitive_calls(k) and first_primitive_call(k.body) is call
    assert not has_primitive_calls(axpy)
    assert "Tx.cta.fill(...)" in str(unlowered(call))
    with pytest.raises(CodegenError, match="not lowered"):
        generate(k)


def test_shared_parameter_is_refused():
    S = Buffer("S", (4,), "float32", "shared")
    with pytest.raises(CodegenError, match="parameters are global tensors"):
        generate(Kernel("k", [S], LaunchConfig(threads=32), []))
