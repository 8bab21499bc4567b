"""tirxpy/intrinsics/render.py: prelude + one helper per distinct used entry."""
import pytest

from tirxpy.intrinsics import get
from tirxpy.intrinsics.errors import TargetError
from tirxpy.intrinsics.render import PRELUDE, render_helpers


def test_helpers_are_deduplicated_in_first_use_order():
    text = render_helpers(["mbarrier_init", get("fence_proxy_async"), "mbarrier_init"])
    assert text.startswith(PRELUDE)
    assert text.count("tx_mbarrier_init(") == 1 and text.count("tx_fence_proxy_async(") == 1
    assert text.index("tx_mbarrier_init(") < text.index("tx_fence_proxy_async(")
    assert text.endswith("\n")


def test_without_prelude():
    text = render_helpers(["fence_proxy_async"], prelude=False)
    assert "TIRXPY_PRELUDE" not in text
    assert text == get("fence_proxy_async").render_helper() + "\n"
    assert render_helpers([], prelude=False) == "\n"


def test_arch_check_names_the_missing_instruction():
    wgmma = "wgmma_m64n64k16_f32_bf16_bf16_ss"
    assert "tx_" + wgmma in render_helpers([wgmma], arch="sm_90a")
    with pytest.raises(TargetError, match="wgmma"):
        render_helpers(["mbarrier_init", wgmma], arch="sm_80")
    # without arch no check is made
    assert "tx_" + wgmma in render_helpers([wgmma])
