"""Fuzz: the kernel factories of tirxpy_kernels (``gemm_sm90``, ``attention_sm90``, ``attention_bwd_sm90``,
``gemm_sm100``, ``rmsnorm_silu``, ``quantize_fp8_kernel`` and the backward's pre- and post-processing kernels) with
one option of a kind no option takes.

Each call either builds a kernel (a value the option may take, such as a number-like ``scale``) or is refused
with the library's typed error naming the option. The pool holds objects whose own methods raise: an ``int``
subclass whose comparisons, arithmetic and repr raise, an object whose ``__eq__`` and ``__repr__`` raise, and the
harness's :class:`~harness.Hostile` (every method raises).
Their code must not run in the checks, and their failure must not replace the library's error."""
import numpy as np
import pytest
from harness import Hostile, refuse

from tirxpy_kernels.attention_bwd_post import attention_bwd_dq_store
from tirxpy_kernels.attention_bwd_pre import attention_bwd_preprocess
from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90
from tirxpy_kernels.attention_sm90 import attention_sm90
from tirxpy_kernels.gemm_sm100 import gemm_sm100
from tirxpy_kernels.gemm_sm90 import gemm_sm90
from tirxpy_kernels.quantize_sm90 import quantize_fp8_kernel
from tirxpy_kernels.rmsnorm_silu import rmsnorm_silu

AREA = "tirxpy_kernels kernel factories"


class _HostileInt(int):
    """128 as an int subclass whose comparisons, arithmetic and repr raise."""

    def _raise(self, *args):
        raise ZeroDivisionError("the value's own code ran")

    __lt__ = __le__ = __gt__ = __ge__ = __mod__ = __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = _raise
    __floordiv__ = __truediv__ = __repr__ = _raise
    __hash__ = int.__hash__


class _HostileObject:
    """An object whose equality and repr raise (its hash is fixed, so a cache lookup compares it)."""

    def __hash__(self):
        return 1

    def __eq__(self, other):
        raise ZeroDivisionError("the value's own __eq__ ran")

    def __repr__(self):
        raise ZeroDivisionError("the value's own __repr__ ran")


HUGE = 10 ** 30     # an int: an option with no upper bound may take it
POOL = [_HostileInt(128), _HostileObject(), Hostile(), "128", (1, 2), [1], float("nan"), 1.5, np.float32(2.0), HUGE]

# factory, its required arguments, its options
FACTORIES = {
    "gemm_sm90": (gemm_sm90, dict(M=256, N=256, K=256),
                  ["M", "N", "K", "BN", "STAGES", "CM", "a_major", "b_major", "dtype", "out_dtype", "bias",
                   "activation", "sms", "group", "DEFER", "PINGPONG", "drop", "PDL", "SPLIT", "scaling", "b_dtype",
                   "PART", "PASS", "gate"]),
    "attention_sm90": (attention_sm90, dict(B=1, H=2, HKV=2, SQ=256, SK=256, D=64),
                       ["causal", "scale", "dtype", "BN", "STAGES", "NC", "SQT", "SKT", "PINGPONG", "PERSIST", "CHAIN",
                        "sms", "OSTAGE", "LAZY", "TRIM", "TAIL", "FOLD", "PDL", "VARLEN", "PAIRS", "strides"]),
    "attention_bwd_sm90": (attention_bwd_sm90, dict(B=1, H=2, HKV=2, SQ=256, SK=256, D=64),
                           ["causal", "scale", "dtype", "deterministic", "SQT", "SKT", "BM", "STAGES", "DQ_SPLIT",
                            "PACKED", "FOLD", "strides", "grad_strides", "TAIL", "sms", "ROTATE", "PDL", "TRAIL",
                            "FUSE_DQ", "dq_strides"]),
    "gemm_sm100": (gemm_sm100, dict(M=256, N=256, K=256), ["BN", "STAGES", "EPI", "ctas", "cta_group", "dtype", "drop"]),
    "rmsnorm_silu": (rmsnorm_silu, dict(n_rows=64, d=256), ["n_rows", "d", "eps", "elems_per_thread"]),
    "quantize_fp8_kernel": (quantize_fp8_kernel, dict(granularity="1x128", M=128, K=256),
                            ["granularity", "M", "K", "in_dtype", "out_dtype", "pow2", "div", "vecs", "lanes"]),
    "attention_bwd_preprocess": (attention_bwd_preprocess, dict(B=1, H=2, SQ=128, D=64),
                                 ["B", "H", "SQ", "D", "dtype", "SQT", "PDL"]),
    "attention_bwd_dq_store": (attention_bwd_dq_store, dict(B=1, S_=128, H=2, D=64),
                               ["B", "S_", "H", "D", "dtype", "sb", "ss", "PDL"]),
}

# values an option takes as a number: float(value) is what the kernel uses
NUMBER_LIKE = {"scale", "eps"}


@pytest.mark.parametrize("factory", sorted(FACTORIES))
def test_an_option_of_a_kind_no_option_takes_is_named(factory):
    fn, required, options = FACTORIES[factory]
    for name in options:
        for value in POOL:
            kw = dict(required, **{name: value})
            allow = (lambda built: True) if name in NUMBER_LIKE or value is HUGE else None
            refuse(AREA, lambda: fn(**kw), names=[name], seconds=20, allow=allow)


def test_token_quantization_takes_no_lanes():
    """``lanes`` splits a 128-column group over lanes; a token row has no such group, so the option is refused
    rather than ignored."""
    refuse(AREA, lambda: quantize_fp8_kernel("token", 128, 256, lanes=8), names=["lanes", "token"])
