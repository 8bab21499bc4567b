"""The Hopper FP8 GEMM (tirxpy_kernels.gemm_sm90 with ``scaling=``, tirxpy_kernels.gemm_fp8): each scaling through
the simulator at ragged shapes against the float64 product of the dequantized operands, the argument checks
on meta tensors, and on the GPU against float64 with NaN-poisoned outputs (outliers, ragged M / N / K,
bias, every output dtype, e5m2), the block scaling's error at K = 16384 against cuBLAS's per-tensor one."""
import dataclasses
import itertools

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tirxpy_kernels
from tirxpy.sim import run
from tirxpy_kernels.bench_fp8 import reference
from tirxpy_kernels.errors import KernelConfigError
from tirxpy_kernels.gemm_fp8_api import Fp8ArgumentError, _checked_plan, _scale_args, check, scales
from tirxpy_kernels.gemm_fp8_plan import BLOCK_SCALE, block_part, block_tile_cost, choose_block_tile
from tirxpy_kernels.gemm_plan import kernel_plan
from tirxpy_kernels.gemm_sm90 import build, gemm_sm90, scale_shapes

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def _fresh():
    return torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))


def _operands(M, N, K, g, dtype=E4M3, outliers=False, b_dtype=None):
    a = torch.randn(M, K, generator=g) * 2
    w = torch.randn(N, K, generator=g) * 2
    if outliers:        # a few large entries, up to e4m3's largest finite value: the scales must keep the rest representable
        a[torch.rand(M, K, generator=g) < 0.01] *= 100
    return a.clamp(-448, 448).to(dtype), w.to(b_dtype or dtype)


def _scales(scaling, M, N, K, g):
    kb, nb = -(-K // 128), -(-N // 128)
    shapes = {"tensor": ((), ()), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, nb))}[scaling]
    return tuple(torch.rand(s, generator=g) + 0.5 for s in shapes)


@pytest.mark.parametrize("M,N,K,scaling,BN,out_dtype,bias,dtype,b_dtype,opts", [
    (136, 200, 144, "row", 128, "float32", True, E4M3, E4M3, {}),      # row scales with a fused bias, float32 output
    (200, 264, 144, "block", 128, "bfloat16", False, E4M3, E4M3, {}),  # three column blocks, ragged last k-block
    (130, 128, 400, "block", 128, "float16", True, E5M2, E4M3, {}),    # e5m2 x e4m3, four k-blocks, bias
    (200, 200, 144, "tensor", 192, "bfloat16", False, E5M2, E5M2, {}),  # a 192-wide tile, ragged M, N, K
    (130, 400, 144, "block", 256, "bfloat16", False, E4M3, E4M3, {}),  # two B scales per tile, 4 parts in 2 buffers
    (130, 300, 272, "block", 256, "float32", True, E4M3, E4M3, {"PART": 128}),     # 2 parts in one buffer, bias
    (136, 440, 144, "block", 192, "bfloat16", False, E4M3, E4M3, {}),  # one whole-tile part, tiles starting mid-block
    (130, 440, 272, "block", 192, "float32", True, E4M3, E4M3, {"PART": 64}),     # three 64-column parts, two buffers
    (130, 200, 144, "block", 128, "bfloat16", False, E4M3, E4M3, {"PART": 64}),    # two parts of a 128-wide tile
    (130, 200, 672, "block", 128, "bfloat16", False, E4M3, E4M3, {"PASS": 16}),    # 6 k-blocks: a short pass
    # one k-block a tile, 4-5 tiles a CTA: each tile's k-block 0 under the previous tile's epilogue
    (260, 392, 128, "block", 192, "bfloat16", False, E4M3, E4M3, {}),
    (130, 520, 272, "block", 256, "bfloat16", True, E4M3, E4M3, {"PART": 128}),    # k-block 0's part 1 after it
])
def test_fp8_sim_matches_float64(M, N, K, scaling, BN, out_dtype, bias, dtype, b_dtype, opts):
    _sim_case(M, N, K, scaling, BN, out_dtype, bias, dtype, b_dtype, opts)


def test_block_scales_cross_windows_of_b_scales_in_the_simulator():
    """B's block scales come in windows of ``b_window`` k-blocks, one per lane, shuffled out per k-block; at a
    window of 4, 10 k-blocks in passes of 3 cross two windows (one mid-pass, one at a pass's end), load a
    third window and end on a short pass; one CTA takes both tiles, whose column blocks differ, so the second
    tile's first window is the one loaded under the first tile's epilogue."""
    _sim_case(128, 200, 1232, "block", 128, "bfloat16", False, E4M3, E4M3, {"PASS": 3}, b_window=4, sms=1)


@pytest.mark.parametrize("BN", [192, 128])
def test_block_ctas_of_fewer_k_blocks_than_stages_read_only_written_stages(BN):
    """Six CTAs of one tile and one k-block each, two stages: with one scratch accumulator (192) each CTA also
    issues a k-block 0 past its last tile and discards it; that wgmma reads the stage its last k-block filled, not
    the one no load ever filled (the simulator reports a read of unwritten shared memory)."""
    _sim_case(256, 392, 128, "block", BN, "bfloat16", False, E4M3, E4M3, {}, sms=8)


