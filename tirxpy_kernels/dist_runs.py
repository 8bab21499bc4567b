"""What a call of a distributed GEMM does on the GPU once its arguments are checked (:mod:`tirxpy_kernels.dist_api`):
the symmetric buffers of a shape (:func:`buffers`), the copy engines' side stream (:func:`side_stream`), and per
transfer a *run*, ``run(x, y, out)``, built once per checked call with everything that call fixed (the kernel,
the buffers, the transfer's addresses and byte ranges) and called for it and every later call like it:

- :func:`ag_copy_engine` / :func:`ag_movers`: the all-gather GEMM (:mod:`tirxpy_kernels.dist_ag_gemm`);
- :func:`rs_copy_engine` / :func:`rs_push`: the GEMM + reduce-scatter (:mod:`tirxpy_kernels.dist_rs_gemm`).

A run advances its buffers' call number (``epoch``) once per call; the flags count calls, so they are never reset.
"""
from __future__ import annotations

from tirxpy.errors import ArgumentError


class DistArgumentError(ArgumentError):
    """A bad argument of :func:`~tirxpy_kernels.all_gather_gemm` / :func:`~tirxpy_kernels.gemm_reduce_scatter`
    (an ``ArgumentError``), or a transfer the driver refused."""


CHUNKS = 2      # copy-engine chunks per shard (all_gather_gemm)
RS_CHUNKS = 8   # copy-engine chunks of a shard's partials (gemm_reduce_scatter)


class Buffers:
    """Symmetric allocations of one shape on one group: this rank's tensors and views of the peer's."""

    def __init__(self, group, me, specs):
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        self.group, self.mine, self.peer = group, {}, {}
        for name, shape, dtype in specs:
            t = symm_mem.empty(shape, dtype=dtype, device=torch.device("cuda", torch.cuda.current_device()))
            if dtype == torch.uint32:
                t.view(torch.int32).zero_()
            h = symm_mem.rendezvous(t, group)
            self.mine[name] = t
            self.peer[name] = h.get_buffer(1 - me, shape, dtype)
        torch.cuda.synchronize()
        dist.barrier(group)          # every rank's flags are zero before any rank signals
        self.epoch = 0


_BUFFERS: dict = {}


def buffers(key, group, me, specs):
    """The buffers of ``key`` (a kernel's kind and shape) on ``group`` (made, collectively, on the first call; again
    for a new group object of the same name, after the process group was destroyed and made anew)."""
    key = (getattr(group, "group_name", str(id(group))),) + key
    got = _BUFFERS.get(key)
    if got is None or got.group is not group:
        got = _BUFFERS[key] = Buffers(group, me, specs)
    return got


def new_out(shape, device):
    import torch

    return torch.empty(shape, dtype=torch.bfloat16, device=device)


