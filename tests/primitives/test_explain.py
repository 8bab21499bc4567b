"""tirxpy.explain: per call site the chosen implementation, its instructions and the candidates
passed over; user implementations of an existing primitive take part in dispatch at once."""
import numpy as np

import tirxpy
from tests.primitives.helpers import choices, kernel
from tests.primitives.interp import run_lowered
from tirxpy.primitives import register_impl, unregister_impl


def _k():
    return kernel('A: T.Tensor((64,), "float32"), O: T.Tensor((64,), "float32")', """
    s = T.alloc_shared((64,), "float32")
    Tx.cta.fill(s, T.float32(3))
    x = T.alloc_local((64,), "float32", layout=TileLayout(S[(32, 2) : (1@laneid, 1@m)]))
    Tx.warp.copy(x, A[0:64])
    Tx.warp.exp2(x, x)
    Tx.warp.copy(O[0:64], x)""", threads=32)


def test_explain_lists_sites_choices_and_instructions():
    text = tirxpy.explain(_k(), "sm_90a")
    lines = text.splitlines()
    assert lines[0] == "k for sm_90a: 4 primitive call site(s)"
    assert any("Tx.cta.fill(s, T.float32(3.0))" in ln for ln in lines)
    assert "  -> fill/memory_fill (priority 5, any)" in lines
    assert "     passed over local_fill: dst is in 'shared'; this variant fills register tiles" in lines
    assert "  -> copy/reg_mem_vec (priority 20, sm_80)" in lines
    assert "     emits: vld_global_v2_b32 x1" in lines
    assert "     emits: ex2_approx_f32 x2" in lines
    assert ":11  Tx.warp.exp2(x, x)" in text


def test_memory_fill_values():
    k = kernel('O: T.Tensor((70,), "float32")', """
    s = T.alloc_shared((64,), "float32")
    Tx.cta.fill(s, T.float32(3))
    Tx.cta.fill(O[0:64], T.float32(-1))
    T.ptx.bar_warp_sync(T.uint32(0xffffffff))      # the copy's lanes read what other lanes' fill wrote
    Tx.cta.copy(O[0:64], s)""", threads=32)
    out = run_lowered(k, O=np.zeros(70, np.float32)).result("O")
    assert (out[:64] == 3).all() and (out[64:] == 0).all()


def test_user_impl_of_existing_primitive_wins_by_priority():
    @register_impl("copy", "any", variant="my_copy", priority=99,
                   when=[lambda ctx: None if ctx.attr("mine") else "only with mine=True"])
    def my_copy(ctx):
        return ctx.emit("syncthreads")
    try:
        k = kernel('A: T.Tensor((64,), "float32")', """
    s = T.alloc_shared((64,), "float32")
    Tx.cta.copy(s, A[0:64], mine=True)
    Tx.cta.copy(s, A[0:64])""", threads=32)
        assert [c[0] for c in choices(k)] == ["my_copy", "mem_mem_vec"]
        assert "passed over my_copy: only with mine=True" in tirxpy.explain(k)
    finally:
        unregister_impl("copy", "my_copy")
