"""The kernel library's alignment rule, on the CPU: a kernel's own launch checks demand the alignment its accesses
need (a direct caller gets a typed error, not a misaligned-address fault); an entry point copies an input off a
16-byte boundary (:func:`tirxpy_kernels.checks.aligned_input`) and refuses such an ``out``
(:func:`tirxpy_kernels.checks.aligned`); the layout helpers ask the one home of the fact
(:func:`tirxpy_kernels.checks.misalignment`).

GPU (marker gpu): python -m pytest -q -m gpu tests/kernels/test_alignment_rules.py
"""
import pytest
import torch

from tirxpy.lower.errors import LaunchError
from tirxpy.lower.packer import ArgPacker
from tirxpy_kernels.quantize_sm90 import GRANULARITIES, padded_shape, quantize_fp8_kernel, scales_storage
from tests.primitives.helpers import compile_ok

E4M3 = torch.float8_e4m3fn


def _odd(*shape, dtype=torch.bfloat16, device="cpu", off=1):
    """A contiguous tensor of ``shape`` whose data starts ``off`` elements past a 16-byte boundary."""
    n = 1
    for s in shape:
        n *= s
    t = torch.zeros(n + 16, dtype=dtype, device=device)[off:off + n].view(*shape)
    assert t.data_ptr() % 16 == off * t.element_size()
    return t


# ---------------------------------------------------------------- a kernel's own launch checks
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_the_quantize_kernel_refuses_an_x_off_16_bytes_at_launch(granularity):
    """The kernel reads ``x`` with 16-byte vector loads: its launch checks (run before the device; here against the
    CPU) take an ``x`` on a 16-byte boundary and refuse one 2 or 8 bytes off it, naming ``X``, the offset and the
    fix; they asked only for 2-byte (bf16) alignment, which let a direct launch fault on the GPU."""
    M, K = padded_shape(granularity, 64, 256)
    ck = compile_ok(quantize_fp8_kernel(granularity, M, K), "sm_90a")
    assert {s.name: s.align for s in ck.specs}["X"] == 16
    packer = ArgPacker(ck.specs, torch.device("cpu"))
    q, s = torch.empty(M, K, dtype=E4M3), torch.empty(scales_storage(granularity, M, K))
    packer.check((torch.zeros(M, K, dtype=torch.bfloat16), q, s))
    for off in (1, 4):
        with pytest.raises(LaunchError, match=rf"parameter 'X': data pointer 0x[0-9a-f]+ is not 16-byte aligned "
                                              rf"\(offset {2 * off}\).*\.clone\(\)") as e:
            packer.check((_odd(M, K, off=off), q, s))
        assert e.value.param == "X" and isinstance(e.value, ValueError)


def test_a_kernels_vector_accesses_set_its_parameters_alignment():
    """What a launch asks of each tensor is what the kernel's code does with it: 16 bytes for a bf16 tensor the code
    moves in 16-byte vectors (the RMSNorm kernel's rows and weights), a float32 tensor's own 4 bytes where it is
    read one element at a time (the quantize kernel's scales)."""
    from tirxpy_kernels.rmsnorm_silu import rmsnorm_silu

    ck = compile_ok(rmsnorm_silu(8, 256), "sm_90a")
    assert {s.name: s.align for s in ck.specs} == {"X": 16, "W": 16, "Y": 16}
    ck = compile_ok(quantize_fp8_kernel("1x128", 64, 256), "sm_90a")
    assert {s.name: s.align for s in ck.specs} == {"X": 16, "Q": 8, "Sc": 4}


@pytest.mark.gpu
@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_gpu_a_direct_launch_with_x_off_16_bytes_is_a_launch_error(granularity):
    """Calling the compiled kernel itself (not the API) with ``x`` 2 bytes off a 16-byte boundary raises a
    LaunchError naming ``X`` instead of faulting; the device is fine afterwards, and an aligned ``x`` is quantized
    as the API quantizes it."""
    from tirxpy_kernels.launch_cache import compiled
    from tirxpy_kernels.quantize_api import quantize_fp8
    from tirxpy_kernels.quantize_sm90 import scales_view

    M, K = padded_shape(granularity, 64, 256)
    ck = compiled(quantize_fp8_kernel(granularity, M, K), "sm_90a")
    x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
    q = torch.empty(M, K, dtype=E4M3, device="cuda")
    s = torch.empty(scales_storage(granularity, M, K), device="cuda")
    with pytest.raises(LaunchError, match=r"parameter 'X': .* not 16-byte aligned \(offset 2\)"):
        ck(_odd(M, K, device="cuda").copy_(x), q, s)
    ck(x, q, s)
    torch.cuda.synchronize()
    wq, ws = quantize_fp8(x, granularity)
    assert torch.equal(q.view(torch.uint8), wq.view(torch.uint8)) and torch.equal(scales_view(s, granularity), ws)


# ---------------------------------------------------------------- the distributed GEMMs' entry points
class _CudaAt(torch.Tensor):
    """A stand-in bf16 CUDA tensor (no GPU here) whose data pointer is ``ptr``: what the distributed GEMMs' argument
    checks read of it."""

    @staticmethod
    def __new__(cls, shape, ptr):
        t = torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.bfloat16, device="cuda")
        t.ptr = ptr
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func}")

    def data_ptr(self):
        return self.ptr


def test_the_distributed_gemms_take_an_input_off_16_bytes_and_refuse_such_an_out():
    """An input off a 16-byte boundary passes the checks (the call copies it); an ``out`` off one is refused, naming
    it, the offset and the fix. Both were refused."""
    from tirxpy_kernels.dist_api import DistArgumentError, _tensor

    for name in ("a_shard", "b", "a", "b_shard"):
        _tensor(_CudaAt((256, 128), 0x10002), name, "(M, K)")
    with pytest.raises(DistArgumentError, match=r"out starts 2 bytes past a 16-byte boundary .*pass a freshly "
                                                r"allocated out \(or out=None\)"):
        _tensor(_CudaAt((256, 128), 0x10002), "out", "(M, N)")


