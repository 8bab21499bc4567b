"""Tests mirror the source (docs/design.md section 1): tirxpy/<path>/<mod>.py is tested by
tests/<path>/test_<mod>.py.

A module of a sub-package may also be tested by the flattened name in its package's folder
(tirxpy/layout/atoms/wgmma.py by tests/layout/test_atoms_wgmma.py). ``__init__.py`` and
``__main__.py`` are not mirrored: their doctests run, and ``python -m tirxpy`` is
tests/test_main.py. A module tested elsewhere is listed in :data:`ELSEWHERE` with the test files
and the reason; a module that still lacks its own tests is listed in :data:`GAPS`, which only
shrinks: a new module comes with its test file.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]

_ERRORS = "error classes only: the tests of each raise site check the type and the message"
_FAMILY = ("a family file of the instruction table: test_families.py checks its entries and "
           "test_table_compile.py compiles every entry it adds")
ELSEWHERE = {
    # module: (test files, relative to tests/; why the module has no test file of its own)
    "tirxpy/errors.py": (["fuzz/test_harness.py"], "the root error and its built-in bases are the harness's "
                                                   "classification; test_harness checks them"),
    "tirxpy/intrinsics/errors.py": (["intrinsics/test_entry.py", "intrinsics/test_register.py"], _ERRORS),
    "tirxpy/ir/errors.py": (["ir/test_parser.py"], _ERRORS),
    "tirxpy/lang/errors.py": (["lang/test_roles.py", "lang/test_pipeline.py"], _ERRORS),
    "tirxpy/layout/errors.py": (["layout/test_tile.py"], _ERRORS),
    "tirxpy/lower/errors.py": (["lower/test_build.py", "lower/test_nvrtc.py"], _ERRORS),
    "tirxpy/lower/codegen/errors.py": (["lower/test_codegen_kernels.py"], _ERRORS),
    "tirxpy/scope/errors.py": (["scope/test_scopes.py"], _ERRORS),
    "tirxpy/sim/errors.py": (["sim/test_args.py"], _ERRORS),
    "tirxpy/intrinsics/barrier.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/cluster.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/cp_async.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/fence.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/ldst_matrix.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/mbarrier.py": (["intrinsics/test_mbarrier_remote.py", "intrinsics/test_table_compile.py"],
                                      _FAMILY),
    "tirxpy/intrinsics/misc.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/mma_sync.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/tcgen05.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/tma.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/wgmma.py": (["intrinsics/test_families.py", "intrinsics/test_table_compile.py"], _FAMILY),
    "tirxpy/intrinsics/defs.py": (["intrinsics/test_families.py"], "the row constructors of the family files: "
                                                                   "every entry they build is checked there"),
    "tirxpy/intrinsics/exercise.py": (["intrinsics/test_table_compile.py"], "the exercising kernel is the tool of "
                                                                            "test_table_compile"),
    "tirxpy/ir/jit_hooks.py": (["test_jit.py", "ir/test_parser.py"], "the T entry points that parse: tested "
                                                                     "through T.prim_func / T.macro / T.parse_script"),
}

GAPS = [
    # modules with no test file of their own yet: write tests/<path>/test_<mod>.py (a new module comes with one)
]


def modules(root: pathlib.Path = ROOT) -> list:
    return sorted(p.relative_to(root).as_posix() for p in (root / "tirxpy").rglob("*.py")
                  if p.name not in ("__init__.py", "__main__.py"))


def mirrors(module: str) -> list:
    """The test files that mirror ``module`` (a path under tirxpy/), most specific first."""
    parts = pathlib.PurePosixPath(module).with_suffix("").parts[1:]
    out = ["tests/" + "/".join(parts[:-1] + (f"test_{parts[-1]}.py",))]
    if len(parts) > 2:
        out.append(f"tests/{parts[0]}/test_{'_'.join(parts[1:])}.py")
    return out


def unmirrored(root: pathlib.Path = ROOT) -> list:
    return [m for m in modules(root) if not any((root / t).is_file() for t in mirrors(m))]


def test_every_module_has_a_mirrored_test_file():
    missing = [m for m in unmirrored() if m not in ELSEWHERE and m not in GAPS]
    assert not missing, "modules without a mirrored test file (write it, or list it in ELSEWHERE in " \
                        "tests/test_mirror.py with the reason):\n" + \
                        "\n".join(f"{m} -> {mirrors(m)[0]}" for m in missing)


def test_the_gap_list_only_shrinks():
    closed = [m for m in GAPS if m not in unmirrored()]
    assert not closed, "these modules have a test file now (or are gone): remove them from GAPS in " \
                       "tests/test_mirror.py:\n" + "\n".join(closed)


def _public_names(module: str) -> set:
    tree = ast.parse((ROOT / module).read_text())
    names = {pathlib.PurePosixPath(module).stem}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")} or names


def test_modules_tested_elsewhere_name_tests_that_use_them():
    for module, (tests, why) in ELSEWHERE.items():
        assert (ROOT / module).is_file(), f"ELSEWHERE lists {module}, which does not exist"
        assert why and tests, module
        for t in tests:
            assert (ROOT / "tests" / t).is_file(), f"ELSEWHERE names tests/{t} for {module}: no such file"
        if why is _FAMILY:      # test_table_compile compiles every table entry, whichever family file adds it
            assert "I.entries()" in (ROOT / "tests/intrinsics/test_table_compile.py").read_text()
            continue
        names = _public_names(module)
        assert any(n in (ROOT / "tests" / t).read_text() for t in tests for n in names), \
            f"{tests} name nothing of {module} ({sorted(names)[:5]} ...)"


def test_mirrors_of_a_module_and_of_a_sub_package_module():
    assert mirrors("tirxpy/lower/launcher.py") == ["tests/lower/test_launcher.py"]
    assert mirrors("tirxpy/errors.py") == ["tests/test_errors.py"]
    assert mirrors("tirxpy/layout/atoms/wgmma.py") == ["tests/layout/atoms/test_wgmma.py",
                                                       "tests/layout/test_atoms_wgmma.py"]


def test_a_module_without_a_test_is_found(tmp_path):
    for rel in ("tirxpy/__init__.py", "tirxpy/a/__init__.py", "tirxpy/a/b.py", "tirxpy/a/c.py",
                "tirxpy/a/sub/d.py", "tirxpy/a/sub/e.py", "tests/a/test_b.py", "tests/a/test_sub_d.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert unmirrored(tmp_path) == ["tirxpy/a/c.py", "tirxpy/a/sub/e.py"]
