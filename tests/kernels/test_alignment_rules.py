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
