"""Codegen unit tests: literals, expressions, addresses from layouts, statements, locals, aliases,
intrinsic operands (hidden tensor maps, descriptors) and error messages."""
import itertools
import math

import pytest

import tirxpy.intrinsics  # noqa: F401
from tirxpy import T
from tirxpy.ir import Buffer, IntImm, Var, expr as E
from tirxpy.layout import ComposeLayout, S, TileLayout, laneid
from tirxpy.layout.atoms import mma_smem_layout
from tirxpy.lower import CodegenError, build, generate
from tirxpy.lower.codegen import smem_plan
from tirxpy.lower.codegen.address import element_m
from tirxpy.lower.codegen.types import float_literal, int_literal
from tirxpy.lower.nvrtc import compile_cuda


def _eval(e, env):
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    ops = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
           E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.BitXor: lambda a, b: a ^ b,
           E.BitAnd: lambda a, b: a & b, E.Shr: lambda a, b: a >> b, E.Shl: lambda a, b: a << b}
    return ops[type(e)](_eval(e.a, env), _eval(e.b, env))


def _compile(k, arch="sm_90a"):
    u = generate(k, arch)
    return u, compile_cuda(u.source, arch)


# ------------------------------------------------------------------ literals
@pytest.mark.parametrize("v", [0.0, -0.0, 1.5, 0.1, 1e-40, 3.0e38, -2.5e-7, 1 / 3])
def test_float32_literals_are_exact(v):
    import struct

    t = float_literal(v, "float32")
    assert t.endswith("f")
    body = t[:-1]
    got = float.fromhex(body) if "0x" in body else float(body)
    want = struct.unpack("<f", struct.pack("<f", v))[0]
    assert got == want and math.copysign(1, got) == math.copysign(1, want)


def test_special_and_narrow_literals():
    assert float_literal(float("-inf"), "float32") == "__int_as_float(0xff800000)"
    assert float_literal(float("nan"), "float64") == "__longlong_as_double(0x7ff8000000000000ll)"
    assert float_literal(0.1, "float64") == "0.1"
    assert float_literal(2.0, "bfloat16") == "__nv_bfloat16(2.0f)"
    assert int_literal(-1, "uint32") == "4294967295u" and int_literal(-2**63, "int64").startswith("(-9223372036854775807ll")


# ------------------------------------------------------------------ addresses
@pytest.mark.parametrize("shape, layout", [
    ((64, 64), mma_smem_layout(64, 64, "bfloat16", "K", 128)),
    ((32, 64), mma_smem_layout(32, 64, "float16", "K", 64)),
    ((16, 8), TileLayout(S[(16, 8) : (1, 16)])),
    ((4, 8, 8), TileLayout(S[(4, 8, 8) : (64, 1, 8)])),
])
def test_element_addresses_match_the_layout_everywhere(shape, layout):
    idx = [Var(f"i{d}") for d in range(len(shape))]
    m = element_m(layout, shape, idx)
    for c in itertools.product(*(range(n) for n in shape)):
        assert _eval(m, {f"i{d}": v for d, v in enumerate(c)}) == layout.apply(*c, shape=shape)["m"], c


def test_address_of_a_symbolic_view_of_a_swizzled_tile():
    L = ComposeLayout(3, 3, 3, TileLayout(S[(3, 64, 64) : (4096, 64, 1)]))
    s, i, j = Var("s"), Var("i"), Var("j")
    m = element_m(L, (3, 64, 64), [s, i * 8 + 3, j])
    assert str(m) == "s * 4096 + i * 512 + j + 192 ^ 24"  # row % 8 == 3 is known: the XOR is a constant


