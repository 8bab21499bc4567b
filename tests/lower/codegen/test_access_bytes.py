"""The width a PTX instruction moves at a global address (``access_bytes``), which a kernel's launch then demands of
the tensor's base address. The expected widths are the PTX ISA's rules: a vector access moves its vector count
times its type's size and needs that alignment; ``cp.async`` moves its cp-size; every bulk operation
(``cp.async.bulk``, ``cp.reduce.async.bulk``, ``cp.async.bulk.prefetch``) needs 16-byte aligned addresses."""
import pytest

from tirxpy import T
from tirxpy.intrinsics import register_intrinsic
from tirxpy.lower.build import build
from tirxpy.lower.codegen.intrin import access_bytes


@pytest.mark.parametrize("template,operand,width", [
    ("ld.global.v4.b32 { {a}, {b}, {c}, {d} }, [{p}];", "p", 16),
    ("ld.global.nc.L1::no_allocate.v2.f64 { {a}, {b} }, [{p}];", "p", 16),
    ("ld.global.b128 {a}, [{p}];", "p", 16),
    ("st.global.v2.bf16x2 [{p}], { {a}, {b} };", "p", 8),
    ("red.global.add.noftz.f16x2 [{p}], {v};", "p", 4),
    ("ld.global.u8 {r}, [{p}];", "p", 1),
    ("cp.async.ca.shared.global [{d}], [{s}], 8;", "s", 8),
    ("cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};", "d", 16),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{d}], [{s}], {n};", "d", 16),
    ("cp.async.bulk.prefetch.L2.global [{p}], {n};", "p", 16),
    # the completion mbarrier of an instruction that signals one is an 8-byte mbarrier, whatever the rest moves
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{bar}];", "bar", 8),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{bar}];", "s", 16),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, { {x}, {y} }], "
     "[{bar}];", "bar", 8),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [{r}], [{bar}];", "r", 16),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [{r}], [{bar}];", "bar", 8),
    ("mbarrier.arrive.expect_tx.shared::cta.b64 {st}, [{bar}], {tx};", "bar", 8),
    # an offset in the brackets: the base is held to the access's width
    ("ld.global.v4.f32 { {a}, {b}, {c}, {d} }, [{p}+16];", "p", 16),
    ("ld.global.v2.u32 { {a}, {b} }, [{p} + {off}];", "p", 8),
    ("@q ld.global.v2.u32 { {a}, {b} }, [{p}-8];", "p", 8),
    # the operand not addressed by this instruction: no demand
    ("mov.b64 {r}, {p};", "p", 1),
])
def test_width_of_an_access(template, operand, width):
    assert access_bytes(template, operand) == width


def test_a_registered_bulk_reduction_asks_16_byte_alignment_of_its_tensor():
    """A user's intrinsic that reduce-adds a shared buffer into global memory with ``cp.reduce.async.bulk`` (the
    non-tensor form) makes the kernel's launch ask 16-byte alignment of the tensor it writes; a pointer 4 bytes off
    would fault on the GPU."""
    red = register_intrinsic(
        "t_bulk_reduce_f32", "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [{dst}], [{src}], 512;",
        [("dst", "gmem_ptr", None, "rw"), ("src", "smem_addr")], lowest="sm_90", replace=True)

    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        s = T.alloc_shared((128,), "float32")
        s[T.thread_id()] = A[T.thread_id()]
        red(T.address_of(B[0]), T.address_of(s[0]))

    specs = {s.name: s.align for s in build(k, "sm_90a").specs}
    assert specs["B"] == 16 and specs["A"] == 4


def _barrier_kernel(dtype, index, count=8, via_address_of=False):
    """A kernel that initializes the mbarrier at element ``index`` (an int, or ``"i"``: a loop over 4) of a shared
    tile of ``dtype``."""
    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=128)
        bars = T.alloc_shared((count,), dtype)
        if T.thread_id() == 0:
            for i in T.serial(4):
                j = i if index == "i" else index
                if via_address_of:
                    T.ptx.mbarrier_init(T.address_of(bars[j]), 1)
                else:
                    T.ptx.mbarrier_init(bars[j], 1)
        A[T.thread_id()] = 1.0
    return k


