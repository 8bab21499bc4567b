"""Fuzz: tirxpy_kernels.gemm / tirxpy_kernels.attention arguments on CPU tensors.

Every bad argument (an unknown name, a value of the wrong kind or out of range, a tensor of the wrong kind)
must be refused with the library's typed error naming it, before the device check; a call whose only fault is
that its tensors are on the CPU gets the device error ("... are on cpu")."""
import math

import pytest
import torch
from harness import EXAMPLES, HOSTILE, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirxpy_kernels
from tirxpy_kernels.attention_api import TUNING as ATT_TUNING
from tirxpy_kernels.gemm_api import TUNING as GEMM_TUNING

AREA = "tirxpy_kernels.gemm / attention arguments"
ON_CPU = ["are on cpu"]
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


def _bf(*shape):
    return torch.zeros(shape, dtype=torch.bfloat16)


A, B = _bf(256, 512), _bf(512, 512).t()     # b as w.t(): K-major, the nn.Linear layout
Q, KV = _bf(1, 128, 4, 64), _bf(1, 128, 2, 64)


def _gemm(**kw):
    args = {"a": A, "b": B}
    args.update(kw)
    a, b = args.pop("a"), args.pop("b")
    return lambda: tirxpy_kernels.gemm(a, b, **args)


def _attention(**kw):
    args = {"q": Q, "k": KV, "v": KV}
    args.update(kw)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    return lambda: tirxpy_kernels.attention(q, k, v, **args)


class _Thing:
    pass


# values no option takes: containers, other objects, floats that are not ints
JUNK = st.one_of(st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                 st.sets(st.integers(), max_size=2), st.builds(_Thing), st.just(object()), st.just(torch.zeros(2)),
                 st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not float(x).is_integer()),
                 st.just(float("nan")), st.complex_numbers(max_magnitude=10), st.binary(max_size=3),
                 st.just(Ellipsis), HOSTILE)
NOT_INT = st.one_of(JUNK, st.text(max_size=5), st.booleans(), st.just(torch.bfloat16))
NOT_FLAG = st.one_of(JUNK, st.text(max_size=5), st.integers().filter(lambda i: i not in (0, 1)), st.just(torch.bool))

# per option: values that must be refused (naming the option), and values that must pass (the device error)
GEMM_BAD = {
    "BN": st.one_of(NOT_INT, st.integers().filter(lambda i: not (64 <= i <= 256 and i % 16 == 0))),
    "STAGES": st.one_of(NOT_INT, st.integers(max_value=1), st.integers(min_value=7)),
    "CM": st.one_of(NOT_INT, st.integers().filter(lambda i: i not in (1, 2))),
    "group": st.one_of(NOT_INT, st.integers(max_value=0)),
    "sms": st.one_of(NOT_INT, st.integers(max_value=0)),
    "DEFER": NOT_FLAG, "PINGPONG": NOT_FLAG, "PDL": st.one_of(NOT_FLAG, st.none()),
    "SPLIT": st.one_of(JUNK, st.text(max_size=4), st.integers(), st.tuples(st.integers(), st.integers()),
                       st.tuples(st.integers(), st.floats(), st.integers()), st.tuples(st.booleans(), st.integers(),
                                                                                         st.integers())),
    "activation": st.one_of(JUNK, st.integers(), st.text(max_size=5).filter(lambda s: s not in ("relu", "silu")),
                            st.just(["relu"]), st.just(("silu",))),
    "out_dtype": st.one_of(JUNK, st.text(max_size=8), st.integers(),
                           st.sampled_from([torch.int32, torch.float64, torch.complex64, torch.bool, torch.uint8])),
    "bias": st.one_of(JUNK, st.text(max_size=3), st.integers(), st.just(_bf(511)), st.just(_bf(1, 512)),
                      st.just(torch.zeros(512, dtype=torch.int32)), st.just(_bf(512).to_sparse()),
                      st.just(torch.zeros(512, dtype=torch.complex64))),
}
GEMM_GOOD = {
    "BN": st.sampled_from(range(64, 257, 16)), "STAGES": st.one_of(st.none(), st.sampled_from([2, 3, 4])),
    "CM": st.sampled_from([1, 2]), "group": st.integers(1, 10 ** 6), "sms": st.one_of(st.none(), st.integers(1, 10 ** 6)),
    "DEFER": st.sampled_from([None, False, 0]), "PINGPONG": st.sampled_from([None, True, False, 1, 0]),
    "PDL": st.sampled_from([True, False, 0, 1]), "SPLIT": st.none(),
    "activation": st.sampled_from([None, "relu", "silu"]),
    "out_dtype": st.sampled_from([None, torch.bfloat16, torch.float16, torch.float32]),
    "bias": st.sampled_from([None, _bf(512), torch.zeros(512), torch.zeros(512, dtype=torch.float16)]),
}
ATT_BAD = {
    "BN": st.one_of(NOT_INT, st.integers().filter(lambda i: not (16 <= i <= 256 and i % 16 == 0))),
    "STAGES": st.one_of(NOT_INT, st.integers(max_value=0), st.integers(min_value=20)),
    "NC": st.one_of(NOT_INT, st.integers().filter(lambda i: i not in (1, 2, 3))),
    "sms": st.one_of(NOT_INT, st.integers(max_value=0)),
    "OSTAGE": st.one_of(JUNK, st.integers(), st.text(max_size=4).filter(lambda s: s not in ("own", "q", "kv"))),
    **{f: NOT_FLAG for f in ("PINGPONG", "PERSIST", "CHAIN", "LAZY", "TRIM", "TAIL", "FOLD")},
    "PDL": st.one_of(NOT_FLAG, st.none()),
    "causal": st.one_of(JUNK, st.integers(), st.none(), st.text(max_size=3)),
    "scale": st.one_of(JUNK.filter(lambda x: not isinstance(x, float) or not (math.isfinite(x) and x > 0)),
                       st.text(max_size=3), st.booleans(), st.floats(max_value=0.0), st.integers(max_value=0),
                       st.just(float("inf"))),
    "return_lse": st.one_of(JUNK, st.integers(), st.none(), st.text(max_size=3)),
}
ATT_GOOD = {
    "BN": st.sampled_from([16, 32, 64, 128]), "STAGES": st.sampled_from([None, 1, 2, 3]),
    "NC": st.sampled_from([None, 1, 2]), "sms": st.one_of(st.none(), st.integers(1, 10 ** 6)),
    "OSTAGE": st.sampled_from([None, "q"]), "PERSIST": st.sampled_from([None, True, False]),
    "LAZY": st.sampled_from([None, True, False, 0, 1]), "TAIL": st.sampled_from([None, True, False]),
    "FOLD": st.sampled_from([None, True, False]), "PDL": st.sampled_from([True, False]),
    "causal": st.booleans(), "scale": st.one_of(st.none(), st.floats(1e-6, 1e6), st.integers(1, 100)),
    "return_lse": st.booleans(),
}
NAMES = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=8)


