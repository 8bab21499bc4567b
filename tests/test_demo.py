"""python -m tirxpy demo."""
import os
import subprocess
import sys

import pytest

from tirxpy import demo
from tirxpy.viz.png import decode_png


def test_demo_sections_and_files(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if line.startswith("== ")]
    assert titles == [f"== {k}. {t}" for k, (t, _) in enumerate(demo.SECTIONS, 1)]
    assert "owners of (3, 9) in the (8, 16) tile: {laneid: 12, warpid: 6, m: 1}, {laneid: 12, warpid: 10, m: 1}" in out
    # WGMMA accumulator (37, 13): warp 2, rows 8*0 + lane/4 = 5, col 8 + 2*2 + 1 -> lane 22, reg 4 + 0 + 1.
    assert "owners of (37, 13) in the (64, 16) tile: {wid_in_wg: 2, m: 5, laneid: 22}" in out
    assert "L12 W6/10 r1" in out
    png = tmp_path / "tirxpy_demo_layout.png"
    assert decode_png(png.read_bytes()).shape[2] == 3
    assert (tmp_path / "tirxpy_demo_layout.svg").read_text().startswith("<svg")
    assert "sm_90a: " in out and "sm_100a: " in out and "0 B spilled" in out
    assert '| extern "C" __global__ void __launch_bounds__(128) axpb(' in out and "|   Y[i] = a * X[i] + 1.0f;" in out
    # tile primitives: the warp's 16-byte-per-lane row tile loads with one vector load per lane
    assert "-> copy/reg_mem_vec" in out and "emits: vld_global_v4_b32 x1" in out
    assert "tirxpy.sim.run: 64 CTAs x 1 warp, no problems reported" in out and "(ok: bf16 output)" in out
    assert "== 8. On the GPU" in out
    assert len(out.splitlines()) < 50


def test_demo_bad_out(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path / "missing")]) == 2
    assert "is not a directory; create it first" in capsys.readouterr().err


@pytest.mark.parametrize("out", [""])
def test_demo_empty_out_is_a_usage_error(out, capsys):
    """An empty ``--out`` names no directory (it is not the current one, nor a file): exit 2 saying so."""
    assert demo.main(["--out", out]) == 2
    assert f"--out {out!r} names no directory" in capsys.readouterr().err


def test_demo_out_under_a_file_is_a_usage_error(tmp_path, capsys):
    """A path that cannot be a directory (a regular file on the way) exits 2 with one line naming both paths."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "sub"
    assert demo.main(["--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--out {str(out)!r} is not a directory: {str(tmp_path / 'file')!r} is a file" in err
    assert demo.main(["--out", str(tmp_path / "file")]) == 2
    assert "is a file, not a directory; pass a directory" in capsys.readouterr().err


def test_demo_unwritable_out_is_a_usage_error(capsys):
    """A directory no file can be created in (/proc refuses even root) exits 2 before any section runs."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs procfs")
    assert demo.main(["--out", "/proc"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1
    assert cap.err.startswith("tirxpy demo: error: --out '/proc' is not writable (")


def test_demo_via_module(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tirxpy", "demo", "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "tirxpy_demo_layout.png").exists()
