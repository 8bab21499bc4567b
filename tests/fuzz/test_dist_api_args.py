"""Fuzz: tirxpy_kernels.all_gather_gemm / gemm_reduce_scatter arguments on a CPU machine.

Hostile tensors (CPU, meta, sparse, storage-less wrapper subclasses that claim a CUDA device, wrong ranks, dtypes
and strides), non-tensors and options of every kind must be refused with the typed DistArgumentError: without a
process group (it names ``init_process_group``), and past the group check (a stand-in two-rank group), where the
first fault found is named. The two-GPU runs are tests/kernels/test_dist_gpu.py."""
import pytest
import torch
from harness import EXAMPLES, HOSTILE, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirxpy_kernels
import tirxpy_kernels.dist_api as dist_api

AREA = "tirxpy_kernels.all_gather_gemm / gemm_reduce_scatter arguments"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


class _NoStorage(torch.Tensor):
    """A tensor subclass with no storage that says it lives on a CUDA device."""

    @staticmethod
    def __new__(cls, shape, dtype):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=dtype, device="cuda")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func}")


def _tensors():
    bf = torch.bfloat16
    base = torch.zeros(256, 128, dtype=bf)
    return [base, base.t(), base[:, ::2], base[1:], torch.zeros(0, 128, dtype=bf), torch.zeros(256, 128),
            torch.zeros(256, 128, dtype=torch.complex64), torch.zeros(256, 128, dtype=torch.int8),
            torch.zeros(256, dtype=bf), torch.zeros(2, 256, 128, dtype=bf), torch.zeros(256, 128, device="meta",
                                                                                       dtype=bf),
            base.to_sparse(), base[:1].expand(256, 128), _NoStorage((256, 128), bf), _NoStorage((128, 256), bf),
            _NoStorage((3,), torch.float32)]


class _Thing:
    pass


TENSORS = st.sampled_from(_tensors())
JUNK = st.one_of(st.none(), st.integers(-3, 1 << 40), st.floats(allow_nan=True), st.text(max_size=6),
                 st.lists(st.integers(), max_size=2), st.builds(_Thing), st.booleans(), st.just(Ellipsis),
                 HOSTILE)
ARGS = st.one_of(TENSORS, JUNK)
OPTIONS = st.fixed_dictionaries({}, optional={"out": ARGS, "sms": JUNK, "transfer": st.one_of(
    st.sampled_from(["copy_engine", "movers", "push", "nccl", ""]), JUNK), "group": JUNK})


def _call(op, x, y, options, lag):
    kw = dict(options)
    if op == "rs":
        if lag is not None:
            kw["lag"] = lag
        return lambda: tirxpy_kernels.gemm_reduce_scatter(x, y, **kw)
    return lambda: tirxpy_kernels.all_gather_gemm(x, y, **kw)


@pytest.fixture(scope="module", autouse=True)
def _no_group():
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")


@SETTINGS
@given(op=st.sampled_from(["ag", "rs"]), x=ARGS, y=ARGS, options=OPTIONS, lag=JUNK)
def test_without_a_process_group_every_call_is_refused_naming_it(op, x, y, options, lag):
    refuse(AREA, _call(op, x, y, options, lag), names=["init_process_group"])


@SETTINGS
@given(op=st.sampled_from(["ag", "rs"]), x=ARGS, y=ARGS, options=OPTIONS, lag=JUNK)
def test_past_the_group_check_every_bad_argument_is_refused(op, x, y, options, lag):
    saved = dist_api._group
    dist_api._group = lambda group: (object(), 0, 2)           # a stand-in two-rank group
    try:
        refuse(AREA, _call(op, x, y, options, lag))
    finally:
        dist_api._group = saved
