"""tirxpy/primitives/elementwise/slots.py: broadcasting checks and register slots of local tiles."""
from types import SimpleNamespace

import pytest

from tirxpy.ir import Buffer
from tirxpy.layout import S, TileLayout, laneid, m
from tirxpy.primitives.elementwise.slots import _linear, _op_coord, all_slots, broadcast_shape_ok


def _t(name, shape):
    return SimpleNamespace(name=name, shape=shape)


@pytest.mark.parametrize("op_shape, ok", [((32, 4), True), ((32, 1), True), ((1, 4), True), ((4,), True),
                                          ((1,), True), ((4, 4), False), ((32,), False), ((2, 32, 4), False)])
def test_broadcast_follows_numpy(op_shape, ok):
    import numpy as np
    try:
        np.broadcast_to(np.zeros(op_shape), (32, 4))
        np_ok = True
    except ValueError:
        np_ok = False
    assert np_ok == ok
    why = broadcast_shape_ok(_t("o", (32, 4)), _t("v", op_shape))
    assert (why is None) == ok
    if not ok:
        assert "v" in why and "o" in why


def test_operand_coordinate_aligns_right_and_pins_broadcast_dimensions():
    dst = _t("o", (2, 32, 4))
    assert _op_coord((1, 7, 3), dst, _t("v", (32, 1))) == (7, 0)
    assert _op_coord((1, 7, 3), dst, _t("v", (1, 4))) == (0, 3)
    assert _op_coord((1, 7, 3), dst, _t("v", (2, 32, 4))) == (1, 7, 3)
    assert _linear((1, 7, 3), (2, 32, 4)) == 1 * 128 + 7 * 4 + 3


def test_all_slots_lists_every_register_slot_of_a_local_tile():
    b = Buffer("a", (32, 4), "float32", storage="local", layout=TileLayout(S[(32, 4) : (1 @ laneid, 1 @ m)]))
    assert all_slots(b) == [0, 1, 2, 3]
    b = Buffer("c", (32, 4), "float32", storage="local", layout=TileLayout(S[(32, 4) : (1 @ laneid, 2 @ m)]))
    assert all_slots(b) == [0, 2, 4, 6]


def test_slot_maps_are_memoized_by_layout_value_and_a_bad_operand_is_still_refused():
    """slot_map keeps each (destination, operand) map it built, keyed by the tiles' layouts, shapes, pins and
    the active threads: lowering the same calls again gives the same maps from the memo (the kernel then runs
    the same), and an operand whose layout does not fit is refused every time (a refusal is never kept)."""
    import numpy as np

    from tests.primitives.elementwise.test_local import A, B, V, _prog
    from tests.primitives.helpers import kernel, reason, rejected
    from tests.primitives.interp import run_lowered
    from tirxpy.primitives.elementwise import slots

    slots._MAPS.clear()
    for _ in range(2):          # the second lowering reads the maps the first one built
        out = run_lowered(_prog("    Tx.warp.fma(o, a, b, v)"), A=A, B=B, V=V,
                          O=np.zeros((32, 4), np.float32)).result("O")
        np.testing.assert_allclose(out, A * B + V, rtol=1e-6, atol=1e-6)
        assert len(slots._MAPS) == 2        # (o, a) and (o, b) share one map; (o, v) the other
    L = "TileLayout(S[(32, 4) : (1@laneid, 1@m)])"
    bad = "TileLayout(S[(32, 1) : (1@laneid, 1@m)] + 1@warpid)"   # the row values live in warp 1
    for _ in range(2):
        k = kernel('V: T.Tensor((32, 1), "float32")', f"""
    a = T.alloc_local((32, 4), "float32", layout={L})
    v = T.alloc_local((32, 1), "float32", layout={bad})
    Tx.cta.mul(a, a, v)""", threads=64)
        assert reason(rejected(k), "local_map").startswith("v: element (0, 0) is owned by (laneid 0, warpid 1)")
