"""GPU tests (marker gpu) of tirxpy_kernels.gemm / tirxpy_kernels.gemm_sm90 on Hopper: results against a
float64 reference on fresh random inputs, output poisoned (NaN) before every launch.

    python -m pytest -q -m gpu tests/kernels/test_gemm_sm90_gpu.py
"""
import pytest
import torch

import tirxpy_kernels

from tests.kernels.late_copy import late_copy

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                 reason="the sm_90a kernel needs a Hopper GPU")]


def _ref(a, b, bias=None, act=None):
    r = a.double() @ b.double()
    if bias is not None:
        r = r + bias.double()
    if act == "relu":
        r = torch.relu(r)
    elif act == "silu":
        r = torch.nn.functional.silu(r)
    return r


def _check(c, ref, out_dtype, K):
    assert not torch.isnan(c).any(), "unwritten (NaN-poisoned) output elements"
    err = ((c.double() - ref).norm() / ref.norm()).item()
    # f32 accumulation of K bf16 products (exact in f32): ~sqrt(K) * 2**-24 relative; plus the output rounding
    tol = {torch.float32: 1e-5, torch.bfloat16: 8e-3, torch.float16: 1e-3}[out_dtype]
    assert err < tol, (tuple(c.shape), K, err)


SHAPES = [(128, 256, 64), (256, 512, 128), (1000, 1000, 1000), (4096, 4096, 512), (8, 4096, 1024),
          (4096, 8, 1024), (1, 1, 8), (333, 777, 520), (129, 257, 65), (2048, 2112, 7168 // 4)]


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_gemm_bf16_matches_float64(M, N, K):
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    c = tirxpy_kernels.gemm(a, w.t(), out)
    torch.cuda.synchronize()
    assert c is out
    _check(c, _ref(a, w.t()), torch.bfloat16, K)


@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("a_col,b_col", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gemm_majors_and_outputs(a_col, b_col, out_dtype, pingpong):
    M, N, K = 320, 384, 200
    dt = torch.float16 if out_dtype == torch.float16 else torch.bfloat16
    a = torch.randn(K, M, device="cuda").to(dt).t() if a_col else torch.randn(M, K, device="cuda").to(dt)
    b = torch.randn(N, K, device="cuda").to(dt).t() if b_col else torch.randn(K, N, device="cuda").to(dt)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    tirxpy_kernels.gemm(a, b, out, PINGPONG=pingpong)
    torch.cuda.synchronize()
    _check(out, _ref(a, b), out_dtype, K)


@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("act", [None, "relu", "silu"])
def test_gemm_bias_activation(act, pingpong):
    M, N, K = 300, 520, 256
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    tirxpy_kernels.gemm(a, w.t(), out, bias=bias, activation=act, PINGPONG=pingpong)
    torch.cuda.synchronize()
    ref = _ref(a, w.t(), bias, act)
    assert not torch.isnan(out).any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err   # silu through the SFU approximations; bias rounded to bf16 like the input


@pytest.mark.parametrize("bn", [176, 192])
def test_gemm_bias_silu_pingpong_16bit_at_the_widths_it_is_capped_to(bn):
    """Fused bias + silu into bf16 is the epilogue with the most registers next to the accumulator
    (tirxpy_kernels.gemm_sm90.widest_bn): ping-pong at 176 and 192, ragged in M, N and K, several tiles per consumer."""
    M, N, K = 700, 1000, 520
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tirxpy_kernels.gemm(a, w.t(), out, bias=bias, activation="silu", PINGPONG=True, BN=bn, sms=4)
    torch.cuda.synchronize()
    _check(out, _ref(a, w.t(), bias, "silu"), torch.bfloat16, K)


# CM=1 at 1100x900x700 gave wrong 8x8 blocks until the k-loops that issue wgmma were kept rolled
# (ptxas read the accumulators above the final wait_group: docs/performance.md, Hopper GEMM lab notes)
@pytest.mark.parametrize("tune", [dict(CM=1), dict(BN=128, STAGES=3), dict(BN=128, CM=1, group=1), dict(CM=2),
                                  dict(BN=192), dict(BN=192, STAGES=3), dict(CM=2, BN=128), dict(DEFER=False),
                                  dict(BN=192, DEFER=False), dict(CM=2, DEFER=False), dict(BN=64, sms=3),
                                  dict(BN=176), dict(BN=80, DEFER=False), dict(BN=112),
                                  dict(BN=176, CM=2), dict(BN=80, CM=2, DEFER=False),
                                  dict(PINGPONG=True), dict(PINGPONG=True, BN=192), dict(PINGPONG=True, BN=176, STAGES=5),
                                  dict(PINGPONG=True, BN=128, CM=2), dict(PINGPONG=True, BN=80, sms=3),
                                  dict(BN=256, SPLIT=(4, 1, 240)), dict(BN=256, SPLIT=(9, 0, 208), sms=7),
                                  dict(BN=128, SPLIT=(3, 2, 112), sms=5), dict(BN=128, SPLIT=(8, 0, 80))])
def test_gemm_tunings(tune):
    M, N, K = 1100, 900, 700
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tirxpy_kernels.gemm(a, w.t(), out, **tune)
    torch.cuda.synchronize()
    _check(out, _ref(a, w.t()), torch.bfloat16, K)


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 3000), (8192, 2048, 3000), (2048, 8192, 4096)])
def test_balanced_split_grids_that_kernels_gemm_picks(M, N, K):
    """Shapes where tirxpy_kernels.gemm deals 240-wide tiles in some rows so the tiles fill the last round
    (tirxpy_kernels.gemm_sm90.balanced_split): every narrow tile's columns, its last (overlapping) chunk included."""
    from tirxpy_kernels.gemm_api import _tile

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert _tile({}, M, N, K, sms).get("SPLIT") is not None
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tirxpy_kernels.gemm(a, w.t(), out)
    torch.cuda.synchronize()
    _check(out, _ref(a, w.t()), torch.bfloat16, K)
    worst = ((out.double() - _ref(a, w.t())).abs() / (a.double().abs() @ w.double().abs().t())).amax(dim=0)
    assert worst.max() < 2 ** -7, worst.argmax()       # column by column: no column of a tile left wrong


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (2048, 8192, 4096)])
def test_an_mn_major_a_on_the_balanced_split(M, N, K):
    """An MN-major a (a.t() of a contiguous (K, M) tensor) at shapes where tirxpy_kernels.gemm applies the balanced
    split: the narrow tiles read A's stages MN-major (transpose_a), every column of them right."""
    from tirxpy_kernels.gemm_api import _major, _tile

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    at = torch.randn(K, M, device="cuda").to(torch.bfloat16)
    a = at.t()
    assert _major(a, 1) == "MN" and _tile({}, M, N, K, sms).get("SPLIT") is not None
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    tirxpy_kernels.gemm(a, w.t(), out)
    torch.cuda.synchronize()
    _check(out, _ref(a, w.t()), torch.bfloat16, K)


