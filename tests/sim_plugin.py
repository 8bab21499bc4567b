"""pytest ``--sim``: run kernels through tirxpy.sim instead of the GPU.

Tests read the switch from the ``sim_mode`` fixture (True with ``--sim``); tests marked
``gpu`` that also accept the simulator check ``sim_mode`` and call ``tirxpy.sim.run``.
"""
import pytest


def pytest_addoption(parser):
    parser.addoption("--sim", action="store_true", default=False,
                     help="run kernels through the CPU simulator (tirxpy.sim) instead of a GPU launch")


@pytest.fixture
def sim_mode(request):
    return bool(request.config.getoption("--sim"))
