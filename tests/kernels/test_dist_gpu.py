"""The distributed GEMMs on two GPUs (tirxpy_kernels.all_gather_gemm / gemm_reduce_scatter): float64 references on
fresh inputs per rank, NaN-poisoned outputs, ragged shapes, repeated calls (both buffer slots, growing flags) and a
rank that reaches the kernel late. Run under torchrun, every rank the same tests in the same order:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node=2 -m pytest -m gpu tests/kernels/test_dist_gpu.py

Skipped unless two CUDA GPUs and a torchrun environment (RANK, WORLD_SIZE = 2) exist."""
import os

for _k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ[_k] = "0" if _k == "NCCL_NVLS_ENABLE" else "1"

import pytest  # noqa: E402
import torch  # noqa: E402

pytestmark = pytest.mark.gpu

_READY = (torch.cuda.is_available() and torch.cuda.device_count() >= 2 and os.environ.get("WORLD_SIZE") == "2"
          and "RANK" in os.environ)
if not _READY:
    pytest.skip("needs 2 CUDA GPUs and torchrun --nproc_per_node=2", allow_module_level=True)

import torch.distributed as dist  # noqa: E402

import tirxpy_kernels  # noqa: E402
from tirxpy_kernels.dist_api import DistArgumentError  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def group():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", os.environ["RANK"])))
    if not dist.is_initialized():
        dist.init_process_group("nccl")
    yield dist.group.WORLD


def _seed():
    """One fresh seed, the same on both ranks (rank 0 draws it)."""
    s = torch.randint(0, 2**31 - 1, (1,), device="cuda")
    dist.broadcast(s, 0)
    return int(s.item())


def _inputs(seed, *shapes):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(*s, generator=g, device="cuda").bfloat16() for s in shapes]


def _close(out, ref, mag, K, parts=None):
    """Within the bf16 rounding of the output (and of each partial sum, ``parts``, for the reduce-scatter) plus
    the float32 accumulation's bound."""
    rounded = ref.abs() if parts is None else ref.abs() + sum(p.abs() for p in parts)
    bound = 2.0 ** -8 * rounded + K * 2.0 ** -22 * mag + 1e-30
    return bool(torch.all((out.double() - ref).abs() <= bound))


def _partials(a, b, rows):
    kr = a.shape[1] // 2
    return [a[rows, q * kr:(q + 1) * kr].double() @ b[q * kr:(q + 1) * kr].double() for q in range(2)]


