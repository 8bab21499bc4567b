"""The driver context and arch checks (tirxpy/lower/device.py); no GPU needed."""
import pytest
import torch

from tirxpy.lower.device import arch_for, cubin_runs_on, ensure_context
from tirxpy.lower.errors import DriverError


def test_no_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(DriverError, match="no CUDA GPU is available"):
        ensure_context()


@pytest.mark.parametrize("arch, cap, ok", [
    ("sm_80", (8, 0), True), ("sm_80", (8, 6), True), ("sm_86", (8, 0), False), ("sm_80", (9, 0), False),
    ("sm_90a", (9, 0), True), ("sm_90", (9, 0), True), ("sm_90a", (10, 0), False), ("sm_100a", (10, 0), True),
    ("sm_100a", (10, 3), False),
])
def test_cubin_runs_only_on_its_own_architecture(arch, cap, ok):
    assert cubin_runs_on(arch, cap) is ok


def test_arch_for_names_the_arch_specific_targets():
    assert arch_for((9, 0)) == "sm_90a" and arch_for((10, 0)) == "sm_100a" and arch_for((8, 9)) == "sm_89"


def test_arch_checks_are_the_targets():
    """cubin_runs_on / arch_for are tirxpy.target's Target.runs_on / for_capability: a Target is accepted,
    and a GPU older than the oldest target tirxpy supports gets a TargetError naming it."""
    from tirxpy.target import TargetError, as_target

    assert cubin_runs_on(as_target("sm_90a"), (9, 0)) and not cubin_runs_on(as_target("sm_80"), (9, 0))
    with pytest.raises(TargetError, match="sm_75 is older than sm_80"):
        arch_for((7, 5))
