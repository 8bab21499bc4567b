"""`python -m tirxpy`: the command dispatcher."""
import subprocess
import sys

from tirxpy.__main__ import COMMANDS, main


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage: python -m tirxpy" in capsys.readouterr().out


def test_unknown_command_names_the_choices(capsys):
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'frobnicate'" in err
    assert "demo" in err


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "tirxpy", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "commands:" in r.stdout
