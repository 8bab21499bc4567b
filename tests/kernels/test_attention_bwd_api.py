"""tirxpy_kernels.attention_backward's checks and the backward plan, on the CPU (meta tensors): each bad argument
gets an AttentionBwdArgumentError (an ArgumentError) naming it; the kernel compiles for sm_90a."""
import pytest
import torch

import tirxpy
from tirxpy.errors import ArgumentError
from tirxpy_kernels.attention_bwd_api import AttentionBwdArgumentError, attention_backward, check
from tirxpy_kernels.attention_bwd_plan import plan
from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90
from tirxpy_kernels.errors import KernelConfigError


def _meta(B=2, SQ=300, SK=200, H=8, HKV=2, D=128, dtype=torch.bfloat16):
    q = torch.empty(B, SQ, H, D, dtype=dtype, device="meta")
    k = torch.empty(B, SK, HKV, D, dtype=dtype, device="meta")
    lse = torch.empty(B, H, SQ, device="meta")
    return q, k, k.clone(), q.clone(), q.clone(), lse


def test_good_arguments_plan():
    p = check(*_meta(), causal=True)
    assert (p.grid, p.group, p.dq_split) == ((2, 2, 2), 4, "cols")
    # head dim 256: the consumers share 64 keys (4 key blocks of 200), each with 128 columns of dK, dV and dQ
    p = check(*_meta(D=256, dtype=torch.float16), deterministic=True)
    assert (p.BN, p.grid, p.kv_split, p.dq_split, p.dq_cols, p.STAGES) == (64, (4, 2, 2), "cols", "cols", 128, 1)
    assert p.smem <= 227 * 1024


@pytest.mark.parametrize("mutate,words", [
    (lambda a: a.__setitem__(0, a[0].float()), "q has dtype torch.float32"),
    (lambda a: a.__setitem__(1, a[1].half()), "k has dtype torch.float16"),
    (lambda a: a.__setitem__(5, a[5].half()), "lse has dtype"),
    (lambda a: a.__setitem__(5, a[5][:, :4]), "lse has shape (2, 4, 300)"),
    (lambda a: a.__setitem__(4, a[4][:, :10]), "dout has shape"),
    (lambda a: a.__setitem__(2, a[2][:, :, :1]), "must have one shape"),
    (lambda a: a.__setitem__(slice(1, 3), [a[1][..., :64], a[2][..., :64]]), "do not match q"),
    (lambda a: a.__setitem__(slice(0, 1), [a[0][:, :, :4]]) or a.__setitem__(slice(3, 5), [a[3][:, :, :4], a[4][:, :, :4]]),
     "lse has shape (2, 8, 300); it must be (batch, heads, seq_q) = (2, 4, 300)"),
    (lambda a: a.__setitem__(3, "x"), "out must be a torch.Tensor"),
    (lambda a: a.__setitem__(0, a[0][0]), "q must be 4-D"),
])
def test_bad_tensors_are_named(mutate, words):
    args = list(_meta())
    mutate(args)
    with pytest.raises(AttentionBwdArgumentError) as e:
        check(*args)
    assert words in str(e.value)
    assert isinstance(e.value, ArgumentError)


def test_bad_head_dim_and_groups_and_flags():
    q, k, v, o, do, lse = _meta(D=96)
    with pytest.raises(AttentionBwdArgumentError, match="head dim 96"):
        check(q, k, v, o, do, lse)
    q, k, v, o, do, lse = _meta(H=6, HKV=4)
    with pytest.raises(AttentionBwdArgumentError, match="6 query heads"):
        check(q, k, v, o, do, lse)
    with pytest.raises(AttentionBwdArgumentError, match="causal must be True or False"):
        check(*_meta(), causal=1)
    with pytest.raises(AttentionBwdArgumentError, match="deterministic must be True or False"):
        check(*_meta(), deterministic="yes")
    for bad in (0, -1.0, float("nan"), True, "0.1"):
        with pytest.raises(AttentionBwdArgumentError, match="scale must be"):
            check(*_meta(), scale=bad)


