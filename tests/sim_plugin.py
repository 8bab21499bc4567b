"""pytest ``--sim``: run GPU tests' kernels through tirxpy.sim instead of the GPU.

A test marked ``gpu`` that requests the ``sim_mode`` fixture runs with ``--sim`` even on a
machine without a GPU (tests/conftest.py skips it otherwise): ``sim_mode`` is True, tensors live
on :func:`device` ``(sim_mode)`` and :func:`launch` ``(kernel, *tensors, sim=sim_mode)`` runs the
kernel in the simulator (which also raises on races, deadlocks, mbarrier misuse) and writes the
results back into the torch tensors, so the test's assertions are the same either way. Tests
skip shapes too large for the simulator with :func:`skip_large`.
"""
import pytest


def pytest_addoption(parser):
    parser.addoption("--sim", action="store_true", default=False,
                     help="run kernels of gpu tests that take the sim_mode fixture in the CPU simulator (tirxpy.sim)")


@pytest.fixture
def sim_mode(request):
    return bool(request.config.getoption("--sim"))


def device(sim):
    """Where a test's tensors live: ``"cpu"`` in the simulator, else ``"cuda"``."""
    return "cpu" if sim else "cuda"


def launch(kernel, *tensors, sim=False, arch=None):
    """Run ``kernel`` on ``tensors`` (torch): ``tirxpy.sim.run`` with ``sim=True`` (arch default:
    the one the kernel's instructions need, sm_90a when they do not decide; raises
    :class:`tirxpy.sim.SimReportError` on any problem), else compile for ``arch`` (default: the
    device's) and launch on the GPU, then synchronize."""
    if sim:
        from tirxpy.sim import run

        run(kernel, *tensors, arch=arch)
        return
    import torch

    import tirxpy
    from tirxpy.lower.runtime import device_arch

    tirxpy.compile(kernel, arch=arch or device_arch())(*tensors)
    torch.cuda.synchronize()


def skip_large(sim, work, limit=1 << 16):
    """Skip in the simulator when ``work`` (e.g. elements or M*N*K / 64) is over ``limit``."""
    if sim and work > limit:
        pytest.skip(f"too large for the simulator ({work} > {limit}); runs on a GPU")
