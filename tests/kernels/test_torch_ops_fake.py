"""The fakes (meta implementations) of the ``torch.ops.tirxpy`` operators run their real operators' metadata checks.

The rule: a call the real operator refuses for its arguments' metadata (dtypes, shapes, flags, options) is refused
by the fake with the same typed error and message, before any output is made; a call it accepts gets outputs of
the real operator's shapes and dtypes. Checked here on meta tensors, under FakeTensorMode, and on symbolic shapes
(make_fx, torch.compile with dynamic shapes). The real operators run on CPU tensors: their metadata checks come
before the device's, so a bad call raises the metadata error there and a good one the device error (no GPU needed).
"""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import tirxpy_kernels.mlp_ops  # noqa: F401  (registers torch.ops.tirxpy.mlp)
import tirxpy_kernels.attention_qkv_ops  # noqa: F401  (registers torch.ops.tirxpy.attention_qkvpacked*)
from tirxpy_kernels import attention_api, attention_bwd_api, attention_varlen_api, gemm_api, torch_ops
from tirxpy_kernels.attention_api import AttentionArgumentError
from tirxpy_kernels.attention_bwd_api import AttentionBwdArgumentError
from tirxpy_kernels.attention_varlen_api import VarlenArgumentError
from tirxpy_kernels.gemm_api import GemmArgumentError

bf, f16, f32 = torch.bfloat16, torch.float16, torch.float32
OPS = ("gemm", "attention", "attention_backward", "attention_varlen", "attention_varlen_backward", "mlp",
       "attention_qkvpacked", "attention_qkvpacked_backward")


class _Make:
    """Tensors for one call on ``device`` ("cpu": the real operator; "meta"; or the fake tensors of ``mode``)."""

    def __init__(self, device):
        self.device = device

    def __call__(self, *shape, dtype=bf):
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def cu(self, *offsets, dtype=torch.int32):
        return torch.tensor(offsets, dtype=dtype, device=self.device)


# Good calls (as the public wrappers make them), each with the outputs' (shape, dtype) the real operator returns.
def _good(op, t):
    q, k = t(2, 300, 8, 64), t(2, 200, 2, 64)
    qv, cu = t(700, 8, 128), t.cu(0, 300, 700)
    return {
        "gemm": ((t(300, 64), t(64, 520), t(520, dtype=f32), "silu", f32, "", None), [((300, 520), f32)]),
        "attention": ((q, k, k, True, None, "(('BN', 64),)"), [((2, 300, 8, 64), bf), ((2, 8, 300), f32)]),
        "attention_backward": ((q, k, k, q, q, t(2, 8, 300, dtype=f32), True, 0.1),
                               [((2, 300, 8, 64), bf), ((2, 200, 2, 64), bf), ((2, 200, 2, 64), bf)]),
        "attention_varlen": ((qv, qv, qv, cu, cu, 400, 400, False, None), [((700, 8, 128), bf), ((8, 700), f32)]),
        "attention_varlen_backward": ((qv, qv, qv, qv, qv, t(8, 700, dtype=f32), cu, cu, 400, 400, True, None),
                                      [((700, 8, 128), bf)] * 3),
        "mlp": ((t(300, 64, dtype=f16), t(64, 256, dtype=f16), t(256, 96, dtype=f16)),
                [((300, 96), f16), ((300, 256), f16)]),
        "attention_qkvpacked": ((t(2, 300, 3, 4, 64), True, None), [((2, 300, 4, 64), bf), ((2, 4, 300), f32)]),
        "attention_qkvpacked_backward": ((t(2, 300, 3, 4, 64), t(2, 300, 4, 64), t(2, 300, 4, 64),
                                          t(2, 4, 300, dtype=f32), False, None), [((2, 300, 3, 4, 64), bf)]),
    }[op]


def _gemm(t, a=(300, 64), b=(64, 520), dtype=bf, bias=None, activation=None, out_dtype=None, tuning="", gate=None):
    return t(*a, dtype=dtype), t(*b, dtype=dtype), bias, activation, out_dtype, tuning, gate


