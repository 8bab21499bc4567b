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
from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, reason, rejected

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
    assert intrinsics(stmt).count("vld_global_v4_b32") == 1       # 16-byte vectors (40 bf16 = 5 x 16 B per row)
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
