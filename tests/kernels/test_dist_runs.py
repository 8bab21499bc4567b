"""What a distributed GEMM call does once its arguments are checked (tirxpy_kernels/dist_runs.py), on stand-ins:
CPU tensors for the symmetric buffers, a recording driver for the side stream, a recording kernel. Checked: the
launch comes before the side stream's operations, the flag values grow with the call number, each chunk's byte
range, the buffer slots alternate, and the all-gather's chunks go out even when its launch raises (the peer's
kernel waits for them). test_dist_gpu.py runs the real thing on two GPUs."""
import pytest
import torch

import tirxpy.lower.device as device_mod
import tirxpy_kernels.dist_runs as dr
from tirxpy_kernels.dist_ag_gemm import chunk_rows, shared_own_rows
from tirxpy_kernels.dist_rs_walk import chunk_halves, chunk_shard_rows
from tirxpy_kernels.dist_streams import ENTRY, StreamOps

CPU = torch.device("cpu")
CUR, SIDE, FOLLOW, JOIN = 9, 77, 501, 502      # the caller's stream, the side stream, the two events


class _Lib:
    def __init__(self, log):
        self.log = log

    def __getattr__(self, name):
        def call(*args):
            self.log.append((name, args))
            return 0
        return call


class _Buffers:
    """CPU tensors in place of the symmetric allocations (``peer``: another set, as the peer's would be)."""

    def __init__(self, specs):
        def make(shape, dtype):
            return torch.zeros(shape, dtype=torch.int32).view(torch.uint32) if dtype == torch.uint32 else \
                torch.zeros(shape, dtype=dtype)
        self.group, self.epoch = None, 0
        self.mine = {name: make(shape, dtype) for name, shape, dtype in specs}
        self.peer = {name: make(shape, dtype) for name, shape, dtype in specs}


@pytest.fixture
def fakes(monkeypatch):
    log, made = [], {}
    ops = StreamOps(SIDE, dr.DistArgumentError, "transfer='push'", events=(FOLLOW, JOIN), lib=_Lib(log))
    monkeypatch.setattr(dr, "side_stream", lambda device: ops)
    monkeypatch.setattr(dr, "buffers", lambda key, group, me, specs: made.setdefault(key, _Buffers(specs)))
    monkeypatch.setattr(device_mod, "stream_getter", lambda: (lambda index: CUR))
    return log, made


def _kernel(log, fail_at=()):
    def ck(*args):
        if args[-1] in fail_at:
            raise RuntimeError(f"launch {args[-1]} refused")
        log.append(("launch", args))
    return ck


FOLLOWS = [(ENTRY["record"], (FOLLOW, CUR)), (ENTRY["wait_event"], (SIDE, FOLLOW, 0))]
JOINS = [(ENTRY["record"], (JOIN, SIDE)), (ENTRY["wait_event"], (CUR, JOIN, 0))]


@pytest.mark.parametrize("M,K,me", [(400, 104, 1), (400, 104, 0), (1024, 64, 1)])
def test_all_gather_copy_engine_launches_then_sends_each_chunk_and_counts_it(fakes, M, K, me):
    log, made = fakes
    run = dr.ag_copy_engine(_kernel(log, fail_at=(2,)), CPU, None, me, 2, M, 136, K, False)
    buf, = made.values()
    assert [c[0] for c in log] == [ENTRY[n] for n in ("record", "wait_event", "wait", "write", "copy", "record",
                                                      "wait_event")]     # each operation tried once, first
    ms, row, chunks = M // 2, K * 2, chunk_rows(M // 2, me, dr.CHUNKS)
    for epoch in (1, 2, 3):
        del log[:]
        a = torch.randn(ms, K).bfloat16()
        if epoch == 2:                                   # the launch raises: the chunks still go out
            with pytest.raises(RuntimeError, match="launch 2 refused"):
                run(a, torch.zeros(K, 136, dtype=torch.bfloat16), None)
            launch = []
        else:
            out = run(a, torch.zeros(K, 136, dtype=torch.bfloat16), None)
            assert out.shape == (M, 136) and out.dtype == torch.bfloat16
            launch = [log[2]]
            args = log[2][1]
            assert args[0].data_ptr() == buf.mine["a"][epoch % 2].data_ptr() and args[4] is a and args[-1] == epoch
        slot, flag = buf.peer["a"][epoch % 2].data_ptr(), buf.peer["flags"][me].data_ptr()
        sends = []
        for c, (r0, r1) in enumerate(chunks):
            sends += [(ENTRY["copy"], (slot + (me * ms + r0) * row, a.data_ptr() + r0 * row, (r1 - r0) * row, SIDE)),
                      (ENTRY["write"], (SIDE, flag, (epoch - 1) * len(chunks) + c + 1, 0))]
        assert log == FOLLOWS + launch + sends + JOINS
        assert sum(r1 - r0 for r0, r1 in chunks) == ms
        for r0, r1 in shared_own_rows(M, 2, me):        # own rows of shared tile rows: in this rank's slot
            assert torch.equal(buf.mine["a"][epoch % 2][me * ms + r0:me * ms + r1], a[r0:r1])


