"""Run every python block of docs/tutorial/02-kernels.md in order, each from a real source file
(``@T.prim_func`` reads kernel source), and check the outputs that the text promises."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial" / "02-kernels.md"
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def test_tutorial_blocks_run(tmp_path, capsys):
    blocks = [m.group(2) for m in BLOCK.finditer(PAGE.read_text())]
    assert len(blocks) >= 8
    ns = {"__name__": "__tutorial__"}
    for n, code in enumerate(blocks):
        f = tmp_path / f"block{n}.py"
        f.write_text(code)
        exec(compile(code, str(f), "exec"), ns)
    out = capsys.readouterr().out
    assert "def add_one(A: T.Tensor((1024,), \"float32\"), B: T.Tensor((1024,), \"float32\")):" in out
    assert "A[base + 3] = A[base + 3] * T.float32(2.0)" in out
    assert "{'m': m0 * 128}" in out
    assert "TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 4@warpid) warpgroup" in out
    assert "1 thread (warp 4, lane 0)" in out
    assert "Tx.wg.fill runs at warpgroup scope and needs whole warpgroups, but only 1 thread" in out
    assert "def gemm(" in out