def test_gemm_unaligned_k_and_n_are_padded():
    M, N, K = 100, 101, 99
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
    c = tirxpy_kernels.gemm(a, b)
    torch.cuda.synchronize()
    assert c.shape == (M, N)
    _check(c, _ref(a, b), torch.bfloat16, K)


@pytest.mark.parametrize("tuning", [dict(), dict(BN=176, PINGPONG=True), dict(CM=2)])
def test_back_to_back_pdl_launches_read_what_the_previous_one_wrote(tuning):
    """PDL (default on): each launch may start while the previous kernel in the stream is still running and
    must wait for it before reading. A kernel that lets its dependents launch at once and writes ``A`` only
    after ~200 us, then ``C1 = A B``, ``C2 = C1 D``, ``C3 = C2 E`` queued back to back, ``A`` and each output
    NaN-poisoned: a GEMM that read before its ``griddepcontrol.wait`` would see NaN (with the wait skipped at
    run time, 35 of 36 such runs failed on the H100, the three schedules together)."""
    M = K = 1024 + 64 * int(torch.randint(0, 4, (1,)))
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    a_late = torch.full((M, K), float("nan"), device="cuda", dtype=torch.bfloat16)
    # (N, K) weights passed transposed: a K-major B, which every tuning here takes (BN = 176 needs it)
    ws = [(torch.randn(K, K, device="cuda") / K ** 0.5).to(torch.bfloat16).t() for _ in range(3)]
    outs = [torch.full((M, K), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in ws]
    for w in ws:                            # build the kernels first: a compile would let the copy finish
        tirxpy_kernels.gemm(a, w, **tuning)
    torch.cuda.synchronize()
    late_copy(a, a_late)                    # one CTA: the GEMMs start on the other SMs while it spins
    x = a_late
    for w, o in zip(ws, outs):
        x = tirxpy_kernels.gemm(x, w, o, **tuning)
    torch.cuda.synchronize()
    assert torch.equal(a_late, a)
    x = a
    for w, o in zip(ws, outs):
        _check(o, _ref(x, w), torch.bfloat16, K)
        x = o                               # each step against float64 of the input it was given


@pytest.mark.parametrize("tuning", [dict(), dict(BN=176, PINGPONG=True), dict(CM=2, PDL=False)])
def test_chain_captured_in_a_cuda_graph_replays_on_new_inputs(tuning):
    """``torch.cuda.graph`` captures the launches (PDL ones included): a
    chain ``C1 = A B``, ``C2 = C1 D`` captured once, replayed on new values copied into ``A`` with both
    outputs NaN-poisoned before each replay, matches float64 each time."""
    M = K = 768
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    ws = [(torch.randn(K, K, device="cuda") / K ** 0.5).to(torch.bfloat16).t() for _ in range(2)]
    outs = [torch.empty((M, K), device="cuda", dtype=torch.bfloat16) for _ in ws]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):               # warm-up (build, load, tensor maps) outside the capture
        tirxpy_kernels.gemm(tirxpy_kernels.gemm(a, ws[0], outs[0], **tuning), ws[1], outs[1], **tuning)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tirxpy_kernels.gemm(tirxpy_kernels.gemm(a, ws[0], outs[0], **tuning), ws[1], outs[1], **tuning)
    for _ in range(2):
        a.copy_(torch.randn(M, K, device="cuda").to(torch.bfloat16))
        for o in outs:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check(outs[0], _ref(a, ws[0]), torch.bfloat16, K)
        _check(outs[1], _ref(outs[0], ws[1]), torch.bfloat16, K)


