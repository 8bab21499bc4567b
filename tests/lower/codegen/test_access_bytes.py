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
