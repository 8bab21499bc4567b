"""ldmatrix / stmatrix: chosen when the register layout is made of their fragments (mma operand
layouts, transposed B), grouped into .x4 / .x2 / .x1; element-exact by interpretation; reasons."""
import numpy as np
import pytest

from tests.primitives.helpers import choices, compile_ok, intrinsics, kernel, nodes, reason, rejected
from tests.primitives.interp import bf16_array, run_lowered

P = 'A: T.Tensor((16, 16), "bfloat16"), O: T.Tensor((16, 16), "bfloat16")'


def _k(layout, store=False, smem="T.alloc_shared((16, 16), 'bfloat16')"):
    back = "Tx.warp.copy(s2, a)\n    Tx.warp.copy(O[0:16, 0:16], s2)" if store else "Tx.warp.copy(O[0:16, 0:16], a)"
    return kernel(P, f"""
    s = {smem}
    s2 = T.alloc_shared((16, 16), "bfloat16")
    a = T.alloc_local((16, 16), "bfloat16", layout={layout})
    Tx.warp.copy(s, A[0:16, 0:16])
    Tx.warp.copy(a, s)
    {back}""", threads=32)


X = bf16_array(np.random.default_rng(8).standard_normal((16, 16)))


@pytest.mark.parametrize("layout,name", [
    ("mma_m16n8k16_a('bf16')", "ldmatrix_x4"),
    ("ldmatrix_layout(4, trans=True, grid=(2, 2))", "ldmatrix_x4_trans"),
    ("TileLayout(S[(2, 8, 2, 4, 2) : (4@m, 4@laneid, 2@m, 1@laneid, 1@m)])", "ldmatrix_x4"),  # registers reordered
])
def test_ldmatrix_exact(layout, name):
    k = _k(layout)
    ch = choices(k)
    assert ch[1][0] == "ldmatrix" and intrinsics(ch[1][1]) == [name]
    out = run_lowered(k, A=X, O=np.zeros((16, 16), np.float32)).result("O")
    np.testing.assert_array_equal(out, X)


def test_stmatrix_exact_and_sm80_falls_back():
    k = _k("mma_m16n8k16_a('bf16')", store=True)
    ch = choices(k)
    assert [c[0] for c in ch] == ["mem_mem_vec", "ldmatrix", "stmatrix", "mem_mem_vec"]
    out = run_lowered(k, A=X, O=np.zeros((16, 16), np.float32)).result("O")
    np.testing.assert_array_equal(out, X)
    assert [c[0] for c in choices(k, "sm_80")][2] == "reg_mem_vec"  # stmatrix needs sm_90


def test_reasons():
    k = _k("TileLayout(S[(16, 2, 8) : (2@laneid, 1@laneid, 1@m)])")  # 8 contiguous columns per lane
    ch = choices(k)
    assert ch[1][0] == "reg_mem_vec"
    k = kernel(P, """
    s = T.alloc_shared((16, 16), "bfloat16")
    a = T.alloc_local((16, 16), "bfloat16", layout=TileLayout(S[(16, 2, 8) : (2@laneid, 1@laneid, 1@m)]))
    Tx.warp.copy(a, s, dispatch="ldmatrix")""", threads=32)
    assert reason(rejected(k), "ldmatrix") == (
        "a: register 0 of lane 1 (warp 0) holds elements (0, 8) and (0, 9), not an ldmatrix fragment "
        "(row l/4, columns 2*(l%4)+{0,1} of an 8x8 block, or its transpose)")
    k = kernel(P, """
    s = T.alloc_shared((16, 16), "bfloat16", layout=TileLayout(S[(16, 16) : (1, 16)]))
    a = T.alloc_local((16, 16), "bfloat16", layout=mma_m16n8k16_a('bf16'))
    Tx.warp.copy(a, s, dispatch="ldmatrix")""", threads=32)
    assert reason(rejected(k), "ldmatrix") == ("s: rows of 8 elements are not 16-byte contiguous and aligned in "
                                               "shared memory")
    k = kernel(P, """
    s = T.alloc_shared((16, 16), "float32")
    a = T.alloc_local((16, 16), "float32", layout=TileLayout(S[(16, 16) : (1@laneid, 1@m)]))
    Tx.warp.copy(a, s, dispatch="ldmatrix")""", threads=32)
    assert reason(rejected(k), "ldmatrix") == "ldmatrix moves 16-bit elements; a is float32, s is float32"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compiles(arch):
    compile_ok(_k("mma_m16n8k16_a('bf16')", store=(arch == "sm_90a")), arch)


@pytest.mark.parametrize("store", [False, True])
def test_row_address_is_arithmetic(store):
    """Matrices at constant steps from one another (an mma operand: (0, 0), (8, 0), (0, 8), (8, 8)) give
    each lane's row address as arithmetic in the bits of lane / 8, not a per-lane select (which ptxas
    compiles to divergent branches); the copy stays exact (test_ldmatrix_exact, test_stmatrix_exact...)."""
    from tirxpy.ir.expr import AddressOf, Select

    ch = choices(_k("mma_m16n8k16_a('bf16')", store=store))
    site = ch[2] if store else ch[1]
    assert site[0] == ("stmatrix" if store else "ldmatrix")
    addrs = nodes(site[1], AddressOf)
    assert addrs and not any(nodes(a, Select) for a in addrs)


def test_bit_steps():
    """Which matrix placements take the arithmetic address: constant steps, with matrix 3 = matrix 1 +
    matrix 2 - matrix 0 for .x4; anything else keeps the select over the matrices."""
    from tirxpy.ir import Var, ops
    from tirxpy.primitives.copy.ldmatrix import _bit_steps

    r, c = Var("r"), Var("c")

    def at(*offsets):
        return [(ops.add(r, dr), ops.add(c, dc)) for dr, dc in offsets]

    assert _bit_steps(at((0, 0), (8, 0), (0, 8), (8, 8))) == [(0, (8, 0)), (1, (0, 8))]
    assert _bit_steps(at((0, 0), (0, 8))) == [(0, (0, 8))]
    assert _bit_steps(at((0, 0))) == []
    assert _bit_steps(at((0, 0), (8, 0), (0, 8), (16, 8))) is None       # not a sum of the bit steps
    assert _bit_steps([(r, c), (ops.mul(r, 2), c)]) is None               # no constant step
