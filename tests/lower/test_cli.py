"""python -m tirxpy compile: resources table, --emit, errors exit 2 with a message."""
import textwrap

import pytest

from tirxpy.lower.cli import main

KERNELS = textwrap.dedent('''
    import tirxpy
    from tirxpy import T

    @T.prim_func
    def double(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        T.launch(grid=(2,), threads=128)
        i = T.cta_id(0) * 128 + T.thread_id()
        B[i] = A[i] * T.float32(2)

    @tirxpy.jit
    def make_fill(n=128):
        @T.prim_func
        def fill(A: T.Tensor((n,), "int32")):
            T.launch(grid=(1,), threads=n)
            A[T.thread_id()] = 7
        return fill

    @tirxpy.jit
    def needs_args(n):
        return double
''')


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "kernels.py"
    p.write_text(KERNELS)
    return str(p)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_table(kfile, capsys, arch):
    assert main([kfile, "--arch", arch]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["kernel", "arch", "registers", "spills", "stack", "smem", "threads"]
    rows = {ln.split()[0]: ln.split() for ln in out[1:]}
    assert set(rows) == {"double", "fill"}
    assert rows["double"][1] == arch and rows["double"][3] == "0" and rows["double"][6] == "128"


def test_emit_cuda_and_ptx(kfile, capsys):
    assert main([kfile, "--emit", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "// ===== double (cuda, sm_90a) =====" in out and "B[i] = A[i] * 2.0f;" in out and "void __launch_bounds__(128) double_(" in out
    assert main([kfile, "--emit", "ptx"]) == 0
    assert ".visible .entry double_(" in capsys.readouterr().out


def test_module_name(capsys):
    assert main(["tirxpy.demo"]) == 2  # a module without kernels
    assert "defines no kernels" in capsys.readouterr().err


@pytest.mark.parametrize("argv, msg", [
    (["missing.py"], "cannot import 'missing.py': FileNotFoundError"),
    (["no.such.module"], "cannot import 'no.such.module': ModuleNotFoundError"),
])
def test_import_errors(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


def test_a_directory_is_named_as_one(tmp_path, capsys):
    """A directory is not a file of source: exit 2, one line on stderr naming the path and what is expected."""
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{tmp_path} is a directory; pass a file of Python source (a .py file)" in err


def test_a_source_file_by_another_name_is_imported(kfile, tmp_path, capsys):
    src = tmp_path / "kernels.txt"
    src.write_text(open(kfile).read())
    assert main([str(src)]) == 0
    assert "double" in capsys.readouterr().out


def test_bad_arch_and_failing_module(kfile, tmp_path, capsys):
    assert main([kfile, "--arch", "sm_9"]) == 2
    assert "unknown target 'sm_9'" in capsys.readouterr().err
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    assert main([str(bad)]) == 2
    assert "raised RuntimeError: boom" in capsys.readouterr().err


def test_kernel_that_fails_to_build(tmp_path, capsys):
    p = tmp_path / "hopper_only.py"
    p.write_text(textwrap.dedent('''
        import tirxpy.intrinsics
        from tirxpy import T

        @T.prim_func
        def fence_only(A: T.Tensor((128,), "float32")):
            T.launch(grid=(1,), threads=128)
            T.ptx.wgmma_fence()
    '''))
    assert main([str(p), "--arch", "sm_100a"]) == 2
    err = capsys.readouterr().err
    assert "error in kernel 'fence_only'" in err and "exists only on sm_90a" in err and "Traceback" not in err


def test_dispatcher_runs_compile(kfile, capsys):
    from tirxpy.__main__ import main as top

    assert top(["compile", kfile, "--arch", "sm_90a"]) == 0
    assert "double" in capsys.readouterr().out


def test_kernels_bound_to_other_names_are_told_apart(tmp_path, capsys):
    p = tmp_path / "variants.py"
    src = 'T.parse_script(\'@T.prim_func\\ndef twin(A: T.Tensor((32,), "float32")):\\n    T.launch(grid=(1,), threads=32)\\n    A[T.thread_id()] = T.float32({})\\n\')'
    p.write_text("from tirxpy import T\nsmall = " + src.format(1) + "\nlarge = " + src.format(2) + "\n")
    assert main([str(p)]) == 0
    names = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()[1:]]
    assert names == ["small:twin", "large:twin"]


def test_help_states_the_defaults(capsys):
    from tirxpy.lower.cli import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "default: sm_90a" in out and "default: none" in out
