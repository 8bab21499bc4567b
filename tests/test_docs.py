"""The README's and docs' code blocks run, and the outputs they show are what the code prints.

The convention (docs/tutorial.md's last paragraph says the same for readers):

- Every fenced block names its language (```` ```python ````, ```` ```text ````, ```` ```bash ````, ...);
  an unlabeled fence, or a bare four-space-indented code block, fails: nothing that might be Python
  escapes the runner. Fenced blocks indented inside list items count like any other.
- ```` ```python ```` blocks run top to bottom per page, in one namespace, in a temporary working
  directory. ```` ```python gpu ```` blocks need an NVIDIA GPU: they run in order where torch sees one
  and are skipped elsewhere (later blocks must not depend on them). No other tag is allowed (no
  ``no-run``): a fragment that cannot run is prose, fenced as ```` ```text ````.
- Outputs are checked three ways, each with doctest's ELLIPSIS (``...`` matches any text) and
  nothing else loosened:
  - ``expr  # -> shown``: on the last line of an expression statement, top-level or nested (in a
    loop, a branch, an ``except`` clause). ``shown`` is ``repr(expr)``, or, when the expression is
    ``None`` and printed something (``print(...)``), the printed text (one line). It is checked each
    time the statement runs, and it must run at least once.
  - A ```` ```text output ```` block right after a python block (only blank lines between): the
    whole of what that block prints.
  - A python block that starts with ``>>> `` is a doctest transcript, run in the page's namespace.
  A comment that starts like a value (``[``, ``{``, ``(``, a quote, a number, ``True`` / ``False`` /
  ``None``, a name followed by ``(`` or ``[``) after an expression statement, on its line or the next, is an unchecked output and fails:
  write it as ``# -> ...``.
"""
import ast
import contextlib
import doctest
import io
import linecache
import pathlib
import re
import textwrap
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^( *)(`{3,})(.*)$")
LIST_ITEM = re.compile(r"^ {0,3}([-*+]|\d+[.)]) ")
ARROW = "# -> "
CHECK = "__docs_check__"
VALUE_LIKE = re.compile(r"#\s*([\[{('\"]|-?\d|True\b|False\b|None\b|[A-Za-z_][\w.]*[\[(])")
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS


class DocError(AssertionError):
    """A page breaks the convention or its code disagrees with it."""


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def parse(text):
    """Fenced blocks of a markdown text as dicts (``lang``, ``tags``, ``code``, ``line``: 1-based line
    of the opening fence), in order; raises DocError on an unlabeled fence, an unclosed one or a bare
    indented code block."""
    lines = text.split("\n")
    blocks, i, in_list, prev_blank = [], 0, False, True
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            indent, ticks, info = m.group(1), m.group(2), m.group(3).strip()
            if not info:
                raise DocError(f"line {i + 1}: a fenced block without a language; write ```python, ```text, ```bash ...")
            close = re.compile(r"^ {0,%d}%s`*\s*$" % (len(indent) + 3, ticks))
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            if j == len(lines):
                raise DocError(f"line {i + 1}: the fence ``{ticks}{info}`` is never closed")
            body = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:j])
            words = info.split()
            blocks.append({"lang": words[0], "tags": words[1:], "code": body + "\n" if body else "",
                           "line": i + 1, "end": j + 1})
            i, prev_blank = j + 1, False
            continue
        blank = not line.strip()
        if not blank:
            if LIST_ITEM.match(line):
                in_list = True
            elif not line.startswith(" "):
                in_list = False
            elif line.startswith("    ") and prev_blank and not in_list:
                raise DocError(f"line {i + 1}: an indented code block; fence it with its language "
                               f"(```python or ```text)")
        prev_blank = blank
        i += 1
    return blocks


def outputs(blocks):
    """Pair each python block with the ```text output block right after it: a list of
    ``(python block, expected output or None)``; raises DocError on a misplaced output block or a
    python block with a tag other than ``gpu``."""
    pairs = []
    for n, b in enumerate(blocks):
        if b["lang"] == "text" and "output" in b["tags"]:
            prev = blocks[n - 1] if n else None
            if prev is None or prev["lang"] != "python" or (pairs and pairs[-1][1] is not None):
                raise DocError(f"line {b['line']}: a ```text output block must follow a python block directly")
            pairs[-1] = (prev, b["code"])
        elif b["lang"] in ("py", "python3", "pycon", "ipython"):
            raise DocError(f"line {b['line']}: write ```python, not ```{b['lang']}")
        elif b["lang"] == "python":
            if any(t != "gpu" for t in b["tags"]):
                raise DocError(f"line {b['line']}: python block tags {b['tags']}: only `gpu` is allowed; "
                               f"a fragment that cannot run is prose, fence it as ```text")
            pairs.append((b, None))
    return pairs


