"""The tutorial's and README's code blocks run, top to bottom per page."""
import linecache
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def blocks(page):
    return [(m.group(1).strip(), m.group(2)) for m in BLOCK.finditer(page.read_text())]


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    ns = {"__name__": "__docs__"}
    for n, (tag, code) in enumerate(blocks(page)):
        if "gpu" in tag.split() or "no-run" in tag.split():
            continue
        fname = f"<{page.name} block {n}>"
        # @T.prim_func reads its function's source: make the block's text findable.
        linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)
        try:
            exec(compile(code, fname, "exec"), ns)
        except Exception as e:  # show which block failed
            raise AssertionError(f"{page.name} block {n} failed: {type(e).__name__}: {e}\n{code}") from e
