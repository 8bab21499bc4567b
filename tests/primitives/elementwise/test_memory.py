"""tirxpy/primitives/elementwise/memory.py: fill of shared / global tiles by all active threads."""
import numpy as np

from tests.primitives.helpers import choices, kernel, reason, rejected
from tests.primitives.interp import run_lowered


def test_fill_global_view_with_cast_value():
    k = kernel('O: T.Tensor((8, 40), "float32")', """
    Tx.cta.fill(O[2:6, 0:40], 3)""", threads=64)
    assert choices(k)[0][0] == "memory_fill"
    out = run_lowered(k, O=np.zeros((8, 40), np.float32)).result("O")
    want = np.zeros((8, 40), np.float32)
    want[2:6] = 3
    np.testing.assert_array_equal(out, want)


def test_fill_shared_then_copy_out():
    k = kernel('O: T.Tensor((16, 16), "float32")', """
    s = T.alloc_shared((16, 16), "float32")
    Tx.cta.fill(s, T.float32(-1.5))
    T.ptx.syncthreads()
    Tx.cta.copy(O[0:16, 0:16], s)""", threads=128)
    assert choices(k)[0][0] == "memory_fill"
    out = run_lowered(k, O=np.zeros((16, 16), np.float32)).result("O")
    np.testing.assert_array_equal(out, np.full((16, 16), -1.5, np.float32))


def test_fill_refuses_a_tensor_value():
    k = kernel('O: T.Tensor((16, 16), "float32")', """
    s = T.alloc_shared((16, 16), "float32")
    Tx.cta.fill(s, O[0:16, 0:16])""", threads=128)
    assert reason(rejected(k), "memory_fill") == "fill(dst, value) takes a tensor and a scalar value"
