"""Fuzz: tirxpy_kernels.gemm_fp8 / quantize_fp8 / attention_backward / attention_varlen / attention_varlen_backward
arguments on CPU tensors.

Every bad argument (a tensor of the wrong kind, dtype or shape, a scale of the wrong shape, an option of the wrong
kind or range, an unknown option) must be refused with the library's typed error naming it before the device
check; a call whose only fault is that its tensors are on the CPU gets the device error."""
import pytest
import torch
from harness import EXAMPLES, HOSTILE, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirxpy_kernels

AREA = "tirxpy_kernels.gemm_fp8 / quantize_fp8 / attention_backward / attention_varlen arguments"
ON_CPU = ["cpu"]
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
E4M3 = torch.float8_e4m3fn


class _Thing:
    pass


JUNK = st.one_of(st.lists(st.integers(), max_size=3), st.builds(_Thing), st.just(object()), st.text(max_size=4),
                 st.floats(allow_nan=True, allow_infinity=True), st.complex_numbers(max_magnitude=10),
                 st.binary(max_size=3), st.just(Ellipsis), st.booleans(), st.integers(), HOSTILE)

M, N, K = 256, 384, 512
A, W = torch.zeros(M, K).to(E4M3), torch.zeros(N, K).to(E4M3)
SCALES = {"tensor": (torch.ones(()), torch.ones(())), "row": (torch.ones(M, 1), torch.ones(1, N)),
          "block": (torch.ones(M, K // 128), torch.ones(K // 128, N // 128))}


_DEFAULT = object()


def _gemm_fp8(a=A, b=W.t(), scales="tensor", sa=_DEFAULT, sb=_DEFAULT, **kw):
    d_sa, d_sb = SCALES[scales]
    sa = d_sa if sa is _DEFAULT else sa
    sb = d_sb if sb is _DEFAULT else sb
    return lambda: tirxpy_kernels.gemm_fp8(a, b, sa, sb, **kw)


def _wrong_tensors(shape, dtype):
    good = torch.zeros(shape).to(dtype)
    return ["x", None, 3, [[0.0]], good.float().numpy(), (good,), torch.zeros(shape).to_sparse(),
            torch.zeros(()).to(dtype), torch.zeros(*shape, 1).to(dtype), torch.zeros(shape[:-1]).to(dtype),
            torch.zeros(shape, dtype=torch.int32), torch.zeros(shape, dtype=torch.complex64)]


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_gemm_fp8_good_arguments_reach_the_device_check(scaling):
    refuse(AREA, _gemm_fp8(scales=scaling), names=ON_CPU)
    refuse(AREA, _gemm_fp8(scales=scaling, scaling=scaling, out_dtype=torch.float32), names=ON_CPU)


@pytest.mark.parametrize("name", ["a", "b", "sa", "sb"])
def test_gemm_fp8_tensors_of_every_wrong_kind_are_named(name):
    shape = {"a": (M, K), "b": (K, N), "sa": (M, 1), "sb": (1, N)}[name]
    dtype = E4M3 if name in ("a", "b") else torch.float32
    label = {"a": "a", "b": "b", "sa": "scale", "sb": "scale"}[name]
    for t in _wrong_tensors(shape, dtype) + ([torch.zeros(shape)] if name in ("a", "b") else []):
        refuse(AREA, _gemm_fp8(scales="row", **{name: t}), names=[label])


@SETTINGS
@given(st.data())
def test_gemm_fp8_scales_of_random_shapes_are_refused_or_read(data):
    """Scales of any small shape: one a scaling names goes on (to the device error), any other is refused with the
    shapes each scaling takes."""
    sa = torch.ones(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    sb = torch.ones(data.draw(st.lists(st.integers(0, 5), max_size=3)))
    refuse(AREA, _gemm_fp8(sa=sa, sb=sb), names=["scale", "cpu"])


@SETTINGS
@given(st.sampled_from(["BN", "STAGES", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "scaling", "out_dtype",
                        "bias"]), JUNK)
def test_gemm_fp8_bad_options_are_named(name, value):
    if name in ("DEFER", "PINGPONG", "PDL") and type(value) in (int, bool) and value in (0, 1):
        return
    if name == "STAGES" and type(value) is int and 2 <= value <= 4:
        return
    if name == "BN" and type(value) is int and 64 <= value <= 256 and value % 16 == 0:
        return
    if name == "group" and type(value) is int and value >= 1:
        return
    if name == "scaling" and type(value) is str and value == "tensor":
        return
    refuse(AREA, _gemm_fp8(**{name: value}), names=[name, "cpu"] if name == "SPLIT" else [name])


@SETTINGS
@given(st.one_of(st.sampled_from([64, 128, 192, 256]), st.integers(0, 300), JUNK),
       st.one_of(st.none(), st.sampled_from([64, 128]), st.integers(-1, 300), JUNK),
       st.one_of(st.none(), st.integers(-2, 20), JUNK), st.one_of(st.none(), st.integers(0, 6), JUNK))
def test_gemm_fp8_block_tiles_are_built_or_refused_by_name(BN, PART, PASS, STAGES):
    """The block scaling's tile options in any mix: a mix the kernel builds goes on to the device error, any other
    is refused naming an option it gives (or the shared memory its stages would take)."""
    kw = {k: v for k, v in (("BN", BN), ("PART", PART), ("PASS", PASS), ("STAGES", STAGES)) if v is not None}
    refuse(AREA, _gemm_fp8(scales="block", **kw), names=list(kw) + ["cpu", "shared memory"])


@SETTINGS
@given(st.sampled_from(["PART", "PASS"]), st.one_of(st.integers(-2, 300), JUNK))
def test_gemm_fp8_block_options_are_refused_with_other_scalings(name, value):
    refuse(AREA, _gemm_fp8(scales="row", **{name: value}), names=[name])


@SETTINGS
@given(st.text(min_size=1, max_size=8).filter(lambda s: s.isidentifier() and s not in (
    "BN", "STAGES", "group", "DEFER", "PINGPONG", "PDL", "SPLIT", "sms", "scaling", "out_dtype", "bias", "out",
    "a", "b", "scale_a", "scale_b", "PART", "PASS", "sa", "sb", "scales")))     # (the last three: _gemm_fp8's own)
def test_gemm_fp8_unknown_option_is_named(name):
    refuse(AREA, _gemm_fp8(**{name: 1}), names=[name])


# ---- quantize_fp8 ---------------------------------------------------------------------------------------------

X = torch.zeros(64, 256, dtype=torch.bfloat16)


@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
def test_quantize_good_arguments_reach_the_device_check(granularity):
    refuse(AREA, lambda: tirxpy_kernels.quantize_fp8(X, granularity), names=ON_CPU)


def test_quantize_inputs_of_every_wrong_kind_are_named():
    for t in _wrong_tensors((64, 256), torch.bfloat16) + [torch.zeros(64, 256), X.t()]:
        refuse(AREA, lambda t=t: tirxpy_kernels.quantize_fp8(t, "token"), names=["x"])


@SETTINGS
@given(st.sampled_from(["granularity", "dtype", "pow2_scales"]), JUNK)
def test_quantize_bad_options_are_named(name, value):
    kw = {"granularity": "token", name: value}
    if (name == "granularity" and type(value) is str and value in ("token", "1x128", "128x128")) or \
            (name == "pow2_scales" and type(value) is bool):
        return
    g = kw.pop("granularity")
    refuse(AREA, lambda: tirxpy_kernels.quantize_fp8(X, g, **kw), names=[name])


# ---- attention_backward / attention_varlen ---------------------------------------------------------------------

B, S, H, D = 1, 128, 2, 64
Q = torch.zeros(B, S, H, D, dtype=torch.bfloat16)
LSE = torch.zeros(B, H, S)


def _bwd(**kw):
    args = dict(q=Q, k=Q, v=Q, out=Q, dout=Q, lse=LSE)
    args.update(kw)
    return lambda: tirxpy_kernels.attention_backward(**args)


def test_attention_backward_good_arguments_reach_the_device_check():
    refuse(AREA, _bwd(), names=ON_CPU)
    refuse(AREA, _bwd(causal=True, deterministic=True), names=ON_CPU)


@pytest.mark.parametrize("name", ["q", "k", "v", "out", "dout", "lse"])
def test_attention_backward_tensors_of_every_wrong_kind_are_named(name):
    shape, dtype = ((B, H, S), torch.float32) if name == "lse" else ((B, S, H, D), torch.bfloat16)
    for t in _wrong_tensors(shape, dtype):
        refuse(AREA, _bwd(**{name: t}), names=[name])


def test_attention_backward_grads_of_every_wrong_kind_are_named():
    def good():
        return torch.zeros(B, S, H, D, dtype=torch.bfloat16)

    refuse(AREA, _bwd(grads=(good(), good(), good())), names=ON_CPU)
    for bad in ("x", 3, (good(), good()), [good()] * 4, (good(), good(), Q)):
        refuse(AREA, _bwd(grads=bad), names=["grads"])
    for i in range(3):
        for t in _wrong_tensors((B, S, H, D), torch.bfloat16):
            g = [good(), good(), good()]
            g[i] = t
            refuse(AREA, _bwd(grads=tuple(g)), names=["grads"])


@SETTINGS
@given(st.data())
def test_attention_backward_grads_that_share_memory_are_named(data):
    """Two of ``grads`` cut from one buffer at random offsets (overlapping or not), or one expanded along a random
    dimension: a pair that shares memory, or a tensor that holds a location twice, is refused naming ``grads``;
    separate ones reach the device check."""
    n = B * S * H * D
    i, j = data.draw(st.lists(st.integers(0, 2), min_size=2, max_size=2, unique=True))
    off = data.draw(st.integers(0, 2 * n))
    buf = torch.empty(n + off + n, dtype=torch.bfloat16)
    g = [torch.zeros(B, S, H, D, dtype=torch.bfloat16) for _ in range(3)]
    g[i], g[j] = buf[:n].view(B, S, H, D), buf[off:off + n].view(B, S, H, D)
    refuse(AREA, _bwd(grads=tuple(g)), names=ON_CPU if off >= n else ["share memory"])
    shape = [B, S, H, D]
    shape[data.draw(st.sampled_from([d for d in range(4) if shape[d] > 1]))] = 1
    g = [torch.zeros(B, S, H, D, dtype=torch.bfloat16) for _ in range(3)]
    g[i] = torch.zeros(shape, dtype=torch.bfloat16).expand(B, S, H, D)
    refuse(AREA, _bwd(grads=tuple(g)), names=["several indices"])


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_a_meta_tensor_among_real_ones_under_autograd_is_named(name):
    """Under autograd a call runs the custom operator, whose fake runs when one input is on ``meta``: a mix of
    ``meta`` and CPU tensors is refused naming the devices, never answered with unwritten memory."""
    t = {k: torch.zeros(B, S, H, D, dtype=torch.bfloat16, requires_grad=True) for k in "qkv"}
    t[name] = torch.empty(B, S, H, D, dtype=torch.bfloat16, device="meta")
    refuse(AREA, lambda: tirxpy_kernels.attention(t["q"], t["k"], t["v"]), names=["on meta; pass real tensors on one device"])


@SETTINGS
@given(st.sampled_from(["causal", "scale", "deterministic"]), JUNK)
def test_attention_backward_bad_options_are_named(name, value):
    if name in ("causal", "deterministic") and type(value) is bool:
        return
    if name == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
            and 0 < value < float("inf"):
        return
    refuse(AREA, _bwd(**{name: value}), names=[name])


QV = torch.zeros(300, H, D, dtype=torch.bfloat16)
CU = torch.tensor([0, 100, 300], dtype=torch.int32)


def _varlen(**kw):
    args = dict(q=QV, k=QV, v=QV, cu_seqlens_q=CU, cu_seqlens_k=CU, max_seqlen_q=200, max_seqlen_k=200)
    args.update(kw)
    return lambda: tirxpy_kernels.attention_varlen(**args)


def test_attention_varlen_good_arguments_reach_the_device_check():
    refuse(AREA, _varlen(), names=ON_CPU)


@SETTINGS
@given(st.sampled_from(["cu_seqlens_q", "cu_seqlens_k"]),
       st.lists(st.integers(-5, 400), min_size=0, max_size=5), st.sampled_from([torch.int32, torch.int64,
                                                                                   torch.float32]))
def test_attention_varlen_bad_cu_seqlens_are_named(name, values, dtype):
    refuse(AREA, _varlen(**{name: torch.tensor(values, dtype=dtype)}), names=_cu_names(values, dtype))


def _cu_names(values, dtype):
    """What a refusal of these ``cu_seqlens`` (over :data:`QV`'s 300 rows, ``max_seqlen`` 200) must name: the
    device only when the offsets are good, else the offsets."""
    ok = (dtype == torch.int32 and len(values) >= 2 and values[0] == 0 and values[-1] <= 300
          and all(x <= y for x, y in zip(values, values[1:])) and max(y - x for x, y in zip(values, values[1:])) <= 200)
    return ON_CPU + ["cu_seqlens", "max_seqlen"] if ok else ["cu_seqlens"]


@SETTINGS
@given(st.sampled_from(["max_seqlen_q", "max_seqlen_k", "causal", "scale"]), JUNK)
def test_attention_varlen_bad_options_are_named(name, value):
    if name == "causal" and type(value) is bool:
        return
    if name.startswith("max_seqlen") and type(value) is int and value >= 200:
        return
    if name == "scale" and isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
            and 0 < value < float("inf"):
        return
    refuse(AREA, _varlen(**{name: value}), names=[name])


LSEV = torch.zeros(H, 300)


def _varlen_bwd(**kw):
    args = dict(q=QV, k=QV, v=QV, out=QV, dout=QV, lse=LSEV, cu_seqlens_q=CU, cu_seqlens_k=CU, max_seqlen_q=200,
                max_seqlen_k=200)
    args.update(kw)
    return lambda: tirxpy_kernels.attention_varlen_backward(**args)


def test_attention_varlen_backward_good_arguments_reach_the_device_check():
    refuse(AREA, _varlen_bwd(), names=ON_CPU)
    refuse(AREA, _varlen_bwd(causal=True, deterministic=True), names=ON_CPU)


@pytest.mark.parametrize("name", ["q", "k", "v", "out", "dout", "lse"])
def test_attention_varlen_backward_tensors_of_every_wrong_kind_are_named(name):
    shape, dtype = ((H, 300), torch.float32) if name == "lse" else ((300, H, D), torch.bfloat16)
    for t in _wrong_tensors(shape, dtype):
        refuse(AREA, _varlen_bwd(**{name: t}), names=[name])


@SETTINGS
@given(st.sampled_from(["cu_seqlens_q", "cu_seqlens_k"]),
       st.lists(st.integers(-5, 400), min_size=0, max_size=5), st.sampled_from([torch.int32, torch.int64,
                                                                                   torch.float32]))
def test_attention_varlen_backward_bad_cu_seqlens_are_named(name, values, dtype):
    refuse(AREA, _varlen_bwd(**{name: torch.tensor(values, dtype=dtype)}), names=_cu_names(values, dtype))


ENTRY_CALLS = {     # each entry point of a fixed signature, with good CPU arguments
    "attention_backward": lambda **kw: tirxpy_kernels.attention_backward(Q, Q, Q, Q, Q, LSE, **kw),
    "attention_varlen": lambda **kw: tirxpy_kernels.attention_varlen(QV, QV, QV, CU, CU, 200, 200, **kw),
    "attention_varlen_backward": lambda **kw: tirxpy_kernels.attention_varlen_backward(
        QV, QV, QV, QV, QV, torch.zeros(H, 300), CU, CU, 200, 200, **kw),
    "attention_qkvpacked": lambda **kw: tirxpy_kernels.attention_qkvpacked(torch.stack([Q, Q, Q], 2), **kw),
    "mlp": lambda **kw: tirxpy_kernels.mlp(X, torch.zeros(256, 512, dtype=torch.bfloat16),
                                           torch.zeros(512, 256, dtype=torch.bfloat16), **kw),
    "quantize_fp8": lambda **kw: tirxpy_kernels.quantize_fp8(X, "token", **kw),
}


@SETTINGS
@given(st.sampled_from(sorted(ENTRY_CALLS)), st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_an_unknown_keyword_is_named_by_every_entry_point(where, name):
    """A misspelt keyword (``casual=``, ``pow2=``) gets the library's ArgumentError naming it and the parameters."""
    call = ENTRY_CALLS[where]
    import inspect

    fn = getattr(tirxpy_kernels, where)
    known = set(inspect.signature(fn).parameters)
    if where == "quantize_fp8":
        known |= {"dtype", "pow2_scales"}
    if name in known:
        return
    refuse(AREA, lambda: call(**{name: 1}), names=[f"unexpected keyword argument '{name}'; it takes ("])
