"""tirxpy/primitives/lower_pass.py: every primitive call replaced in place, input untouched, sites in order."""
import numpy as np

from tests.primitives.helpers import kernel, nodes
from tests.primitives.interp import run_lowered
from tirxpy.ir import PrimitiveCall
from tirxpy.primitives.lower_pass import lower_calls, lower_calls_traced


def _k():
    return kernel('O: T.Tensor((8, 32), "float32")', """
    Tx.cta.fill(O[0:4, 0:32], 1)
    if T.thread_id() < 32:
        Tx.warp.fill(O[4:8, 0:32], 2)""", threads=64)


def test_lowering_replaces_every_call_and_keeps_the_input():
    k = _k()
    before = len(nodes(k.body, PrimitiveCall))
    out = lower_calls(k, "sm_90a")
    assert before == 2 and len(nodes(k.body, PrimitiveCall)) == 2          # input not modified
    assert nodes(out.body, PrimitiveCall) == []
    assert out.name == k.name and out.params == k.params


def test_sites_are_in_source_order_with_their_thread_sets():
    k = _k()
    _, sites = lower_calls_traced(k, "sm_90a")
    assert [s.call.scope.name for s in sites] == ["CTA", "WARP"]
    assert [len(s.threads.tids) for s in sites] == [64, 32]
    assert all(s.impl is not None and s.stmt is not None for s in sites)


def test_lowered_kernel_computes_the_calls():
    out = run_lowered(_k(), O=np.zeros((8, 32), np.float32)).result("O")
    np.testing.assert_array_equal(out, np.repeat(np.array([1, 1, 1, 1, 2, 2, 2, 2], np.float32)[:, None], 32, 1))
