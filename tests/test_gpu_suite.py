"""`pytest -m gpu` on a GPU machine, and the whole suite (`python -m pytest -q`, no paths) anywhere, run in
pytest-xdist workers (tests/conftest.py); the workers' fuzz tallies are summed in the main process."""
import importlib.util
import pathlib

import pytest

_spec = importlib.util.spec_from_file_location("tirxpy_tests_conftest", pathlib.Path(__file__).with_name("conftest.py"))
conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conftest)


class _Plugins:
    def __init__(self, xdist):
        self.xdist = xdist

    def hasplugin(self, name):
        return name == "xdist" and self.xdist


class _Source:
    def __init__(self, name):
        self.name = name


class FakeConfig:
    def __init__(self, markexpr="gpu", xdist=True, numprocesses=None, collectonly=False, usepdb=False,
                 source="TESTPATHS"):
        self.pluginmanager = _Plugins(xdist)
        self._opts = {"markexpr": markexpr, "numprocesses": numprocesses, "collectonly": collectonly,
                      "usepdb": usepdb}
        self.args_source = _Source(source)

    def getoption(self, name, default=None):
        return self._opts.get(name, default)

    def getini(self, name):
        assert name == "markers"
        return ["gpu: needs an NVIDIA GPU", "slow: slower CPU test"]


@pytest.mark.parametrize("expr, only_gpu", [
    ("gpu", True), ("gpu and not slow", True), ("(gpu)", True), ("", False), ("not gpu", False), ("slow", False),
    ("gpu or slow", False), ("gpu or not slow", False), ("gpu and", False),
])
def test_a_session_runs_only_gpu_tests_when_the_mark_expression_drops_the_rest(expr, only_gpu):
    assert conftest.selects_only_gpu_tests(expr, ["gpu", "slow"]) is only_gpu


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv(conftest.GPU_WORKERS_ENV, raising=False)
    monkeypatch.delenv(conftest.SUITE_WORKERS_ENV, raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return monkeypatch


def test_gpu_sessions_on_a_gpu_machine_use_one_worker_per_core_up_to_16(env):
    assert conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=16) == 16
    assert conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=64) == 16
    assert conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=4) == 4


@pytest.mark.parametrize("kw, has_gpu", [
    (dict(), False),                                    # no GPU: the gpu tests skip
    (dict(markexpr=""), True),                          # the whole suite
    (dict(markexpr="not gpu"), True),
    (dict(xdist=False), True),                          # pytest-xdist missing or -p no:xdist
    (dict(numprocesses=4), True),                       # -n given: pytest-xdist as asked
    (dict(numprocesses=0), True),
    (dict(collectonly=True), True),
])
def test_other_sessions_run_in_this_process(env, kw, has_gpu):
    assert conftest.gpu_workers(FakeConfig(**kw), has_gpu=has_gpu, cpu_count=16) == 0


def test_the_environment_sets_the_worker_count(env):
    env.setenv(conftest.GPU_WORKERS_ENV, "0")
    assert conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=16) == 0
    env.setenv(conftest.GPU_WORKERS_ENV, "3")
    assert conftest.gpu_workers(FakeConfig(), has_gpu=False, cpu_count=16) == 3     # a --sim dry run
    env.setenv("PYTEST_XDIST_WORKER", "gw0")                                         # inside a worker: none
    assert conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=16) == 0
    env.setenv(conftest.GPU_WORKERS_ENV, "many")
    with pytest.raises(pytest.UsageError, match="TIRXPY_GPU_WORKERS='many': give a number of worker processes"):
        conftest.gpu_workers(FakeConfig(), has_gpu=True, cpu_count=16)


def test_the_whole_suite_uses_one_worker_per_core_up_to_8(env):
    cfg = FakeConfig(markexpr="")
    assert [conftest.suite_workers(cfg, cpu_count=n) for n in (2, 4, 64)] == [2, 4, 8]
    assert conftest.suite_workers(cfg, cpu_count=1) == 0            # one core: no workers


@pytest.mark.parametrize("kw", [
    dict(source="ARGS"),                 # paths given: `pytest tests/sim/test_run.py` runs here
    dict(xdist=False),                   # pytest-xdist missing or -p no:xdist
    dict(numprocesses=0), dict(numprocesses=3),     # -n given: as asked
    dict(collectonly=True), dict(usepdb=True),
])
def test_other_whole_suite_sessions_run_in_this_process(env, kw):
    assert conftest.suite_workers(FakeConfig(markexpr="", **kw), cpu_count=16) == 0


def test_the_environment_sets_the_suite_worker_count(env):
    env.setenv(conftest.SUITE_WORKERS_ENV, "0")
    assert conftest.suite_workers(FakeConfig(markexpr=""), cpu_count=16) == 0
    env.setenv(conftest.SUITE_WORKERS_ENV, "3")
    assert conftest.suite_workers(FakeConfig(markexpr=""), cpu_count=2) == 3
    env.setenv("PYTEST_XDIST_WORKER", "gw1")                                          # inside a worker: none
    assert conftest.suite_workers(FakeConfig(markexpr=""), cpu_count=16) == 0
    env.setenv(conftest.SUITE_WORKERS_ENV, "two")
    with pytest.raises(pytest.UsageError, match="TIRXPY_TEST_WORKERS='two': give a number of worker processes"):
        conftest.suite_workers(FakeConfig(markexpr=""), cpu_count=16)


class _Node:
    def __init__(self, out):
        self.workeroutput = out


class _Reporter:
    def __init__(self):
        self.lines = []

    def write_sep(self, sep, title):
        self.lines.append(title)

    def write_line(self, line):
        self.lines.append(line)


def test_the_workers_fuzz_tallies_are_summed_into_one_table():
    t = conftest.FuzzTally()
    t.pytest_testnodedown(_Node({"tirxpy_fuzz": {"tally": [("layouts", "refused", 3), ("_self", "crash", 1)],
                                                 "findings": [["_self", "crash", "KeyError"]]}}), None)
    t.pytest_testnodedown(_Node({"tirxpy_fuzz": {"tally": [("layouts", "refused", 2), ("layouts", "hang", 1)],
                                                 "findings": [["layouts", "hang", "5.0 s"]]}}), None)
    t.pytest_testnodedown(_Node({}), None)             # a worker that ran no fuzz test (or crashed)
    r = _Reporter()
    t.pytest_terminal_summary(r)
    assert r.lines[0] == "fuzz outcomes per area (tests/fuzz/harness.py)"
    assert "| layouts | 6 | 5 | 0 | 0 | 1 | 0 | 0 | 0 |" in r.lines[1]
    assert "_self" not in r.lines[1]
    assert r.lines[2:] == ["  layouts: hang: 5.0 s"]


def test_no_fuzz_cases_print_no_table():
    r = _Reporter()
    conftest.FuzzTally().pytest_terminal_summary(r)
    assert r.lines == []
