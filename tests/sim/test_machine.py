"""Register tiles in the simulator (tirxpy/sim/machine.py): reading bytes nothing wrote since the tile's
allocation is reported (``uninitialized_read``, naming the tile, the line and the lanes), while a copy of
undefined registers into registers is not (the copy is undefined in turn: the report comes where it
reaches memory)."""
import numpy as np
import pytest

from tirxpy import T
from tirxpy.sim import SimReportError, run


def _run(src, n=64):
    a = np.zeros(n, np.float32)
    return run(T.parse_script(src), a, check=False), a


def test_read_of_unwritten_register_tile_is_reported():
    res, _ = _run('''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=64)
    r = T.alloc_local((2,), "float32")
    r[0] = T.float32(1)
    A[T.thread_id()] = r[1]
''')
    assert [p.kind for p in res.problems] == ["uninitialized_read"]
    p = res.problems[0]
    assert "register tile r" in p.msg and p.span.line == 7 and "lanes 0-31" in p.threads


def test_lanes_that_skipped_the_write_are_named():
    res, a = _run('''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=32)
    r = T.alloc_local((1,), "float32")
    if T.lane_id() < 8:
        r[0] = T.float32(2)
    A[T.thread_id()] = r[0]
''')
    assert [p.kind for p in res.problems] == ["uninitialized_read"] and "lanes 8-31" in res.problems[0].threads
    assert (a[:8] == 2).all()


def test_written_tiles_are_clean():
    res, a = _run('''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=64)
    r = T.alloc_local((4,), "float32")
    for i in T.serial(4):
        r[i] = T.cast(i, "float32")
    A[T.thread_id()] = r[0] + r[1] + r[2] + r[3]
''')
    assert res.problems == [] and (a == 6).all()


def test_register_copy_of_undefined_values_is_reported_only_where_it_is_used():
    src = '''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=32)
    r = T.alloc_local((2,), "float32")
    s = T.alloc_local((2,), "float32")
    r[0] = T.float32(3)
    for i in T.serial(2):
        s[i] = r[i] * T.float32(2)
    A[T.thread_id()] = s[USE]
'''
    res, a = _run(src.replace("USE", "0"))
    assert res.problems == [] and (a[:32] == 6).all()
    with pytest.raises(SimReportError) as ei:
        run(T.parse_script(src.replace("USE", "1")), np.zeros(64, np.float32))
    assert ei.value.kinds() == {"uninitialized_read"} and "register tile s" in str(ei.value)


def test_reallocation_in_a_loop_is_uninitialized_again():
    res, _ = _run('''
@T.prim_func
def k(A: T.Tensor((64,), "float32")):
    T.launch(grid=(1,), threads=32)
    for j in T.serial(2):
        r = T.alloc_local((1,), "float32")
        if j == 0:
            r[0] = T.float32(1)
        A[T.thread_id()] = r[0]
''')
    assert [p.kind for p in res.problems] == ["uninitialized_read"]


def test_shared_buffers_are_placed_as_the_generated_kernel_places_them():
    """plan_shared is tirxpy.ir.visitor.shared_plan, the placement codegen and the verifier use: a small
    buffer takes a 128-byte boundary (not 8), a swizzled tile a 1024-byte one."""
    from tirxpy.ir import stmt as St
    from tirxpy.ir.visitor import shared_plan, walk_stmts
    from tirxpy.layout import ComposeLayout, S, TileLayout, swizzle_128B
    from tirxpy.sim.machine import plan_shared

    SL = ComposeLayout(swizzle_128B("bf16"), TileLayout(S[(64, 64)]))

    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        T.launch(grid=(1,), threads=64)
        bar = T.alloc_shared((1,), "uint64")
        flag = T.alloc_shared((2,), "int32")
        tile = T.alloc_shared((64, 64), "bfloat16", layout=SL)
        A[T.thread_id()] = T.float32(0)

    plan, size = plan_shared(k)
    offs, total = shared_plan(k.body)
    allocs = [s for s in walk_stmts(k.body) if isinstance(s, St.Allocate)]
    assert [plan[s.buffer] for s in allocs] == [offs[id(s)] for s in allocs] == [0, 128, 1024]
    assert size == total == 1024 + 64 * 64 * 2