@SETTINGS
@given(st.data())
def test_gemm_one_bad_option_is_named(data):
    name = data.draw(st.sampled_from(sorted(GEMM_BAD)))
    value = data.draw(GEMM_BAD[name])
    refuse(AREA, _gemm(**{name: value}), names=[name])


@SETTINGS
@given(st.data())
def test_gemm_bad_options_among_good_ones_name_a_bad_one(data):
    """Several options at once: the error names one of the bad ones (never the device while one is bad)."""
    bad = data.draw(st.lists(st.sampled_from(sorted(GEMM_BAD)), min_size=1, max_size=3, unique=True))
    good = data.draw(st.lists(st.sampled_from(sorted(set(GEMM_GOOD) - set(bad))), max_size=3, unique=True))
    kw = {n: data.draw(GEMM_BAD[n]) for n in bad}
    kw.update({n: data.draw(GEMM_GOOD[n]) for n in good})
    refuse(AREA, _gemm(**kw), names=bad)


@SETTINGS
@given(st.data())
def test_gemm_one_good_option_reaches_the_device_check(data):
    name = data.draw(st.sampled_from(sorted(GEMM_GOOD)))
    refuse(AREA, _gemm(**{name: data.draw(GEMM_GOOD[name])}), names=ON_CPU)


@SETTINGS
@given(NAMES.filter(lambda n: n not in GEMM_TUNING and n not in ("bias", "activation", "out_dtype", "out", "gate")
                    and n.isidentifier()), st.one_of(JUNK, st.integers(), st.none()))
def test_gemm_unknown_option_is_named(name, value):
    refuse(AREA, _gemm(**{name: value}), names=[name])


@SETTINGS
@given(st.data())
def test_attention_one_bad_option_is_named(data):
    name = data.draw(st.sampled_from(sorted(ATT_BAD)))
    refuse(AREA, _attention(**{name: data.draw(ATT_BAD[name])}), names=[name])


@SETTINGS
@given(st.data())
def test_attention_one_good_option_reaches_the_device_check(data):
    name = data.draw(st.sampled_from(sorted(ATT_GOOD)))
    refuse(AREA, _attention(**{name: data.draw(ATT_GOOD[name])}), names=ON_CPU)


@SETTINGS
@given(NAMES.filter(lambda n: n not in ATT_TUNING and n not in ("causal", "scale", "return_lse") and n.isidentifier()),
       st.one_of(JUNK, st.integers(), st.none()))
def test_attention_unknown_option_is_named(name, value):
    refuse(AREA, _attention(**{name: value}), names=[name])


