"""Fuzz: the command lines (python -m tirxpy, its compile command, python -m tirxpy_kernels / tirxpy_kernels.bench) on random argv.

Each case runs the CLI's ``main(argv)`` in process and must return an exit status (0, or 2 for a user error with
a message on stderr) without a traceback and without raising (SystemExit included). The layout command belongs to
tirxpy.layout's own fuzz; the demo and the simulator runs are kept out of the random draws (they are long runs,
not argument checks): the simulator entry points are stubbed."""
import contextlib
import io
import os

import pytest
from harness import EXAMPLES, Hostile, classify
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tirxpy_kernels.bench as bench
import tirxpy_kernels.bench_attention as bench_attention
from tirxpy.__main__ import main as tirxpy_main
from tirxpy.lower.cli import main as compile_main

AREA = "CLIs"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


def _run(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:         # a CLI's main returns its status; it never exits the process itself
            rc = ("SystemExit", e.code)
    return rc, out.getvalue(), err.getvalue()


def _handled(r):
    rc, out, err = r
    return rc in (0, 2) and "Traceback" not in out + err and (rc == 0 or bool(err.strip()))


def cli_case(main, argv):
    """One argv through ``main``: a clean exit (0, or 2 with a message), or a finding."""
    out = classify(AREA, lambda: _run(main, argv), allow=_handled, seconds=20)
    assert out == "accepted", f"{argv!r}: {out}"


@pytest.fixture(autouse=True)
def _no_simulator_runs(monkeypatch):
    monkeypatch.setattr(bench, "sim_gemm", lambda args: 0)
    monkeypatch.setattr(bench_attention, "sim_attention", lambda args: 0)


TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
NUM = st.integers(-2, 10 ** 7).map(str)
SHAPE = st.lists(st.one_of(NUM, TEXT), min_size=1, max_size=4).map("x".join)
SHAPES = st.lists(SHAPE, min_size=1, max_size=3).map(",".join)
ITEM = st.one_of(st.tuples(st.sampled_from(["BN", "STAGES", "NC", "CM", "PINGPONG", "SPLIT", "OSTAGE", "sms", "BM"])
                           | TEXT, st.one_of(NUM, TEXT, st.just("none"), st.just("16/1/240"))).map("=".join), TEXT)
TUNE = st.lists(st.lists(ITEM, max_size=3).map(",".join), min_size=1, max_size=3).map(";".join)
BENCH_TOKEN = st.one_of(st.sampled_from(["--sim", "-h", "--help", "--shapes", "--tune", "--reps", "--jobs"]), TEXT,
                        NUM, SHAPES, TUNE)


@SETTINGS
@given(st.sampled_from(["gemm", "attention", "conv", ""]) | TEXT,
       st.lists(st.one_of(st.tuples(st.just("--shapes"), SHAPES), st.tuples(st.just("--tune"), TUNE),
                          st.tuples(st.sampled_from(["--reps", "--jobs"]), st.one_of(NUM, TEXT)),
                          st.tuples(st.just("--sim")), st.tuples(BENCH_TOKEN)), max_size=4))
def test_bench_argv(name, parts):
    argv = [name] + [t for p in parts for t in p]
    cli_case(bench.main, argv)


@SETTINGS
@given(st.lists(BENCH_TOKEN, max_size=6))
def test_bench_random_tokens(argv):
    cli_case(bench.main, argv)


def _target(tmp_dir, kind, text):
    if kind == "missing":
        return os.path.join(tmp_dir, "zz_fuzz_missing.py")
    if kind == "module":
        return "zz_fuzz_" + text.replace(".", "_")
    if kind == "file":
        p = os.path.join(tmp_dir, "zz_fuzz_file.py")
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        return p
    return text


BODIES = st.one_of(TEXT, st.sampled_from([
    "import tirxpy\n@tirxpy.jit\ndef k():\n    raise RuntimeError('factory failed')\n",
    "import tirxpy\n@tirxpy.jit\ndef k():\n    return 42\n",
    "import tirxpy\n@tirxpy.jit\ndef k(n):\n    return n\n",
    "from . import nothing\n", "raise KeyError('x')\n", "import sys\nsys.exit('bye')\n", "def f(:\n",
    "x = 1\n"]))


@SETTINGS
@given(st.sampled_from(["missing", "module", "file", "raw"]), BODIES,
       st.lists(st.one_of(st.sampled_from(["--arch", "--emit", "-h", "sm_90a", "sm_100a", "sm_80", "cuda", "ptx",
                                            "sass"]), TEXT), max_size=4))
def test_compile_argv(tmp_path_factory, kind, body, rest):
    tmp = str(tmp_path_factory.mktemp("cli"))
    target = _target(tmp, kind, body)
    if kind == "raw" and (os.path.exists(target) or not target.startswith(("-", "zz")) and "." not in target):
        target = "zz_fuzz_" + target        # never an existing path or an importable top-level module
    cli_case(compile_main, [target] + rest)
    cli_case(tirxpy_main, ["compile", target] + rest)


@SETTINGS
@given(st.one_of(st.sampled_from(["demo", "compile", "", "-x", "help"]), TEXT),
       st.lists(st.one_of(st.sampled_from(["--out", "--nope", "-h"]), TEXT), max_size=3))
def test_dispatcher_argv(cmd, rest):
    if cmd == "layout":
        return              # tirxpy.layout's CLI: its own fuzz
    if cmd == "demo" and not any(t.startswith("--") and t not in ("--out", "--help") for t in rest) \
            and (not rest or any(os.path.isdir(t) for t in rest) or rest == ["--out"]):
        rest = ["--nope"] + rest        # never a whole demo run: an unknown flag in front
    if cmd == "compile":
        rest = ["zz_fuzz_" + "".join(rest)]
    cli_case(tirxpy_main, [cmd] + rest)


@pytest.mark.parametrize("argv", [
    ["gemm", "--tune", "BN"], ["gemm", "--tune", "BN=abc"], ["gemm", "--tune", "=1"], ["gemm", "--tune", ";;,,"],
    ["gemm", "--tune", "SPLIT=1/2"], ["gemm", "--tune", "PINGPONG=yes"], ["attention", "--tune", "OSTAGE=4"],
    ["gemm", "--shapes", "99999999999x99999999999x99999999999"], ["attention", "--shapes", "99999999x64"],
    ["gemm", "--shapes", "1x1x1"], ["attention", "--shapes", "1x64"], ["gemm", "--sim", "--shapes", "1x1x1"],
    ["gemm", "--sim", "--shapes", "128x256x64"], ["attention", "--sim", "--shapes", "64x64"],
    ["gemm", "--reps", "-1"], ["gemm", "--jobs", "x"], ["gemm", "--sim", "--jobs", "4"], ["gemm", "--shapes"],
    ["--sim"], ["-h"], ["gemm", "--shapes", "１２８x256x64"],
])
def test_known_bench_cases(argv):
    cli_case(bench.main, argv)


@pytest.mark.parametrize("main", [bench.main, compile_main, tirxpy_main], ids=["bench", "compile", "tirxpy"])
@pytest.mark.parametrize("argv", [[Hostile()], ["gemm", Hostile()], ["compile", Hostile()], [None], [b"gemm"],
                                  ["gemm", "--shapes", 3]], ids=lambda v: type(v).__name__)
def test_argv_that_is_no_list_of_str_is_refused(main, argv):
    """``main(argv)`` called from Python with a token that is no str: exit status 2 and a message naming argv."""
    cli_case(main, argv)


@pytest.mark.parametrize("argv", [
    [], ["-h"], ["--help"], ["nope"], ["compile"], ["compile", "-h"], ["compile", "zz_fuzz_missing"],
    ["compile", "zz_fuzz.py"], ["compile", "tirxpy_kernels/errors.py"], ["compile", "tirxpy_kernels/__main__.py"],
    ["compile", "tirxpy_kernels.errors", "--arch", "sm_1"], ["compile", "..."], ["compile", ".rel"], ["demo", "--out"],
    ["demo", "--out", "/zz_fuzz_no_such_dir"], ["demo", "extra"],
])
def test_known_dispatcher_cases(argv):
    cli_case(tirxpy_main, argv)
