import os

import pytest

from tirxpy.lower import cache as C
from tirxpy.lower.nvrtc import compile_cuda

SRC = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = %d; }'


@pytest.fixture
def cdir(tmp_path, monkeypatch):
    monkeypatch.setenv("TIRXPY_CACHE_DIR", str(tmp_path))
    C.clear_memory()
    yield tmp_path
    C.clear_memory()


def _files(d):
    return [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs]


def test_miss_then_memory_then_disk_hit(cdir):
    a = compile_cuda(SRC % 1, "sm_90a")
    assert a.cached is None and len(_files(cdir)) == 1
    assert compile_cuda(SRC % 1, "sm_90a").cached == "memory"
    C.clear_memory()
    b = compile_cuda(SRC % 1, "sm_90a")
    assert b.cached == "disk" and b.cubin == a.cubin and b.resources == a.resources


def test_key_includes_options_arch_source_and_version():
    base = ("src", ["--gpu-architecture=sm_90a"], (), False, (13, 0))
    k = C.make_key(*base)
    assert k != C.make_key("src2", *base[1:])
    assert k != C.make_key(base[0], ["--gpu-architecture=sm_100a"], *base[2:])
    assert k != C.make_key(base[0], base[1] + ["-lineinfo"], *base[2:])
    assert k != C.make_key(*base[:4], (13, 1))
    assert k != C.make_key(base[0], base[1], (), True, (13, 0))


def test_options_change_misses(cdir):
    compile_cuda(SRC % 2, "sm_90a")
    assert compile_cuda(SRC % 2, "sm_90a", options=["-lineinfo"]).cached is None
    assert len(_files(cdir)) == 2


def test_corrupted_entry_is_recovered(cdir):
    a = compile_cuda(SRC % 3, "sm_90a")
    (path,) = _files(cdir)
    with open(path, "r+b") as f:
        f.seek(60)
        f.write(b"garbage!")
    C.clear_memory()
    b = compile_cuda(SRC % 3, "sm_90a")
    assert b.cached is None and b.cubin == a.cubin  # recompiled
    C.clear_memory()
    assert compile_cuda(SRC % 3, "sm_90a").cached == "disk"  # and rewritten
    with open(path, "wb") as f:
        f.write(b"short")
    C.clear_memory()
    assert compile_cuda(SRC % 3, "sm_90a").cached is None


def test_disable_and_default_dirs(monkeypatch, tmp_path):
    monkeypatch.setenv("TIRXPY_CACHE_DIR", "off")
    assert C.cache_dir() is None
    C.clear_memory()
    assert compile_cuda(SRC % 4, "sm_80").cached is None
    assert compile_cuda(SRC % 4, "sm_80").cached == "memory"
    monkeypatch.delenv("TIRXPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert C.cache_dir() == os.path.join(str(tmp_path), "tirxpy")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert C.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "tirxpy")
    C.clear_memory()


def test_unwritable_dir_does_not_break_compile(monkeypatch, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    monkeypatch.setenv("TIRXPY_CACHE_DIR", str(f))  # a file, not a directory
    C.clear_memory()
    assert compile_cuda(SRC % 5, "sm_80").cached is None
    C.clear_memory()


def test_cache_key_names_header_packages_not_their_paths(tmp_path):
    """-I options enter the key as the wheels (name==version) that ship the headers, so a cache
    directory copied to another machine or venv with the same wheels still hits; a custom include
    directory enters as its path plus a digest of its files, which changes when a header does."""
    from tirxpy.lower import nvrtc

    opts = nvrtc.build_options("sm_90a")
    keyed = nvrtc.key_options(opts)
    wheel_dirs = [o for o in opts if o.startswith("-I") and "nvidia" in o]
    assert wheel_dirs, opts
    for o in keyed:
        if o.startswith("-I") and "==" in o:
            assert os.sep + "site-packages" not in o and "/" not in o.split(":")[0], o
    d = tmp_path / "inc"
    d.mkdir()
    (d / "my.h").write_text("#define A 1\n")
    first = nvrtc._header_identity(str(d))
    nvrtc._header_identity.cache_clear()
    (d / "my.h").write_text("#define A 22\n")
    second = nvrtc._header_identity(str(d))
    nvrtc._header_identity.cache_clear()
    assert first.startswith(str(d)) and first != second
