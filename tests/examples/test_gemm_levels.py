"""The GEMM ladder (examples/gemm/level_N.py): every level's simulator form computes A @ B^T within the
stated tolerance of float64 and says its seed; a result past the tolerance fails the run; levels 1-3
build for sm_90a (their GPU form); the command line refuses bad shapes and a timing run without a GPU."""
import importlib
import pathlib
import subprocess
import sys
import types

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEVELS = ROOT / "examples" / "gemm"


@pytest.fixture(scope="module")
def levels():
    sys.path.insert(0, str(LEVELS))
    try:
        yield {n: importlib.import_module(f"level_{n}") for n in (1, 2, 3, 4)}, importlib.import_module("ladder")
    finally:
        sys.path.remove(str(LEVELS))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_each_level_matches_float64_under_the_simulator(levels, n, capsys):
    mods, ladder = levels
    assert ladder.main(mods[n], ["--sim", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "in tirxpy.sim" in out and "seed 3" in out and "tolerance 1e-05" in out


def test_a_ragged_shape_under_the_simulator(levels, capsys):
    mods, ladder = levels
    assert ladder.main(mods[2], ["--sim", "--seed", "5", "--shape", "72x136x128"]) == 0
    assert "72x136x128" in capsys.readouterr().out


def test_a_result_past_the_tolerance_fails_and_names_the_seed(levels, capsys):
    _, ladder = levels

    def sim_run(a, w, c, seed):
        c.copy_((a.float() @ w.float().t()) * (1 + 1e-3))       # 1e-3 off: past 1e-5

    bad = types.SimpleNamespace(__file__="level_bad.py", NAME="bad level", GPU_SHAPE=(64, 64, 64),
                                SIM_SHAPE=(64, 64, 64), SHAPE_RULE="any", check_shape=lambda M, N, K: None,
                                sim_run=sim_run)
    assert ladder.main(bad, ["--sim", "--seed", "11"]) == 1
    err = capsys.readouterr().err
    assert "FAILED: relative error 1.0e-03 is past the tolerance 1e-05 (seed 11)" in err


@pytest.mark.parametrize("n,argv,msg", [
    (1, ["--sim", "--shape", "64x64x100"], "K = 100 is not a multiple of 64"),
    (1, ["--sim", "--shape", "64x64x1024"], "K = 1024 needs 393216 bytes of shared memory"),
    (2, ["--sim", "--shape", "64x64"], "'64x64' is not MxNxK"),
    (3, ["--sim", "--shape", "64x64x0"], "'64x64x0' is not MxNxK"),
    (4, ["--sim", "--shape", "64x136x104"], "gemm_sm90"),
])
def test_bad_shapes_exit_2_with_the_rule(levels, n, argv, msg, capsys):
    mods, ladder = levels
    assert ladder.main(mods[n], argv) == 2
    assert msg in capsys.readouterr().err


def test_a_gpu_run_without_a_gpu_says_so(levels, capsys, monkeypatch):
    mods, ladder = levels
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ladder.main(mods[3], []) == 2
    assert "no CUDA GPU here" in capsys.readouterr().err


@pytest.mark.parametrize("n", [1, 2, 3])
def test_levels_build_for_hopper(levels, n):
    import tirxpy

    mods, _ = levels
    ck = tirxpy.compile(mods[n].build(*mods[n].GPU_SHAPE), arch="sm_90a")
    assert "wgmma" in ck.cuda_source


def test_a_level_runs_as_a_script():
    r = subprocess.run([sys.executable, str(LEVELS / "level_1.py"), "--sim", "--seed", "4"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "seed 4" in r.stdout and "relerr vs float64" in r.stdout