def test_element_offset_in_16_byte_units_is_exact_or_none():
    """``units=(16, 128)``: the offset of a bf16 element in 16-byte units, an integer polynomial of the
    indices where every term is a multiple of 8 elements; None where it is not, or a swizzle is left."""
    L = TileLayout(S[(3, 64, 64) : (4096, 64, 1)])
    s, i = Var("s"), Var("i")
    m16 = element_m(L, (3, 64, 64), [s, IntImm(0), i * 16 + 32], units=(16, 128))
    for sv, iv in itertools.product(range(3), range(2)):
        assert _eval(m16, {"s": sv, "i": iv}) * 8 == L.apply(sv, 0, iv * 16 + 32, shape=(3, 64, 64))["m"]
    assert element_m(L, (3, 64, 64), [s, IntImm(0), i], units=(16, 128)) is None          # i: any column
    assert element_m(L, (3, 64, 64), [s, IntImm(1), IntImm(4)], units=(16, 128)) is None  # 68 elements
    SW = ComposeLayout(3, 3, 3, L)
    assert element_m(SW, (3, 64, 64), [s, i, IntImm(0)], units=(16, 128)) is None        # row i: XOR stays


def test_element_offset_in_16_byte_units_counts_sub_byte_elements():
    """Units are counted in bits: 64 float4 elements are 32 bytes, 2 units of 16 bytes (a byte count of
    ``4 // 8 = 0`` would have made every offset 0)."""
    L = TileLayout(S[(2, 64, 128) : (8192, 128, 1)])
    m16 = element_m(L, (2, 64, 128), [Var("s"), IntImm(0), IntImm(64)], units=(4, 128))
    assert [_eval(m16, {"s": v}) for v in range(2)] == [2, 258]
    assert element_m(L, (2, 64, 128), [Var("s"), IntImm(0), IntImm(16)], units=(4, 128)) is None  # 8 bytes


def test_local_tile_uses_only_the_register_coordinate():
    L = TileLayout(S[(8, 4, 2) : (4@laneid, 1@laneid, 1)])
    m = element_m(L, (8, 8), [Var("r"), Var("c")])
    assert str(m) == "c % 2"


# ------------------------------------------------------------------ expressions and statements
@T.prim_func
def exprs(A: T.Tensor((256,), "float32"), H: T.Tensor((256,), "float16"), I: T.Tensor((256,), "int32"),
          n: T.int32):
    T.launch(grid=(2,), threads=128)
    t = T.cta_id(0) * 128 + T.thread_id()
    q = n - t
    I[t] = q // 3 + q % 3 + q // 4 + t // 3 + T.min(q, t) + T.select(q > 0, q, -q)
    H[t] = T.cast(T.exp(T.cast(H[t], "float32")) + T.float32(0.5), "float16") * H[t]
    A[t] = T.sqrt(A[t]) + T.max(A[t], T.float32(-1.25))
    for k in T.unroll(4):
        if k == 2:
            A[t] = A[t] + T.cast(k, "float32")
        else:
            A[t] = A[t] - T.float32(1)
    for k in T.serial(3):
        I[t] = I[t] * 2


def test_expression_rendering_and_floor_semantics():
    u, mod = _compile(exprs)
    src = u.source
    assert "tx_floordiv<int32_t>(q, 3)" in src and "tx_floormod<int32_t>(q, 3)" in src  # sign unknown
    assert "q >> 2" in src  # power of two: arithmetic shift is floor division
    assert "t / 3" in src  # t = block * 128 + tid is provably non-negative
    assert "min(q, t)" in src and "(q > 0 ? q : 0 - q)" in src
    assert "__half(expf(static_cast<float>(H[t])) + 0.5f) * H[t]" in src
    assert "sqrtf(A[t]) + fmaxf(A[t], -1.25f)" in src
    assert "#pragma unroll\n" in src and "} else {" in src
    assert mod.resources_of("exprs").spills == 0


@T.prim_func
def loop_bounds(N: T.Tensor((4,), "int32"), Out: T.Tensor((4,), "int32")):
    T.launch(grid=(1,), threads=32)
    n = N[0]
    cnt = T.alloc_local((1,), "int32")
    cnt[0] = 0
    for i in T.serial(T.select(n > 2, n, 1)):       # a ternary bound
        cnt[0] = cnt[0] + 1
    for i in T.serial(n >> 1):                      # binds tighter than `<`: no parentheses needed
        cnt[0] = cnt[0] + 100
    Out[T.thread_id() % 4] = cnt[0]


