"""The ``dq`` conversion after the attention backward kernel (:mod:`tirxpy_kernels.attention_bwd_post`): the kernel in
the simulator against torch's own conversion (bit-equal: both round to nearest even) into NaN-poisoned slices of a
packed ``dqkv`` at ragged lengths, the layouts it takes and refuses, and its config errors; on the GPU, the same
against torch."""
from __future__ import annotations

import pytest
import torch

from tirxpy.sim import run
from tirxpy_kernels.attention_bwd_post import attention_bwd_dq_store, dq_strides
from tirxpy_kernels.errors import KernelConfigError


def _accumulator(B, S, H, D, device="cpu"):
    """A float32 ``dQacc`` whose values need rounding (and some past bf16's precision by far)."""
    g = torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    x = torch.randn(B, S, H, D, generator=g, device=device) * 30
    x.view(-1)[::97] *= 1e30
    return x


@pytest.mark.parametrize("B,S,H,D,dtype", [
    (2, 70, 2, 64, torch.bfloat16),     # a last CTA of 6 rows
    (1, 130, 3, 128, torch.float16),    # two 64-column halves per head
    (1, 64, 1, 256, torch.bfloat16),    # whole CTAs only
])
def test_store_into_a_packed_slice_matches_torch_bit_for_bit(B, S, H, D, dtype):
    x = _accumulator(B, S, H, D)
    qkv = torch.full((B, S, 3, H, D), float("nan"), dtype=dtype)
    dq = qkv[:, :, 0]
    st = dq_strides(dq)
    assert st == (S * 3 * H * D, 3 * H * D)
    res = run(attention_bwd_dq_store(B, S, H, D, str(dtype).removeprefix("torch."), *st), x, dq,
              seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert torch.equal(qkv[:, :, 0].view(torch.int16), x.to(dtype).view(torch.int16))
    assert torch.isnan(qkv[:, :, 1:].float()).all()                 # dk's and dv's slices untouched


def test_dense_strides_by_default():
    x = _accumulator(1, 65, 2, 64)
    y = torch.full((1, 65, 2, 64), float("nan"), dtype=torch.bfloat16)
    assert dq_strides(y) == (65 * 2 * 64, 2 * 64)
    assert run(attention_bwd_dq_store(1, 65, 2, 64), x, y).problems == []
    assert torch.equal(y, x.to(torch.bfloat16))


def test_layouts_its_vectors_cannot_write_are_left_to_torch():
    base = torch.empty(2, 64, 4, 64, dtype=torch.bfloat16)
    assert dq_strides(base) is not None
    assert dq_strides(base.transpose(1, 2).contiguous().transpose(1, 2)) is None     # heads not side by side
    assert dq_strides(torch.empty(2, 64, 4, 65, dtype=torch.bfloat16)[..., :64]) is None  # heads 130 bytes apart
    assert dq_strides(torch.empty(2, 64, 4, 128, dtype=torch.bfloat16)[..., ::2]) is None  # columns strided
    assert dq_strides(torch.empty(2 * 64 * 4 * 64 + 1, dtype=torch.bfloat16)[1:].view(2, 64, 4, 64)) is None
    assert dq_strides(torch.empty(1, 1, 4, 64, dtype=torch.bfloat16).expand(2, 64, 4, 64)) is None  # rows overlap
    assert dq_strides(torch.empty(2, 63, 4, 64, dtype=torch.bfloat16)) is None       # under one tile of rows
    one_head = torch.empty(2, 1, 64, 64, dtype=torch.bfloat16).transpose(1, 2)       # head stride 4096, not 64
    assert one_head.stride()[2] != 64 and dq_strides(one_head) is None


@pytest.mark.parametrize("args,match", [
    ((1, 80, 2, 96), "head dim D = 96 must be a multiple of 64"),
    ((1, 63, 2, 64), "S_ = 63 rows are fewer than one tile of 64"),
    ((1, 80, 2, 64, "bfloat16", None, 132), "ss = 132 / sb = 10560 must be multiples of 8"),
    ((1, 80, 2, 64, "bfloat16", None, 64), "at least H \\* D = 128"),
    ((1, 80, 2, 64, "bfloat16", -8), "sb = -8 is out of range"),
    ((0, 80, 2, 64), "B = 0 is out of range"),
    ((1, 80.0, 2, 64), "S_ must be an int"),
    ((1, 80, 2, 64, "float32"), "dtype must be one of"),
])
def test_config_errors_name_the_fix(args, match):
    with pytest.raises(KernelConfigError, match=match):
        attention_bwd_dq_store(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("S,D", [(300, 128), (4096, 64)])
def test_store_on_the_gpu_matches_torch(S, D):
    from tirxpy_kernels.attention_bwd_post import dq_store

    B, H = 2, 4
    x = _accumulator(B, S, H, D, "cuda")
    qkv = torch.full((B, S, 3, H, D), float("nan"), dtype=torch.bfloat16, device="cuda")
    dq_store(qkv[:, :, 0], "bfloat16")(x, qkv[:, :, 0])
    torch.cuda.synchronize()
    assert torch.equal(qkv[:, :, 0].view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    assert torch.isnan(qkv[:, :, 1:].float()).all()