def test_repeated_calls_launch_bound_arguments_keyed_by_address():
    """A repeated tirxpy_kernels.gemm call with tensors at the same addresses launches the arguments packed the first
    time (tirxpy_kernels.gemm_api._BOUND): it must read what the tensors hold now, follow new addresses, leave a
    bias it cannot bind (converted, strided) to the checked path, and refuse a bias of the wrong length as the
    first call would."""
    from tirxpy_kernels import gemm_api
    from tirxpy_kernels.gemm_api import GemmArgumentError

    M, N, K = 512, 768, 320
    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    gemm_api._BOUND.clear()
    for _ in range(2):                      # first: checked and recorded; second: bound, same contents
        out.fill_(float("nan"))
        tirxpy_kernels.gemm(a, w.t(), out)
        torch.cuda.synchronize()
        _check(out, _ref(a, w.t()), torch.bfloat16, K)
    assert len(gemm_api._BOUND) == 1
    a.copy_(torch.randn(M, K, device="cuda").to(torch.bfloat16))      # same address, new values
    out.fill_(float("nan"))
    tirxpy_kernels.gemm(a, w.t(), out)
    torch.cuda.synchronize()
    _check(out, _ref(a, w.t()), torch.bfloat16, K)
    a2 = torch.randn(M, K, device="cuda").to(torch.bfloat16)          # a new address: bound anew
    c2 = tirxpy_kernels.gemm(a2, w.t())
    torch.cuda.synchronize()
    _check(c2, _ref(a2, w.t()), torch.bfloat16, K)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    for bb in (bias, torch.randn(2 * N, device="cuda").to(torch.bfloat16)[::2], bias.float()):
        for _ in range(2):
            out.fill_(float("nan"))
            tirxpy_kernels.gemm(a, w.t(), out, bias=bb)
            torch.cuda.synchronize()
            _check(out, _ref(a, w.t(), bb.to(torch.bfloat16)), torch.bfloat16, K)
    with pytest.raises(GemmArgumentError, match=r"bias must be a tensor of shape \(768,\)"):
        tirxpy_kernels.gemm(a, w.t(), out, bias=torch.randn(N - 8, device="cuda").to(torch.bfloat16))