def _nested(*rows):
    return torch.nested.nested_tensor([torch.zeros(r, rows[-1] if len(rows) > 1 else 8) for r in rows[:1] * 2])


def _bad_tensors(shape):
    """Tensors of every wrong kind for an argument of ``shape`` (bf16)."""
    good = _bf(*shape)
    return [
        "x", None, 3, 2.5, [[0.0]], good.tolist(), good.float().numpy(), (good,),
        good.to_sparse(), good.float().to_sparse_csr() if len(shape) == 2 else good.to_sparse(2),
        torch.nested.nested_tensor([good[0].float(), good[0].float()]).bfloat16(),
        torch.zeros((), dtype=torch.bfloat16), _bf(*shape[:-1]), _bf(*shape, 1),
        good.float(), good.double(), good.to(torch.int32), torch.zeros(shape, dtype=torch.complex64),
        torch.zeros(shape, dtype=torch.bool), torch.zeros(shape, dtype=torch.uint8),
        torch.zeros(shape, dtype=torch.float8_e4m3fn),
    ]


@pytest.mark.parametrize("name", ["a", "b"])
def test_gemm_tensors_of_every_wrong_kind_are_named(name):
    for t in _bad_tensors(A.shape if name == "a" else B.shape):
        refuse(AREA, _gemm(**{name: t}), names=[name])


@pytest.mark.parametrize("name", ["q", "k", "v"])
def test_attention_tensors_of_every_wrong_kind_are_named(name):
    for t in _bad_tensors(Q.shape if name == "q" else KV.shape):
        refuse(AREA, _attention(**{name: t}), names=[name])


def test_gemm_gate_of_every_wrong_kind_is_named():
    for t in _bad_tensors((256, 512)) + [_bf(512, 256).t(), _bf(256, 1024)[:, ::2], _bf(256, 512).float()]:
        if t is None:
            continue        # gate=None: no gate
        refuse(AREA, _gemm(gate=t), names=["gate"])


def test_gemm_out_of_every_wrong_kind_is_named():
    for t in _bad_tensors((256, 512)) + [_bf(512, 256).t(), _bf(256, 1024)[:, ::2], A, B[:256].t()]:
        if t is None or (isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.layout == torch.strided
                         and not t.is_nested):
            continue        # out=None and a float32 out are right
        refuse(AREA, _gemm(out=t), names=["out"])


def test_empty_and_mismatched_shapes_are_refused():
    refuse(AREA, _gemm(a=_bf(0, 512)), names=["empty"])
    refuse(AREA, _gemm(b=_bf(512, 0)), names=["empty"])
    refuse(AREA, _gemm(b=_bf(256, 512)), names=["chain"])
    refuse(AREA, _attention(q=_bf(1, 0, 4, 64)), names=["empty"])
    refuse(AREA, _attention(k=_bf(1, 128, 3, 64), v=_bf(1, 128, 3, 64)), names=["heads"])
    refuse(AREA, _attention(k=_bf(1, 128, 2, 64), v=_bf(1, 64, 2, 64)), names=["one shape"])


def test_device_faults_come_last_and_are_named():
    """Only a call right in every other way gets the device error; meta tensors and mixed devices say so."""
    m = torch.zeros(256, 512, dtype=torch.bfloat16, device="meta")
    refuse(AREA, _gemm(a=m), names=["device"])
    refuse(AREA, _gemm(a=m, b=torch.zeros(512, 512, dtype=torch.bfloat16, device="meta")), names=["meta"])
    refuse(AREA, _gemm(a=m, BN=100), names=["BN"])          # the option first, though the device is wrong too
    big = torch.zeros(1 << 20, 1 << 20, dtype=torch.bfloat16, device="meta")
    refuse(AREA, lambda: tirxpy_kernels.gemm(big, big), names=["meta"])
    mq = torch.zeros(1, 128, 4, 64, dtype=torch.bfloat16, device="meta")
    refuse(AREA, _attention(q=mq), names=["device"])
    refuse(AREA, _attention(q=mq, NC=7), names=["NC"])


def test_requires_grad_inputs_are_read_as_values():
    """Forward only: inputs that require grad are fine (they reach the device check here)."""
    a = A.clone().requires_grad_()
    refuse(AREA, _gemm(a=a, bias=torch.zeros(512, requires_grad=True)), names=ON_CPU)
    refuse(AREA, _attention(q=Q.clone().requires_grad_()), names=ON_CPU)