@settings(max_examples=200, deadline=None)
@given(BN=st.sampled_from([64, 128, 192, 256]), part=st.sampled_from([64, 128, 192, 256]), j=st.integers(0, 40))
def test_block_parts_promote_each_column_with_its_own_block_scale(BN, part, j):
    """For every tile start ``n0 = j BN`` each promoted run of a part's columns lies inside one 128-column block of
    B's scales, and the scale slot it takes is that block's; the runs cover each part once, in order."""
    try:
        part = block_part(BN, part)
    except KernelConfigError:
        assume(False)
    P = kernel_plan(128, 128 * 64, 256, BN=BN, dtype="float8_e4m3", scaling="block", PART=part)
    n0 = j * BN
    for p in range(P.parts):
        runs = P.part_segments(p)
        assert [o for o, _, _ in runs] == [0] + list(itertools.accumulate(w for _, w, _ in runs))[:-1]
        assert sum(w for _, w, _ in runs) == part
        for o, w, q in runs:
            first, last = n0 + p * part + o, n0 + p * part + o + w - 1
            assert first // BLOCK_SCALE == last // BLOCK_SCALE == (n0 + P.scale_cols[q]) // BLOCK_SCALE


def test_choose_block_tile_takes_the_width_with_fewer_exposed_rounds():
    """The block scaling's default width is the one of least estimated time: 192 where 128-wide tiles leave a
    nearly empty last round (N = 2112: 544 tiles = 4.12 rounds of 132 against 352 = 2.67), 128 where both fill
    their rounds alike; each cost grows with the rounds it runs."""
    assert choose_block_tile(4096, 2112, 7168, 132) == 192
    assert choose_block_tile(4096, 4096, 4096, 132) == 128
    assert choose_block_tile(8192, 8192, 8192, 132) == 128
    for bn in (128, 192):
        assert block_tile_cost(4096, 8192, 4096, bn, 132) > block_tile_cost(4096, 4096, 4096, bn, 132)
        assert block_tile_cost(4096, 4096, 8192, bn, 132) > block_tile_cost(4096, 4096, 4096, bn, 132)
    a = torch.empty(0, dtype=E4M3, device="meta")
    assert _checked_plan(4096, 2112, 7168, a, torch.bfloat16, "block", False, {}, 132)[0]["BN"] == 192
    assert _checked_plan(4096, 2112, 7168, a, torch.bfloat16, "block", False, {"BN": 128}, 132)[0]["BN"] == 128


def test_row_scales_follow_each_tile_in_the_ping_pong_schedule():
    """Row scaling, ping-pong: one CTA's two consumers take six 128 x 176 tiles in turn; each loads its tile's
    column scales into six registers a lane before the tile's k-loop, and each 16-column output chunk shuffles
    its columns' out of them, so a stale tile's scales, a wrong register or a wrong lane shows in the output
    (the last tile column, 48 wide, clamps its reads at N)."""
    _sim_case(200, 400, 144, "row", 176, "bfloat16", False, E4M3, E4M3, {"PINGPONG": True}, sms=1)


@pytest.mark.parametrize("drop,kind,line", [
    ("store_wait", "race", "Tx.wg.copy(Cs[j"),                      # a tile staged over the previous tile's stores
    ("fence_proxy_async", "missing_fence_proxy_async", "Tx.copy_async(C["),
])
def test_whole_tile_staging_steps_are_needed_in_the_simulator(drop, kind, line):
    """The block scaling's 192-wide tile stages its three chunks at once (``whole_staging``); with two tiles per
    CTA, dropping the wait for the previous tile's stores or the proxy fence is reported where it shows."""
    from tirxpy.sim import SimReportError

    M, N, K = 260, 392, 128
    assert kernel_plan(M, N, K, BN=192, STAGES=2, dtype="float8_e4m3", scaling="block").whole_staging
    g = _fresh()
    a, w = _operands(M, N, K, g)
    SA, SB = _scale_args("block", *_scales("block", M, N, K, g), M, N, K, M, N, K)
    k = gemm_sm90(M, N, K, BN=192, STAGES=2, sms=2, dtype="float8_e4m3", scaling="block", drop=drop)
    with pytest.raises(SimReportError) as e:
        run(k, a, w, SA, SB, torch.zeros(1, 1).bfloat16(), torch.full((M, N), float("nan")).bfloat16(), seed=1)
    assert any(p.kind == kind and line in str(p) for p in e.value.problems), str(e.value)