def _attn(t, q=(2, 300, 8, 64), k=(2, 200, 2, 64), v=None, dtype=bf, kdtype=None, scale=None, tuning=""):
    return t(*q, dtype=dtype), t(*k, dtype=kdtype or dtype), t(*(v or k), dtype=kdtype or dtype), False, scale, tuning


def _bwd(t, q=(2, 300, 8, 64), k=(2, 200, 2, 64), out=None, dout=None, lse=(2, 8, 300), dtype=bf, lse_dtype=f32,
         dout_dtype=None, scale=None):
    return (t(*q, dtype=dtype), t(*k, dtype=dtype), t(*k, dtype=dtype), t(*(out or q), dtype=dtype),
            t(*(dout or q), dtype=dout_dtype or dtype), t(*lse, dtype=lse_dtype), True, scale)


def _varlen(t, q=(700, 8, 128), k=None, dtype=bf, kdtype=None, cu_q=None, cu_k=None, max_q=400, max_k=400,
            scale=None):
    kk = t(*(k or q), dtype=kdtype or dtype)
    return (t(*q, dtype=dtype), kk, kk, t.cu(0, 300, 700) if cu_q is None else cu_q(t),
            t.cu(0, 300, 700) if cu_k is None else cu_k(t), max_q, max_k, False, scale)


def _varlen_bwd(t, q=(700, 8, 128), out=None, out_dtype=None, dout=None, lse=(8, 700), cu_q=None, max_k=400,
                dtype=bf):
    return (t(*q, dtype=dtype), t(*q, dtype=dtype), t(*q, dtype=dtype), t(*(out or q), dtype=out_dtype or dtype),
            t(*(dout or q), dtype=dtype), t(*lse, dtype=f32), t.cu(0, 300, 700) if cu_q is None else cu_q(t),
            t.cu(0, 300, 700), 400, max_k, False, None)


def _qkv(t, shape=(2, 300, 3, 4, 64), dtype=bf, scale=None):
    return t(*shape, dtype=dtype), True, scale


def _qkv_bwd(t, shape=(2, 300, 3, 4, 64), out=(2, 300, 4, 64), out_dtype=bf, dout=(2, 300, 4, 64), lse=(2, 4, 300)):
    return t(*shape), t(*out, dtype=out_dtype), t(*dout), t(*lse, dtype=f32), False, None


