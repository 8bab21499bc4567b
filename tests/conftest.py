import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# the simulator's --sim option and sim_mode fixture (tests/ has no __init__.py; importlib mode)
sys.path.insert(0, os.path.dirname(__file__))
pytest_plugins = ["sim_plugin"]

settings.register_profile(
    "ci", max_examples=int(os.environ.get("TIRXPY_HYPOTHESIS_EXAMPLES", "60")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("TIRXPY_HYPOTHESIS_PROFILE", "ci"))


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    # with --sim, gpu tests that take the sim_mode fixture run their kernels in tirxpy.sim
    sim = config.getoption("--sim")
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (marker gpu; --sim runs those taking sim_mode)")
    for item in items:
        if "gpu" in item.keywords and not (sim and "sim_mode" in getattr(item, "fixturenames", ())):
            item.add_marker(skip)