def ag_movers(ck, device, group, me, world, M, N, K, k_major):
    """The run of the movers transfer: the kernel alone, with this rank's slot ``epoch % 2`` of the gathered rows,
    the peer's, the flags and start signals of both ranks."""
    import torch

    from .dist_ag_gemm import need_table

    key = ("ag", M, K, device.index)
    buf = buffers(key, group, me, [("a", (2, M, K), torch.bfloat16), ("flags", (world, -(-M // 128)), torch.uint32),
                                   ("sig", (world,), torch.uint32)])
    if "need" not in buf.mine:
        buf.mine["need"] = torch.from_numpy(need_table(M, world, me)).to(device)
        buf.mine["bias"] = torch.zeros(1, 1, dtype=torch.bfloat16, device=device)
    mine, peer = buf.mine, buf.peer

    def run(a_shard, b, out):
        out = new_out((M, N), device) if out is None else out
        buf.epoch += 1
        slot = buf.epoch % 2
        a_slot = mine["a"][slot]
        ck(a_slot, b.t() if k_major else b, mine["bias"], out, a_shard, a_slot, peer["a"][slot], mine["flags"],
           peer["flags"], mine["sig"], peer["sig"], mine["need"], buf.epoch)
        return out
    return run


def ag_copy_engine(ck, device, group, me, world, M, N, K, k_major):
    """The run of the copy-engine transfer. The kernel is launched first, then, on a side stream that waits for
    the caller's stream up to the launch: each chunk of this rank's shard
    (:func:`~tirxpy_kernels.dist_ag_gemm.chunk_rows`) is copied into its rows of the peer's buffer slot, then the
    peer's flag ``F[me]`` is set to the chunks sent so far (``cuStreamWriteValue32``, which fences the copies
    before the write), through the side stream's :class:`~tirxpy_kernels.dist_streams.StreamOps`; the caller's
    stream then waits for the side stream. The chunks are sent even when the launch raised, as the peer's kernel
    waits for them. Own rows in tile rows shared with the peer are copied into this rank's own slot on the
    caller's stream before the launch. Slot ``epoch % 2`` is free when a chunk lands in it: this rank's previous
    kernel waited for the peer's previous chunks, which the peer sent after its own kernel of two calls ago, the
    last reader of the slot."""
    import torch

    from tirxpy.lower.device import stream_getter

    from .dist_ag_gemm import ce_need_table, chunk_rows, shared_own_rows

    ms = M // world
    key = ("ag-ce", M, K, CHUNKS, device.index)
    buf = buffers(key, group, me, [("a", (2, M, K), torch.bfloat16), ("flags", (world,), torch.uint32)])
    ops = side_stream(device)
    if "need" not in buf.mine:
        buf.mine["need"] = torch.from_numpy(ce_need_table(M, world, me, CHUNKS)).to(device)
        buf.mine["bias"] = torch.zeros(1, 1, dtype=torch.bfloat16, device=device)
        probe(buf, ops, device, buf.peer["a"].data_ptr())
    row = K * 2                       # bytes of a row of A (bf16)
    pushes = [(r0 * row, (me * ms + r0) * row, (r1 - r0) * row) for r0, r1 in chunk_rows(ms, me, CHUNKS)]
    peer_slots = [buf.peer["a"][s].data_ptr() for s in range(2)]
    flag = buf.peer["flags"][me].data_ptr()
    slots = [buf.mine["a"][s] for s in range(2)]
    shared = [[(slots[s][me * ms + r0:me * ms + r1], r0, r1) for r0, r1 in shared_own_rows(M, world, me)]
              for s in range(2)]
    bias, flags, need = buf.mine["bias"], buf.mine["flags"], buf.mine["need"]
    current, index = stream_getter(), device.index

    def run(a_shard, b, out):
        out = new_out((M, N), device) if out is None else out
        B = b.t() if k_major else b
        buf.epoch += 1
        epoch, slot = buf.epoch, buf.epoch % 2
        cur = current(index)
        ops.follow(cur)
        try:
            for dst, r0, r1 in shared[slot]:
                dst.copy_(a_shard[r0:r1])
            ck(slots[slot], B, bias, out, a_shard, flags, need, epoch)
        finally:
            src, dst, sent = a_shard.data_ptr(), peer_slots[slot], (epoch - 1) * len(pushes)
            for c, (s0, d0, n) in enumerate(pushes):      # (source, destination, bytes) of each chunk
                ops.copy(dst + d0, src + s0, n)
                ops.write(flag, sent + c + 1)
            ops.join(cur)
        return out
    return run


_SIDE: dict = {}


def side_stream(device):
    """The :class:`~tirxpy_kernels.dist_streams.StreamOps` of the device's side stream of the copy-engine
    transfers (a high-priority stream, made once per device, with its two join events)."""
    import torch

    from .dist_streams import StreamOps

    got = _SIDE.get(device.index)
    if got is None:
        s = torch.cuda.Stream(device, priority=-1)
        events = []
        for _ in range(2):
            ev = torch.cuda.Event()
            ev.record(s)              # made on the stream's device: its handle exists from here on
            events.append(ev)
        ops = StreamOps(s.cuda_stream, DistArgumentError, "transfer='movers' (all_gather_gemm) or transfer='push' "
                        "(gemm_reduce_scatter)", events=[ev.cuda_event for ev in events])
        got = _SIDE[device.index] = (ops, s, events)      # the stream and events live as long as their operations
    return got[0]


def probe(buf, ops, device, peer_addr):
    """Each stream operation tried once before any launch (a wait and a write on a scratch flag, a 4-byte read
    of the peer's buffer at ``peer_addr``, both joins): one that failed after a launch would leave a kernel
    waiting for a flag nobody sets."""
    import torch

    from tirxpy.lower.device import stream_getter

    scratch = buf.mine["scratch"] = torch.zeros(1, dtype=torch.int32, device=device)
    cur = stream_getter()(device.index)
    ops.follow(cur)
    ops.wait_geq(scratch.data_ptr(), 0)
    ops.write(scratch.data_ptr(), 0)
    ops.copy(scratch.data_ptr(), peer_addr, 4)
    ops.join(cur)


def rs_push(ck, device, group, me, world, M, N, BN, k_major):
    """The run of the push transfer: the kernel alone, with both ranks' receive buffers, flags and signals."""
    import torch

    from .dist_rs_walk import shard_tile_rows

    key = ("rs", M, N, BN, device.index)
    buf = buffers(key, group, me, [("r", (M // world, N), torch.bfloat16),
                                   ("flags", (shard_tile_rows(M, world), -(-N // BN)), torch.uint32),
                                   ("sig", (world,), torch.uint32)])
    mine, peer = buf.mine, buf.peer

    def run(a, b_shard, out):
        out = new_out((M // world, N), device) if out is None else out
        buf.epoch += 1
        ck(a, b_shard.t() if k_major else b_shard, out, mine["r"], peer["r"], mine["flags"], peer["flags"],
           mine["sig"], peer["sig"], buf.epoch)
        return out
    return run


def rs_copy_engine(ck, device, group, me, world, M, N, BN, split, k_major):
    """The run of the copy-engine transfer. The kernel is launched first, then, on a side stream that waits for
    the caller's stream up to the launch, for each chunk of shard rows
    (:func:`~tirxpy_kernels.dist_rs_walk.chunk_shard_rows`): wait until the peer counted in every half of the
    chunk's tiles (:func:`~tirxpy_kernels.dist_rs_walk.chunk_halves` of ``split``, the kernel's) on this rank's
    flag ``F[c]`` (``cuStreamWaitValue32``), copy the peer's partial rows from its send buffer into ``out``, set
    the ready flag ``H[c]`` to the call number (``cuStreamWriteValue32``, which fences the copy before the
    write) and reset ``F[c]`` to 0; the caller's stream then waits for the side stream. The launch goes first
    because a stream wait holds the hardware queue it sits in, which the caller's stream may share. The peer
    overwrites its send buffer only after this rank's next kernel started (the kernel's start flag), which
    follows this call's copies."""
    import torch

    from tirxpy.lower.device import stream_getter

    from .dist_rs_walk import chunk_halves, chunk_shard_rows

    rows = chunk_shard_rows(M, world, RS_CHUNKS)
    key = ("rs-ce", M, N, BN, RS_CHUNKS, device.index)
    buf = buffers(key, group, me, [("s", (M // world, N), torch.bfloat16), ("flags", (len(rows),), torch.uint32),
                                   ("sig", (world,), torch.uint32)])
    ops = side_stream(device)
    if "ready" not in buf.mine:
        buf.mine["ready"] = torch.zeros(len(rows), dtype=torch.int32, device=device).view(torch.uint32)
        probe(buf, ops, device, buf.peer["s"].data_ptr())
    row = N * 2                       # bytes of a row of out (bf16)
    flag, done = buf.mine["flags"].data_ptr(), buf.mine["ready"].data_ptr()
    # per chunk: its count flag F[c], its ready flag H[c] (4-byte flags), its byte offset and size in a shard, and
    # the count of tile halves F[c] reaches
    chunks = [(flag + 4 * c, done + 4 * c, r0 * row, (r1 - r0) * row, count)
              for c, ((r0, r1), count) in enumerate(zip(rows, chunk_halves(M, N, BN, world, RS_CHUNKS, split)))]
    src = buf.peer["s"].data_ptr()
    send, peer_flags, ready, sig, peer_sig = (buf.mine["s"], buf.peer["flags"], buf.mine["ready"], buf.mine["sig"],
                                              buf.peer["sig"])
    current, index = stream_getter(), device.index

    def run(a, b_shard, out):
        out = new_out((M // world, N), device) if out is None else out
        buf.epoch += 1
        epoch, cur = buf.epoch, current(index)
        ops.follow(cur)
        ck(a, b_shard.t() if k_major else b_shard, out, send, peer_flags, ready, sig, peer_sig, epoch)
        dst = out.data_ptr()
        for f, h, off, n, count in chunks:
            ops.wait_geq(f, count)
            ops.copy(dst + off, src + off, n)
            ops.write(h, epoch)
            ops.write(f, 0)
        ops.join(cur)
        return out
    return run