@pytest.mark.parametrize("dtype,index,ok", [
    ("uint64", 1, True), ("uint64", "i", True),
    ("uint32", 2, True),          # byte 8
    ("uint32", 1, False),         # byte 4
    ("uint32", "i", False),       # bytes 0, 4, 8, 12
    ("uint16", 4, True), ("uint16", 6, False),
])
@pytest.mark.parametrize("via_address_of", [False, True])
def test_an_mbarrier_off_8_bytes_is_refused_at_build(dtype, index, ok, via_address_of):
    """``mbarrier.*.b64`` moves 8 bytes: an element of a narrower tile whose byte offset is not a multiple of 8
    (for some index) is a CodegenError naming the operand, the width and the fix; one on 8 bytes builds."""
    from tirxpy.lower.codegen.errors import CodegenError

    k = _barrier_kernel(dtype, index, via_address_of=via_address_of)
    if ok:
        build(k, "sm_90a")
        return
    with pytest.raises(CodegenError, match=r"operand bar of T.ptx.mbarrier_init: the instruction moves 8 bytes .* "
                                           r"must be 8-byte aligned") as e:
        build(k, "sm_90a")
    assert "uint64" in e.value.hint


def _computed_address_load(align):
    """A user intrinsic whose 16-byte load goes through an address computed inside the template, which the opcode
    reading cannot see; ``align`` declares the width."""
    op = {"name": "p", "kind": "gmem_ptr"} if align is None else {"name": "p", "kind": "gmem_ptr", "align": align}
    return register_intrinsic(
        f"t_ld_computed_{align}", "{ .reg .u64 a; add.u64 a, {p}, 16; ld.global.v4.f32 { {x}, {y}, {z}, {w} }, [a]; }",
        [("x", "reg", "float32", "w"), ("y", "reg", "float32", "w"), ("z", "reg", "float32", "w"),
         ("w", "reg", "float32", "w"), op], replace=True)


@pytest.mark.parametrize("align,want", [(None, 4), (16, 16), (2, 4)])
def test_a_declared_align_sets_what_the_launch_asks(align, want):
    """What the opcode reading cannot see, the operand declares: ``align=16`` makes the launch ask 16 bytes of the
    tensor; without it the tensor is held to its element's 4; a declared width below that changes nothing."""
    ld = _computed_address_load(align)

    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=1)
        r = T.alloc_local((4,), "float32")
        ld(r[0], r[1], r[2], r[3], T.address_of(A[0]))
        B[0] = r[0] + r[1] + r[2] + r[3]

    assert {s.name: s.align for s in build(k, "sm_90a").specs}["A"] == want


def test_a_declared_align_holds_a_shared_element():
    """``align=8`` on a shared address: an element at byte 4 of a ``uint32`` tile is refused at build."""
    from tirxpy.lower.codegen.errors import CodegenError

    arrive = register_intrinsic("t_arrive_declared", "{ .reg .b32 a; mov.b32 a, {bar}; mbarrier.arrive.shared.b64 _, "
                                "[a]; }", [{"name": "bar", "kind": "smem_addr", "align": 8}], replace=True)

    @T.prim_func
    def k(A: T.Tensor((128,), "float32")):
        T.launch(grid=(1,), threads=32)
        bars = T.alloc_shared((4,), "uint32")
        arrive(bars[1])
        A[T.thread_id()] = 1.0

    with pytest.raises(CodegenError, match="moves 8 bytes at the address, which must be 8-byte aligned"):
        build(k, "sm_90a")


@pytest.mark.parametrize("spec,msg", [
    ({"name": "p", "kind": "gmem_ptr", "align": 24}, "align must be a power of two in"),
    ({"name": "p", "kind": "gmem_ptr", "align": 0}, "align must be a power of two in"),
    ({"name": "p", "kind": "gmem_ptr", "align": "16"}, "align must be a power of two in"),
    ({"name": "x", "kind": "reg", "dtype": "uint32", "align": 4}, "align= applies to gmem_ptr and smem_addr"),
])
def test_a_bad_align_is_refused_at_registration(spec, msg):
    from tirxpy.intrinsics.errors import OperandSpecError

    with pytest.raises(OperandSpecError, match=msg):
        register_intrinsic("t_bad_align", "ld.global.u32 {x}, [{p}];", [("x", "reg", "uint32", "w"), spec],
                           replace=True)
