"""`python -m tirxpy`: the command dispatcher."""
import os
import subprocess
import sys

import pytest

from tirxpy.__main__ import COMMANDS, main


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "usage: python -m tirxpy" in capsys.readouterr().err


def test_unknown_command_names_the_choices(capsys):
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'frobnicate'" in err
    assert "demo" in err


def test_module_entry_point_runs():
    r = subprocess.run([sys.executable, "-m", "tirxpy", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "commands:" in r.stdout


def _no_traceback(capsys):
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err + cap.out
    return cap


def test_compile_a_file_inside_a_package_imports_it_as_the_package_module(capsys):
    """tirxpy_kernels/gemm_sm90.py has relative imports: it is imported as tirxpy_kernels.gemm_sm90 (its `example` kernel)."""
    assert main(["compile", "tirxpy_kernels/gemm_sm90.py", "--arch", "sm_90a"]) == 0
    out = _no_traceback(capsys).out
    assert "gemm_sm90_kernel" in out and "sm_90a" in out


def test_compile_package_module_with_relative_imports(tmp_path, capsys):
    pkg = tmp_path / "mypkg" / "sub"
    pkg.mkdir(parents=True)
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "consts.py").write_text("N = 128\n")
    (pkg / "k.py").write_text(
        "from tirxpy import T\nfrom .consts import N\n\n"
        "@T.prim_func\ndef double(A: T.Tensor((N,), 'float32')):\n"
        "    T.launch(grid=(1,), threads=N)\n    A[T.thread_id()] = A[T.thread_id()] * T.cast(2, 'float32')\n")
    assert main(["compile", str(pkg / "k.py")]) == 0
    assert "double" in _no_traceback(capsys).out
    bad = tmp_path / "my-pkg"
    bad.mkdir()
    (bad / "__init__.py").write_text("")
    (bad / "k.py").write_text("")
    assert main(["compile", str(bad / "k.py")]) == 2
    assert "is not a dotted module name" in _no_traceback(capsys).err


def test_compile_reports_a_raising_factory_and_a_module_that_exits(tmp_path, capsys):
    p = tmp_path / "raising.py"
    p.write_text("import tirxpy\n\n@tirxpy.jit\ndef broken():\n    raise ValueError('no such tile')\n")
    assert main(["compile", str(p)]) == 2
    err = _no_traceback(capsys).err
    assert "the @tirxpy.jit factory 'broken' raised ValueError: no such tile" in err
    p = tmp_path / "script.py"
    p.write_text("import sys\nsys.exit(3)\n")
    assert main(["compile", str(p)]) == 2
    assert "called sys.exit(3)" in _no_traceback(capsys).err


def test_compile_names_factories_that_need_arguments(capsys):
    assert main(["compile", "tirxpy_kernels/errors.py"]) == 2
    assert "defines no kernels" in _no_traceback(capsys).err
    assert main(["compile", "tirxpy_kernels.gemm_sm100", "--arch", "sm_999"]) == 2
    assert "sm_999" in _no_traceback(capsys).err


@pytest.mark.parametrize("argv", [["compile"], ["compile", "--arch"], ["compile", "x.py", "--emit", "elf"],
                                  ["demo", "--nope"], ["compile", "/"], ["compile", ""], ["compile", ".x"]])
def test_user_errors_exit_2_without_a_traceback(argv, capsys):
    assert main(argv) == 2
    cap = _no_traceback(capsys)
    assert cap.err.strip()


def test_compile_via_subprocess_exits_2_without_a_traceback(tmp_path):
    p = tmp_path / "raising.py"
    p.write_text("import tirxpy\n\n@tirxpy.jit\ndef broken():\n    raise KeyError('x')\n")
    r = subprocess.run([sys.executable, "-m", "tirxpy", "compile", str(p)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "factory 'broken' raised KeyError" in r.stderr and "Traceback" not in r.stderr


def test_compile_a_package_name_that_is_also_a_directory_here(tmp_path, monkeypatch, capsys):
    """`compile NAME` where NAME is a package directory in the working directory: NAME is a dotted module name (what
    the command takes), so the package is imported and its kernels built; it was refused as "a directory". A path
    to the directory is refused with what to type: a .py file in it, or the package's module name."""
    import pathlib

    name = "zz_cli_pkg_" + tmp_path.name.replace("-", "_")
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from tirxpy import T\n\n@T.prim_func\ndef double(A: T.Tensor((128,), 'float32')):\n"
        "    T.launch(grid=(1,), threads=128)\n    A[T.thread_id()] = A[T.thread_id()] * T.cast(2, 'float32')\n")
    (pkg / "k.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, name, raising=False)
    try:
        assert main(["compile", name]) == 0
        assert "double" in _no_traceback(capsys).out
    finally:
        sys.modules.pop(name, None)
    assert main(["compile", name + "/"]) == 2
    err = _no_traceback(capsys).err
    assert f"{name}/ is a directory; pass a file of Python source (a .py file, such as {name}/k.py) or the " \
           f"package's module name, {name}" in err
    monkeypatch.chdir(pathlib.Path(__file__).resolve().parents[1])     # the repository root: a package of modules
    assert main(["compile", "tirxpy_kernels"]) == 2
    err = _no_traceback(capsys).err
    assert "is a directory" not in err and "it is a package: compile one of its modules (tirxpy_kernels." in err


def test_compile_a_path_that_is_no_regular_file(tmp_path, capsys):
    """A device or FIFO given to compile is named as not a regular file (it was 'no such file', which it is)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (str(fifo), os.devnull):
        assert main(["compile", target]) == 2
        err = _no_traceback(capsys).err
        assert f"{target} is not a regular file; pass a file of Python source (a .py file) or a dotted module " \
               "name" in err
    assert main(["compile", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in _no_traceback(capsys).err