@pytest.mark.parametrize("M,N,K,bt", [(400, 136, 104, False), (2000, 1000, 520, True), (4096, 2048, 1024, False)])
@pytest.mark.parametrize("transfer", ["copy_engine", "movers"])
def test_all_gather_gemm_matches_float64(M, N, K, bt, transfer):
    me = dist.get_rank()
    for _ in range(3):                           # both buffer slots, growing flags
        a_full, b = _inputs(_seed(), (M, K), (K, N))
        if bt:                                   # b as the transpose of a row-major (N, K) weight
            b = b.t().contiguous().t()
        shard = a_full[me * M // 2:(me + 1) * M // 2].contiguous()
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        tirxpy_kernels.all_gather_gemm(shard, b, out=out, transfer=transfer)
        torch.cuda.synchronize()
        ref = a_full.double() @ b.double()
        assert not torch.isnan(out).any()
        assert _close(out, ref, a_full.double().abs() @ b.double().abs(), K)


@pytest.mark.parametrize("M,N,K,bt,transfer,lag", [
    (400, 136, 208, False, "copy_engine", None), (2000, 1000, 1040, True, "copy_engine", None),
    (4096, 2048, 2048, False, "copy_engine", None), (300, 264, 144, True, "copy_engine", None),
    (4096, 4096, 4096, True, "copy_engine", None), (3000, 3000, 2064, True, "copy_engine", None),   # split walks
    (400, 136, 208, False, "push", None), (2000, 1000, 1040, True, "push", None),
    (4096, 2048, 2048, False, "push", None), (4096, 2048, 2048, True, "push", 0), (4096, 2048, 2048, False, "push", 8)])
def test_gemm_reduce_scatter_matches_float64(M, N, K, bt, transfer, lag):
    me = dist.get_rank()
    for _ in range(3):
        a, b = _inputs(_seed(), (M, K), (K, N))
        kr = K // 2
        a_me, b_me = a[:, me * kr:(me + 1) * kr].contiguous(), b[me * kr:(me + 1) * kr]
        if bt:                                   # b_shard as the transpose of a row-major (N, K / 2) weight
            b_me = b_me.t().contiguous().t()
        out = torch.full((M // 2, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        tirxpy_kernels.gemm_reduce_scatter(a_me, b_me, out=out, lag=lag, transfer=transfer)   # lag 0 / 8: interleaved
        torch.cuda.synchronize()
        rows = slice(me * M // 2, (me + 1) * M // 2)
        ref = a[rows].double() @ b.double()
        assert not torch.isnan(out).any()
        assert _close(out, ref, a[rows].double().abs() @ b.double().abs(), K, _partials(a, b, rows))


@pytest.mark.parametrize("late", [0, 1])
@pytest.mark.parametrize("transfer,rs_transfer", [("copy_engine", "copy_engine"), ("movers", "push")])
def test_a_late_rank_still_gives_the_right_answer(late, transfer, rs_transfer):
    me = dist.get_rank()
    M, N, K = 2048, 1024, 1024
    a_full, b = _inputs(_seed(), (M, K), (K, N))
    dist.barrier()
    torch.cuda.synchronize()
    if me == late:
        torch.cuda._sleep(200_000_000)           # ~0.1 s of GPU time before this rank's launches
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    tirxpy_kernels.all_gather_gemm(a_full[me * M // 2:(me + 1) * M // 2].contiguous(), b, out=out, transfer=transfer)
    rs = torch.full((M // 2, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    tirxpy_kernels.gemm_reduce_scatter(a_full[:, me * K // 2:(me + 1) * K // 2].contiguous(), b[me * K // 2:(me + 1) * K // 2],
                                       out=rs, transfer=rs_transfer)
    torch.cuda.synchronize()
    ref = a_full.double() @ b.double()
    mag = a_full.double().abs() @ b.double().abs()
    assert _close(out, ref, mag, K)
    rows = slice(me * M // 2, (me + 1) * M // 2)
    assert _close(rs, ref[rows], mag[rows], K, _partials(a_full, b, rows))


def _queued_cases(M, N, K, out_shape, late):
    """Six ``(a, b, out)`` cases on fresh inputs (``out`` NaN-poisoned), then both ranks lined up and rank ``late``
    held back (~25 ms of GPU time) before the caller queues its calls."""
    cases = []
    for _ in range(6):
        a, b = _inputs(_seed(), (M, K), (K, N))
        cases.append((a, b, torch.full(out_shape, float("nan"), dtype=torch.bfloat16, device="cuda")))
    dist.barrier()
    torch.cuda.synchronize()
    if dist.get_rank() == late:
        torch.cuda._sleep(50_000_000)
    return cases


@pytest.mark.parametrize("transfer", ["copy_engine", "movers"])
def test_all_gather_gemm_back_to_back_calls_reuse_the_slots_safely(transfer):
    """Six calls queued with no synchronization between them (each slot written three times while the peer may
    still be reading the one before), each checked afterwards."""
    me = dist.get_rank()
    M, N, K = 1024, 512, 768
    cases = _queued_cases(M, N, K, (M, N), late=1)
    for a_full, b, out in cases:
        tirxpy_kernels.all_gather_gemm(a_full[me * M // 2:(me + 1) * M // 2].contiguous(), b, out=out, transfer=transfer)
    torch.cuda.synchronize()
    for a_full, b, out in cases:
        assert _close(out, a_full.double() @ b.double(), a_full.double().abs() @ b.double().abs(), K)


def test_capture_in_a_cuda_graph_is_refused_with_the_reason():
    me = dist.get_rank()
    M, N, K = 512, 256, 256
    a_full, b = _inputs(_seed(), (M, K), (K, N))
    shard = a_full[me * M // 2:(me + 1) * M // 2].contiguous()
    tirxpy_kernels.all_gather_gemm(shard, b)            # buffers and build outside the capture
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    for call in (lambda: tirxpy_kernels.all_gather_gemm(shard, b),
                 lambda: tirxpy_kernels.gemm_reduce_scatter(a_full[:, :K // 2].contiguous(), b[:K // 2])):
        with pytest.raises(DistArgumentError, match="CUDA graph"):
            with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=s):
                call()
    dist.barrier()


def test_a_bad_lag_or_transfer_is_a_typed_error():
    a, b = _inputs(_seed(), (4096, 1024), (1024, 512))
    with pytest.raises(DistArgumentError, match="LAG = 3"):
        tirxpy_kernels.gemm_reduce_scatter(a, b, lag=3, transfer="push")
    with pytest.raises(DistArgumentError, match="transfer='push' only"):
        tirxpy_kernels.gemm_reduce_scatter(a, b, lag=4)
    with pytest.raises(DistArgumentError, match="transfer = 'nccl'"):
        tirxpy_kernels.gemm_reduce_scatter(a, b, transfer="nccl")
    for bad in (2.5, [1], True):
        with pytest.raises(DistArgumentError, match="must be an int"):
            tirxpy_kernels.gemm_reduce_scatter(a, b, lag=bad, transfer="push")


@pytest.mark.parametrize("transfer", ["copy_engine", "push"])
def test_gemm_reduce_scatter_back_to_back_calls(transfer):
    """Six calls queued with no synchronization between them (the send buffer and flags reused while the peer
    may still be a call behind), each checked afterwards."""
    me = dist.get_rank()
    M, N, K = 1024, 512, 768
    cases = _queued_cases(M, N, K, (M // 2, N), late=0)
    kr = K // 2
    for a, b, out in cases:
        tirxpy_kernels.gemm_reduce_scatter(a[:, me * kr:(me + 1) * kr].contiguous(), b[me * kr:(me + 1) * kr], out=out,
                                           transfer=transfer)
    torch.cuda.synchronize()
    rows = slice(me * M // 2, (me + 1) * M // 2)
    for a, b, out in cases:
        ref = a[rows].double() @ b.double()
        assert _close(out, ref, a[rows].double().abs() @ b.double().abs(), K, _partials(a, b, rows))


def test_an_out_that_shares_memory_with_an_input_is_refused():
    me = dist.get_rank()
    M, N, K = 512, 256, 256
    a_full, b = _inputs(_seed(), (M, K), (K, N))
    shard = a_full[me * M // 2:(me + 1) * M // 2].contiguous()
    big = torch.empty(M * N + M * K, dtype=torch.bfloat16, device="cuda")
    sh = big[:M // 2 * K].view(M // 2, K)
    sh.copy_(shard)
    with pytest.raises(DistArgumentError, match="out shares memory with a_shard"):
        tirxpy_kernels.all_gather_gemm(sh, b, out=big[:M * N].view(M, N))
    a = a_full[:, :K // 2].contiguous()            # (M, K / 2): as many elements as out (M / 2, N)
    with pytest.raises(DistArgumentError, match="out shares memory with a"):
        tirxpy_kernels.gemm_reduce_scatter(a, b[:K // 2], out=a.view(M // 2, N))
    dist.barrier()


@pytest.mark.parametrize("transfer,rs_transfer", [("copy_engine", "copy_engine"), ("movers", "push")])
def test_repeated_calls_on_the_same_tensors_take_the_kept_run_and_stay_right(transfer, rs_transfer):
    """The same tensors refilled in place (the kept run of the first call), then the same shapes at new addresses
    and with out=None (checked again): every result against float64."""
    from tirxpy_kernels.dist_api import _CALLS, _call_key

    me = dist.get_rank()
    M, N, K = 1024, 512, 768
    shard = torch.empty(M // 2, K, dtype=torch.bfloat16, device="cuda")
    b = torch.empty(N, K, dtype=torch.bfloat16, device="cuda").t()       # K-major, as nn.Linear's weight.t()
    a_rs = torch.empty(M, K // 2, dtype=torch.bfloat16, device="cuda")
    b_rs = torch.empty(K // 2, N, dtype=torch.bfloat16, device="cuda")
    out, rs = torch.empty(M, N, dtype=torch.bfloat16, device="cuda"), torch.empty(M // 2, N, dtype=torch.bfloat16,
                                                                                  device="cuda")
    rows = slice(me * M // 2, (me + 1) * M // 2)
    for i in range(4):
        a_full, bb = _inputs(_seed(), (M, K), (K, N))
        if i < 3:                                        # the same tensors, refilled
            shard.copy_(a_full[rows])
            b.copy_(bb)
            a_rs.copy_(a_full[:, me * K // 2:(me + 1) * K // 2])
            b_rs.copy_(bb[me * K // 2:(me + 1) * K // 2])
            out.fill_(float("nan"))
            rs.fill_(float("nan"))
            got = tirxpy_kernels.all_gather_gemm(shard, b, out=out, transfer=transfer)
            got_rs = tirxpy_kernels.gemm_reduce_scatter(a_rs, b_rs, out=rs, transfer=rs_transfer)
            assert got is out and got_rs is rs
            assert _call_key("ag", None, shard, b, out, (None, transfer)) in _CALLS
        else:                                            # new tensors, out=None
            got = tirxpy_kernels.all_gather_gemm(a_full[rows].contiguous(), bb.t().contiguous().t(), transfer=transfer)
            got_rs = tirxpy_kernels.gemm_reduce_scatter(a_full[:, me * K // 2:(me + 1) * K // 2].contiguous(),
                                                        bb[me * K // 2:(me + 1) * K // 2], transfer=rs_transfer)
        torch.cuda.synchronize()
        ref = a_full.double() @ bb.double()
        mag = a_full.double().abs() @ bb.double().abs()
        assert _close(got, ref, mag, K)
        assert _close(got_rs, ref[rows], mag[rows], K, _partials(a_full, bb, rows))


def test_a_misaligned_view_another_device_or_a_bad_sms_is_a_typed_error():
    me = dist.get_rank()
    M, N, K = 512, 256, 256
    a_full, b = _inputs(_seed(), (M, K), (K, N))
    shard = a_full[me * M // 2:(me + 1) * M // 2].contiguous()
    odd = torch.empty(M // 2 * K + 8, dtype=torch.bfloat16, device="cuda")[1:1 + M // 2 * K].view(M // 2, K)
    got = tirxpy_kernels.all_gather_gemm(odd.copy_(shard), b)       # an input off 16 bytes: read from a copy
    torch.cuda.synchronize()
    assert _close(got, a_full.double() @ b.double(), a_full.double().abs() @ b.double().abs(), K)
    with pytest.raises(DistArgumentError, match=f"b is on cuda:{1 - me} and a_shard on cuda:{me}"):
        tirxpy_kernels.all_gather_gemm(shard, b.to(f"cuda:{1 - me}"))
    with torch.cuda.device(1 - me):
        with pytest.raises(DistArgumentError, match=f"current device is cuda:{1 - me}.*set_device\\({me}\\)"):
            tirxpy_kernels.all_gather_gemm(shard, b)
    sms = torch.cuda.get_device_properties(me).multi_processor_count
    import numpy as np

    for bad in (0, -1, sms + 1, 2.5, True, np.float32(8)):
        with pytest.raises(DistArgumentError, match=rf"sms = .* must be None or an int in \[1, {sms}\]"):
            tirxpy_kernels.all_gather_gemm(shard, b, sms=bad)
        with pytest.raises(DistArgumentError, match=rf"sms = .* must be None or an int in \[1, {sms}\]"):
            tirxpy_kernels.gemm_reduce_scatter(a_full[:, :K // 2].contiguous(), b[:K // 2], sms=bad)
    with pytest.raises(DistArgumentError, match="out starts 2 bytes past a 16-byte boundary"):
        tirxpy_kernels.gemm_reduce_scatter(a_full[:, :K // 2].contiguous(), b[:K // 2],
                                           out=torch.empty(M // 2 * N + 8, dtype=torch.bfloat16,
                                                           device="cuda")[1:1 + M // 2 * N].view(M // 2, N))
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    tirxpy_kernels.all_gather_gemm(shard, b, out=out, sms=np.int64(64))     # the refusals left nothing half done
    torch.cuda.synchronize()
    assert _close(out, a_full.double() @ b.double(), a_full.double().abs() @ b.double().abs(), K)
