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


# ---------------------------------------------------------------------- hostile entries
def _entry_path(cdir, src, arch="sm_80"):
    from tirxpy.lower import nvrtc

    opts = nvrtc.build_options(arch)
    key = C.make_key(src, nvrtc.key_options(opts), (), False, nvrtc.nvrtc_version())
    return os.path.join(str(cdir), key[:2], key + ".cubin"), key


def _recompiles(cdir, src, plant):
    """Plant something at ``src``'s entry path, then compile: the result is compiled now (not read
    back), equals a fresh compile, and a regular entry replaces what was planted."""
    good = compile_cuda(src, "sm_80", cache=False)
    path, key = _entry_path(cdir, src)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    plant(path)
    C.clear_memory()
    mod = compile_cuda(src, "sm_80")
    assert mod.cached is None and mod.cubin == good.cubin and mod.key == key
    assert os.path.isfile(path) and not os.path.islink(path)
    C.clear_memory()
    assert compile_cuda(src, "sm_80").cached == "disk"


def test_fifo_entry_recompiles_without_hanging(cdir):
    _recompiles(cdir, SRC % 10, os.mkfifo)


def test_symlink_to_dev_zero_recompiles(cdir):
    _recompiles(cdir, SRC % 11, lambda p: os.symlink("/dev/zero", p))


def test_symlink_to_a_valid_entry_is_not_followed(cdir, tmp_path_factory):
    other = tmp_path_factory.mktemp("elsewhere") / "target"
    other.write_bytes(b"x")
    _recompiles(cdir, SRC % 12, lambda p: os.symlink(str(other), p))
    assert other.read_bytes() == b"x"       # the write replaced the link, not the file it pointed to


def test_huge_sparse_entry_is_not_read(cdir):
    def plant(p):
        with open(p, "wb") as f:
            f.truncate(12 << 30)
    _recompiles(cdir, SRC % 13, plant)


def test_directory_at_entry_path_does_not_break_compile(cdir):
    good = compile_cuda(SRC % 14, "sm_80", cache=False)
    path, _ = _entry_path(cdir, SRC % 14)
    os.makedirs(path)
    C.clear_memory()
    assert compile_cuda(SRC % 14, "sm_80").cubin == good.cubin


def test_truncated_entry_recompiles(cdir):
    compile_cuda(SRC % 15, "sm_80")
    path, _ = _entry_path(cdir, SRC % 15)
    data = open(path, "rb").read()
    _recompiles(cdir, SRC % 15, lambda p: open(p, "wb").write(data[:len(data) // 2]))


def test_swapped_entry_of_another_key_recompiles(cdir):
    compile_cuda(SRC % 16, "sm_80")
    other, _ = _entry_path(cdir, SRC % 16)
    data = open(other, "rb").read()
    _recompiles(cdir, SRC % 17, lambda p: open(p, "wb").write(data))


def test_corrupted_digest_recompiles(cdir):
    compile_cuda(SRC % 18, "sm_80")
    path, _ = _entry_path(cdir, SRC % 18)
    data = bytearray(open(path, "rb").read())
    data[len(C._MAGIC)] ^= 0xFF          # first byte of the digest
    _recompiles(cdir, SRC % 18, lambda p: open(p, "wb").write(bytes(data)))


def test_entry_records_its_key(cdir):
    mod = compile_cuda(SRC % 19, "sm_80")
    path, key = _entry_path(cdir, SRC % 19)
    assert key.encode() in open(path, "rb").read(200) and mod.key == key


def test_subdirectory_symlink_is_not_written_through(cdir, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    path, _ = _entry_path(cdir, SRC % 20)
    os.symlink(str(outside), os.path.dirname(path))
    C.clear_memory()
    assert compile_cuda(SRC % 20, "sm_80").cached is None
    assert os.listdir(outside) == []


@pytest.mark.parametrize("key", ["../../etc/passwd", "ab/../../x", "A" * 64, 5, "0" * 63])
def test_malformed_keys_are_refused(key):
    from tirxpy.lower.errors import CacheError

    with pytest.raises(CacheError, match="64 lowercase hex digits"):
        C.get(key)
    with pytest.raises(CacheError, match="64 lowercase hex digits"):
        C.put(key, None)


@pytest.mark.parametrize("value, msg", [
    ("", "blank"), ("   ", "blank"), ("~nosuchuser_tirxpy/x", "names no user"),
    ("$TIRXPY_SURELY_UNSET/x", r"\$TIRXPY_SURELY_UNSET is not set"),
    ("${TIRXPY_SURELY_UNSET}/x", "is not set"),
])
def test_bad_cache_dir_values_are_refused(monkeypatch, value, msg):
    from tirxpy.lower.errors import CacheError

    monkeypatch.delenv("TIRXPY_SURELY_UNSET", raising=False)
    monkeypatch.setenv("TIRXPY_CACHE_DIR", value)
    with pytest.raises(CacheError, match=msg) as e:
        C.cache_dir()
    assert "TIRXPY_CACHE_DIR" in str(e.value)


def test_cache_dir_expands_set_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("TIRXPY_TEST_BASE", str(tmp_path))
    monkeypatch.setenv("TIRXPY_CACHE_DIR", "$TIRXPY_TEST_BASE/c")
    assert C.cache_dir() == os.path.join(str(tmp_path), "c")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.delenv("TIRXPY_CACHE_DIR")
    assert C.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "tirxpy")


def _signed_entry(key, meta: bytes, cubin=b"\x7fELF") -> bytes:
    """An entry whose digest is right (the digest is no secret: anyone can compute it) around ``meta``."""
    head = (key.encode(), len(meta), len(cubin), 0, False)
    return C._MAGIC + C._HEADER.pack(C._digest(*head, meta + cubin), *head) + meta + cubin


@pytest.mark.parametrize("meta", [
    b"[" * 100_000 + b"]" * 100_000,                                             # RecursionError in json
    b'{"arch": "sm_80", "log": "", "lowered_names": {}, "resources": {}, "compile_seconds": ' + b"9" * 400 + b"}",
], ids=["deep-json", "huge-float"])
def test_hostile_entry_with_a_valid_digest_recompiles(cdir, meta):
    path, key = _entry_path(cdir, SRC % 21)
    _recompiles(cdir, SRC % 21, lambda p: open(p, "wb").write(_signed_entry(key, meta)))


def test_entries_writable_by_others_are_not_trusted(cdir, monkeypatch):
    compile_cuda(SRC % 22, "sm_80")
    path, _ = _entry_path(cdir, SRC % 22)
    assert os.stat(path).st_mode & 0o077 == 0           # written 0600
    C.clear_memory()
    assert compile_cuda(SRC % 22, "sm_80").cached == "disk"
    os.chmod(path, 0o664)
    C.clear_memory()
    assert compile_cuda(SRC % 22, "sm_80").cached is None   # group-writable: dropped, rewritten 0600
    C.clear_memory()
    me = os.geteuid()
    monkeypatch.setattr(C.os, "geteuid", lambda: me + 1)     # the entry now belongs to someone else
    assert compile_cuda(SRC % 22, "sm_80").cached is None
