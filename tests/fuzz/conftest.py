"""Prints the fuzz tally (tests/fuzz/harness.py) at the end of a run that ran fuzz cases; in a pytest-xdist
worker, hands the worker's tally to the main process instead (tests/conftest.py's FuzzTally sums them)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import harness  # noqa: E402


def pytest_sessionfinish(session):
    out = getattr(session.config, "workeroutput", None)     # set in pytest-xdist workers only
    if out is not None:
        out["tirxpy_fuzz"] = harness.export()


def pytest_terminal_summary(terminalreporter):
    harness.print_table(terminalreporter)
