"""tirxpy/primitives/copy/common.py: vector widths, divisibility, edge guards, coordinate maps."""
from types import SimpleNamespace as NS

import pytest

from tirxpy.intrinsics import lookup
from tirxpy.ir import Buffer, IntImm, Var, ops
from tirxpy.primitives.context import Tile
from tirxpy.primitives.copy.common import (contiguous_run, divisor, edge_guard, map_coord, max_vector,
                                           pow2_floor, same_logical_shape, vector_intrinsic)


def test_vector_intrinsics_are_registered():
    for kind in ("ld", "st"):
        for space in ("global", "shared"):
            for n in (1, 2, 4):
                e = lookup(vector_intrinsic(kind, space, n))
                assert e is not None
                assert e.ptx.startswith(f"{kind}.{space}" + (f".v{n}" if n > 1 else "") + ".b32")
    assert vector_intrinsic("ld", "global", 4) == "vld_global_v4_b32"


def test_divisor():
    i = Var("i")
    assert divisor(12) == 4 and divisor(0) == 1 << 20 and divisor(IntImm(-24)) == 8
    assert divisor(i) == 1
    assert divisor(ops.mul(i, 16)) == 16
    assert divisor(ops.add(ops.mul(i, 16), 8)) == 8
    assert divisor(ops.shl(i, 3)) == 8


def test_divisor_looks_through_let_bound_names():
    i, c0, c1 = Var("i"), Var("c0"), Var("c1")
    lets = {c0: ops.mul(ops.floormod(i, 2), 64), c1: ops.add(c0, 4)}
    assert divisor(c0) == 1                                    # a name alone proves nothing
    assert divisor(c0, lets) == 64 and divisor(ops.add(ops.mul(i, 32), c0), lets) == 32
    assert divisor(c1, lets) == 4                              # through two bindings
    assert divisor(ops.add(c0, 3), lets) == 1


@pytest.mark.parametrize("n,p", [(0, 1), (1, 1), (3, 2), (8, 8), (17, 16)])
def test_pow2_floor(n, p):
    assert pow2_floor(n) == p


def test_contiguous_run_and_max_vector_of_row_major_tiles():
    A = Buffer("A", (8, 16), "float16")
    assert contiguous_run(Tile(A, 0)) == (16, 16)
    assert max_vector([Tile(A, 0)]) == 8                      # 16 bytes of fp16
    S = Buffer("S", (8, 16), "float32", "shared")
    assert max_vector([Tile(S, 0)]) == 4
    assert max_vector([Tile(A, 0), Tile(S, 0)]) == 4
    B = Buffer("B", (8, 6), "float16")                      # rows of 6: run 6; row starts 6k are multiples of 2 only
    run, align = contiguous_run(Tile(B, 0))
    assert run == 6 and align == 2 and max_vector([Tile(B, 0)]) == 2
    i = Var("i")
    assert contiguous_run(Tile(A[i, 0:16], 0)) == (16, 16)


def test_edge_guard_only_for_symbolic_global_starts():
    A = Buffer("A", (8, 16), "float16")
    i = Var("i")
    assert edge_guard(Tile(A, 0), (0, 0)) is None
    g = edge_guard(Tile(A[i * 8:i * 8 + 8, 0:16], 0), (1, 2))
    assert str(g) == "i * 8 + 1 < 8"
    S = Buffer("S", (8, 16), "float16", "shared")
    assert edge_guard(Tile(S[i * 8:i * 8 + 8, 0:16], 0), (0, 0)) is None


def test_same_logical_shape_and_map_coord():
    a, b = NS(name="a", shape=(1, 4, 8)), NS(name="b", shape=(4, 1, 8))
    assert same_logical_shape(a, b) is None
    assert "a has shape (1, 4, 8) and b has shape (4, 8, 2)" in same_logical_shape(a, NS(name="b", shape=(4, 8, 2)))
    out = map_coord((0, 3, 5), a, b)
    assert out[0] == 3 and out[1].value == 0 and out[2] == 5
