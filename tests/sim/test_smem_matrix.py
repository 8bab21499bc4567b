"""tirxpy.sim.smem_matrix: descriptor decoding and the canonical operand addresses (PTX ISA 9.7.15.5.1.2)."""
import numpy as np
import pytest

from tirxpy.intrinsics import descriptors as D
from tirxpy.sim.errors import UnsupportedError
from tirxpy.sim.memory import Bytes
from tirxpy.sim.smem_matrix import decode, operand_addresses, read_operand, tf32


def test_decode_round_trips_descriptor_fields():
    assert decode(D.wgmma_smem_desc(0x400, 128, 256, 0)) == (0x400, 128, 256, 0)
    assert decode(D.wgmma_smem_desc(0x800, 16, 1024, 64)) == (0x800, 16, 1024, 64)
    with pytest.raises(UnsupportedError, match="reserved code"):
        decode(7 << 61, "tcgen05")


def test_k_major_interleaved_addresses():
    """No swizzle: 8 x 16-byte core matrices; rows step 16 B inside one, SBO between 8-row groups,
    LBO between 16-byte K chunks."""
    desc = D.wgmma_smem_desc(0x100, 128, 256, 0)
    a = operand_addresses(desc, 16, 16, "float16", "K")
    assert a.shape == (16, 16)
    assert a[0, 0] == 0x100 and a[0, 1] == 0x102 and a[1, 0] == 0x110
    assert a[9, 10] == 0x100 + 256 + 16 + 128 + 4          # (9//8)*SBO + (9%8)*16 + (20//16)*LBO + 20%16
    assert len(np.unique(a)) == a.size


def test_k_major_128b_swizzle_xors_the_16_byte_chunk_with_the_row():
    desc = D.wgmma_smem_desc(0, 16, 1024, 128)
    a = operand_addresses(desc, 8, 64, "bfloat16", "K")
    for r in range(8):
        for c in (0, 8, 56):
            lin = r * 128 + c * 2
            assert a[r, c] == lin ^ (r << 4)
    assert sorted(a.ravel().tolist()) == list(range(0, 1024, 2))   # a permutation of the 1 KiB atom


def test_mn_major_interleaved_addresses():
    desc = D.wgmma_smem_desc(0, 64, 512, 0)
    a = operand_addresses(desc, 16, 16, "float16", "MN")
    # (r*2 // 16)*SBO + (r*2) % 16 + (c // 8)*LBO + (c % 8)*16
    assert a[0, 0] == 0 and a[1, 0] == 2 and a[0, 1] == 16 and a[8, 0] == 512 and a[0, 8] == 64
    assert a[13, 11] == 512 + 10 + 64 + 48


def test_read_operand_gathers_values():
    smem = Bytes(1024, "smem")
    vals = np.arange(256, dtype=np.float32)
    smem.write(np.arange(256) * 2, vals, "float16")      # row-major 16 x 16 float16 at address 0
    desc = D.wgmma_smem_desc(0, 128, 256, 0)
    a = operand_addresses(desc, 16, 16, "float16", "K")
    got = read_operand(smem, a, "float16")
    assert got.dtype == np.float32
    assert (got == vals[(a // 2)]).all()
    # element (9, 10) sits at byte 404 = element 202 of the flat buffer
    assert got[9, 10] == 202.0


def test_tf32_rounds_to_ten_mantissa_bits_nearest_even():
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20, -(1 + 2 ** -10)], np.float32)
    assert tf32(x).tolist() == [1.0, 1 + 2 ** -9, 1 + 2 ** -10, -(1 + 2 ** -10)]