def _comments(code):
    """``{line: comment text}`` of the block's comments (1-based lines)."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _same(want, got):
    return CHECKER.check_output(want.rstrip() + "\n", got.rstrip() + "\n", FLAGS)


def _check_unchecked(tree, comments, where):
    """Value-like comments after expression statements must be ``# -> ...``."""
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Expr):
            for ln in (stmt.end_lineno, stmt.end_lineno + 1):
                c = comments.get(ln)
                if c and not c.startswith(ARROW) and VALUE_LIKE.match(c):
                    raise DocError(f"{where} line {ln}: the comment {c!r} shows an output nobody checks; "
                                   f"write it as `{ARROW}...` on the expression's line")


def run_block(code, ns, fname):
    """Run one python block in ``ns``, checking its ``# -> `` comments; return what it printed."""
    linecache.cache[fname] = (len(code), None, code.splitlines(True), fname)  # @T.prim_func reads source
    if code.lstrip().startswith(">>> "):
        test = doctest.DocTestParser().get_doctest(code, ns, fname, fname, 0)
        buf = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=FLAGS)
        runner.run(test, out=buf.write, clear_globs=False)
        if runner.failures:
            raise DocError(f"{fname}: transcript differs:\n{buf.getvalue()}")
        return ""
    tree = ast.parse(code, fname)
    comments = _comments(code)
    _check_unchecked(tree, comments, fname)
    arrows = {ln: c[len(ARROW):] for ln, c in comments.items() if c.startswith(ARROW)}
    out, seen = io.StringIO(), set()

    def check(line, thunk):     # an arrowed expression: evaluate it and compare what it shows
        start = out.tell()
        value = thunk()
        printed = out.getvalue()[start:]
        got = printed if value is None and printed else repr(value)
        if not _same(arrows[line], got):
            raise DocError(f"{fname} line {line}: shows {arrows[line]!r}, the code gives {got.rstrip()!r}")
        seen.add(line)
        return value

    class Arrowed(ast.NodeTransformer):     # `expr  # -> shown` becomes `check(line, lambda: expr)`
        def visit_Expr(self, node):
            if node.end_lineno not in arrows:
                return self.generic_visit(node)
            thunk = ast.Lambda(ast.arguments([], [], None, [], [], None, []), node.value)
            call = ast.Call(ast.Name(CHECK, ast.Load()), [ast.Constant(node.end_lineno), thunk], [])
            return ast.copy_location(ast.Expr(call), node)

    tree = ast.fix_missing_locations(Arrowed().visit(tree))
    ns[CHECK] = check
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(tree, fname, "exec"), ns)
    finally:
        del ns[CHECK]
    for line in sorted(set(arrows) - seen):
        raise DocError(f"{fname} line {line}: `{ARROW}` must end an expression statement that runs")
    return out.getvalue()


