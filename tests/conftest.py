import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# One compute thread per pytest-xdist worker: the workers already take every core (one each, see suite_workers),
# and torch's / OpenBLAS's own thread pools on top of them put several spinning threads on each core; a test of
# many small tensor operations then ran >10x slower than alone (a gradcheck: 41 s under two workers, 2 s alone).
# Set before torch or numpy is imported in the worker; an OMP_NUM_THREADS etc. set by the user wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

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


# -- the GPU suite in parallel ------------------------------------------------------------------
# A GPU test spends most of its time compiling (NVRTC, one core per kernel). When the session runs
# only gpu-marked tests (`pytest -m gpu`) on a machine with a GPU, the tests run in worker processes
# (pytest-xdist, one per core, at most 16) so the compiles run side by side; the workers share the
# disk cache of compiled modules (tirxpy/lower/cache.py writes entries by atomic replace) and the GPU.
# TIRXPY_GPU_WORKERS=N sets the number of workers (0: run in this process); setting it also turns the
# workers on without a GPU, for `pytest -m gpu --sim`. An explicit -n / -p no:xdist wins.
GPU_WORKERS_ENV = "TIRXPY_GPU_WORKERS"
MAX_GPU_WORKERS = 16


def selects_only_gpu_tests(markexpr: str, other_markers=("slow",)) -> bool:
    """Whether ``-m markexpr`` keeps a test marked gpu and drops an unmarked one and one marked only with
    one of ``other_markers``."""
    if not markexpr:
        return False
    from _pytest.mark.expression import Expression

    try:
        expr = Expression.compile(markexpr)
    except Exception:       # pytest reports a malformed -m expression itself
        return False
    return expr.evaluate(lambda name, **kw: name == "gpu") and not any(
        expr.evaluate(lambda name, m=m, **kw: name == m) for m in (None, *other_markers) if m != "gpu")


def _markers(config) -> list:
    return [line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")]


def gpu_workers(config, has_gpu, cpu_count) -> int:
    """How many worker processes run this session's tests: 0 to run them in this process."""
    env = os.environ.get(GPU_WORKERS_ENV, "").strip()
    if env:
        if not env.isdigit():
            raise pytest.UsageError(f"{GPU_WORKERS_ENV}={env!r}: give a number of worker processes (0: none)")
    if os.environ.get("PYTEST_XDIST_WORKER") or not config.pluginmanager.hasplugin("xdist"):
        return 0
    if config.getoption("numprocesses", None) is not None or config.getoption("collectonly"):
        return 0
    if not selects_only_gpu_tests(config.getoption("markexpr", ""), _markers(config)) or not (has_gpu or env):
        return 0
    return int(env) if env else min(MAX_GPU_WORKERS, cpu_count or 1)


# -- the whole suite in parallel -----------------------------------------------------------------
# `python -m pytest -q` with no paths (the README's command, which CI runs) runs the default test paths in
# worker processes (pytest-xdist), one per available core, at most 8: the suite is CPU-bound (kernel
# lowering, the simulator), so two cores take about half the time of one. A session given paths
# (`pytest tests/sim/test_run.py`), -n, -p no:xdist, --pdb or --collect-only runs as asked.
# TIRXPY_TEST_WORKERS=N sets the count (0: run in this process). Fuzz tallies of the workers are summed
# in the main process (FuzzTally) for the table at the end.
SUITE_WORKERS_ENV = "TIRXPY_TEST_WORKERS"
MAX_SUITE_WORKERS = 8


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return os.cpu_count() or 1


def runs_default_paths(config) -> bool:
    """Whether the session was started with no paths, so it runs the ini file's ``testpaths``."""
    source = getattr(config, "args_source", None)
    return source is not None and source.name == "TESTPATHS"


def suite_workers(config, cpu_count) -> int:
    """How many worker processes run a whole-suite session (no paths given): 0 to run it in this process
    (also where fewer than two would run)."""
    env = os.environ.get(SUITE_WORKERS_ENV, "").strip()
    if env and not env.isdigit():
        raise pytest.UsageError(f"{SUITE_WORKERS_ENV}={env!r}: give a number of worker processes (0: none)")
    if os.environ.get("PYTEST_XDIST_WORKER") or not config.pluginmanager.hasplugin("xdist"):
        return 0
    if config.getoption("numprocesses", None) is not None or config.getoption("collectonly", False) \
            or config.getoption("usepdb", False) or not runs_default_paths(config):
        return 0
    n = int(env) if env else min(MAX_SUITE_WORKERS, cpu_count or 1)
    return n if n >= 2 else 0


class FuzzTally:
    """In the main process of a session run by pytest-xdist workers: sums the fuzz harness's tallies and
    findings (tests/fuzz/harness.py) that each worker sends at its end (tests/fuzz/conftest.py) and prints
    the table, as tests/fuzz/conftest.py does when the tests run in one process."""

    def __init__(self):
        self.tally, self.findings = {}, []

    def pytest_testnodedown(self, node, error):
        out = getattr(node, "workeroutput", {}).get("tirxpy_fuzz")
        if out:
            for area, outcome, n in out["tally"]:
                self.tally[(area, outcome)] = self.tally.get((area, outcome), 0) + n
            self.findings += [tuple(f) for f in out["findings"]]

    def pytest_terminal_summary(self, terminalreporter):
        if not any(not a.startswith("_") for a, _ in self.tally):
            return
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "tirxpy_fuzz_harness_summary", os.path.join(os.path.dirname(__file__), "fuzz", "harness.py"))
        harness = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(harness)
        harness.TALLY.update(self.tally)
        harness.FINDINGS.extend(self.findings)
        harness.print_table(terminalreporter)


def pytest_configure(config):
    n = gpu_workers(config, _has_gpu(), os.cpu_count()) or suite_workers(config, _cores())
    if n:
        import xdist

        config.option.numprocesses = n
        config.option.tx = ["popen"] * n
        # worksteal (xdist >= 3.2) rebalances the long tail of slow compiles; load on older versions
        config.option.dist = "worksteal" if tuple(map(int, xdist.__version__.split(".")[:2])) >= (3, 2) else "load"
    if (n or config.getoption("numprocesses", None)) and not os.environ.get("PYTEST_XDIST_WORKER"):
        config.pluginmanager.register(FuzzTally(), "tirxpy_fuzz_tally")
    config._tirxpy_gpu_workers = n


def pytest_report_header(config):
    n = getattr(config, "_tirxpy_gpu_workers", 0)
    if n and runs_default_paths(config) and not selects_only_gpu_tests(config.getoption("markexpr", ""),
                                                                        _markers(config)):
        return f"tirxpy: the suite runs in {n} worker processes (pytest-xdist; {SUITE_WORKERS_ENV}=0 runs it here)"
    if n:
        return f"tirxpy: gpu tests run in {n} worker processes (pytest-xdist; {GPU_WORKERS_ENV}=0 runs them here)"
    if selects_only_gpu_tests(config.getoption("markexpr", ""), _markers(config)) \
            and not config.pluginmanager.hasplugin("xdist") \
            and _has_gpu():
        return "tirxpy: pytest-xdist is not installed, so gpu tests compile one at a time (pip install pytest-xdist)"
    return None


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    # with --sim, gpu tests that take the sim_mode fixture run their kernels in tirxpy.sim
    sim = config.getoption("--sim")
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (marker gpu; --sim runs those taking sim_mode)")
    for item in items:
        if "gpu" in item.keywords and not (sim and "sim_mode" in getattr(item, "fixturenames", ())):
            item.add_marker(skip)
