import pytest
import torch

from tirxpy.lower.errors import LaunchError, TmaError
from tirxpy.lower.runtime import ArgPacker, ParamSpec
from tirxpy.lower.tma import swizzle_of_layout, tma_params, tma_params_for


def test_2d_bf16_128b():
    p = tma_params((256, 512), (512, 1), "bfloat16", (64, 64), swizzle=128, data_ptr=0x10000)
    assert (p.dtype_enum, p.rank, p.global_dims, p.global_strides) == (9, 2, (512, 256), (1024,))
    assert (p.box_dims, p.element_strides, p.swizzle, p.l2_promotion, p.oob_fill, p.interleave) == ((64, 64), (1, 1), 3, 2, 0, 0)
    assert p.box_bytes == 64 * 64 * 2


def test_5d_and_strided_view():
    t = torch.zeros(2, 3, 4, 8, 64, dtype=torch.float16)
    p = tma_params(t.shape, t.stride(), "float16", (1, 1, 2, 8, 32), swizzle=64)
    assert p.global_dims == (64, 8, 4, 3, 2) and p.global_strides == (128, 1024, 4096, 12288)
    assert p.box_dims == (32, 8, 2, 1, 1) and p.swizzle == 2
    sub = torch.zeros(128, 256, dtype=torch.float32)[:, 64:128]
    q = tma_params(sub.shape, sub.stride(), "float32", (16, 32), swizzle=128)
    assert q.global_dims == (64, 128) and q.global_strides == (1024,)
    assert tma_params((100,), (1,), "float8_e4m3", (64,)).dtype_enum == 0


@pytest.mark.parametrize("args, kw, msg", [
    (((64, 64), (64, 1), "float32", (8, 8)), dict(data_ptr=0x1008), "16-byte aligned global address, got 0x1008"),
    (((64, 64), (1, 64), "float32", (8, 8)), {}, r"innermost dimension must be contiguous"),
    (((64, 6), (6, 1), "float32", (8, 4)), {}, r"stride of dimension 0 is 24 bytes.*multiple of 16 bytes.*multiple of 4 elements"),
    (((2,) * 6, (32, 16, 8, 4, 2, 1), "float32", (1,) * 6), {}, "rank 1..5"),
    (((64, 64), (64, 1), "float32", (8,)), {}, "same rank"),
    (((64, 512), (512, 1), "float32", (300, 8)), {}, "box dimension 0 is 300"),
    (((64, 64), (64, 1), "float16", (8, 4)), {}, "inner box dimension is 8 bytes"),
    (((64, 512), (512, 1), "bfloat16", (64, 128)), dict(swizzle=128), r"128B swizzle needs the inner box dimension <= 128 bytes, got 128 x 2 = 256 bytes; split the tile into boxes of 64 elements"),
    (((64, 64), (64, 1), "bfloat16", (8, 32)), dict(swizzle=48), "swizzle must be 0, 32, 64 or 128"),
    (((64, 64), (64, 1), "complex64", (8, 8)), {}, "cannot move dtype"),
    (((0, 64), (64, 1), "float32", (8, 8)), {}, r"every dimension must be in \[1, 2\*\*32\)"),
    (((64, 64), (64, 1), "float32", (8, 8)), dict(element_strides=(1, 9)), "element stride 9"),
    (((64, 64), (64, 1), "float32", (8, 8)), dict(element_strides=(1,)), "element_strides"),
    (((64, 64), (64, 1), "float32", (8, 8)), dict(l2_promotion=32), "l2_promotion"),
    (((64, 64), (64, 1), "int32", (8, 8)), dict(oob_fill="nan"), "floating-point dtype"),
    (((64, 64), (64, 1), "float32", (8, 8)), dict(oob_fill="inf"), "oob_fill must be"),
    ((("a", 64), (64, 1), "float32", (8, 8)), {}, "shape must be a sequence of ints"),
])
def test_validation_errors(args, kw, msg):
    with pytest.raises(TmaError, match=msg):
        tma_params(*args, **kw)


def test_swizzle_from_layout():
    from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_for

    dense = TileLayout(S[(64, 64) : (64, 1)])
    assert swizzle_of_layout(ComposeLayout(*_sw(swizzle_for(128, "bfloat16")), dense), "bfloat16", (64, 64)) == 128
    assert swizzle_of_layout(dense, "bfloat16", (64, 64)) == 0
    assert swizzle_of_layout(ComposeLayout(*_sw(swizzle_for(32, "float32")), TileLayout(S[(16, 8) : (8, 1)])),
                             "float32", (16, 8)) == 32
    with pytest.raises(TmaError, match=r"not the dense row-major box \(64, 64\).*element \(1, 0\) is at offset 1, TMA puts it at 64"):
        swizzle_of_layout(TileLayout(S[(64, 64) : (1, 64)]), "bfloat16", (64, 64))
    with pytest.raises(TmaError, match="is not a TMA swizzle for bfloat16"):
        swizzle_of_layout(ComposeLayout(1, 2, 3, dense), "bfloat16", (64, 64))
    with pytest.raises(TmaError, match="must be a TileLayout or ComposeLayout"):
        swizzle_of_layout("x", "bfloat16", (64, 64))


def _sw(s):
    return s.per_element, s.swizzle_len, s.atom_len


def test_params_for_tensor_and_launch_error_names_param():
    from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_for

    t = torch.zeros(128, 64, dtype=torch.bfloat16)
    L = ComposeLayout(*_sw(swizzle_for(128, "bfloat16")), TileLayout(S[(64, 64) : (64, 1)]))
    p = tma_params_for(t, (64, 64), L)
    assert p.swizzle == 3 and p.global_dims == (64, 128)
    bad = torch.zeros(128, 65, dtype=torch.bfloat16)[:, :64]  # row pitch 130 bytes
    pk = ArgPacker([ParamSpec("A", "tensormap", dtype="bfloat16", box=(64, 64), layout=L, align=1)], device="cpu")
    with pytest.raises(LaunchError, match=r"parameter 'A': A: stride of dimension 0 is 130 bytes"):
        pk.pack([bad])