@pytest.mark.parametrize("op", ["all_gather_gemm", "gemm_reduce_scatter"])
def test_the_distributed_gemms_hand_their_run_aligned_inputs_on_every_call(monkeypatch, op):
    """Each call (the checked first one and a repeated one that takes the kept run) hands the run its inputs
    themselves where they start on a 16-byte boundary and aligned copies of their values (same strides) where they
    do not; ``out`` as given."""
    import tirxpy_kernels.dist_api as api
    from tirxpy_kernels.launch_cache import LaunchCache

    launched = []

    def run(x, y, out):
        launched.append((x, y, out))
        return out

    checked = "_ag_checked" if op == "all_gather_gemm" else "_rs_checked"
    monkeypatch.setattr(api, checked, lambda *args: (None, run))
    monkeypatch.setattr(api, "_CALLS", LaunchCache("test"))
    monkeypatch.setattr(api, "_repeat", lambda key, group: None if api._CALLS.get(key) is None else run)
    x = torch.randn(256, 128).to(torch.bfloat16)
    w = torch.randn(192, 128).to(torch.bfloat16)               # b = w.t(): the transpose of a row-major weight
    ox, ow = _odd(256, 128).copy_(x), _odd(192, 128).copy_(w)
    out = torch.empty(256, 192, dtype=torch.bfloat16)
    for a, b in ((x, w.t()), (ox, ow.t()), (ox, ow.t()), (x, ow.t())):
        del launched[:]
        assert getattr(api, op)(a, b, out=out) is out
        ((A, B, O),) = launched
        assert O is out and A.data_ptr() % 16 == 0 and B.data_ptr() % 16 == 0
        assert (A is a) == (a is x) and (B is b) == (b.data_ptr() % 16 == 0)
        assert torch.equal(A, a) and torch.equal(B, b) and B.stride() == b.stride()


# ---------------------------------------------------------------- views read in place
class _NoPointer(torch.Tensor):
    """A tensor subclass whose data pointer cannot be read (as a functorch batched tensor's)."""

    @staticmethod
    def __new__(cls, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.bfloat16)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"{func}")

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def test_tma_view_asks_the_alignment_rule_of_checks():
    """tma_view judges the address by :func:`~tirxpy_kernels.checks.misalignment` (the one home of the 16-byte
    rule): a view off 16 bytes is copied, one on it read in place, and a tensor without a data pointer is an
    ArgumentError naming it (it was torch's RuntimeError)."""
    from tirxpy.errors import ArgumentError
    from tirxpy_kernels.views import kernel_input, tma_view

    flat = torch.arange(2 * 8 * 2 * 64 + 8, dtype=torch.float32).to(torch.bfloat16)
    on, off = flat[8:8 + 2048].view(2, 8, 2, 64), flat[1:1 + 2048].view(2, 8, 2, 64)
    assert tma_view(on)[0] is on and tma_view(off) == (None, None)
    t, st = kernel_input(off, 8)
    assert st is None and t.data_ptr() % 16 == 0 and torch.equal(t, off)
    with pytest.raises(ArgumentError, match=r"tma_view: t has no data pointer .*pass a plain torch tensor"):
        tma_view(_NoPointer((2, 8, 2, 64)))


# ---------------------------------------------------------------- the attention backward's out
@pytest.mark.gpu
def test_gpu_attention_backward_reads_an_out_off_16_bytes_from_a_copy_on_every_call():
    """The preprocessing reads ``out`` with 16-byte loads. An ``out`` 2 bytes off a 16-byte boundary gives the same
    gradients as an aligned one on the first (checked) call and on the repeated call that takes the fast path, which
    used to hand the misaligned ``out`` to the kernel."""
    from tirxpy_kernels import attention, attention_backward

    torch.manual_seed(0)
    B, S, H, D = 1, 256, 2, 64
    q, k, v, dout = (torch.randn(B, S, H, D, device="cuda").to(torch.bfloat16) for _ in range(4))
    out, lse = attention(q, k, v, causal=True, return_lse=True)
    want = attention_backward(q, k, v, out, dout, lse, causal=True, deterministic=True)
    odd = _odd(B, S, H, D, device="cuda").copy_(out)
    for _ in range(3):
        got = attention_backward(q, k, v, odd, dout, lse, causal=True, deterministic=True)
        for g, w in zip(got, want):
            assert torch.equal(g, w)


@pytest.mark.gpu
def test_gpu_varlen_backward_reads_an_out_off_16_bytes_from_a_copy():
    """As above for the packed backward, whose ``out`` went to the preprocessing as given."""
    from tirxpy_kernels import attention_varlen, attention_varlen_backward

    torch.manual_seed(1)
    H, D = 2, 64
    cu = torch.tensor([0, 100, 300], dtype=torch.int32, device="cuda")
    q, k, v, dout = (torch.randn(300, H, D, device="cuda").to(torch.bfloat16) for _ in range(4))
    out, lse = attention_varlen(q, k, v, cu, cu, 200, 200, causal=True, return_lse=True)
    want = attention_varlen_backward(q, k, v, out, dout, lse, cu, cu, 200, 200, causal=True, deterministic=True)
    odd = _odd(300, H, D, device="cuda").copy_(out)
    for _ in range(2):
        got = attention_varlen_backward(q, k, v, odd, dout, lse, cu, cu, 200, 200, causal=True, deterministic=True)
        for g, w in zip(got, want):
            assert torch.equal(g, w)