def run_page(text, name, gpu=False):
    """Run a markdown text's python blocks (``gpu`` ones too when ``gpu``) and check their outputs."""
    ns = {"__name__": "__docs__"}
    for block, want in outputs(parse(text)):
        if "gpu" in block["tags"] and not gpu:
            continue
        fname = f"<{name} line {block['line']}>"
        code = textwrap.dedent(block["code"])
        try:
            printed = run_block(code, ns, fname)
        except DocError:
            raise
        except Exception as e:  # say which block failed, with its code
            raise DocError(f"{fname} failed: {type(e).__name__}: {e}\n{code}") from e
        if want is not None and not _same(want, printed):
            raise DocError(f"{fname}: the output block shows\n{want}\nthe code prints\n{printed}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    run_page(page.read_text(), page.name, gpu=_has_gpu())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_follows_the_convention(page):
    outputs(parse(page.read_text()))


def _links(text):
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    missing = [t for t in _links(page.read_text())
               if "://" not in t and not t.startswith("mailto:") and not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_tutorial_index_links_every_chapter_and_the_design_pages():
    index = (ROOT / "docs" / "tutorial.md").read_text()
    linked = set(_links(index))
    chapters = {f"tutorial/{p.name}" for p in (ROOT / "docs" / "tutorial").glob("*.md")}
    assert chapters <= linked, f"docs/tutorial.md does not link {sorted(chapters - linked)}"
    assert {"design.md", "trust.md", "performance.md"} <= linked


def test_tutorial_pages_state_rules_not_history():
    """Tutorial pages and the README say what a thing does and why; dated history lives in
    docs/performance.md."""
    history = re.compile(r"\b(sessions?|20\d\d-[01]\d-[0-3]\d)\b", re.I)
    for page in [ROOT / "README.md", ROOT / "docs" / "tutorial.md", *(ROOT / "docs" / "tutorial").glob("*.md")]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            assert not history.search(line), f"{page.relative_to(ROOT)}:{n}: history belongs in docs/performance.md: {line}"


def test_the_simulator_chapter_lists_every_problem_kind():
    """Chapter 6's table of problem kinds is the list a reader checks a SimReportError against: every kind the
    simulator reports (a literal ``report("kind", ...)`` in tirxpy/sim, ``oob_<storage>`` too) is in it."""
    kinds = set()
    for src in (ROOT / "tirxpy" / "sim").glob("*.py"):
        kinds |= set(re.findall(r"report\(\s*\"([a-z_0-9]+)\"", src.read_text()))
    assert {"race", "deadlock", "uninitialized_read"} <= kinds
    table = (ROOT / "docs" / "tutorial" / "06-simulator.md").read_text()
    missing = sorted(k for k in kinds if f"`{k}`" not in table)
    assert not missing, f"docs/tutorial/06-simulator.md's table of problem kinds lacks {missing}"


# The runner itself: each rule above fails where it should.

def _fails(text, match):
    with pytest.raises(DocError, match=match):
        run_page(textwrap.dedent(text), "t.md")


def test_arrow_comments_are_checked():
    run_page("```python\nx = [1, 2]\nx  # -> [1, 2]\nprint('a b')  # -> a b\nlen(x) + 40  # -> 42\n```\n", "t.md")
    run_page("```python\nprint(list(range(30)))  # -> [0, 1, ...29]\n```\n", "t.md")
    _fails("```python\nx = 3\nx  # -> 4\n```\n", "shows '4', the code gives '3'")
    _fails("```python\nprint('a')  # -> b\n```\n", "shows 'b'")
    _fails("```python\nfor i in range(2):\n    i  # -> 0\n```\n", "shows '0', the code gives '1'")
    run_page("```python\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n    print(e)  # -> division by zero\n```\n", "t.md")
    _fails("```python\nif False:\n    print(1)  # -> 1\n```\n", "must end an expression statement that runs")
    _fails("```python\nx = 1  # -> 1\n```\n", "must end an expression statement that runs")


def test_output_blocks_are_checked():
    page = "```python\nprint('one')\nprint('two')\n```\n\n```text output\none\n{}\n```\n"
    run_page(page.format("two"), "t.md")
    _fails(page.format("three"), "the code prints")
    _fails("Text.\n\n```text output\nx\n```\n", "must follow a python block")


def test_transcripts_run_as_doctests():
    run_page("```python\n>>> 1 + 1\n2\n```\n", "t.md")
    _fails("```python\n>>> 1 + 1\n3\n```\n", "transcript differs")


def test_unchecked_outputs_untagged_fences_and_no_run_are_refused():
    _fails("```python\nx = 1\nprint(x)   # 1\n```\n", "shows an output nobody checks")
    _fails("```python\nx = 1\nprint([x])\n# [1]\n```\n", "shows an output nobody checks")
    _fails("```python\nx = 1\nprint(x)   # Point(x=1)\n```\n", "shows an output nobody checks")
    _fails("```python no-run\nx = 1\n```\n", "only `gpu` is allowed")
    _fails("```\nx = 1\n```\n", "without a language")
    _fails("```py\nx = 1\n```\n", "write ```python")
    _fails("Text.\n\n    x = 1\n", "indented code block")
    run_page("- item\n\n    continued item text\n", "t.md")       # a list item's paragraph, not code
    run_page("1. step\n\n   ```python\n   x = 1\n   x  # -> 1\n   ```\n", "t.md")   # fenced in a list: runs
    _fails("1. step\n\n   ```python\n   x = 1\n   x  # -> 2\n   ```\n", "shows '2'")


def test_gpu_blocks_run_only_with_a_gpu():
    page = "```python gpu\nraise RuntimeError('needs a GPU')\n```\n"
    run_page(page, "t.md", gpu=False)
    with pytest.raises(DocError, match="needs a GPU"):
        run_page(page, "t.md", gpu=True)
