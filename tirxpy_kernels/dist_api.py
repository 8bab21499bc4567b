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

import functools

from tirxpy.errors import ArgumentError
from .errors import KernelConfigError
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


def _not_capturing(what):
    """The kernels' flags count calls (``epoch``), which a captured CUDA graph would replay unchanged: refuse."""
    import torch

    if torch.cuda.is_current_stream_capturing():
        raise DistArgumentError(f"{what} cannot be captured in a CUDA graph: its flags count calls, and a replayed "
                                "call would reuse the captured call number (so it would not wait for new rows); "
                                "call it eagerly, outside the capture")


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
        self.host = {}               # host-side values derived from the buffers (addresses, chunk byte ranges)


_BUFFERS: dict = {}


def _buffers(key, group, me, specs):
    got = _BUFFERS.get(key)
    if got is None:
        got = _BUFFERS[key] = _Buffers(group, me, specs)
    return got


def _out(out, shape, like, name, inputs=()):
    """``out`` checked (or a new tensor): a row-major bf16 tensor of ``shape`` on ``like``'s device that shares
    no memory with the named ``inputs``."""
    import torch

    from .checks import overlaps

    if out is None:
        return torch.empty(shape, dtype=torch.bfloat16, device=like.device)
    _tensor(out, "out", str(tuple(shape)))
    if tuple(out.shape) != tuple(shape) or not out.is_contiguous() or out.device != like.device:
        raise DistArgumentError(f"{name}: out must be a row-major {tuple(shape)} tensor on {like.device}, got "
                                f"{tuple(out.shape)} on {out.device}")
    for what, t in inputs:
        if overlaps(out, t):
            raise DistArgumentError(f"{name}: out shares memory with {what}, which is read while out is written; "
                                    "pass a separate out tensor (or out=None)")
    return out


def all_gather_gemm(a_shard, b, group=None, *, out=None, sms=None, transfer="copy_engine"):
    """``A_full @ b`` on every rank, where ``A_full`` stacks the ranks' ``a_shard`` in rank order: one persistent
    GEMM kernel per rank runs over the rows already in while the rest arrive (:mod:`tirxpy_kernels.dist_ag_gemm`).
    ``transfer``: ``"copy_engine"`` (default) pushes this rank's shard into each peer's buffer with the copy
    engines, chunk by chunk, each chunk counted on the peer's flag by a stream write (no SM time);
    ``"movers"`` pushes it with warps of the kernel itself. Returns ``out`` (a new ``(M, N)`` bf16 tensor when
    None)."""
    import torch

    from .dist_ag_gemm import TRANSFERS

    group, me, world = _group(group)
    _not_capturing("all_gather_gemm")
    _tensor(a_shard, "a_shard", "(M / world, K)")
    _tensor(b, "b", "(K, N)")
    if transfer not in TRANSFERS:
        raise DistArgumentError(f"transfer = {transfer!r} must be one of {TRANSFERS}")
    if not a_shard.is_contiguous():
        raise DistArgumentError(f"a_shard {tuple(a_shard.shape)} must be row-major; pass a_shard.contiguous()")
    ms, K = a_shard.shape
    if b.shape[0] != K:
        raise DistArgumentError(f"a_shard is {tuple(a_shard.shape)} and b is {tuple(b.shape)}: b must have K = {K} rows")
    M, N = ms * world, b.shape[1]
    _sizes(M, N, K, "all_gather_gemm")
    B, b_major = _b_operand(b, "b")
    sms = sms or torch.cuda.get_device_properties(a_shard.device).multi_processor_count
    out = _out(out, (M, N), a_shard, "all_gather_gemm", (("a_shard", a_shard), ("b", b)))
    ck = compiled(_ag_kernel(M, N, K, me, world, b_major, sms, transfer, CHUNKS), ARCH)
    if transfer == "copy_engine":
        _ag_copy_engine(ck, a_shard, B, out, group, me, world, M, K)
    else:
        _ag_movers(ck, a_shard, B, out, group, me, world, M, K)
    return out


CHUNKS = 2      # copy-engine chunks per shard (all_gather_gemm)


