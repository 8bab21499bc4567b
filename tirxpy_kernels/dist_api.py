"""torch API of the distributed GEMMs: ``all_gather_gemm(a_shard, b, group)`` and
``gemm_reduce_scatter(a, b_shard, group)`` on the ranks of a ``torch.distributed`` process group (NCCL, launched
with ``torchrun``), with their peer buffers in torch's symmetric memory (``torch.distributed._symmetric_memory``:
``empty`` + ``rendezvous``; a peer's buffer is reached through ``get_buffer``).

Every rank of the group calls the function with its own shard, in the same order (like a collective). The first
call for a shape allocates the symmetric buffers (``empty`` + ``rendezvous``, collective) and zeroes their flags;
later calls reuse them: a call number (``epoch``) makes every flag a counter that only grows, so nothing is reset
between calls. No multicast object is created and no ``multimem`` instruction is emitted (run with
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` as well, so torch creates none either).

Shapes: ``a_shard (M / world, K)`` and ``b (K, N)`` (row-major, or the transpose of a row-major ``(N, K)``
weight) give ``A_full @ b``, ``(M, N)``; ``a (M, K / world)`` and ``b_shard (K / world, N)`` give this rank's
rows ``(M / world, N)`` of ``sum_r a_r @ b_r``. bf16 in and out, ``world = 2``. The kernels are
:mod:`tirxpy_kernels.dist_ag_gemm` and :mod:`tirxpy_kernels.dist_rs_gemm`; docs/distributed.md is the design.
"""
from __future__ import annotations

from tirxpy.errors import ArgumentError
from .launch_cache import compiled

ARCH = "sm_90a"


class DistArgumentError(ArgumentError):
    """A bad argument of :func:`all_gather_gemm` / :func:`gemm_reduce_scatter` (an ``ArgumentError``)."""


def _group(group):
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise DistArgumentError("the distributed GEMMs run on a torch.distributed process group: call "
                                "torch.distributed.init_process_group('nccl') first (launch with torchrun)")
    group = dist.group.WORLD if group is None else group
    world, me = dist.get_world_size(group), dist.get_rank(group)
    if world != 2:
        raise DistArgumentError(f"the process group has {world} ranks; the distributed GEMMs take 2 (one NVLink peer) "
                                "for now: docs/distributed.md says how they extend")
    return group, me, world


def _tensor(t, name, shape_text):
    import torch

    if not isinstance(t, torch.Tensor):
        raise DistArgumentError(f"{name} must be a torch tensor {shape_text}, got {type(t).__name__}")
    if t.dtype != torch.bfloat16 or t.device.type != "cuda" or t.dim() != 2:
        raise DistArgumentError(f"{name} must be a 2-D bfloat16 CUDA tensor {shape_text}, got {tuple(t.shape)} "
                                f"{t.dtype} on {t.device}")


def _b_operand(b, name):
    """``(tensor the kernel takes, b_major)``: ``b (K, N)`` row-major as is, or ``b.t()`` of a row-major ``(N, K)``."""
    if b.is_contiguous():
        return b, "MN"
    if b.t().is_contiguous():
        return b.t(), "K"
    raise DistArgumentError(f"{name} {tuple(b.shape)} must be row-major or the transpose of a row-major tensor; "
                            f"pass {name}.contiguous()")


def _tile_n(N):
    for bn in (256, 192, 128, 64):
        if bn <= N:
            return bn
    raise DistArgumentError(f"N = {N} is narrower than one 64-column tile; pad b's columns to 64")


def _sizes(M, N, K, what):
    if M < 128 or K < 64:
        raise DistArgumentError(f"{what}: M = {M} rows and K = {K} must be at least 128 and 64 (one tile); pad them")
    if K % 8 or N % 8:
        raise DistArgumentError(f"{what}: K = {K} and N = {N} must be multiples of 8 (16-byte rows, which TMA needs)")


class _Buffers:
    """Symmetric allocations of one shape on one group: this rank's tensors and views of the peer's."""

    def __init__(self, group, me, specs):
        import torch
        import torch.distributed._symmetric_memory as symm_mem

        self.mine, self.peer = {}, {}
        for name, shape, dtype in specs:
            t = symm_mem.empty(shape, dtype=dtype, device=torch.device("cuda", torch.cuda.current_device()))
            if dtype == torch.uint32:
                t.view(torch.int32).zero_()
            h = symm_mem.rendezvous(t, group)
            self.mine[name] = t
            self.peer[name] = h.get_buffer(1 - me, shape, dtype)
        torch.cuda.synchronize()
        import torch.distributed as dist

        dist.barrier(group)          # every rank's flags are zero before any rank signals
        self.epoch = 0


_BUFFERS: dict = {}


def _buffers(key, group, me, specs):
    got = _BUFFERS.get(key)
    if got is None:
        got = _BUFFERS[key] = _Buffers(group, me, specs)
    return got