def _sim_case(M, N, K, scaling, BN, out_dtype, bias, dtype, b_dtype, opts, b_window=None, sms=2):
    g = _fresh()
    a, w = _operands(M, N, K, g, dtype, outliers=True, b_dtype=b_dtype)
    sa, sb = _scales(scaling, M, N, K, g)
    SA, SB = _scale_args(scaling, sa, sb, M, N, K, M, N, K)
    name = {E4M3: "float8_e4m3", E5M2: "float8_e5m2"}
    P = kernel_plan(M, N, K, BN=BN, STAGES=2, dtype=name[dtype], b_dtype=name[b_dtype], scaling=scaling,
                    out_dtype=out_dtype, bias=bias, **opts)
    assert (tuple(SA.shape), tuple(SB.shape)) == scale_shapes(P)
    if b_window is None:
        k = gemm_sm90(M, N, K, BN=BN, STAGES=2, sms=sms, dtype=P.dtype, b_dtype=P.b_dtype, scaling=scaling,
                      out_dtype=out_dtype, bias=bias, **opts)
    else:
        k = build(dataclasses.replace(kernel_plan(M, N, K, BN=BN, STAGES=2, dtype=P.dtype, b_dtype=P.b_dtype,
                                                  scaling=scaling, out_dtype=out_dtype, bias=bias, sms=sms, **opts),
                                      b_window=b_window))
    tdt = getattr(torch, out_dtype)
    bias_t = (torch.randn(1, N, generator=g) if bias else torch.zeros(1, 1)).to(tdt)
    c = torch.full((M, N), float("nan")).to(tdt)
    res = run(k, a, w, SA, SB, bias_t, c, seed=int(torch.randint(0, 1000, (1,))))
    assert res.problems == []
    assert not torch.isnan(c).any()
    ref = reference(a, w.t(), sa, sb, scaling) + (bias_t.double() if bias else 0)
    # FP8 products are exact in float32; the sums round in float32 and the output in out_dtype
    ulp = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -24}[out_dtype]
    mag = reference(a.float().abs(), w.float().abs().t(), sa, sb, scaling)
    bound = ulp * ref.abs() + K * 2.0 ** -23 * mag + 1e-30
    assert torch.all((c.double() - ref).abs() <= bound)


def _meta(*shape, dtype=E4M3):
    return torch.empty(shape, dtype=dtype, device="meta")


A, W = _meta(256, 512), _meta(384, 512)
S0 = torch.empty((), device="meta")


def test_scalings_read_from_the_scale_shapes():
    m = lambda *s: torch.empty(s, device="meta")   # noqa: E731
    assert scales(A, W.t(), S0, S0) == "tensor"
    assert scales(A, W.t(), m(1, 1), m(1)) == "tensor"
    assert scales(A, W.t(), m(256, 1), m(1, 384)) == "row"
    assert scales(A, W.t(), m(256, 4), m(4, 3)) == "block"
    assert scales(A, W.t(), m(256, 4), m(4, 3), "block") == "block"


@pytest.mark.parametrize("args,kw,msg", [
    ((A, W, S0, S0), {}, "shapes do not chain"),
    ((A, W.t().contiguous(), S0, S0), {}, "b must be (K, N) column-major, the .t() of a row-major (N, K) weight"),
    ((A.t().contiguous().t(), W.t(), S0, S0), {}, "a must be row-major (M, K)"),
    ((_meta(256, 512, dtype=torch.bfloat16), W.t(), S0, S0), {}, "a has dtype torch.bfloat16; it takes torch.float8_e4m3fn"),
    ((A, W.t(), torch.empty(256, 2, device="meta"), S0), {}, "name no scaling"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(3, 4, device="meta")), {},
     "'block': scale_a (256, 4), scale_b (4, 3)"),
    ((A, W.t(), S0, S0), dict(scaling="row"), "scaling='row' for a (256, 512) @ (512, 384) product takes scale_a of "
                                              "shape (256, 1) and scale_b (1, 384)"),
    ((A, W.t(), S0, S0), dict(scaling="blockwise"), "scaling must be one of ('tensor', 'row', 'block')"),
    ((A, W.t(), torch.empty((), device="meta", dtype=torch.float16), S0), {}, "scale_a has dtype torch.float16"),
    ((A, W.t(), [1.0], S0), {}, "scale_a must be a dense float32 torch.Tensor, got list"),
    ((A, W.t(), S0, S0), dict(BN=100), "gemm_fp8: BN = 100 must be a multiple of 16"),
    ((A, W.t(), S0, S0), dict(BN="x"), "gemm_fp8: BN must be an int"),
    ((A, W.t(), S0, S0), dict(CM=2), "unknown tuning argument(s) ['CM']"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(BN=160),
     "scaling='block' takes BN = 64, 128, 192 or 256"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(BN=192, PART=128),
     "PART = 128 must divide both BN = 192 and 128"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(BN=256, PART=256),
     "or be BN up to 192 (one whole-tile part): use PART = 128 or 64"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(PART="64"),
     "PART must be an int"),
    ((A, W.t(), S0, S0), dict(PART=64), "PART = 64 applies to scaling='block' only"),
    ((A, W.t(), S0, S0), dict(PASS=2), "PASS = 2 applies to scaling='block' only"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(PASS=65),
     "PASS = 65 must be an int in [1, 64]"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(BN=256, STAGES=4),
     "4 stages of 49664 bytes"),
    ((A, W.t(), torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")), dict(DEFER=True),
     "scaling='block' keeps its k-block products next to the tile in registers"),
    ((A, W.t(), S0, S0), dict(out_dtype=torch.int8), "out_dtype torch.int8 must be torch.bfloat16"),
    ((A, W.t(), S0, S0), dict(bias=torch.empty(5, device="meta")), "bias must be a floating-point tensor of shape (384,)"),
    ((A, W.t(), S0, S0, torch.empty(256, 383, device="meta")), {}, "out must be a contiguous (256, 384) tensor"),
])
def test_bad_arguments_are_refused_with_the_fix(args, kw, msg):
    with pytest.raises(Fp8ArgumentError) as e:
        check(*args, **kw)
    assert msg in str(e.value)