def test_non_contiguous_and_broadcast_inputs_reach_the_device_check():
    """Strided, transposed and broadcast (stride-0) inputs are made contiguous by the call, never refused."""
    refuse(AREA, _gemm(a=_bf(512, 256).t()), names=ON_CPU)
    refuse(AREA, _gemm(a=_bf(256, 1024)[:, ::2]), names=ON_CPU)
    refuse(AREA, _gemm(b=_bf(1, 512).expand(512, 512)), names=ON_CPU)
    refuse(AREA, _gemm(a=_bf(100, 30), b=_bf(30, 7)), names=ON_CPU)             # smaller than a tile: padded
    refuse(AREA, _attention(q=_bf(1, 4, 128, 64).transpose(1, 2)), names=ON_CPU)
    refuse(AREA, _attention(k=_bf(1, 1, 2, 64).expand(1, 128, 2, 64), v=_bf(1, 1, 2, 64).expand(1, 128, 2, 64)),
           names=ON_CPU)


GOOD_STRIDE = (256 * 3 * 4 * 64, 3 * 4 * 64, 64, 1)   # a (B, 256, 4, 64) slice of a fused (B, 256, 3, 4, 64) projection
BAD_STRIDE = st.one_of(
    st.sampled_from([[8, 4, 2, 1], (768, 64, 1), (768, 256, 64, 1, 1), "768,256,64,1", 3, 1.0, b"\x00"]),
    st.tuples(st.integers(1, 10 ** 4).map(lambda x: 8 * x), st.just(256), st.just(64), st.integers(2, 9)),  # innermost
    st.tuples(st.just(6144), st.integers(1, 4095).filter(lambda x: x % 8), st.just(64), st.just(1)),        # 16 bytes
    st.tuples(st.integers(-(2 ** 70), 0), st.just(256), st.just(64), st.just(1)),                         # not positive
    st.tuples(st.integers(2 ** 39, 2 ** 80).map(lambda x: x * 8), st.just(256), st.just(64), st.just(1)),  # too large
    st.tuples(st.sampled_from([True, 256.0, "256", None, 2 ** 0.5]), st.just(256), st.just(64), st.just(1)),
)


@SETTINGS
@given(st.sampled_from(["attention_sm90", "attention_bwd_sm90"]), st.integers(0, 3), BAD_STRIDE)
def test_kernel_strides_of_any_value_are_checked(factory, which, bad):
    """A kernel factory's ``strides=`` (one entry per input, each None or element strides TMA can follow) refuses any
    other value with a typed error naming ``strides``; the good entries beside it are not blamed."""
    from tirxpy_kernels import attention_bwd_sm90, attention_sm90

    n = 3 if factory == "attention_sm90" else 4
    strides = [GOOD_STRIDE] * n
    strides[which % n] = bad
    fn = {"attention_sm90": attention_sm90.attention_sm90, "attention_bwd_sm90": attention_bwd_sm90.attention_bwd_sm90}
    refuse(AREA, lambda: fn[factory](2, 4, 4, 256, 256, 64, strides=tuple(strides)), names=["strides"])
    refuse(AREA, lambda: fn[factory](2, 4, 4, 256, 256, 64, strides=bad), names=["strides"])
    fn[factory](2, 4, 4, 256, 256, 64, strides=(GOOD_STRIDE,) * n)         # the good ones build


def test_mlp_and_qkvpacked_arguments_of_every_wrong_kind_are_named():
    x, w1, w2 = _bf(4, 64, 128), _bf(512, 128), _bf(128, 512)
    refuse(AREA, lambda: tirxpy_kernels.mlp(x, w1.t(), w2.t()), names=ON_CPU)
    for args, name in (((x, w1, w2.t()), "shapes do not chain"), ((x, w1.t(), w2.t(), "gelu"), "activation"),
                       ((x.tolist(), w1.t(), w2.t()), "x must be a tensor"), ((x, w1.t()[None], w2.t()), "b1"),
                       ((x, w1.t(), 3), "b2"), ((x[0, 0], w1.t(), w2.t()), "x must be (..., dim)"),
                       # each fault named before any product runs (not the first product's device error)
                       ((torch.nested.nested_tensor([x[0], x[1]]), w1.t(), w2.t()), "x is a nested tensor"),
                       ((x, w1.t().to_sparse(), w2.t()), "b1 is a sparse tensor"),
                       ((x, w1.t(), w2.t().float()), "b2 has dtype"), ((x.int(), w1.t(), w2.t()), "x has dtype"),
                       ((x, w1.t(), w2.t().half()), "share one dtype"),
                       ((x, w1.t(), _bf(0, 512).t()), "empty problem")):
        refuse(AREA, lambda a=args: tirxpy_kernels.mlp(*a), names=[name])
    refuse(AREA, lambda: tirxpy_kernels.attention_qkvpacked(_bf(1, 128, 3, 2, 64)), names=ON_CPU)
    for qkv in (_bf(1, 128, 2, 2, 64), _bf(1, 128, 6, 64), "qkv", None, _bf(1, 128, 3, 2, 64).float()):
        refuse(AREA, lambda t=qkv: tirxpy_kernels.attention_qkvpacked(t), names=["qkv"])