def test_loop_bound_is_parenthesized_as_the_right_operand_of_less_than():
    """`for (i = 0; i < c ? a : b; ++i)` is `(i < c) ? a : b` in C++: never false, a loop that does
    not end (the stream-K GEMM hung on the GPU while the simulator, which reads the IR, passed)."""
    src = generate(loop_bounds, "sm_90a").source
    assert "i < (n > 2 ? n : 1); ++i)" in src, src
    assert "i_1 < n >> 1; ++i_1)" in src, src


@T.prim_func
def locals_aliases(A: T.Tensor((128, 8), "bfloat16"), B: T.Tensor((128, 4), "uint32")):
    T.launch(grid=(1,), threads=128)
    frag = T.alloc_local((8,), "bfloat16")
    smem = T.alloc_shared((128, 8), "bfloat16")
    bars = T.alloc_shared((2,), "uint64")
    t = T.thread_id()
    for j in T.unroll(8):
        frag[j] = A[t, j]
        smem[t, j] = frag[j]
    T.ptx.syncthreads()
    T.ptx.ldmatrix_x4(frag, smem[t % 32, 0])
    for j in T.unroll(4):
        B[t, j] = T.ptx.mov_b32_from_b16x2(frag[2 * j], frag[2 * j + 1]) if False else T.cast(j, "uint32")
    if T.warp_id() == 1:
        if T.elect_one():
            T.ptx.mbarrier_init(bars[1], 32)


def test_locals_shared_and_elect():
    u, mod = _compile(locals_aliases)
    src = u.source
    assert "alignas(16) __nv_bfloat16 frag[8];" in src
    assert "__nv_bfloat16* const smem = reinterpret_cast<__nv_bfloat16*>(tx_smem + 0);" in src
    assert "uint64_t* const bars = reinterpret_cast<uint64_t*>(tx_smem + 2048);" in src
    assert "tx_ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&frag[0]), tx_smem_addr(&smem[(t & 31) * 8]));" in src
    assert "tx_warp_id == 1 && tx_elect_sync(0xffffffffu)" in src
    assert "tx_mbarrier_init(tx_smem_addr(&bars[1]), 32);" in src
    assert "const __nv_bfloat16* __restrict__ A" in src and "uint32_t* __restrict__ B" in src
    assert mod.resources_of("locals_aliases").spills == 0


def test_smem_plan_matches_shared_bytes():
    from tirxpy.ir import shared_bytes

    for k in (locals_aliases, exprs):
        assert smem_plan(k)[1] == shared_bytes(k)


def test_alias_reinterprets_root_storage():
    from tirxpy.ir import Allocate, BufferStore, Kernel, LaunchConfig, SeqStmt, ops

    out = Buffer("out", (128,), "uint32")
    frag = Buffer("frag", (4,), "bfloat16", "local")
    words = frag.alias((2,), "uint32", name="words")
    t = E.ScopeId("thread_id")
    body = SeqStmt([Allocate(frag), BufferStore(frag, [IntImm(0)], ops.cast(1.0, "bfloat16")),
                    BufferStore(out, [t], E.BufferLoad(words, [IntImm(0)]))])
    k = Kernel("alias_k", [out], LaunchConfig(grid=(1,), threads=128), body)
    u, mod = _compile(k)
    assert "out[(int)threadIdx.x] = reinterpret_cast<uint32_t*>(frag)[0];" in u.source
    assert mod.resources_of("alias_k").spills == 0