def test_scale_follows_the_forwards_rule():
    """The backward's ``scale`` is the forward's, under the forward's rule (attention_plan.check_scale): a scale
    past float32 once multiplied by log2(e) (1e300; the kernel's exp2 argument went infinite: a wrong gradient), an
    int past every float (2 ** 2000: OverflowError) and a bad value given to the kernel factory itself (taken as
    float(scale): -1 and NaN built a kernel, 'x' raised ValueError) are refused naming scale; numpy floats the
    forward takes are taken."""
    import numpy as np

    for bad in (1e300, 2 ** 2000, 10 ** 39, float("inf")):
        with pytest.raises(AttentionBwdArgumentError, match="attention_backward: scale must be a positive finite"):
            check(*_meta(), scale=bad)
    check(*_meta(), scale=np.float32(0.125))
    for bad in ("x", -1.0, float("nan"), 1e300, 2 ** 2000):
        with pytest.raises(KernelConfigError, match="attention_bwd_sm90: scale must be a positive finite"):
            attention_bwd_sm90(1, 4, 2, 128, 128, 64, scale=bad)


@pytest.mark.parametrize("bad", ["yes", None, 1, 0, 2.5, [True]])
def test_varlen_backward_names_a_deterministic_that_is_not_a_bool(bad):
    """``attention_varlen_backward(deterministic=...)`` takes True or False as ``attention_backward`` does, refused
    before the device (every value reached the device check unchecked; on a GPU the plan took the ints 0 / 1 and
    refused the rest with its own error after the device was chosen)."""
    from tirxpy_kernels.attention_bwd_api import attention_varlen_backward
    from tirxpy_kernels.attention_varlen_api import VarlenArgumentError

    q, k, lse = (torch.zeros(256, 4, 64, dtype=torch.bfloat16), torch.zeros(256, 2, 64, dtype=torch.bfloat16),
                 torch.zeros(4, 256))
    cu = torch.tensor([0, 100, 256], dtype=torch.int32)
    with pytest.raises(VarlenArgumentError, match="attention_varlen_backward: deterministic must be True or False"):
        attention_varlen_backward(q, k, k, q, q, lse, cu, cu, 156, 156, deterministic=bad)
    with pytest.raises(AttentionBwdArgumentError, match="CUDA device"):
        attention_varlen_backward(q, k, k, q, q, lse, cu, cu, 156, 156, deterministic=True)


def test_numpy_bool_flags_are_taken_as_python_bools_and_ints_are_not():
    import numpy as np

    p = check(*_meta(), causal=np.bool_(True), deterministic=np.bool_(False))
    assert type(p.causal) is bool and p.causal and type(p.deterministic) is bool and not p.deterministic
    for name in ("causal", "deterministic"):
        msg = rf"attention_backward: {name} must be True or False, got (np\.int64\()?1"
        with pytest.raises(AttentionBwdArgumentError, match=msg):
            check(*_meta(), **{name: np.int64(1)})


def test_grads_that_share_memory_are_refused():
    """``grads=`` tensors the kernels write: two that share memory (one gradient would overwrite the other), or
    one that holds a location at several indices, are refused before anything runs."""
    q = torch.zeros(1, 128, 2, 64, dtype=torch.bfloat16)
    ins = (q, q.clone(), q.clone(), q.clone(), q.clone(), torch.zeros(1, 2, 128))
    g = torch.empty_like(q)
    with pytest.raises(AttentionBwdArgumentError, match="grads' dk and dv share memory"):
        attention_backward(*ins, grads=(torch.empty_like(q), g, g))
    half = torch.empty(2 * q.numel() - 64, dtype=q.dtype)      # dv starts inside dq
    dq, dv = half[:q.numel()].view(q.shape), half[q.numel() - 64:].view(q.shape)
    with pytest.raises(AttentionBwdArgumentError, match="grads' dq and dv share memory"):
        attention_backward(*ins, grads=(dq, torch.empty_like(q), dv))
    wide = torch.empty(1, 1, 2, 64, dtype=q.dtype).expand(q.shape)
    with pytest.raises(AttentionBwdArgumentError, match=r"grads' dk \(strides \(128, 0, 64, 1\)\) holds one memory "
                                                        r"location at several indices .*torch.empty_like\(k\)"):
        attention_backward(*ins, grads=(torch.empty_like(q), wide, torch.empty_like(q)))
    packed = torch.empty(1, 128, 3, 2, 64, dtype=q.dtype)     # three slices of one tensor share no element
    with pytest.raises(AttentionBwdArgumentError, match="CUDA device"):
        attention_backward(*ins, grads=tuple(packed.unbind(2)))


