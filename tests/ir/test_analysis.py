from tirxpy import T
from tirxpy.ir import IRError, Scope, active_threads, annotate_active_threads
from tirxpy.layout import S, TileLayout, laneid, warpid

import pytest

SRC = '''@T.prim_func
def k(A: T.Tensor((512,), "float32"), n: T.int32):
    T.launch(grid=(1,), threads=256)
    A[0] = T.float32(0)
    wg = T.warpgroup_id()
    w = T.warp_id_in_wg()
    if wg == 1:
        A[1] = T.float32(1)
        if w == 2 and T.elect_one():
            A[2] = T.float32(2)
        else:
            A[3] = T.float32(3)
    else:
        A[4] = T.float32(4)
    if T.thread_id_in_wg() // 32 < 2:
        A[5] = T.float32(5)
    if T.thread_id() < n:
        A[6] = T.float32(6)
    for i in T.serial(4):
        if i == 0:
            A[7] = T.float32(7)
    if T.cta_id(0) == 0:
        A[8] = T.float32(8)
    if wg * 64 < n:
        A[9] = T.float32(9)
        if T.warp_id_in_wg() == 1:
            A[10] = T.float32(10)
'''


def stores(k):
    out = {}

    def walk(seq):
        for s in seq.stmts:
            if type(s).__name__ == "BufferStore":
                out[s.indices[0].value] = s
            for f in ("body", "then_body", "else_body"):
                if getattr(s, f, None) is not None:
                    walk(getattr(s, f))
    walk(k.body)
    return out


def test_active_sets_for_every_statement():
    k = T.parse_script(SRC)
    info = annotate_active_threads(k)
    st = stores(k)
    assert info.layout(st[0]).identical(TileLayout(S[(8, 32) : (1@warpid, 1@laneid)])) and info.scope(st[0]) is Scope.CTA
    assert info.layout(st[1]).identical(TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 4@warpid))
    assert info.scope(st[1]) is Scope.WARPGROUP
    assert info[st[2]].tids == {6 * 32} and info.scope(st[2]) is Scope.THREAD
    assert len(info[st[3]]) == 127 and info.scope(st[3]) is Scope.THREAD   # the rest of warpgroup 1
    assert info.layout(st[4]).identical(TileLayout(S[(4, 32) : (1@warpid, 1@laneid)]))
    assert sorted(info[st[5]].warps()) == [0, 1, 4, 5] and info.scope(st[5]) is Scope.WARP
    assert not info[st[6]].exact and info[st[6]].describe().startswith("at most")
    assert info[st[6]].grain is Scope.THREAD and not info[st[6]].whole("warp")   # thread id vs data
    assert info[st[9]].grain is Scope.WARPGROUP and info[st[9]].whole("warpgroup") and not info[st[9]].exact
    # a thread-id branch inside it keeps the grain: the warps 1 of the warpgroups that run
    assert info[st[10]].whole("warp") and not info[st[10]].whole("warpgroup") and sorted(info[st[10]].warps()) == [1, 5]
    assert info.scope(st[7]) is Scope.CTA                      # uniform branch on a loop variable
    assert info[st[8]].cta_narrowed and info.scope(st[8]) is Scope.CTA and not info[st[8]].covers("cluster")
    assert active_threads(k, st[2]).describe() == "1 thread (warp 6, lane 0)"
    assert info.narrowed_by(st[2]).cond is not None


def test_unknown_statement():
    k = T.parse_script(SRC)
    other = stores(T.parse_script(SRC))[0]
    with pytest.raises(IRError, match="is not part of kernel k"):
        annotate_active_threads(k)[other]


CONJ = '''@T.prim_func
def k(A: T.Tensor((512,), "float32"), n: T.int32):
    T.launch(grid=(4,), threads=256, cluster=(2,))
    warp = T.warp_id()
    rank = T.cluster_rank()
    if warp == 5 and rank == 0:
        A[0] = T.float32(0)
        if T.elect_one():
            A[1] = T.float32(1)
    else:
        A[2] = T.float32(2)
    if warp == 2 and n > 3 and T.elect_one():
        A[3] = T.float32(3)
    if rank == 0 and T.elect_one():
        A[4] = T.float32(4)
    else:
        A[5] = T.float32(5)
    if warp == 3 and T.thread_id() + T.cta_id(0) < n:
        A[6] = T.float32(6)
'''


def test_conjuncts_on_thread_ids_filter_exactly_beside_cta_and_data_conjuncts():
    """Each conjunct narrows on its own: ``warp == 5 and rank == 0`` is warp 5 (of the rank-0 CTAs), not an
    upper bound of the whole CTA whose elected thread would be warp 0's."""
    info = annotate_active_threads(k := T.parse_script(CONJ))
    st = stores(k)
    assert info[st[0]].exact and info[st[0]].cta_narrowed and sorted(info[st[0]].warps()) == [5]
    assert info[st[1]].describe() == "1 thread (warp 5, lane 0)" and info.scope(st[1]) is Scope.THREAD
    assert len(info[st[2]]) == 256                       # every thread of a rank-1 CTA takes the else branch
    assert info[st[3]].describe() == "1 thread (warp 2, lane 0)"
    assert info[st[4]].tids == {0} and len(info[st[5]]) == 256
    assert not info[st[6]].exact and sorted(info[st[6]].warps()) == [3] and info[st[6]].grain is Scope.THREAD