# (operator, the arguments made by _Make, the error, a pattern naming the argument): calls the real operator refuses
BAD = [
    ("gemm", lambda t: _gemm(t, out_dtype=torch.int32), GemmArgumentError, "out_dtype torch.int32"),
    ("gemm", lambda t: _gemm(t, dtype=f32), GemmArgumentError, "a has dtype torch.float32"),
    ("gemm", lambda t: (t(300, 64), t(64, 520, dtype=f16), None, None, None), GemmArgumentError,
     "a is torch.bfloat16 and b is torch.float16"),
    ("gemm", lambda t: _gemm(t, bias=t(519)), GemmArgumentError, r"bias must be a tensor of shape \(520,\)"),
    ("gemm", lambda t: _gemm(t, bias=t(520, dtype=torch.int32)), GemmArgumentError, "bias must be floating point"),
    ("gemm", lambda t: _gemm(t, activation="gelu"), GemmArgumentError, "activation must be one of"),
    ("gemm", lambda t: _gemm(t, gate=t(300, 520, dtype=f32)), GemmArgumentError, "gate is torch.float32"),
    ("gemm", lambda t: _gemm(t, gate=t(300, 521)), GemmArgumentError, "gate has shape"),
    ("gemm", lambda t: _gemm(t, gate=t(520, 300).t()), GemmArgumentError, "gate must be contiguous"),
    ("gemm", lambda t: _gemm(t, tuning="(('BM', 128),)"), GemmArgumentError, r"unknown tuning argument\(s\) \['BM'\]"),
    ("gemm", lambda t: _gemm(t, tuning="(('BN', 100),)"), GemmArgumentError, "BN = 100"),
    ("gemm", lambda t: _gemm(t, a=(0, 64)), GemmArgumentError, "empty problem"),
    ("gemm", lambda t: _gemm(t, b=(63, 520)), GemmArgumentError, "shapes do not chain"),
    ("attention", lambda t: _attn(t, kdtype=f16), AttentionArgumentError, "q, k, v have dtypes"),
    ("attention", lambda t: _attn(t, dtype=f32), AttentionArgumentError, "q has dtype torch.float32"),
    ("attention", lambda t: _attn(t, q=(2, 300, 8, 96), k=(2, 200, 2, 96)), AttentionArgumentError, "head dim 96"),
    ("attention", lambda t: _attn(t, k=(2, 200, 2, 128)), AttentionArgumentError, "q has head dim 64 but k / v"),
    ("attention", lambda t: _attn(t, v=(2, 201, 2, 64)), AttentionArgumentError, r"k \(2, 200, 2, 64\) and v"),
    ("attention", lambda t: _attn(t, k=(3, 200, 2, 64)), AttentionArgumentError, "batch"),
    ("attention", lambda t: _attn(t, k=(2, 200, 3, 64)), AttentionArgumentError, "8 query heads"),
    ("attention", lambda t: _attn(t, scale=-1.0), AttentionArgumentError, "scale must be a positive"),
    ("attention", lambda t: _attn(t, tuning="(('STAGES', '3'),)"), AttentionArgumentError, "STAGES must be an int"),
    ("attention", lambda t: _attn(t, tuning="(('XY', 4),)"), AttentionArgumentError, "unknown tuning.*XY"),
    ("attention", lambda t: _attn(t, tuning="(('NC', 4),)"), AttentionArgumentError, "NC = 4 consumer warpgroups"),
    ("attention", lambda t: _attn(t, tuning="(('BN', 8),)"), AttentionArgumentError, "BN = 8 must be a multiple"),
    ("attention_backward", lambda t: _bwd(t, lse=(2, 4, 300)), AttentionBwdArgumentError, "lse has shape"),
    ("attention_backward", lambda t: _bwd(t, lse_dtype=bf), AttentionBwdArgumentError, "lse has dtype"),
    ("attention_backward", lambda t: _bwd(t, dout_dtype=f16), AttentionBwdArgumentError, "dout has dtype"),
    ("attention_backward", lambda t: _bwd(t, out=(2, 299, 8, 64)), AttentionBwdArgumentError, "out has shape"),
    ("attention_backward", lambda t: _bwd(t, dtype=f32), AttentionBwdArgumentError, "q has dtype torch.float32"),
    ("attention_backward", lambda t: _bwd(t, q=(2, 300, 8, 96), k=(2, 200, 2, 96)), AttentionBwdArgumentError,
     "head dim 96"),
    ("attention_backward", lambda t: _bwd(t, k=(2, 200, 3, 64)), AttentionBwdArgumentError, "8 query heads"),
    ("attention_backward", lambda t: _bwd(t, scale=0.0), AttentionBwdArgumentError, "scale must be a positive"),
    ("attention_varlen", lambda t: _varlen(t, cu_q=lambda t: t.cu(0, 300, 700, dtype=torch.int64)),
     VarlenArgumentError, "cu_seqlens_q must be a 1-D torch.int32"),
    ("attention_varlen", lambda t: _varlen(t, cu_k=lambda t: t.cu(0, 700)), VarlenArgumentError,
     "cu_seqlens_q has 3 offsets and cu_seqlens_k 2"),
    ("attention_varlen", lambda t: _varlen(t, cu_k=lambda t: t.cu(0, 0, 300, 0, 700, 0)[::2]), VarlenArgumentError,
     "cu_seqlens_k is a strided view"),
    ("attention_varlen", lambda t: _varlen(t, max_q=0), VarlenArgumentError, "max_seqlen_q must be a positive int"),
    ("attention_varlen", lambda t: _varlen(t, kdtype=f16), VarlenArgumentError, "q, k, v have dtypes"),
    ("attention_varlen", lambda t: _varlen(t, q=(700, 8, 96)), VarlenArgumentError, "head dim 96"),
    ("attention_varlen", lambda t: _varlen(t, k=(700, 3, 128)), VarlenArgumentError, "8 query heads"),
    ("attention_varlen", lambda t: _varlen(t, scale=-1.0), VarlenArgumentError, "scale must be a positive"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, lse=(700, 8)), VarlenArgumentError, "lse is"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, out_dtype=f16), VarlenArgumentError, "out is"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, dout=(699, 8, 128)), VarlenArgumentError, "dout is"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, cu_q=lambda t: t.cu(0, 700, dtype=torch.int64)),
     VarlenArgumentError, "cu_seqlens_q must be"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, max_k=0), VarlenArgumentError, "max_seqlen_k"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, q=(700, 8, 96)), VarlenArgumentError, "head dim 96"),
    ("attention_varlen_backward", lambda t: _varlen_bwd(t, dtype=f32), VarlenArgumentError, "q has dtype"),
    ("mlp", lambda t: (t(300, 64, dtype=f32), t(64, 256, dtype=f32), t(256, 64, dtype=f32)), GemmArgumentError,
     "mlp: x has dtype torch.float32"),
    ("mlp", lambda t: (t(300, 64), t(64, 256, dtype=f16), t(256, 64)), GemmArgumentError,
     "x, b1 and b2 must share one dtype"),
    ("mlp", lambda t: (t(300, 64), t(64, 256), t(255, 64)), GemmArgumentError, "shapes do not chain"),
    ("mlp", lambda t: (t(2, 150, 64), t(64, 256), t(256, 64)), GemmArgumentError, "the operator takes a matrix x"),
    ("mlp", lambda t: (t(0, 64), t(64, 256), t(256, 64)), GemmArgumentError, "empty problem"),
    ("attention_qkvpacked", lambda t: _qkv(t, dtype=f32), AttentionArgumentError, "attention_qkvpacked: qkv has dtype torch.float32"),
    ("attention_qkvpacked", lambda t: _qkv(t, shape=(2, 300, 3, 4, 96)), AttentionArgumentError, "head dim 96"),
    ("attention_qkvpacked", lambda t: _qkv(t, scale=-1.0), AttentionArgumentError, "scale must be a positive"),
    ("attention_qkvpacked", lambda t: _qkv(t, shape=(2, 300, 2, 4, 64)), AttentionArgumentError, "qkv must be"),
    ("attention_qkvpacked_backward", lambda t: _qkv_bwd(t, lse=(2, 4, 299)), AttentionBwdArgumentError,
     "lse has shape"),
    ("attention_qkvpacked_backward", lambda t: _qkv_bwd(t, out_dtype=f16), AttentionBwdArgumentError,
     "out has dtype"),
    ("attention_qkvpacked_backward", lambda t: _qkv_bwd(t, dout=(2, 300, 4, 32)), AttentionBwdArgumentError,
     "dout has shape"),
    ("attention_qkvpacked_backward", lambda t: _qkv_bwd(t, shape=(2, 300, 3, 4, 96), out=(2, 300, 4, 96),
                                                        dout=(2, 300, 4, 96)), AttentionBwdArgumentError,
     "head dim 96"),
]
# a tuning name that is one of the operator's own arguments: refused, not passed to the API as a second keyword (a
# TypeError); a Python call of the public check cannot take it at all, so these are not compared with it
BAD_NAMES = [
    ("gemm", lambda t: _gemm(t, tuning="(('bias', 1),)"), GemmArgumentError,
     r"unknown tuning argument\(s\) \['bias'\]"),
    ("attention", lambda t: _attn(t, tuning="(('causal', True),)"), AttentionArgumentError, "unknown tuning.*causal"),
]
_IDS = [f"{op}-{i}" for i, (op, *_) in enumerate(BAD)]