@pytest.mark.parametrize("split", [None, (3, 1, 240)])
def test_reduce_scatter_copy_engine_launches_then_waits_copies_and_signals_per_chunk(fakes, split):
    log, made = fakes
    M, N, BN = 2048, 512, 256
    run = dr.rs_copy_engine(_kernel(log), CPU, None, 0, 2, M, N, BN, split, True)
    buf, = made.values()
    rows, want = chunk_shard_rows(M, 2, dr.RS_CHUNKS), chunk_halves(M, N, BN, 2, dr.RS_CHUNKS, split)
    for epoch in (1, 2):
        del log[:]
        out = torch.full((M // 2, N), float("nan")).bfloat16()
        assert run(torch.zeros(M, 64, dtype=torch.bfloat16), torch.zeros(N, 64, dtype=torch.bfloat16).t(), out) is out
        assert log[:2] == FOLLOWS and log[2][0] == "launch" and log[2][1][-1] == epoch and log[-2:] == JOINS
        assert log[2][1][1].stride() == (64, 1)          # a K-major b_shard goes in as its (N, K) rows
        f0, h0, src = buf.mine["flags"].data_ptr(), buf.mine["ready"].data_ptr(), buf.peer["s"].data_ptr()
        expect = []
        for c, ((r0, r1), count) in enumerate(zip(rows, want)):
            off, n = r0 * N * 2, (r1 - r0) * N * 2
            expect += [(ENTRY["wait"], (SIDE, f0 + 4 * c, count, 0)),
                       (ENTRY["copy"], (out.data_ptr() + off, src + off, n, SIDE)),
                       (ENTRY["write"], (SIDE, h0 + 4 * c, epoch, 0)), (ENTRY["write"], (SIDE, f0 + 4 * c, 0, 0))]
        assert log[3:-2] == expect


def test_movers_and_push_runs_launch_once_per_call_alternating_slots(fakes):
    log, made = fakes
    ag = dr.ag_movers(_kernel(log), CPU, None, 1, 2, 400, 136, 104, False)
    rs = dr.rs_push(_kernel(log), CPU, None, 1, 2, 400, 136, 128, False)
    agb, rsb = made.values()
    for epoch in (1, 2, 3):
        del log[:]
        ag(torch.zeros(200, 104, dtype=torch.bfloat16), torch.zeros(104, 136, dtype=torch.bfloat16), None)
        out = rs(torch.zeros(400, 104, dtype=torch.bfloat16), torch.zeros(104, 136, dtype=torch.bfloat16), None)
        assert out.shape == (200, 136)
        (_, ag_args), (_, rs_args) = log
        assert ag_args[0].data_ptr() == agb.mine["a"][epoch % 2].data_ptr()
        assert ag_args[6].data_ptr() == agb.peer["a"][epoch % 2].data_ptr()
        assert ag_args[-1] == epoch and rs_args[-1] == epoch and rsb.epoch == epoch