@pytest.mark.parametrize("BN", [2 ** 31, 2 ** 40, 2 ** 64])
@pytest.mark.parametrize("block", [False, True])
def test_a_bn_past_the_problem_sizes_is_named_bn(BN, block):
    """A ``BN`` of 2**31 or more is named ``BN`` (the FP8 call pads N to at least one tile, so it read
    'N = 2147483648 is out of range', naming a size the caller never gave)."""
    sa, sb = (torch.empty(256, 4, device="meta"), torch.empty(4, 3, device="meta")) if block else (S0, S0)
    with pytest.raises(Fp8ArgumentError, match=rf"gemm_fp8: BN = {BN} must be a multiple of 16 in \[64, 256\]"):
        check(A, W.t(), sa, sb, BN=BN)


def test_the_bound_key_tells_apart_what_the_launch_fixed():
    """A repeated call reuses a bound launch only under an equal key: every tensor's address, shape, strides,
    dtype and device, and the options with their types; anything else gets no key (the full checks run)."""
    from tirxpy_kernels.gemm_fp8_api import _bound, _bound_key

    a, w = torch.zeros(256, 512).to(E4M3), torch.zeros(384, 512).to(E4M3)
    sa, sb, out = torch.ones(()), torch.ones(()), torch.empty(256, 384, dtype=torch.bfloat16)
    k = _bound_key(a, w.t(), sa, sb, out, None, None, None, {})
    assert k == _bound_key(a, w.t(), sa, sb, out, None, None, None, {})
    others = [_bound_key(a, w.t(), sa, sb, out.view(384, 256), None, None, None, {}),     # same address, new shape
              _bound_key(a, w.t(), sa, sb, out.as_strided((256, 384), (1, 256)), None, None, None, {}),
              _bound_key(a, w.t(), sa, sb, out.view(torch.float16), None, None, None, {}),
              _bound_key(a, w.t(), sa.clone(), sb, out, None, None, None, {}),             # new address
              _bound_key(a, w.t(), sa, sb, out, None, None, None, {"BN": 128}),
              _bound_key(a, w.t(), sa, sb, out, None, None, None, {"PDL": 1}),             # 1 is not True
              _bound_key(a, w.t(), sa, sb, out, None, None, None, {"PDL": True})]
    assert len({k, *others}) == len(others) + 1
    assert _bound_key(a, w.t(), [1.0], sb, out, None, None, None, {}) is None
    assert _bound_key(a, w.t(), sa, sb, None, None, None, None, {}) is None
    assert _bound_key(a, w.t(), sa, sb, out, None, None, None, {"SPLIT": [1, 2]}) is not None
    assert _bound(_bound_key(a, w.t(), sa, sb, out, None, None, None, {"SPLIT": [1, 2]})) is None   # unhashable
    assert _bound(None) is None


def _checked_kernel(kernel):
    """``(stand_in, launched)``: a stand-in for ``kernel`` compiled, which runs its launch checks (parameters'
    shapes, strides, dtypes, alignment; :class:`~tirxpy.lower.packer.ArgPacker`) on the CPU when called or bound,
    and records each launch's arguments in ``launched``."""
    from tirxpy.lower.build import host_specs
    from tirxpy.lower.packer import ArgPacker

    packer = ArgPacker(host_specs(kernel), torch.device("cpu"))
    launched = []

    class Checked:
        def __call__(self, *args):
            packer.check(args)
            launched.append(args)

        def bind(self, *args):
            packer.check(args)
            return lambda: launched.append(args)

    return Checked(), launched


@pytest.mark.parametrize("direct", [False, True])
def test_strided_row_scales_and_inputs_that_require_grad_go_to_the_kernel_as_it_takes_them(monkeypatch, direct):
    """The arguments gemm_fp8 hands the kernel pass the kernel's own launch checks (its parameters' shapes,
    strides, dtypes; no tensor that requires grad), run on the CPU: a row scale that is a strided column is
    copied dense, and an input that requires grad (an nn.Linear bias) is read as a value."""
    import tirxpy_kernels.gemm_fp8_api as api
    from tirxpy_kernels.launch_cache import LaunchCache

    M, N, K = 256, 384, 512
    checked, launched = _checked_kernel(api.kernel_for(M, N, K, "row", bias=True)[0])
    hit = (checked, M, N, K, M, N, K, torch.bfloat16, "row", direct)
    monkeypatch.setattr(api, "_planned_call", lambda *args: hit)
    monkeypatch.setattr(api, "_FAST", LaunchCache("test"))
    monkeypatch.setattr(api, "_BOUND", LaunchCache("test bound"))
    a, w = torch.zeros(M, K).to(E4M3).requires_grad_(), torch.zeros(N, K).to(E4M3)
    sa = torch.ones(M, 1) if direct else torch.ones(M, 2)[:, :1]
    sb = torch.ones(1, N).requires_grad_() if direct else torch.ones(1, 2 * N)[:, ::2]
    bias = torch.zeros(N, dtype=torch.bfloat16, requires_grad=True)
    out = api.gemm_fp8(a, w.t(), sa, sb, bias=bias)
    assert len(launched) == 1 and out.shape == (M, N) and not out.requires_grad