def test_cpu_tensors_are_refused():
    q, k = torch.zeros(1, 64, 2, 64, dtype=torch.bfloat16), torch.zeros(1, 128, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(AttentionBwdArgumentError, match="CUDA device"):
        attention_backward(q, k, k, q, q, torch.zeros(1, 2, 64))


def test_plan_refuses_what_it_cannot_build():
    with pytest.raises(KernelConfigError, match="PACKED must be True or False"):
        plan(2, 8, 2, 300, 200, 128, PACKED="yes")
    with pytest.raises(KernelConfigError, match="FOLD must be True or False"):
        plan(2, 8, 2, 300, 200, 128, FOLD="yes")
    with pytest.raises(KernelConfigError, match="fewer than one block"):
        attention_bwd_sm90(2, 2, 1, 100, 100, 64, SQT=40, SKT=300, PACKED=True)
    with pytest.raises(KernelConfigError, match="BM=64"):
        plan(1, 2, 2, 256, 256, 128, BM=128)
    with pytest.raises(KernelConfigError, match="use DQ_SPLIT='cols'"):
        plan(1, 2, 2, 256, 256, 128, DQ_SPLIT="keys")
    with pytest.raises(KernelConfigError, match="shared memory"):
        plan(1, 2, 2, 256, 256, 128, STAGES=4)
    with pytest.raises(KernelConfigError, match="shorter than one block"):
        attention_bwd_sm90(1, 2, 2, 100, 100, 64)
    with pytest.raises(KernelConfigError, match="head dim 256: the consumers share 64 keys"):
        plan(1, 2, 2, 256, 256, 256, DQ_SPLIT="keys")
    # K, V; 2 stages of Q, dO; 2 dS^T and 2 P^T buffers; LSE and D; two 64 x 128 float32 dQ stagings; alignment;
    # the barriers (K and V's, two a stage, two a consumer's dQ staging)
    need = 2 * 64 * 256 * 2 + 2 * 2 * 64 * 256 * 2 + 4 * 64 * 64 * 2 + 2 * 2 * 64 * 4 + 2 * 64 * 128 * 4 + 1024 + 9 * 8
    with pytest.raises(KernelConfigError, match=f"2 stages need {need} bytes"):
        plan(1, 2, 2, 256, 256, 256, STAGES=2)
    for bad in (2, "yes", 1.5):
        with pytest.raises(KernelConfigError, match="FUSE_DQ must be True or False"):
            plan(1, 2, 2, 256, 256, 128, FUSE_DQ=bad)
    # 65536 / 64 query blocks of 64 query heads a CTA: a 16-bit count per step, per consumer, past shared memory
    with pytest.raises(KernelConfigError, match=r"FUSE_DQ=False \(its counts of adds take 262144 bytes\)"):
        plan(1, 64, 1, 65536, 256, 256, FUSE_DQ=True)
    with pytest.raises(KernelConfigError, match="counts the adds into a dQ block in 16 bits"):
        plan(1, 1, 1, 64, 64 * 65536, 256, FUSE_DQ=True)
    with pytest.raises(KernelConfigError, match="dq_strides is for the dense kernel with FUSE_DQ=True"):
        attention_bwd_sm90(1, 2, 2, 256, 256, 128, dq_strides=(256 * 256, 256))
    with pytest.raises(KernelConfigError, match="must be multiples of 8"):
        attention_bwd_sm90(1, 2, 2, 256, 256, 128, FUSE_DQ=True, dq_strides=(256 * 260, 260))
    with pytest.raises(KernelConfigError, match="a \\(batch, token\\) pair"):
        attention_bwd_sm90(1, 2, 2, 256, 256, 128, FUSE_DQ=True, dq_strides=[0, 256])
    with pytest.raises(KernelConfigError, match="shorter than one block"):
        attention_bwd_sm90(1, 2, 2, 100, 50, 256)
    for bad in (-1, 65, 1.5, "3", True):
        with pytest.raises(KernelConfigError, match="TAIL"):
            plan(1, 2, 2, 256, 256, 128, causal=True, TAIL=bad)
    for bad in (0, -4, 2.0, None):
        with pytest.raises(KernelConfigError, match="sms"):
            plan(1, 2, 2, 256, 256, 128, sms=bad)
    with pytest.raises(KernelConfigError, match="ROTATE must be True or False"):
        plan(1, 2, 2, 256, 256, 64, ROTATE="on")
    for kw in (dict(causal=True), dict(deterministic=True)):
        with pytest.raises(KernelConfigError, match="ROTATE=True is for a non-causal, non-deterministic kernel"):
            plan(1, 2, 2, 256, 256, 64, ROTATE=True, **kw)
    with pytest.raises(KernelConfigError, match="TRAIL must be True or False"):
        plan(1, 2, 2, 256, 256, 128, TRAIL="on")
    with pytest.raises(KernelConfigError, match=r"TRAIL=True is for consumers of 64 keys each .* at head dim 256"):
        plan(1, 2, 2, 256, 256, 256, TRAIL=True)
    with pytest.raises(KernelConfigError, match="TRAIL=True is for the unordered dQ adds"):
        plan(1, 2, 2, 256, 256, 128, TRAIL=True, deterministic=True)
    assert plan(1, 2, 2, 256, 256, 128).trail and plan(1, 2, 2, 256, 256, 64).trail
    assert not plan(1, 2, 2, 256, 256, 256).trail
    p64 = plan(1, 2, 2, 256, 256, 64, DQ_SPLIT="keys", TRAIL=True)  # meetings half a step apart; by keys: no lag
    assert p64.trail and not p64.lag and p64.ds_bufs == 2 and plan(1, 2, 2, 256, 256, 128).lag
    # head dim 64, dQ by columns: 32 columns a consumer, K in 64-byte-swizzled boxes of 32 columns (a wgmma B
    # operand is whole swizzle atoms); with deterministic (no trail) dQ goes by keys, K in 128-byte boxes
    p64 = plan(1, 2, 2, 256, 256, 64)
    assert (p64.dq_split, p64.dq_cols, p64.k_box, p64.lag, p64.ds_bufs) == ("cols", 32, 32, True, 3)
    p64 = plan(1, 2, 2, 256, 256, 64, deterministic=True)
    assert (p64.dq_split, p64.dq_cols, p64.k_box, p64.trail) == ("keys", 64, 64, False)
    assert plan(1, 2, 2, 256, 256, 128).k_box == plan(1, 2, 2, 256, 256, 256).k_box == 64
    assert not plan(1, 2, 2, 256, 256, 128, deterministic=True).trail
    with pytest.raises(KernelConfigError, match="3 stages need .* use fewer stages or TRAIL=False"):
        plan(1, 2, 2, 256, 256, 128, STAGES=3)
    assert plan(1, 2, 2, 256, 256, 128, STAGES=3, TRAIL=False).STAGES == 3
    assert plan(1, 2, 2, 256, 256, 128).smem - plan(1, 2, 2, 256, 256, 128, TRAIL=False).smem == 128 * 64 * 2


@pytest.mark.parametrize("D,causal,det,packed,fuse", [(64, True, False, False, False), (128, False, False, False, False),
                                                      (128, True, True, False, False), (256, True, True, False, False),
                                                      (128, False, False, True, False), (128, True, False, False, True),
                                                      (128, True, False, True, True)])
def test_compiles_for_sm90a(D, causal, det, packed, fuse):
    kw = dict(SQT=32768, SKT=32768, PACKED=True) if packed else {}
    kw["FUSE_DQ"] = fuse
    c = tirxpy.compile(attention_bwd_sm90(2, 16, 4, 4096, 4096, D, causal=causal, deterministic=det, **kw),
                       arch="sm_90a")
    # FUSE_DQ: the dQ writer's count (an atom at 24 registers a thread, in one producer thread, off the consumers'
    # path) spills a few words; the same kernel without the count spills nothing
    assert c.resources.spill_stores <= (64 if fuse else 16 if D == 64 else 0)
    # no remark from ptxas: the wgmmas stay pipelined, and no warpgroup.wait is injected before the dQ staging
    # reads its registers under the next step's S^T (C7517)
    assert c.resources.perf_warnings == ()


@pytest.mark.parametrize("argv,msg", [
    (["attention-bwd", "--shapes", "4096x128"], "'4096x128' is not SxDxC"),
    (["attention-bwd", "--shapes", "4096x96x1"], "head dim 96 is not supported by the backward kernel"),
    (["attention-bwd", "--tune", "FOO=1"], "unknown option 'FOO'; the kernel takes BM, STAGES"),
    (["attention-bwd", "--tune", "BM=128"], "--tune BM=128 at 4096x128x0: attention_bwd_sm90: BM = 128"),
    (["attention-bwd", "--tune", ";TRAIL=1", "--shapes", "4096x256x1"],
     "--tune TRAIL=1 at 4096x256x1: attention_bwd_sm90: TRAIL=True is for consumers of 64 keys each"),
    (["attention-bwd", "--sim", "--reps", "3"], "--reps does not apply"),
])
def test_bench_refuses_bad_arguments_before_any_gpu_work(argv, msg, capsys):
    from tirxpy_kernels.bench import main

    assert main(argv) == 2
    assert msg in capsys.readouterr().err