# ------------------------------------------------------------------ tensor maps and descriptors
@T.prim_func
def two_loads(A: T.Tensor((256, 128), "bfloat16"), B: T.Tensor((256, 128), "bfloat16")):
    T.launch(grid=(4,), threads=128)
    s = T.alloc_shared((2, 64, 64), "bfloat16", layout=ComposeLayout(3, 3, 3, TileLayout(S[(2, 64, 64) : (4096, 64, 1)])))
    bar = T.alloc_shared((1,), "uint64")
    m0 = T.cta_id(0) * 64
    if T.thread_id() == 0:
        T.ptx.tma_load_2d(s[0], A[m0:m0 + 64, 0:64], 0, 0, bar[0])
        T.ptx.tma_load_2d(s[1], A[0:64, 0:64], 64, m0, bar[0])
        T.ptx.tma_load_2d(s[1], B[m0:m0 + 64, 64:128], 0, 0, bar[0])


def test_hidden_tensor_maps_are_deduplicated_and_coordinates_add():
    u, mod = _compile(two_loads)
    src = u.source
    assert [t.cname for t in u.tmaps] == ["tmap_A", "tmap_B"]
    assert [(t.box, t.swizzle) for t in u.tmaps] == [((64, 64), 128), ((64, 64), 128)]
    assert "tx_tma_load_2d(tx_smem_addr(&s[0]), &tmap_A, 0, m0, tx_smem_addr(&bar[0]));" in src
    assert "tx_tma_load_2d(tx_smem_addr(&s[4096]), &tmap_A, 64, m0, tx_smem_addr(&bar[0]));" in src
    assert "&tmap_B, 64, m0," in src
    assert "const __grid_constant__ CUtensorMap tmap_A,\n    const __grid_constant__ CUtensorMap tmap_B)" in src
    compile_cuda(src, "sm_100a")


# ------------------------------------------------------------------ errors
def _err(k, arch="sm_90a"):
    with pytest.raises(CodegenError) as ei:
        generate(k, arch)
    return str(ei.value)


def test_error_tmem_element_access():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        acc = T.alloc_tmem((128, 32), "float32")
        A[T.thread_id()] = acc[T.thread_id(), 0]

    msg = _err(k, "sm_100a")
    assert "acc is in tensor memory, which has no element addresses" in msg
    assert "test_codegen.py:" in msg and "hint: move data between tensor memory and registers" in msg


def test_error_target_lacks_instruction():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        T.ptx.wgmma_fence()

    msg = _err(k, "sm_100a")
    assert "T.ptx.wgmma_fence: wgmma.fence exists only on sm_90a" in msg and "test_codegen.py:" in msg


def test_error_vector_operand_size():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        frag = T.alloc_local((4,), "bfloat16")
        s = T.alloc_shared((128, 8), "bfloat16")
        T.ptx.ldmatrix_x4(frag, s[0, 0])

    msg = _err(k)
    assert "operand d of T.ptx.ldmatrix_x4 takes 4 x uint32 (16 bytes) but frag gives 4 x bfloat16 (8 bytes)" in msg


def test_error_tma_rank_and_non_view():
    @T.prim_func
    def k(A: T.Tensor((4, 64, 64), "bfloat16")):
        T.launch(grid=(1,), threads=128)
        s = T.alloc_shared((64, 64), "bfloat16")
        bar = T.alloc_shared((1,), "uint64")
        T.ptx.tma_load_2d(s, A[0, 0:64, 0:64], 0, 0, bar[0])

    assert "moves a 2-D box but A has rank 3" in _err(k)


def test_error_immediate_must_be_constant():
    @T.prim_func
    def k(A: T.Tensor((128,), "int32")):
        T.launch(grid=(1,), threads=128)
        T.ptx.bulk_wait_group(A[0])

    assert "error: T.ptx.bulk_wait_group: operand 'n' must be a compile-time integer constant" in _err(k)


def test_error_unlowered_primitive_names_op_and_line():
    from tirxpy.ir import PrimitiveCall
    from tirxpy.ir.errors import Span
    from tirxpy.lower.codegen.kernel import unlowered

    e = unlowered(PrimitiveCall("copy", [], "warp", span=Span("kern.py", 7)))
    assert str(e).startswith("kern.py:7:0: error: Tx.warp.copy(...) is a tile primitive that was not lowered")