def _out(out, shape, like, name):
    """``out`` checked (or a new tensor): a row-major bf16 tensor of ``shape`` on ``like``'s device."""
    import torch

    if out is None:
        return torch.empty(shape, dtype=torch.bfloat16, device=like.device)
    _tensor(out, "out", str(tuple(shape)))
    if tuple(out.shape) != tuple(shape) or not out.is_contiguous() or out.device != like.device:
        raise DistArgumentError(f"{name}: out must be a row-major {tuple(shape)} tensor on {like.device}, got "
                                f"{tuple(out.shape)} on {out.device}")
    return out


def all_gather_gemm(a_shard, b, group=None, *, out=None, sms=None):
    """``A_full @ b`` on every rank, where ``A_full`` stacks the ranks' ``a_shard`` in rank order: one persistent
    kernel per rank pushes this rank's shard to every rank while the GEMM runs over the rows already in
    (:mod:`tirxpy_kernels.dist_ag_gemm`). Returns ``out`` (a new ``(M, N)`` bf16 tensor when None)."""
    import torch

    from .dist_ag_gemm import ag_gemm, need_table

    group, me, world = _group(group)
    _tensor(a_shard, "a_shard", "(M / world, K)")
    _tensor(b, "b", "(K, N)")
    if not a_shard.is_contiguous():
        raise DistArgumentError(f"a_shard {tuple(a_shard.shape)} must be row-major; pass a_shard.contiguous()")
    ms, K = a_shard.shape
    if b.shape[0] != K:
        raise DistArgumentError(f"a_shard is {tuple(a_shard.shape)} and b is {tuple(b.shape)}: b must have K = {K} rows")
    M, N = ms * world, b.shape[1]
    _sizes(M, N, K, "all_gather_gemm")
    B, b_major = _b_operand(b, "b")
    sms = sms or torch.cuda.get_device_properties(a_shard.device).multi_processor_count
    rows = -(-M // 128)
    key = ("ag", getattr(group, "group_name", str(id(group))), M, K, a_shard.device.index)
    buf = _buffers(key, group, me, [("a", (2, M, K), torch.bfloat16), ("flags", (world, rows), torch.uint32),
                                    ("sig", (world,), torch.uint32)])
    if "need" not in buf.mine:
        buf.mine["need"] = torch.from_numpy(need_table(M, world, me)).to(a_shard.device)
        buf.mine["bias"] = torch.zeros(1, 1, dtype=torch.bfloat16, device=a_shard.device)
    buf.epoch += 1
    slot = buf.epoch % 2
    out = _out(out, (M, N), a_shard, "all_gather_gemm")
    ck = compiled(ag_gemm(M, N, K, me=me, world=world, BN=_tile_n(N), b_major=b_major, sms=sms), ARCH)
    a_slot = buf.mine["a"][slot]
    ck(a_slot, B, buf.mine["bias"], out, a_shard, a_slot, buf.peer["a"][slot], buf.mine["flags"], buf.peer["flags"],
       buf.mine["sig"], buf.peer["sig"], buf.mine["need"], buf.epoch)
    return out


def gemm_reduce_scatter(a, b_shard, group=None, *, out=None, sms=None):
    """This rank's rows of ``sum_r a_r @ b_shard_r`` (``a`` holds this rank's ``K`` shard of the columns): one
    persistent kernel per rank computes the peer's rows first and pushes their partial sums into the peer's
    receive buffer, then its own rows, adding the peer's partial of each tile in its epilogue
    (:mod:`tirxpy_kernels.dist_rs_gemm`). Returns ``out`` (a new ``(M / world, N)`` bf16 tensor when None)."""
    import torch

    from .dist_rs_gemm import rs_gemm, shard_tile_rows

    group, me, world = _group(group)
    _tensor(a, "a", "(M, K / world)")
    _tensor(b_shard, "b_shard", "(K / world, N)")
    if not a.is_contiguous():
        raise DistArgumentError(f"a {tuple(a.shape)} must be row-major; pass a.contiguous()")
    M, K = a.shape
    if b_shard.shape[0] != K:
        raise DistArgumentError(f"a is {tuple(a.shape)} and b_shard is {tuple(b_shard.shape)}: b_shard must have {K} rows")
    N = b_shard.shape[1]
    if M % world:
        raise DistArgumentError(f"M = {M} rows must split evenly over {world} ranks")
    _sizes(M, N, K, "gemm_reduce_scatter")
    B, b_major = _b_operand(b_shard, "b_shard")
    BN = _tile_n(N)
    sms = sms or torch.cuda.get_device_properties(a.device).multi_processor_count
    ms = M // world
    key = ("rs", getattr(group, "group_name", str(id(group))), M, N, BN, a.device.index)
    buf = _buffers(key, group, me, [("r", (ms, N), torch.bfloat16),
                                    ("flags", (shard_tile_rows(M, world), -(-N // BN)), torch.uint32),
                                    ("sig", (world,), torch.uint32)])
    buf.epoch += 1
    out = _out(out, (ms, N), a, "gemm_reduce_scatter")
    ck = compiled(rs_gemm(M, N, K, me=me, world=world, BN=BN, b_major=b_major, sms=sms), ARCH)
    ck(a, B, out, buf.mine["r"], buf.peer["r"], buf.mine["flags"], buf.peer["flags"], buf.mine["sig"], buf.peer["sig"],
       buf.epoch)
    return out
