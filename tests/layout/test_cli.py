"""python -m tirxpy layout: safe spec evaluation, output, exit codes."""
import subprocess
import sys

import pytest

from tirxpy.layout import R, S, TileLayout, laneid, warpid
from tirxpy.layout.atoms import wgmma_accumulator
from tirxpy.layout.cli import SpecError, main, parse_spec
from tirxpy.viz.png import decode_png

SPEC = "S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] + R[2 : 4@warpid] + 5@warpid"
DESIGN = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)


def test_parse_forms():
    assert parse_spec(SPEC).identical(DESIGN)
    assert parse_spec(f"TileLayout({SPEC})").identical(DESIGN)
    assert parse_spec("wgmma_accumulator(n=16)").identical(wgmma_accumulator(16))
    L = parse_spec('ComposeLayout(swizzle_for(128, "bf16"), TileLayout(S[(8, 64) : (64, 1)]))')
    assert L.apply(1, 0, shape=(8, 64)) == {"m": 72}
    assert parse_spec("ldmatrix_layout(4, trans=True)").size() == 256


def test_main_prints_owners_and_writes_plot(capsys, tmp_path):
    rc = main([SPEC, "--shape", "8,16", "--owners", "3,9", "--table", "--plot", str(tmp_path / "p.png")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "size:   128" in out
    assert "owners of (3, 9): {laneid: 12, warpid: 6, m: 1}, {laneid: 12, warpid: 10, m: 1}" in out
    assert "spans:  laneid=32, warpid=6, m=2" in out
    assert "L12 W6/10 r1" in out  # the table
    img = decode_png((tmp_path / "p.png").read_bytes())
    assert img.shape[2] == 3 and f"wrote {tmp_path / 'p.png'}" in out


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("__import__('os').system('true')", "__import__.*is not allowed in a layout spec"),
        ("open('x')", "calling 'open' is not allowed in a layout spec; allowed calls: ComposeLayout"),
        ("S.__class__", "Attribute is not allowed in a layout spec"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("S[8 : 1@lane]", "name 'lane' is not allowed in a layout spec; use axis names"),
        ("S[8 : 2*laneid]", "operator Mult is not allowed in a layout spec; only \\+ and @ are"),
        ("S[8 : 1.5]", "constant 1.5 is not allowed"),
        ("x[3]", "only S\\[...\\] and R\\[...\\] may be indexed"),
        ("S[8 : 1", "cannot parse the layout spec"),
        ("3", "evaluates to 3 \\(int\\), not a layout"),
        ("TileLayout", "TileLayout must be called"),
        ("wgmma_accumulator(*[16])", "\\*args are not allowed"),
        ("wgmma_accumulator(1, 2)", "bad arguments to wgmma_accumulator"),
        ("", "give a layout spec"),
        ("S[1:1]+" * 800 + "S[1:1]", "the limit is 4000"),
    ],
)
def test_refused_specs(spec, msg):
    with pytest.raises(SpecError, match=msg):
        parse_spec(spec)


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["__import__('os')"], "calling '__import__' is not allowed"),
        (["S[(8, 0) : (1, 1)]"], "iterator extent 0 is not positive"),
        (["wgmma_accumulator(12)"], "wgmma m64nNk16 has no N = 12"),
        ([SPEC, "--shape", "8,8"], "--shape 8,8 has 64 elements but the layout has 128"),
        ([SPEC, "--shape", "a,b"], "--shape must be comma-separated integers"),
        ([SPEC, "--shape", "8,16", "--owners", "8,0"], "coordinate 8 in dimension 0 is out of range"),
        ([SPEC, "--owners", "3,9"], "needs shape=..."),
        ([SPEC, "--plot", "/nonexistent-dir/x.png"], "directory '/nonexistent-dir' does not exist"),
        # an empty value is refused, not taken as the option left out (--plot '' wrote nothing and exited 0)
        ([SPEC, "--plot", ""], "plot path '' is not a usable file name"),
        ([SPEC, "--shape", ""], "--shape must be comma-separated integers"),
        ([SPEC, "--owners", ""], "--owners must be comma-separated integers"),
    ],
)
def test_errors_exit_2_with_message(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tirxpy layout: error: ") and msg in err and "Traceback" not in err


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "tirxpy", "layout", SPEC, "--shape", "8,16", "--owners", "3,9"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "{laneid: 12, warpid: 10, m: 1}" in r.stdout
    r = subprocess.run([sys.executable, "-m", "tirxpy", "layout", "exec('1')"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not allowed" in r.stderr and "Traceback" not in r.stderr


def test_size_guard_counts_replicas(capsys):
    rc = main(["S[4 : 1] + R[1099511627776 : 1]", "--owners", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "each element has 1099511627776 replicas, more than the limit" in err
    rc = main(["S[(2, 2) : (13835058055282163712, 1)]", "--owners", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "owners of 3: {m: 13835058055282163713}" in out and "spans:  m=13835058055282163714" in out
