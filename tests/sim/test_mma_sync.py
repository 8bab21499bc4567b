"""tirxpy.sim.mma_sync: m16n8k16 with f16 / bf16 inputs and f32 / f16 accumulators (fragment layouts of
PTX ISA Figures 79, 81, 83), checked against a float64 numpy reference."""
import numpy as np

from tirxpy import T
from tirxpy.sim import run
from tirxpy.sim.values import from_bits, to_bits

_SRC = '''
@T.prim_func
def k(A: T.Tensor((16, 16), "DT"), B: T.Tensor((8, 16), "DT"), C0: T.Tensor((32, NC), "CT"), D: T.Tensor((32, NC), "CT")):
    T.launch(grid=(1,), threads=32)
    sa = T.alloc_shared((16, 16), "DT")
    sb = T.alloc_shared((8, 16), "DT")
    a = T.alloc_local((4,), "uint32")
    b = T.alloc_local((2,), "uint32")
    c = T.alloc_local((NC,), "CT")
    d = T.alloc_local((NC,), "CT")
    l = T.lane_id()
    for j in T.serial(16):
        if l < 16:
            sa[l, j] = A[l, j]
        if l < 8:
            sb[l, j] = B[l, j]
    T.ptx.syncthreads()
    for i in T.serial(NC):
        c[i] = C0[l, i]
    T.ptx.ldmatrix_x4(a, sa[l % 16, (l // 16) * 8])
    T.ptx.ldmatrix_x2(b, sb[l % 8, ((l // 8) % 2) * 8])
    T.ptx.NAME(d, a, b, c)
    for i in T.serial(NC):
        D[l, i] = d[i]
'''


def _frag(C):
    """(16, 8) tile -> (32, 4) per-lane fragment: lane l, element i is row l//4 + 8*(i//2), col 2*(l%4) + i%2."""
    l = np.arange(32)[:, None]
    i = np.arange(4)[None, :]
    return C[l // 4 + 8 * (i // 2), 2 * (l % 4) + i % 2]


def _src(name, dt, ct, nc):
    return T.parse_script(_SRC.replace("NAME", name).replace("DT", dt).replace("CT", ct).replace("NC", str(nc)))


def test_bf16_inputs_f32_accumulator_adds_c():
    rng = np.random.default_rng(0)
    A = to_bits(rng.standard_normal((16, 16)).astype(np.float32), "bfloat16")
    B = to_bits(rng.standard_normal((8, 16)).astype(np.float32), "bfloat16")
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = np.zeros((32, 4), np.float32)
    run(_src("mma_sync_m16n8k16_f32_bf16_bf16_f32", "bfloat16", "float32", 4), A, B, _frag(C), D)
    ref = from_bits(A, "bfloat16").astype(np.float64) @ from_bits(B, "bfloat16").astype(np.float64).T + C
    np.testing.assert_allclose(D, _frag(ref), rtol=1e-6, atol=1e-6)


def test_f16_accumulator_packs_two_halves_per_register():
    rng = np.random.default_rng(1)
    A = (rng.integers(-4, 5, (16, 16)) / 4).astype(np.float16)   # exact products and sums
    B = (rng.integers(-4, 5, (8, 16)) / 4).astype(np.float16)
    C = (rng.integers(-8, 9, (16, 8)) / 2).astype(np.float16)
    c_regs = np.ascontiguousarray(_frag(C)).view(np.uint32)      # (32, 2): halves (i, i+1) in one register
    D = np.zeros((32, 2), np.uint32)
    run(_src("mma_sync_m16n8k16_f16_f16_f16_f16", "float16", "uint32", 2), A, B, c_regs, D)
    got = np.ascontiguousarray(D).view(np.float16)
    ref = A.astype(np.float64) @ B.astype(np.float64).T + C
    assert (got.astype(np.float64) == _frag(ref)).all()

