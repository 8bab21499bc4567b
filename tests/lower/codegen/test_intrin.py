"""tirxpy/lower/codegen/intrin.py: intrinsic calls rendered as helper calls, operand by operand kind."""
from types import SimpleNamespace

import pytest

import tirxpy.primitives.gemm.desc  # noqa: F401  (registers gemm_smem_desc)
from tirxpy import T, Tx
from tirxpy.lower import CodegenError, generate
from tirxpy.lower.codegen.intrin import _reg_bytes


def _body(src):
    return src[src.index('extern "C"'):]


def test_operand_kinds_render_by_kind():
    @T.prim_func
    def k(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        frag = T.alloc_local((4,), "uint32")
        s = T.alloc_shared((128, 8), "bfloat16")
        T.ptx.ldmatrix_x4(frag, s[0, 0])
        T.ptx.bulk_wait_group(3)
        A[0] = T.cast(T.ptx.gemm_smem_desc(T.address_of(s[8, 0]), T.uint64(16)), "uint32")

    body = _body(generate(k, "sm_90a").source)
    assert "tx_ldmatrix_x4(frag, tx_smem_addr(&s[0]));" in body        # whole local tile: the array itself
    assert "tx_bulk_wait_group<3>();" in body                            # imm: template argument
    assert "tx_gemm_smem_desc(tx_smem_addr(&s[64]), 16ull)" in body      # row 8 of 8 columns = element 64


def test_vector_operand_of_a_view_is_reinterpreted_at_its_first_slot():
    @T.prim_func
    def k(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        frag = T.alloc_local((8,), "uint32")
        s = T.alloc_shared((128, 8), "bfloat16")
        T.ptx.ldmatrix_x4(frag[4:8], s[0, 0])

    body = _body(generate(k, "sm_90a").source)
    assert "tx_ldmatrix_x4(*reinterpret_cast<uint32_t(*)[4]>(&frag[4]), tx_smem_addr(&s[0]));" in body


def _err(k, arch="sm_90a"):
    with pytest.raises(CodegenError) as ei:
        generate(k, arch)
    return str(ei.value)


def test_shared_address_operand_refuses_a_global_tile():
    @T.prim_func
    def k(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        frag = T.alloc_local((4,), "uint32")
        T.ptx.ldmatrix_x4(frag, A[0])

    assert "operand addr of T.ptx.ldmatrix_x4 is a shared-memory address, but A is in global memory" in _err(k)


def test_vector_operand_needs_a_register_tile():
    @T.prim_func
    def k(A: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        s = T.alloc_shared((128, 8), "bfloat16")
        T.ptx.ldmatrix_x4(A[0], s[0, 0])

    assert "is 4 registers of uint32: pass a register tile" in _err(k)


@pytest.mark.parametrize("c, n", [("h", 2), ("r", 4), ("f", 4), ("l", 8), ("d", 8)])
def test_register_bytes_follow_the_asm_constraint(c, n):
    assert _reg_bytes(SimpleNamespace(constraint=c)) == n


def _tma_stage_kernel(row):
    """A TMA load of a (1, 4) float32 box into stage ``s`` of a shared tile whose stages are ``row`` floats."""
    @T.prim_func
    def k(S: T.Tensor((8, 64), "float32")):
        T.launch(grid=(1,), threads=128)
        buf = T.alloc_shared((4, 1, row), "float32")
        bar = T.alloc_shared((4,), "uint64")
        for s in T.serial(4):
            if T.thread_id() == 0:
                Tx.copy_async(buf[s, 0:1, 0:4], S[s:s + 1, 0:4], mbar=bar[s])
    return k


def test_tma_box_must_start_on_a_128_byte_boundary():
    """Stages of 16 bytes put the box of stage 1 at byte 16: refused with the tile named and the fix; stages of
    128 bytes are accepted."""
    from tirxpy.lower.build import lower_primitives

    msg = _err(lower_primitives(_tma_stage_kernel(4), "sm_90a"))
    assert "the TMA box buf[s, 0, 0] does not start on a 128-byte boundary of shared memory" in msg
    assert "pad each stage of buf to a multiple of 128 bytes" in msg
    body = _body(generate(lower_primitives(_tma_stage_kernel(32), "sm_90a"), "sm_90a").source)
    assert "tx_tma_load_2d(tx_smem_addr(&buf[s * 32])" in body


def test_tma_boxes_at_column_chunks_of_a_wider_tile_are_not_refused():
    """An MN-major B is loaded in 64-column boxes ``Bs[s, :, c0:c0 + 64]`` whose start ``c0`` is a variable: its
    values are not known to codegen, so the box is not judged; the stage index steps whole 128-byte units."""
    from tirxpy.lower.build import lower_primitives
    from tirxpy_kernels.gemm_sm90 import gemm_sm90

    k = gemm_sm90(512, 512, 256, BN=192, a_major="MN", b_major="MN", PINGPONG=False, STAGES=2)
    assert "tx_tma_load_2d" in generate(lower_primitives(k, "sm_90a"), "sm_90a").source
