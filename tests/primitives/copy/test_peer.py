"""copy between this GPU's and a peer's global memory (tirxpy/primitives/copy/peer.py): dispatch, explain,
values on two simulated ranks (pull and push), compile."""
import numpy as np
import pytest

from tirxpy import T, Tx
from tirxpy.ir.buffer import Buffer
from tirxpy.layout import S, TileLayout, rank
from tirxpy.primitives import explain
from tirxpy.primitives.copy.peer import is_peer
from tirxpy.sim.ranks import Symmetric, run_ranks
from tirxpy.ir import For
from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, nodes, reason, rejected

PL = TileLayout(S[(64, 40)] + 1 @ rank)     # the peer's buffer (rank 1 of rank 0's view; the axis marks a peer)


@T.prim_func
def pull_push(Peer: T.Tensor((64, 40), "bfloat16", layout=PL), Local: T.Tensor((64, 40), "bfloat16"),
              Back: T.Tensor((64, 40), "bfloat16", layout=PL)):
    T.launch(grid=(2,), threads=128)
    r0 = T.cta_id(0) * 32
    Tx.cta.copy(Local[r0:r0 + 32, :], Peer[r0:r0 + 32, :])
    Tx.cta.copy(Back[r0:r0 + 32, :], Local[r0:r0 + 32, :])


def test_is_peer_reads_the_rank_axis():
    assert is_peer(Buffer("P", (2, 2), "float32", layout=TileLayout(S[(2, 2)] + 1 @ rank)))
    assert not is_peer(Buffer("P", (2, 2), "float32"))


def test_dispatch_and_explain_name_the_peer_variant():
    (v, stmt), (v2, _) = choices(pull_push)
    assert v == v2 == "peer_vec"
    # 16-byte vectors (40 bf16 = 5 x 16 B per row); 160 chunks over 128 threads: one batch of two loads, then stores
    names = intrinsics(stmt)
    assert names.count("vld_global_v4_b32") == 2 and names.count("vst_global_v4_b32") == 2
    assert names.index("vst_global_v4_b32") > max(i for i, n in enumerate(names) if n == "vld_global_v4_b32")
    text = explain(pull_push)
    assert "copy/peer_vec" in text and "vld_global_v4_b32" in text


def test_local_global_to_global_is_still_refused():
    k = kernel('A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")', "    Tx.cta.copy(B, A)")
    err = rejected(k)
    assert "neither B nor A is a peer tensor" in reason(err, "peer_vec")


def test_two_ranks_pull_then_push_move_the_values():
    src = Symmetric("src", (64, 40), "bfloat16", 2)
    back = Symmetric("back", (64, 40), "bfloat16", 2)
    rng = np.random.default_rng(1)
    vals = [rng.standard_normal((64, 40)).astype(np.float32) for _ in range(2)]
    for r in range(2):
        src.set(r, vals[r])
    locs = [np.full((64, 40), np.nan, np.float32) for _ in range(2)]
    # this kernel waits for no signal, so its reads of what the peer's host wrote are races (reported, not raised)
    res = run_ranks(pull_push, [(src.on(1 - r), locs[r], back.on(1 - r)) for r in range(2)], check=False)
    assert {p.kind for p in res[0].problems} == {"race"}
    bf = [src.get(r) for r in range(2)]
    for r in range(2):
        assert np.array_equal(res[r][0], bf[1 - r])              # rank r pulled the peer's tile
        assert np.array_equal(back.get(1 - r), bf[1 - r])         # and pushed it back into the peer


def test_compiles_for_hopper():
    compile_ok(pull_push, "sm_90a")


def test_a_peer_tensor_launches_with_its_local_strides():
    from tirxpy.lower.build import tensor_strides

    p = Buffer("P", (64, 40), "bfloat16", layout=PL)
    assert tensor_strides(p) == ((64, 40), (40, 1))      # the rank offset says whose memory, not where in it


PW = TileLayout(S[(40, 200)] + 1 @ rank)


@T.prim_func
def push_deep(Peer: T.Tensor((40, 200), "bfloat16", layout=PW), Local: T.Tensor((40, 200), "bfloat16")):
    T.launch(grid=(1,), threads=64)
    w = T.warp_id()
    if w == 0:
        Tx.warp.copy(Peer[0:24, :], Local[0:24, :], depth=8)       # 600 chunks, 19 per lane: 3 batches, ragged
    else:
        Tx.warp.copy(Peer[24:40, :], Local[24:40, :], depth=1)


def _loads_in_a_row(names):
    run, best = 0, 0
    for n in names:
        run = run + 1 if n == "vld_global_v4_b32" else (run if n != "vst_global_v4_b32" else 0)
        best = max(best, run)
    return best


def test_depth_sets_the_loads_issued_before_the_stores():
    (v8, s8), (v1, s1) = choices(push_deep)
    assert v8 == v1 == "peer_vec"
    assert _loads_in_a_row(intrinsics(s8)) == 8 and _loads_in_a_row(intrinsics(s1)) == 1
    text = explain(push_deep)
    assert "vld_global_v4_b32 x8" in text and "vld_global_v4_b32 x1" in text


def test_depth_batches_move_every_value_once_at_ragged_counts():
    dst = Symmetric("dst", (40, 200), "bfloat16", 2)
    vals = [np.random.default_rng(r).standard_normal((40, 200)).astype(np.float32) for r in range(2)]
    for r in range(2):
        dst.set(r, np.full((40, 200), np.nan, np.float32))
    res = run_ranks(push_deep, [(dst.on(1 - r), vals[r]) for r in range(2)], check=False)
    assert not [p for p in res[0].problems if p.kind != "race"]
    for r in range(2):
        want = np.asarray(vals[1 - r], np.float32)
        got = dst.get(r)
        assert np.array_equal(got, want.astype(got.dtype)) or np.allclose(got, want, rtol=2 ** -8)


@pytest.mark.parametrize("depth", [0, 17, 2.0, True])
def test_bad_depth_is_refused_with_its_range(depth):
    k = kernel(f'P: T.Tensor((32, 32), "float32", layout=TileLayout(S[(32, 32)] + 1 @ rank)), '
               f'A: T.Tensor((32, 32), "float32")', f"    Tx.cta.copy(P, A, depth={depth})")
    err = rejected(k)
    assert "depth=" in reason(err, "peer_vec") and "1 .. 16" in reason(err, "peer_vec")


def test_deep_copy_compiles_for_hopper():
    compile_ok(push_deep, "sm_90a")


@pytest.mark.parametrize("depth, kinds", [(16, ["unroll"]), (10, ["unroll"]), (8, ["serial"]), (1, ["serial"])])
def test_batch_loop_is_unrolled_up_to_two_batches_and_a_loop_past(depth, kinds):
    # 24 x 200 bf16 = 600 16-byte chunks over 32 lanes: 19 per lane; depth 16 or 10 -> 2 batches, 8 -> 3, 1 -> 19
    k = kernel('P: T.Tensor((24, 200), "bfloat16", layout=TileLayout(S[(24, 200)] + 1 @ rank)), '
               'A: T.Tensor((24, 200), "bfloat16")', f"    Tx.warp.copy(P, A, depth={depth})", threads=32)
    (v, stmt), = choices(k)
    assert v == "peer_vec" and [f.kind for f in nodes(stmt, For)] == kinds