def _op(name):
    return getattr(torch.ops.tirxpy, name)


def _raised(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001  (the test compares what each path raised)
        return e
    return None


def _call(op, args, where):
    """``op`` on ``args(_Make(...))``: on CPU tensors (the real operator), meta tensors or under FakeTensorMode."""
    if where == "fake":
        with FakeTensorMode():
            return _op(op)(*args(_Make("cpu")))
    return _op(op)(*args(_Make(where)))


@pytest.mark.parametrize("where", ["meta", "fake"])
@pytest.mark.parametrize("op,args,error,names", BAD + BAD_NAMES, ids=_IDS + ["gemm-bias", "attention-causal"])
def test_the_fake_refuses_a_bad_argument_as_the_operator_does(op, args, error, names, where):
    with pytest.raises(error, match=names) as fake:
        _call(op, args, where)
    real = _raised(lambda: _call(op, args, "cpu"))
    assert type(real) is type(fake.value) and str(real) == str(fake.value)


# the public check of each operator's kernel API, called as the operator calls the API (the flags it passes)
CHECKS = {
    "gemm": lambda a, b, bias, activation, out_dtype, tuning="", gate=None: gemm_api.check(
        a, b, bias=bias, activation=activation, out_dtype=out_dtype, gate=gate, **torch_ops.decode_tuning(tuning)),
    "attention": lambda q, k, v, causal, scale, tuning="": attention_api.check(
        q, k, v, causal, scale, True, **torch_ops.decode_tuning(tuning)),
    "attention_backward": attention_bwd_api.check,
    "attention_varlen": lambda *args: attention_varlen_api.check(*args, True),
}


@pytest.mark.parametrize("op,args,error,names", [c for c in BAD if c[0] in CHECKS],
                         ids=[i for i, c in zip(_IDS, BAD) if c[0] in CHECKS])
def test_the_fake_agrees_with_the_public_check(op, args, error, names):
    """The kernel API's public ``check`` (on meta tensors, as a benchmark calls it) and the operator's fake refuse a
    bad call with one error."""
    want = _raised(lambda: CHECKS[op](*args(_Make("meta"))))
    got = _raised(lambda: _op(op)(*args(_Make("meta"))))
    assert isinstance(want, error) and type(got) is type(want) and str(got) == str(want)


@pytest.mark.parametrize("where", ["meta", "fake"])
@pytest.mark.parametrize("op", OPS)
def test_a_good_call_gets_the_operators_outputs(op, where):
    """The fake's outputs have the real operator's shapes and dtypes; the real operator takes the same call as far
    as its metadata goes (on CPU it stops at the device check)."""
    out = _call(op, lambda t: _good(op, t)[0], where)
    outs = out if isinstance(out, tuple) else (out,)
    assert [(tuple(o.shape), o.dtype) for o in outs] == _good(op, _Make("meta"))[1]
    real = _raised(lambda: _call(op, lambda t: _good(op, t)[0], "cpu"))
    assert real is not None and "cpu" in str(real) and "CUDA" in str(real), real


@pytest.mark.parametrize("op", OPS)
def test_the_fakes_take_symbolic_shapes(op):
    """Traced with symbolic shapes (make_fx, as torch.compile's dynamic shapes make them): the checks compare
    SymInts, the outputs' shapes are symbolic, and a bad call is refused with the typed error."""
    args = _good(op, _Make("cpu"))[0]
    gm = make_fx(lambda *a: _op(op)(*a), tracing_mode="symbolic")(*args)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and str(n.target) == f"tirxpy.{op}.default"]
    assert len(nodes) == 1
    val = nodes[0].meta["val"]
    shapes = [tuple(v.shape) for v in (val if isinstance(val, (tuple, list)) else (val,))]
    assert any(isinstance(d, torch.SymInt) for s in shapes for d in s)
    assert [tuple(int(d) for d in s) for s in shapes] == [s for s, _ in _good(op, _Make("meta"))[1]]
    _, args_, error, names = next(c for c in BAD if c[0] == op)
    with pytest.raises(error, match=names):
        make_fx(lambda *a: _op(op)(*a), tracing_mode="symbolic")(*args_(_Make("cpu")))


def test_torch_compile_refuses_a_bad_call_while_tracing():
    """Under ``torch.compile(dynamic=True)`` a bad call is refused when the graph is traced (the fake raises the
    operator's typed error, which dynamo reports inside its own error), before a backend sees a graph."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def fn(a, b):
        return torch.ops.tirxpy.gemm(a, b, None, None, torch.int32)

    torch._dynamo.reset()
    a, b = torch.zeros(300, 64, dtype=bf), torch.zeros(64, 520, dtype=bf)
    with pytest.raises(Exception, match=r"GemmArgumentError\(.gemm: out_dtype torch.int32 must be"):
        torch.compile(fn, fullgraph=True, dynamic=True, backend=backend)(a, b)
    assert not graphs
