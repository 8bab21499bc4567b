"""TMA copies: chosen for one issuing thread with a dense (swizzled) box; reasons for every
rejected fact; the tensor map's box and swizzle as codegen derives them; NVRTC for sm_90a / sm_100a."""
import pytest

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected

P = 'A: T.Tensor((1000, 256), "bfloat16"), B: T.Tensor((1000, 256), "bfloat16")'
SW = "ComposeLayout(swizzle_128B('bf16'), TileLayout(S[(3, 128, 64)]))"


def _k(call, layout=SW, guard="if T.elect_one():", cluster=""):
    return kernel(P, f"""
    s = T.alloc_shared((3, 128, 64), "bfloat16", layout={layout})
    bar = T.alloc_shared((3,), "uint64")
    r0 = T.cta_id(0) * 128
    {guard}
        {call}""", threads=128, grid=8)


def test_load_store_reduce_multicast():
    k = _k("Tx.copy_async(s[1], A[r0:r0 + 128, 64:128], mbar=bar[1])")
    (v, st), = choices(k)
    assert v == "tma_load" and intrinsics(st) == ["mbarrier_arrive_expect_tx", "tma_load_2d"]
    assert "T.uint32(16384)" in str(st)  # expect_tx bytes: 128 x 64 bf16
    k = _k("Tx.copy_async(s[1], A[r0:r0 + 128, 64:128], mbar=bar[1], arrive=False, multicast=3)")
    assert intrinsics(choices(k)[0][1]) == ["mbarrier_expect_tx", "tma_load_2d_multicast"]
    k = _k("Tx.copy_async(B[r0:r0 + 128, 0:64], s[0])")
    assert intrinsics(choices(k)[0][1]) == ["tma_store_2d", "bulk_commit_group"]
    k = _k("Tx.copy_async(B[r0:r0 + 128, 0:64], s[0], reduce='add')")
    assert intrinsics(choices(k)[0][1]) == ["tma_reduce_add_2d", "bulk_commit_group"]


def test_reasons():
    err = rejected(_k("Tx.cta.copy_async(s[1], A[r0:r0 + 128, 64:128], mbar=bar[1])", guard="if True:"))
    assert reason(err, "tma_load") == ("call runs on the whole CTA (128 threads); a TMA copy is issued by one thread "
                                       "(put it under `if T.elect_one():`)")
    err = rejected(_k("Tx.copy_async(s[1], A[r0:r0 + 128, 0:64], mbar=bar[1])",
                      layout="TileLayout(S[(3, 128, 64) : (8192, 1, 128)])"))
    assert reason(err, "tma_load") == ("s is not the dense row-major box (128, 64) TMA writes: element (1, 0) is at "
                                       "offset 1, TMA puts it at 64")
    # without mbar= one elected thread may still issue cp.async for the whole tile
    assert choices(_k("Tx.copy_async(s[1], A[r0:r0 + 128, 64:128])"))[0][0] == "cp_async"
    err = rejected(_k("Tx.copy_async(s[1], A[r0:r0 + 128, 64:128], dispatch='tma_load')"))
    assert reason(err, "tma_load") == "a TMA load completes on an mbarrier: pass mbar=bar[stage]"
    err = rejected(_k("Tx.copy_async(s[1], A[r0:r0 + 128, 64:128], mbar=bar[1])"), "sm_80")
    assert reason(err, "tma_load") == "target sm_80: needs sm_90; the kernel targets sm_80"
    err = rejected(_k("Tx.copy_async(B[r0:r0 + 128, 0:64], s[0], reduce='max')"))
    assert reason(err, "tma_store") == "reduce='max': TMA reductions here support 'add'"


@pytest.mark.parametrize("c0, ok", [(8, True), (64, True), (4, False), (1, False)])
def test_a_constant_box_start_must_be_16_byte_aligned_in_the_innermost_dimension(c0, ok):
    """bf16 columns 8 and 64 start 16 and 128 bytes in; 4 and 1 start 8 and 2 bytes in, which the TMA unit faults on
    (the simulator reports a device-valued start; a constant one is refused here, for loads and stores)."""
    for call, variant in ((f"Tx.copy_async(s[1], A[r0:r0 + 128, {c0}:{c0 + 64}], mbar=bar[1])", "tma_load"),
                          (f"Tx.copy_async(B[r0:r0 + 128, {c0}:{c0 + 64}], s[0])", "tma_store")):
        if ok:
            assert choices(_k(call))[0][0] == variant
            continue
        assert reason(rejected(_k(call)), variant) == (
            f"the box starts at element {c0} of {'A' if variant == 'tma_load' else 'B'}'s innermost dimension "
            f"({c0 * 2:g} bytes), not a multiple of 16 bytes, which the TMA unit faults on: start it at a multiple of "
            "8 elements")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_compiles_with_derived_tensor_maps(arch):
    k = kernel(P, f"""
    s = T.alloc_shared((3, 128, 64), "bfloat16", layout={SW})
    bar = T.alloc_shared((3,), "uint64")
    r0 = T.cta_id(0) * 128
    if T.elect_one():
        Tx.copy_async(s[0], A[r0:r0 + 128, 0:64], mbar=bar[0])
        Tx.copy_async(B[r0:r0 + 128, 0:64], s[0])""", threads=128, grid=8)
    ck = compile_ok(k, arch)
    assert [(t.box, t.swizzle) for t in ck.unit.tmaps] == [((128, 64), 128), ((128, 64), 128)]