def _odd(*shape, dtype=E4M3, device="cpu"):
    """A contiguous tensor of ``shape`` whose data starts one element past a 16-byte boundary."""
    n = torch.Size(shape).numel()
    t = torch.zeros(n + 16, dtype=dtype, device=device)[1:1 + n].view(shape)
    assert t.data_ptr() % 16 == t.element_size()
    return t


def _args(M=256, N=384, K=512, scaling="block"):
    """Aligned CPU arguments of a ``scaling`` call: ``a``, ``b`` (``w.t()``), ``scale_a`` (the block scaling's
    group-major, as the kernel reads it in place), ``scale_b``."""
    a, w = (torch.randn(M, K) * 2).to(E4M3), (torch.randn(N, K) * 2).to(E4M3)
    kb, nb = -(-K // 128), -(-N // 128)
    if scaling == "row":
        return dict(a=a, b=w.t(), scale_a=torch.rand(M, 1) + 0.5, scale_b=torch.rand(1, N) + 0.5)
    return dict(a=a, b=w.t(), scale_a=(torch.rand(kb, M) + 0.5).t(), scale_b=torch.rand(kb, nb) + 0.5)


def _misaligned(args, which):
    """``args`` with ``which`` (``"a"``, ``"b"`` or ``"scale_a"``) replaced by a view at an odd offset holding the
    same values, with the same strides."""
    t = args[which]
    v = (_odd(*t.t().shape, dtype=t.dtype, device=t.device).t() if t.stride(0) == 1 and t.dim() == 2
         and t.shape[1] > 1 else _odd(*t.shape, dtype=t.dtype, device=t.device))
    if t.dtype in (E4M3, E5M2):
        v.view(torch.uint8).copy_(t.view(torch.uint8))      # bytes: fp8 copies on the CPU through uint8
    else:
        v.copy_(t)
    assert v.stride() == t.stride() and v.data_ptr() % 16
    return dict(args, **{which: v})


def test_a_misaligned_out_is_named_before_the_device():
    """The kernel's TMA stores write ``out`` in place, and a copy would not be the caller's tensor: an ``out`` off a
    16-byte boundary is refused naming ``out`` (not the kernel's ``C``), the offset and the fix, on any device."""
    for args in (_args(), _misaligned(_args(), "a")):
        with pytest.raises(Fp8ArgumentError) as e:
            tirxpy_kernels.gemm_fp8(*args.values(), _odd(256, 384, dtype=torch.bfloat16))
        msg = str(e.value)
        assert msg.startswith("gemm_fp8: out starts 2 bytes past a 16-byte boundary (a view at an odd offset)")
        assert msg.endswith("pass a freshly allocated out (or out=None)")


@pytest.mark.parametrize("scaling,which", [("block", "a"), ("block", "b"), ("block", "scale_a"), ("row", "a"),
                                           ("row", "scale_a"), ("row", "scale_b")])
def test_a_misaligned_input_gets_past_the_checks(scaling, which):
    """An input at an odd offset is copied to an aligned tensor (or, a row scale, read at any address), so the
    checks take it: the call fails only at the device, as the same call with aligned inputs does."""
    args = _misaligned(_args(scaling=scaling), which)
    with pytest.raises(Fp8ArgumentError, match="runs on a CUDA GPU"):
        tirxpy_kernels.gemm_fp8(*args.values())
    check(*args.values())


def test_operands_are_aligned_copies_of_misaligned_inputs():
    """:func:`_operands` hands the kernel ``a`` and ``b.t()`` as they are where they start on 16-byte boundaries,
    aligned copies holding the same values where they do not, zero-padded copies where the problem is larger."""
    from tirxpy_kernels.gemm_fp8_api import _operands

    args = _args(256, 384, 512)
    odd = _misaligned(_misaligned(args, "a"), "b")
    A, B = _operands(args["a"], args["b"], 256, 384, 512, 256, 384, 512)
    assert A is args["a"] and B.data_ptr() == args["b"].data_ptr()
    A, B = _operands(odd["a"], odd["b"], 256, 384, 512, 256, 384, 512)
    assert A.data_ptr() % 16 == 0 and B.data_ptr() % 16 == 0 and A.is_contiguous() and B.is_contiguous()
    assert torch.equal(A.view(torch.uint8), odd["a"].view(torch.uint8))
    assert torch.equal(B.view(torch.uint8), odd["b"].t().view(torch.uint8))
    A, B = _operands(odd["a"], odd["b"], 256, 384, 512, 256, 512, 512)          # N padded: B a padded copy
    assert A.data_ptr() % 16 == 0 and B.shape == (512, 512) and B.data_ptr() % 16 == 0


@pytest.mark.parametrize("scaling", ["row", "block"])
@pytest.mark.parametrize("direct", [False, True])
def test_the_kernel_never_gets_a_misaligned_input(monkeypatch, scaling, direct):
    """Every launch passes the kernel's own launch checks (run on the CPU: shapes, strides, 16-byte alignment of
    what TMA reads), on the first call and on repeated ones, bound or not: a misaligned ``a``, ``b`` or block
    ``scale_a`` reaches the kernel as an aligned copy of its values, and an earlier call's bound launch is not
    taken for it."""
    import tirxpy_kernels.gemm_fp8_api as api
    from tirxpy_kernels.launch_cache import LaunchCache

    M, N, K = 256, 384, 512
    checked, launched = _checked_kernel(api.kernel_for(M, N, K, scaling)[0])
    monkeypatch.setattr(api, "_planned_call", lambda *args: (checked, M, N, K, M, N, K, torch.bfloat16, scaling,
                                                             direct))
    monkeypatch.setattr(api, "_FAST", LaunchCache("test"))
    monkeypatch.setattr(api, "_BOUND", LaunchCache("test bound"))
    args = _args(M, N, K, scaling)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    api.gemm_fp8(*args.values(), out)
    api.gemm_fp8(*args.values(), out)        # bound when direct
    assert len(api._BOUND) == int(direct) and len(launched) == 2
    for which in ("a", "b", "scale_a"):
        odd = _misaligned(args, which)
        for _ in range(2):
            del launched[:]
            api.gemm_fp8(*odd.values(), out)
            (got,) = launched
            assert torch.equal(got[0].view(torch.uint8), odd["a"].view(torch.uint8))
            assert torch.equal(got[1].view(torch.uint8), odd["b"].t().view(torch.uint8))
            sa = got[2] if scaling == "row" else got[2][:, :M].t()
            assert torch.equal(sa, odd["scale_a"]) and got[5] is out
    # bound: the aligned call's, and the row scaling's call with an odd scale_a (plain loads take any address)
    assert len(api._BOUND) == int(direct) * (1 + (scaling == "row"))


def test_the_api_needs_a_cuda_device():
    a, w = torch.zeros(256, 512).to(E4M3), torch.zeros(384, 512).to(E4M3)
    with pytest.raises(Fp8ArgumentError, match="runs on a CUDA GPU"):
        tirxpy_kernels.gemm_fp8(a, w.t(), torch.ones(()), torch.ones(()))


# ---- GPU -----------------------------------------------------------------------------------------------------

def _gpu_case(M, N, K, scaling, out_dtype=torch.bfloat16, bias=False, dtype=E4M3, b_dtype=None, **tuning):
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = torch.randn(M, K, device="cuda", generator=g) * 2
    a[torch.rand(M, K, device="cuda", generator=g) < 0.001] *= 50
    a = a.clamp(-448, 448).to(dtype)        # e4m3's largest finite value: CUDA turns anything past it into NaN
    w = (torch.randn(N, K, device="cuda", generator=g) * 2).to(b_dtype or dtype)
    kb, nb = -(-K // 128), -(-N // 128)
    shp = {"tensor": ((), ()), "row": ((M, 1), (1, N)), "block": ((M, kb), (kb, nb))}[scaling]
    sa, sb = (torch.rand(s, device="cuda", generator=g) + 0.5 for s in shp)
    bias_t = torch.randn(N, device="cuda", generator=g).to(torch.bfloat16) if bias else None
    out = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    res = tirxpy_kernels.gemm_fp8(a, w.t(), sa, sb, out, bias=bias_t, scaling=scaling, **tuning)
    torch.cuda.synchronize()
    ref = reference(a, w.t(), sa, sb, scaling) + (bias_t.double().to(out_dtype).double() if bias else 0)
    return res, ref, a, w, sa, sb


def _fp8_bound(res, ref, a, w, sa, sb, scaling, ulp):
    """What an FP8 wgmma product may differ from float64 by: the output's rounding, plus the tensor cores'
    accumulator, which keeps about 14 bits of the running sum (DeepSeek-V3, section 3.3.2): here at most
    ``2^-11`` of the partial sums' magnitude per ``k32`` instruction of a chain (the whole K, or 128 with the
    block scaling's promotion), a margin of 4 over 13 bits. A misplaced element is off by its own size."""
    K = a.shape[1]
    chain = 128 if scaling == "block" else K
    mag = reference(a.float().abs(), w.float().abs().t(), sa, sb, scaling)
    return ulp * ref.abs() + -(-min(chain, K) // 32) * 2.0 ** -11 * mag


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1000, 2112, 7168), (777, 1000, 1000), (64, 72, 48),
                                   (4096, 7168, 2048), (129, 257, 129)])
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_gpu_matches_float64(M, N, K, scaling):
    res, ref, a, w, sa, sb = _gpu_case(M, N, K, scaling)
    assert not torch.isnan(res).any()
    _assert_within(res, ref, _fp8_bound(res, ref, a, w, sa, sb, scaling, 2.0 ** -8))


