"""Imports go down the layers (docs/design.md section 1), read from the source of every module.

The layers, lowest first: ``tirxpy/errors.py`` (the error root), ``tirxpy/dtype_table.py`` (the scalar
types' sizes; it imports nothing), ``tirxpy/target.py`` (the compile target; it imports only the error
root), then the packages ``layout < viz < scope < ir < intrinsics
< primitives < lang < lower < sim``. A module may import its own layer and any layer below it, at
the top of the file or inside a function alike. The application layer sits above them all: the
package root ``tirxpy/__init__.py``, the other top-level modules (``__main__``, ``demo``, ``jit``,
``command_line``), the ``python -m tirxpy`` commands (any ``cli.py``) and ``tirxpy.testing``. The kernel library
(``tirxpy_kernels/``) uses the public API only: it imports no private module and no private name
(``_name``) of tirxpy.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FOUNDATION = ["errors", "dtype_table", "target"]    # top-level modules below every package, lowest first
LAYERS = ["layout", "viz", "scope", "ir", "intrinsics", "primitives", "lang", "lower", "sim"]
APP_PACKAGES = {"testing"}                  # tools for users above every layer: nothing in the core imports them
APP = len(FOUNDATION) + len(LAYERS)


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str, root: pathlib.Path = ROOT) -> bool:
    f = root.joinpath(*name.split("."))
    return f.with_suffix(".py").is_file() or (f / "__init__.py").is_file()


def imports(path: pathlib.Path, root: pathlib.Path = ROOT):
    """``(line, module, name)`` for every import in the file, top level or nested: ``module`` is the
    absolute module imported (``from pkg import sub`` imports ``pkg.sub`` when that is a module),
    ``name`` the name taken from it (None for ``import x``)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            for a in node.names:
                sub = f"{mod}.{a.name}"
                yield node.lineno, sub if _is_module(sub, root) else mod, a.name


def rank(module: str, root: pathlib.Path = ROOT) -> int | None:
    """The layer of a tirxpy module (higher imports lower); None outside tirxpy."""
    parts = module.split(".")
    if parts[0] != "tirxpy":
        return None
    if len(parts) == 1 or parts[-1] == "cli":
        return APP
    top = parts[1]
    if top in FOUNDATION:
        return FOUNDATION.index(top)
    if top in LAYERS:
        return len(FOUNDATION) + LAYERS.index(top)
    if top in APP_PACKAGES or len(parts) == 2 and _is_module(module, root) and not (root / "tirxpy" / top).is_dir():
        return APP      # a top-level module (tirxpy/demo.py, tirxpy/jit.py): the application layer
    raise AssertionError(f"package tirxpy.{top} has no layer: add it to LAYERS (or APP_PACKAGES) in "
                         f"tests/test_layering.py and to docs/design.md section 1")


def _layer_name(r: int) -> str:
    return "the application layer" if r == APP else (FOUNDATION + LAYERS)[r]


def upward_imports(root: pathlib.Path) -> list:
    out = []
    for path in sorted((root / "tirxpy").rglob("*.py")):
        me = module_name(path, root)
        mine = rank(me, root)
        for line, target, _ in imports(path, root):
            theirs = rank(target, root)
            if theirs is not None and theirs > mine:
                out.append(f"{path.relative_to(root)}:{line}: {me} ({_layer_name(mine)}) imports {target} "
                           f"({_layer_name(theirs)})")
    return out


def _private(module: str, name: str | None) -> bool:
    def priv(s):
        return s.startswith("_") and not s.startswith("__")
    return any(priv(p) for p in module.split(".")) or (name is not None and priv(name))


def private_reaches(root: pathlib.Path) -> list:
    out = []
    for path in sorted((root / "tirxpy_kernels").rglob("*.py")):
        for line, target, name in imports(path, root):
            if target.split(".")[0] == "tirxpy" and _private(target, name):
                what = target if name is None or target.endswith("." + name) else f"{name} from {target}"
                out.append(f"{path.relative_to(root)}:{line}: imports private {what}")
    return out


def test_no_import_goes_up_a_layer():
    bad = upward_imports(ROOT)
    assert not bad, "imports that go up the layers (docs/design.md section 1):\n" + "\n".join(bad)


def test_kernels_use_only_the_public_api():
    bad = private_reaches(ROOT)
    assert not bad, "tirxpy_kernels/ reaches into tirxpy's private names:\n" + "\n".join(bad)


def test_every_package_has_a_layer():
    for d in sorted((ROOT / "tirxpy").iterdir()):
        if (d / "__init__.py").is_file():
            assert rank(f"tirxpy.{d.name}") is not None


# -- the checks themselves catch what they must --------------------------------------------------
def _tree(tmp_path, files: dict) -> pathlib.Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_an_upward_import_in_a_function_is_found(tmp_path):
    root = _tree(tmp_path, {
        "tirxpy/__init__.py": "", "tirxpy/errors.py": "", "tirxpy/layout/__init__.py": "",
        "tirxpy/layout/tile.py": "def f():\n    from tirxpy.viz import pictures\n",
        "tirxpy/layout/ok.py": "from . import tile\nfrom ..errors import X\n",
        "tirxpy/layout/cli.py": "from ..viz.pictures import plot\n",
        "tirxpy/viz/__init__.py": "", "tirxpy/viz/pictures.py": "from ..layout import tile\n",
    })
    assert upward_imports(root) == [
        "tirxpy/layout/tile.py:2: tirxpy.layout.tile (layout) imports tirxpy.viz.pictures (viz)"]


def test_relative_imports_resolve_against_the_package(tmp_path):
    root = _tree(tmp_path, {
        "tirxpy/__init__.py": "", "tirxpy/errors.py": "from .sim import run\n", "tirxpy/sim/__init__.py": "",
        "tirxpy/sim/run.py": "", "tirxpy/scope/__init__.py": "from .. import sim\n",
    })
    assert upward_imports(root) == [
        "tirxpy/errors.py:1: tirxpy.errors (errors) imports tirxpy.sim.run (sim)",
        "tirxpy/scope/__init__.py:1: tirxpy.scope (scope) imports tirxpy.sim (sim)"]


def test_a_private_reach_from_kernels_is_found(tmp_path):
    root = _tree(tmp_path, {
        "tirxpy/__init__.py": "", "tirxpy/lower/__init__.py": "", "tirxpy/lower/_cache.py": "",
        "tirxpy_kernels/a.py": "from tirxpy.lower import build\nfrom tirxpy.lower._cache import X\n"
                        "def f():\n    from tirxpy.lower import _helper\n    import tirxpy.__main__\n",
    })
    assert private_reaches(root) == ["tirxpy_kernels/a.py:2: imports private X from tirxpy.lower._cache",
                                     "tirxpy_kernels/a.py:4: imports private _helper from tirxpy.lower"]


def test_a_package_without_a_layer_is_refused(tmp_path):
    _tree(tmp_path, {"tirxpy/__init__.py": "", "tirxpy/newpkg/__init__.py": ""})
    with pytest.raises(AssertionError, match="package tirxpy.newpkg has no layer: add it to LAYERS"):
        rank("tirxpy.newpkg.mod", tmp_path)