@functools.lru_cache(maxsize=64)
def _ag_kernel(M, N, K, me, world, b_major, sms, transfer, chunks):
    """The all-gather GEMM kernel of this problem: ``BN`` from :func:`_tile_n`, and with a K-major ``b`` the
    standalone GEMM's :func:`~tirxpy_kernels.gemm_plan.balanced_split` (its search runs once per shape)."""
    from .dist_ag_gemm import ag_gemm
    from .gemm_plan import balanced_split

    BN = _tile_n(N)
    split = balanced_split(M, N, K, BN, sms) if b_major == "K" else None
    return ag_gemm(M, N, K, me=me, world=world, BN=BN, b_major=b_major, sms=sms, transfer=transfer, CHUNKS=chunks,
                   SPLIT=split)


def _ag_movers(ck, a_shard, B, out, group, me, world, M, K):
    import torch

    from .dist_ag_gemm import need_table

    key = ("ag", getattr(group, "group_name", str(id(group))), M, K, a_shard.device.index)
    buf = _buffers(key, group, me, [("a", (2, M, K), torch.bfloat16), ("flags", (world, -(-M // 128)), torch.uint32),
                                    ("sig", (world,), torch.uint32)])
    if "need" not in buf.mine:
        buf.mine["need"] = torch.from_numpy(need_table(M, world, me)).to(a_shard.device)
        buf.mine["bias"] = torch.zeros(1, 1, dtype=torch.bfloat16, device=a_shard.device)
    buf.epoch += 1
    a_slot = buf.mine["a"][buf.epoch % 2]
    ck(a_slot, B, buf.mine["bias"], out, a_shard, a_slot, buf.peer["a"][buf.epoch % 2], buf.mine["flags"],
       buf.peer["flags"], buf.mine["sig"], buf.peer["sig"], buf.mine["need"], buf.epoch)


def _ag_copy_engine(ck, a_shard, B, out, group, me, world, M, K):
    """The copy-engine transfer around the kernel's launch. On a side stream that first waits for the caller's
    stream: each chunk of this rank's shard (:func:`~tirxpy_kernels.dist_ag_gemm.chunk_rows`) is copied into its
    rows of the peer's buffer slot, then the peer's flag ``F[me]`` is set to the chunks sent so far
    (``cuStreamWriteValue32``, which fences the copies before the write), both through the side stream's
    :class:`~tirxpy_kernels.dist_streams.StreamOps`. Own rows in tile rows shared with the peer are copied into
    this rank's slot on the caller's stream before the launch. The caller's stream waits
    for the side stream after the launch. Slot ``epoch % 2`` is free when a chunk lands in it: this rank's
    previous kernel waited for the peer's previous chunks, which the peer sent after its own kernel of two
    calls ago, the last reader of the slot."""
    import torch

    from .dist_ag_gemm import ce_need_table, chunk_rows, shared_own_rows

    ms = M // world
    key = ("ag-ce", getattr(group, "group_name", str(id(group))), M, K, CHUNKS, a_shard.device.index)
    buf = _buffers(key, group, me, [("a", (2, M, K), torch.bfloat16), ("flags", (world,), torch.uint32)])
    if "need" not in buf.mine:
        buf.mine["need"] = torch.from_numpy(ce_need_table(M, world, me, CHUNKS)).to(a_shard.device)
        buf.mine["bias"] = torch.zeros(1, 1, dtype=torch.bfloat16, device=a_shard.device)
        row = K * a_shard.element_size()      # bytes of a row of A
        buf.host["pushes"] = [(r0 * row, (me * ms + r0) * row, (r1 - r0) * row)
                              for r0, r1 in chunk_rows(ms, me, CHUNKS)]
        buf.host["slots"] = [buf.peer["a"][s].data_ptr() for s in range(2)]
        buf.host["flag"] = buf.peer["flags"][me].data_ptr()
    buf.epoch += 1
    slot = buf.epoch % 2
    cur = torch.cuda.current_stream(a_shard.device)
    side, ops = _side_stream(a_shard.device)
    side.wait_stream(cur)
    pushes, src, dst = buf.host["pushes"], a_shard.data_ptr(), buf.host["slots"][slot]
    for c, (s0, d0, n) in enumerate(pushes):     # (source, destination, bytes) of each chunk
        ops.copy(dst + d0, src + s0, n)
        ops.write(buf.host["flag"], (buf.epoch - 1) * len(pushes) + c + 1)
    a_slot = buf.mine["a"][slot]
    for r0, r1 in shared_own_rows(M, world, me):
        a_slot[me * ms + r0:me * ms + r1].copy_(a_shard[r0:r1])
    ck(a_slot, B, buf.mine["bias"], out, a_shard, buf.mine["flags"], buf.mine["need"], buf.epoch)
    cur.wait_stream(side)


_SIDE: dict = {}


def _side_stream(device):
    """``(stream, ops)``: the device's side stream of the copy-engine transfers (high priority) and its
    :class:`~tirxpy_kernels.dist_streams.StreamOps`."""
    import torch

    from .dist_streams import StreamOps

    got = _SIDE.get(device.index)
    if got is None:
        s = torch.cuda.Stream(device, priority=-1)
        got = _SIDE[device.index] = (s, StreamOps(s.cuda_stream, DistArgumentError, "transfer='movers' "
                                                  "(all_gather_gemm) or transfer='push' (gemm_reduce_scatter)"))
    return got


def gemm_reduce_scatter(a, b_shard, group=None, *, out=None, sms=None, lag=None, transfer="copy_engine"):
    """This rank's rows of ``sum_r a_r @ b_shard_r`` (``a`` holds this rank's ``K`` shard of the columns): one
    persistent kernel per rank computes tiles of the peer's rows and tiles of its own
    (:mod:`tirxpy_kernels.dist_rs_gemm`). ``transfer``: ``"copy_engine"`` (default) keeps the peer's partials
    in a local buffer, the copy engines pull them into the peer's ``out`` chunk by chunk, and each own tile is
    reduce-added onto them (the sum of two bf16-rounded partials, as NCCL's bf16 reduce-scatter gives);
    ``"push"`` stores the partials into the peer's buffer over NVLink and adds the peer's in float32 registers,
    its walk starting with ``lag`` tile rows of the peer's before interleaving the two (default
    :func:`~tirxpy_kernels.dist_rs_walk.rs_lag`). Returns ``out`` (a new ``(M / world, N)`` bf16 tensor when
    None)."""
    import torch

    from .dist_rs_gemm import TRANSFERS

    group, me, world = _group(group)
    _not_capturing("gemm_reduce_scatter")
    _tensor(a, "a", "(M, K / world)")
    _tensor(b_shard, "b_shard", "(K / world, N)")
    if transfer not in TRANSFERS:
        raise DistArgumentError(f"transfer = {transfer!r} must be one of {TRANSFERS}")
    if lag is not None and (isinstance(lag, bool) or not isinstance(lag, int)):
        raise DistArgumentError(f"lag = {lag!r} must be an int (tile rows of the peer's shard first) or None")
    if lag is not None and transfer != "push":
        raise DistArgumentError(f"lag = {lag!r} tunes transfer='push' only (the copy-engine walk takes every peer "
                                "tile first); pass transfer='push' with it, or drop lag")
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
    out = _out(out, (M // world, N), a, "gemm_reduce_scatter", (("a", a), ("b_shard", b_shard)))
    try:
        prim, split = _rs_kernel(M, N, K, me, world, BN, b_major, sms, lag, transfer)
        ck = compiled(prim, ARCH)
    except KernelConfigError as e:
        raise DistArgumentError(f"gemm_reduce_scatter: {e}") from None
    if transfer == "copy_engine":
        _rs_copy_engine(ck, a, B, out, group, me, world, M, N, BN, split)
    else:
        _rs_push(ck, a, B, out, group, me, world, M, N, BN)
    return out


RS_CHUNKS = 8   # copy-engine chunks of a shard's partials (gemm_reduce_scatter)


@functools.lru_cache(maxsize=64)
def _rs_kernel(M, N, K, me, world, BN, b_major, sms, lag, transfer):
    """``(kernel, split)``: the reduce-scatter kernel of this problem (:func:`~tirxpy_kernels.dist_rs_gemm.rs_gemm`)
    and, for the copy-engine walk with a K-major ``b``, its :func:`~tirxpy_kernels.dist_rs_walk.rs_split` (else
    None); built once per shape, so a repeated call only looks them up."""
    from .dist_rs_gemm import rs_gemm
    from .dist_rs_walk import rs_split

    split = rs_split(M, N, K, BN, world, sms) if transfer == "copy_engine" and b_major == "K" else None
    return rs_gemm(M, N, K, me=me, world=world, BN=BN, b_major=b_major, sms=sms, LAG=lag, transfer=transfer,
                   CHUNKS=RS_CHUNKS, SPLIT=split), split


@functools.lru_cache(maxsize=64)
def _chunk_halves(M, N, BN, world, chunks, split):
    from .dist_rs_walk import chunk_halves

    return chunk_halves(M, N, BN, world, chunks, split)


def _rs_push(ck, a, B, out, group, me, world, M, N, BN):
    import torch

    from .dist_rs_walk import shard_tile_rows

    key = ("rs", getattr(group, "group_name", str(id(group))), M, N, BN, a.device.index)
    buf = _buffers(key, group, me, [("r", (M // world, N), torch.bfloat16),
                                    ("flags", (shard_tile_rows(M, world), -(-N // BN)), torch.uint32),
                                    ("sig", (world,), torch.uint32)])
    buf.epoch += 1      # (after every check: a call that raises leaves the call count as it was)
    ck(a, B, out, buf.mine["r"], buf.peer["r"], buf.mine["flags"], buf.peer["flags"], buf.mine["sig"], buf.peer["sig"],
       buf.epoch)


def _rs_copy_engine(ck, a, B, out, group, me, world, M, N, BN, split):
    """The copy-engine transfer after the kernel's launch. On a side stream that first waits for the caller's
    stream (up to the launch), for each chunk of shard rows
    (:func:`~tirxpy_kernels.dist_rs_walk.chunk_shard_rows`): wait until the peer counted in every half of the
    chunk's tiles (``split``: the kernel's) on this rank's flag ``F[c]`` (``cuStreamWaitValue32``), copy the
    peer's partial rows from its send buffer into ``out``, set the ready flag ``H[c]`` to the call number
    (``cuStreamWriteValue32``, which fences the copy before the write) and reset ``F[c]`` to 0. The caller's
    stream waits for the side stream after the launch. The peer overwrites its send buffer only after this
    rank's next kernel started (the kernel's start flag), which follows this call's copies."""
    import torch

    from .dist_rs_walk import chunk_shard_rows

    rows = chunk_shard_rows(M, world, RS_CHUNKS)
    key = ("rs-ce", getattr(group, "group_name", str(id(group))), M, N, BN, RS_CHUNKS, a.device.index)
    buf = _buffers(key, group, me, [("s", (M // world, N), torch.bfloat16), ("flags", (len(rows),), torch.uint32),
                                    ("sig", (world,), torch.uint32)])
    cur = torch.cuda.current_stream(a.device)
    side, ops = _side_stream(a.device)
    if "ready" not in buf.mine:
        ready = buf.mine["ready"] = torch.zeros(len(rows), dtype=torch.int32, device=a.device).view(torch.uint32)
        row = N * out.element_size()          # bytes of a row of out
        flag, done = buf.mine["flags"].data_ptr(), ready.data_ptr()
        # per chunk: its count flag F[c], its ready flag H[c] (4-byte flags), its byte offset and size in a shard
        buf.host["chunks"] = [(flag + 4 * c, done + 4 * c, r0 * row, (r1 - r0) * row)
                              for c, (r0, r1) in enumerate(rows)]
        buf.host["peer_s"] = buf.peer["s"].data_ptr()
        # the stream operations tried once before any launch: one that failed after the launch would leave the
        # kernel waiting for a ready flag nobody sets
        scratch = buf.mine["scratch"] = torch.zeros(1, dtype=torch.int32, device=a.device)
        side.wait_stream(cur)
        ops.wait_geq(done, 0)
        ops.write(done, 0)
        ops.copy(scratch.data_ptr(), buf.host["peer_s"], 4)       # a read of the peer's send buffer
    buf.epoch += 1
    side.wait_stream(cur)
    want = _chunk_halves(M, N, BN, world, RS_CHUNKS, split)
    # the launch goes first: a stream wait holds the hardware queue it sits in, which the caller's stream may share
    ck(a, B, out, buf.mine["s"], buf.peer["flags"], buf.mine["ready"], buf.mine["sig"], buf.peer["sig"], buf.epoch)
    dst, src = out.data_ptr(), buf.host["peer_s"]
    for (flag, done, off, n), count in zip(buf.host["chunks"], want):
        ops.wait_geq(flag, count)
        ops.copy(dst + off, src + off, n)
        ops.write(done, buf.epoch)
        ops.write(flag, 0)
    cur.wait_stream(side)