def _assert_within(res, ref, bound):
    """Every element of ``res`` within ``bound`` of ``ref``; a failure names how many are not, where they are (in
    128 x 128 tiles) and the worst one."""
    err = (res.double() - ref).abs()
    bad = (err > bound).nonzero()
    if len(bad):
        worst = (err / bound).flatten().argmax().item()
        i, j = divmod(worst, ref.shape[1])
        tiles = sorted({(r // 128, c // 128) for r, c in bad[:64].tolist()})
        pytest.fail(f"{len(bad)} of {ref.numel()} elements past the bound, in tiles (row, col) {tiles[:12]}; worst "
                    f"({i}, {j}): {res[i, j].item()} against {ref[i, j].item()}, bound {bound[i, j].item():.3g}")


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype,bias,dtype,b_dtype", [(torch.float32, True, E4M3, E4M3),
                                                          (torch.float16, False, E5M2, E5M2),
                                                          (torch.bfloat16, True, E4M3, E5M2)])
def test_gpu_epilogues_and_formats(scaling, out_dtype, bias, dtype, b_dtype):
    res, ref, a, w, sa, sb = _gpu_case(520, 1032, 1040, scaling, out_dtype, bias, dtype, b_dtype)
    ulp = {torch.float32: 2.0 ** -23, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}[out_dtype]
    assert res.dtype == out_dtype and not torch.isnan(res).any()
    assert torch.all((res.double() - ref).abs() <= _fp8_bound(res, ref, a, w, sa, sb, scaling, ulp) + 1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_gpu_tensor_and_row_scaling_accumulate_as_cublas_fast_accumulation(scaling):
    """Without promotion the wgmma accumulator sums the whole K, as cuBLAS does with ``use_fast_accum=True``:
    the error is that one's, on the same operands (unit scales: the same product)."""
    M, N, K = 1024, 1024, 8192
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = (torch.randn(M, K, device="cuda", generator=g) * 3).to(E4M3)
    w = (torch.randn(N, K, device="cuda", generator=g) * 3).to(E4M3)
    ref = a.double() @ w.double().t()
    one = torch.ones((), device="cuda")
    sa, sb = (one, one) if scaling == "tensor" else (torch.ones(M, 1, device="cuda"), torch.ones(1, N, device="cuda"))
    ours = tirxpy_kernels.gemm_fp8(a, w.t(), sa, sb, out_dtype=torch.float32)
    fast = torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.float32, use_fast_accum=True)
    e_ours = (ours.double() - ref).norm() / ref.norm()
    e_fast = (fast.double() - ref).norm() / ref.norm()
    assert e_ours <= e_fast * 1.05, (e_ours.item(), e_fast.item())


@pytest.mark.gpu
def test_gpu_block_scaling_error_at_16k_is_no_larger_than_cublas_per_tensor():
    """At K = 16384 the block-scaled product (promoted to float32 every 128 of K) is at least as accurate as
    cuBLAS's per-tensor FP8 GEMM on the same operands (unit block scales: the same product)."""
    M, N, K = 1024, 1024, 16384
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = (torch.randn(M, K, device="cuda", generator=g) * 3).to(E4M3)
    w = (torch.randn(N, K, device="cuda", generator=g) * 3).to(E4M3)
    ref = a.double() @ w.double().t()
    one = torch.ones((), device="cuda")
    ours = tirxpy_kernels.gemm_fp8(a, w.t(), torch.ones(M, K // 128, device="cuda"),
                                   torch.ones(K // 128, N // 128, device="cuda"), out_dtype=torch.float32)
    cublas = torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.float32)
    e_ours = (ours.double() - ref).norm() / ref.norm()
    e_cublas = (cublas.double() - ref).norm() / ref.norm()
    assert e_ours <= e_cublas * 1.0001, (e_ours.item(), e_cublas.item())


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(512, 384, 1024), (777, 1000, 1000)])
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_gpu_misaligned_inputs_are_copied(M, N, K, scaling):
    """``a``, ``b`` and the scales as views one element past a 16-byte boundary (TMA needs one): the product of
    their values, within FP8's bound of float64 and equal to the aligned operands' result, on the first call and
    on calls like an earlier aligned one (whose bound launch they must not take); ``out`` NaN-poisoned before
    each call. A misaligned ``out`` is refused naming it."""
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(E4M3)
    w = (torch.randn(N, K, device="cuda", generator=g) * 2).to(E4M3)
    kb, nb = -(-K // 128), -(-N // 128)
    if scaling == "block":      # scale_a group-major: the layout the kernel reads in place
        sa, sb = (torch.rand(kb, M, device="cuda", generator=g) + 0.5).t(), torch.rand(kb, nb, device="cuda") + 0.5
    else:
        shp = {"tensor": ((), ()), "row": ((M, 1), (1, N))}[scaling]
        sa, sb = (torch.rand(s, device="cuda", generator=g) + 0.5 for s in shp)
    args = dict(a=a, b=w.t(), scale_a=sa, scale_b=sb)
    ref = reference(a, w.t(), sa, sb, scaling)
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    want = tirxpy_kernels.gemm_fp8(*args.values(), out).clone()      # aligned: stores (and binds) its launch
    assert not torch.isnan(want).any()
    _assert_within(want, ref, _fp8_bound(want, ref, a, w, sa, sb, scaling, 2.0 ** -8))
    cases = [_misaligned(args, "a"), _misaligned(args, "b"), _misaligned(_misaligned(args, "a"), "b")]
    if scaling != "tensor":
        cases.append(_misaligned(args, "scale_a"))
    for odd in cases:
        for _ in range(2):
            out.fill_(float("nan"))
            res = tirxpy_kernels.gemm_fp8(*odd.values(), out)
            torch.cuda.synchronize()
            assert res is out and not torch.isnan(res).any()
            assert torch.equal(res, want)
        res = tirxpy_kernels.gemm_fp8(*odd.values())                    # a fresh out
        assert torch.equal(res, want)
    with pytest.raises(Fp8ArgumentError, match="gemm_fp8: out starts 2 bytes past a 16-byte boundary"):
        tirxpy_kernels.gemm_fp8(*args.values(), _odd(M, N, dtype=torch.bfloat16, device="cuda"))


@pytest.mark.gpu
def test_gpu_repeated_calls_reuse_the_launch_and_follow_new_scales():
    M, N, K = 512, 512, 512
    res, ref, a, w, sa, sb = _gpu_case(M, N, K, "row")
    sa2 = sa * 2
    res2 = tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb)
    assert torch.allclose(res2.double(), 2 * res.double(), rtol=2 ** -7)
    sa2.mul_(0.5)       # new values at the same address: the bound launch reads them
    res3 = tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb)
    assert torch.equal(res3, res)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb, out)
    tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb, out)      # bound now
    with pytest.raises(Fp8ArgumentError, match="out must be a contiguous"):     # same address, other strides
        tirxpy_kernels.gemm_fp8(a, w.t(), sa2, sb, out.as_strided((M, N), (1, M)))


