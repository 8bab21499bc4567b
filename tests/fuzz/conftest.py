"""Prints the fuzz tally (tests/fuzz/harness.py) at the end of a run that ran fuzz cases."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import harness  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if not any(not a.startswith("_") for a, _ in harness.TALLY):
        return
    terminalreporter.write_sep("-", "fuzz outcomes per area (tests/fuzz/harness.py)")
    terminalreporter.write_line(harness.summary())
    for area, outcome, detail in [f for f in harness.FINDINGS if not f[0].startswith("_")][:40]:
        terminalreporter.write_line(f"  {area}: {outcome}: {detail}")