def _odd(*shape, dtype=torch.bfloat16):
    """A contiguous CUDA tensor of ``shape`` whose data starts 2 bytes past a 16-byte boundary (a view at an odd
    offset, as a slice of a packed buffer may be)."""
    n = torch.Size(shape).numel()
    t = torch.empty(n + 8, dtype=dtype, device="cuda")[1:n + 1].view(shape)
    assert t.data_ptr() % 16 == 2
    return t


@pytest.mark.parametrize("M,N,K", [(256, 512, 512), (1000, 1000, 1000), (333, 777, 520), (64, 72, 48)])
@pytest.mark.parametrize("which", ["a", "b", "b_mn", "gate", "all"])
def test_misaligned_inputs_are_copied(M, N, K, which):
    """Inputs that start 2 bytes past a 16-byte boundary (TMA needs one) give the product of their values: first
    calls, and calls like an earlier aligned one (which must not take its stored or bound launch), with a gate, a
    bf16 bias (bindable) and a float32 bias (converted each call); ``out`` NaN-poisoned before each call, and equal
    to the aligned inputs' result. A misaligned ``out`` is refused naming it."""
    from tirxpy_kernels.gemm_api import GemmArgumentError

    a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    w = torch.randn(N, K, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, device="cuda").to(torch.bfloat16) if which == "b_mn" else w.t()   # MN- or K-major
    gate = torch.randn(M, N, device="cuda").to(torch.bfloat16)
    oa, ob, og = a, b, gate
    if which in ("a", "all"):
        oa = _odd(M, K).copy_(a)
    if which in ("b", "all"):
        ob = _odd(N, K).copy_(w).t()
    if which == "b_mn":
        ob = _odd(K, N).copy_(b)
    if which in ("gate", "all"):
        og = _odd(M, N).copy_(gate)
    assert ob.stride() == b.stride()
    for bias in (None, torch.randn(N, device="cuda").to(torch.bfloat16), torch.randn(N, device="cuda")):
        ref = _ref(a, b, None if bias is None else bias.to(torch.bfloat16))     # the bias in the output's dtype
        ref = torch.where(gate.double() <= 0, torch.zeros((), dtype=ref.dtype, device="cuda"), ref)
        out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        want = tirxpy_kernels.gemm(a, b, out, bias=bias, gate=gate).clone()      # aligned: stores its launch
        _check(want, ref, torch.bfloat16, K)
        for _ in range(2):
            out.fill_(float("nan"))
            c = tirxpy_kernels.gemm(oa, ob, out, bias=bias, gate=og)
            torch.cuda.synchronize()
            assert c is out
            _check(c, ref, torch.bfloat16, K)
            assert torch.equal(c, want)
        c = tirxpy_kernels.gemm(oa, ob, bias=bias)                      # no gate, a fresh out
        torch.cuda.synchronize()
        _check(c, _ref(a, b, None if bias is None else bias.to(torch.bfloat16)), torch.bfloat16, K)
    with pytest.raises(GemmArgumentError, match="gemm: out starts 2 bytes past a 16-byte boundary"):
        tirxpy_kernels.gemm(a, b, _odd(M, N))