def test_error_non_constant_elect():
    @T.prim_func
    def k(A: T.Tensor((128,), "int32")):
        T.launch(grid=(1,), threads=128)
        if A[T.thread_id()] > T.thread_id():
            if T.elect_one():
                A[0] = 1

    assert "T.elect_one() needs an active thread set known at compile time" in _err(k)


def test_error_bfloat16_scalar_param():
    @T.prim_func
    def k(A: T.Tensor((128,), "bfloat16"), x: T.bfloat16):
        T.launch(grid=(1,), threads=128)
        A[T.thread_id()] = x

    with pytest.raises(CodegenError, match=r"scalar parameter x is bfloat16; the host passes scalars of"):
        build(k, "sm_90a")


def test_smem_addr16_renders_foldable_or_plain_and_refuses_global():
    """``smem_addr16`` (``gemm_smem_desc_folded``'s address): the buffer's base ``>> 4`` plus the offset in
    16-byte units where that is exact, the element's address ``>> 4`` where it is not, and a global
    element is refused with the operand named."""
    import tirxpy.primitives.gemm.desc  # noqa: F401  (registers gemm_smem_desc_folded)

    @T.prim_func
    def k(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        s = T.alloc_shared((4, 64), "bfloat16")
        A[0] = T.cast(T.ptx.gemm_smem_desc_folded(T.address_of(s[T.thread_id() % 4, 16]), T.uint64(0)), "uint32")
        A[1] = T.cast(T.ptx.gemm_smem_desc_folded(T.address_of(s[0, T.thread_id() % 4]), T.uint64(0)), "uint32")

    src = build(k, "sm_90a").cuda_source
    assert "tx_gemm_smem_desc_folded(((tx_smem_addr(&s[0]) >> 4) + (unsigned)(" in src
    assert "tx_gemm_smem_desc_folded((tx_smem_addr(&s[" in src       # a column not a multiple of 8

    @T.prim_func
    def g(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        A[0] = T.cast(T.ptx.gemm_smem_desc_folded(T.address_of(A[8]), T.uint64(0)), "uint32")

    msg = _err(g)
    assert "operand addr of T.ptx.gemm_smem_desc_folded is a shared-memory address, but A is in global memory" in msg


def _copy_rows(rows, cols):
    @T.prim_func
    def copy_rows(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        T.launch(grid=(rows,), threads=128)
        for j in range(2):
            B[T.cta_id(0), cols - 256 + j * 128 + T.thread_id()] = A[T.cta_id(0), j * 128 + T.thread_id()]
    return copy_rows


def test_offsets_into_tensors_past_two_to_the_31_elements_are_64_bit():
    """A (70000, 70000) tensor has offsets up to 4.9e9: codegen computes them in int64_t (every index leaf cast
    before the strides multiply it), so row 69999 is reached without a 32-bit wrap; the same kernel on a
    (4096, 4096) tensor keeps int offsets. Both compile."""
    import re

    big, small = (generate(_copy_rows(n, n)).source for n in (70000, 4096))
    index = re.search(r"\bB\[(.*?)\] = A\[(.*?)\];", big)
    assert index and all("static_cast<int64_t>((int)blockIdx.x) * 70000ll" in g for g in index.groups()), big
    assert "int64_t>((int)blockIdx" not in small and re.search(r"\bB\[\(int\)blockIdx\.x \* 4096", small), small
    compile_cuda(big, "sm_90a")
    # the bound is the tensor's reach in elements: 2**31 - 1 stays 32-bit, one more row past it does not
    from tirxpy.lower.codegen.expr import wide_offsets

    assert not wide_offsets(Buffer("A", (2**31 - 1,), "float32"))
    assert wide_offsets(Buffer("A", (2**31,), "float32"))