@pytest.mark.gpu
def test_gpu_block_scales_group_major_go_to_the_kernel_as_they_are():
    """An (M, KB) view of a row-major (KB, M) scale_a (and a row-major scale_b) runs the bound launch, which reads
    the scales' current values; a row-major scale_a is copied group-major: both give the same result."""
    M, N, K = 512, 384, 1024
    g = torch.Generator(device="cuda").manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(E4M3)
    w = (torch.randn(N, K, device="cuda", generator=g) * 2).to(E4M3)
    sa_t = torch.rand(K // 128, M, device="cuda", generator=g) + 0.5
    sb = torch.rand(K // 128, N // 128, device="cuda", generator=g) + 0.5
    out = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    r1 = tirxpy_kernels.gemm_fp8(a, w.t(), sa_t.t(), sb, out).clone()
    r2 = tirxpy_kernels.gemm_fp8(a, w.t(), sa_t.t().contiguous(), sb)
    assert torch.equal(r1, r2)
    ref = reference(a, w.t(), sa_t.t(), sb, "block")
    assert torch.all((r1.double() - ref).abs() <= _fp8_bound(r1, ref, a, w, sa_t.t(), sb, "block", 2.0 ** -8))
    sa_t.mul_(2)
    r3 = tirxpy_kernels.gemm_fp8(a, w.t(), sa_t.t(), sb, out)
    assert torch.allclose(r3.double(), 2 * r1.double(), rtol=2 ** -7)


@pytest.mark.gpu
def test_gpu_quantized_operands_end_to_end():
    """DeepSeek-V3's recipe: activations quantized per 1 x 128 group (scales group-major, read by the GEMM as they
    are), the weight per 128 x 128 block, then the block-scaled GEMM: the float64 product of the dequantized
    operands, and within FP8's resolution of the bf16 product."""
    from tirxpy_kernels.quantize_api import expand_scales

    x = torch.randn(512, 1024, device="cuda").to(torch.bfloat16)
    w = torch.randn(384, 1024, device="cuda").to(torch.bfloat16)
    xq, xs = tirxpy_kernels.quantize_fp8(x, "1x128")
    wq, ws = tirxpy_kernels.quantize_fp8(w, "128x128")
    assert xs.t().is_contiguous()
    out = tirxpy_kernels.gemm_fp8(xq, wq.t(), xs, ws.t().contiguous())
    xd = xq.double() * expand_scales(xs.double(), "1x128", 512, 1024)
    wd = wq.double() * expand_scales(ws.double(), "128x128", 384, 1024)
    ref = xd @ wd.t()
    bound = _fp8_bound(out, ref, xq, wq, xs, ws.t(), "block", 2.0 ** -8)
    assert torch.all((out.double() - ref).abs() <= bound)
    exact = x.double() @ w.double().t()
    assert (out.double() - exact).norm() / exact.norm() < 0.05
