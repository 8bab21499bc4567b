"""Compiled-module cache: in process, and on disk keyed by source + options + NVRTC version.

The directory is ``$TIRXPY_CACHE_DIR`` (``off`` disables the disk cache), else
``$XDG_CACHE_HOME/tirxpy`` (an absolute ``XDG_CACHE_HOME`` only), else ``~/.cache/tirxpy``.
A ``TIRXPY_CACHE_DIR`` that is blank or does not expand (``~nosuchuser/x``, ``$UNSET/x``) is
refused with a :class:`~tirxpy.lower.errors.CacheError`.

The cache is an optimisation, never a source of truth. The rules an entry must pass, else it is
dropped and the module recompiled (and the entry replaced):

- its path is ``<dir>/<key[:2]>/<key>.cubin`` for a 64-hex-digit key, so no key leads outside the
  directory; the two-letter subdirectory must be a real directory (not a symlink);
- it is opened without following symlinks and without blocking (a FIFO or a device does not hang
  the reader), and must be a regular file of at most :data:`MAX_ENTRY_BYTES` (checked with
  ``fstat`` before reading, so a huge sparse file is never read);
- it is owned by the current user and writable by no one else (entries are written with mode 0600):
  the digest below is no secret, so an entry another user could write is never trusted;
- it records the full key it was written for, and a SHA-256 digest of key and payload that must
  match: a truncated, corrupted or renamed entry (a valid entry of another key) is rejected;
- its metadata must decode to the expected fields (no error of a hostile payload escapes).

Writes go to a temporary file in the entry's own directory, then ``os.replace`` it into place.

    >>> k = make_key("src", ["--gpu-architecture=sm_90a"], (), False, (13, 0))
    >>> len(k), _KEY.fullmatch(k) is not None
    (64, True)
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import stat
import struct

from tirxpy.errors import shown

from .errors import CacheError

_FORMAT = 2
_MAGIC = b"TIRXPYC2"
_HEADER = struct.Struct("<32s64sQQQB")   # digest, key, len(meta), len(cubin), len(ptx), has_ptx
MAX_ENTRY_BYTES = 256 << 20              #: largest entry read back (a cubin + PTX of one unit is far smaller)
_MEMORY: dict = {}
_OFF = ("off", "0", "none", "disabled")
_KEY = re.compile(r"[0-9a-f]{64}")
_UNEXPANDED = re.compile(r"\$(\w+|\{[^}]*\})")
ENV = "TIRXPY_CACHE_DIR"


def cache_dir() -> str | None:
    """Where cubins are cached on disk (an absolute path), or None when disabled (TIRXPY_CACHE_DIR=off)."""
    env = os.environ.get(ENV)
    if env is not None:
        if env.strip().lower() in _OFF:
            return None
        return _expand(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "tirxpy")
    home = os.path.expanduser("~")
    if not os.path.isabs(home):
        return None     # no home directory to cache in: memory cache only
    return os.path.join(home, ".cache", "tirxpy")


def _expand(value: str) -> str:
    if not value.strip():
        raise CacheError(f"{ENV} is set but blank; set it to a directory, or to 'off' to disable the disk cache")
    if "\x00" in value:
        raise CacheError(f"{ENV}={shown(value)} contains a NUL character; set it to a directory path")
    path = os.path.expanduser(value)
    if path.startswith("~"):
        raise CacheError(f"{ENV}={shown(value)}: {value.split(os.sep)[0]!r} names no user's home directory; "
                         f"give an absolute path or '~/...'")
    path = os.path.expandvars(path)
    left = _UNEXPANDED.search(path)
    if left:
        raise CacheError(f"{ENV}={shown(value)}: the environment variable {left.group(0)} is not set; "
                         f"set it or give the directory literally")
    return os.path.abspath(path)


def make_key(source: str, options, names, emit_ptx: bool, nvrtc_version) -> str:
    """SHA-256 (64 hex digits) of everything that decides the compiler's output."""
    h = hashlib.sha256()
    for part in (f"tirxpy-cache-{_FORMAT}", source, "\x1f".join(options), "\x1f".join(names), str(bool(emit_ptx)),
                 ".".join(map(str, nvrtc_version))):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def _check_key(key) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise CacheError(f"a cache key is 64 lowercase hex digits (make_key's output), got {shown(key, 80)}")
    return key


def _where(key: str):
    """``(subdirectory, file name)`` of ``key``'s entry, or None when the disk cache is off."""
    d = cache_dir()
    return None if d is None else (os.path.join(d, key[:2]), key + ".cubin")


def get(key: str):
    """The cached CompiledModule for ``key`` (memory first, then disk), or None."""
    _check_key(key)
    mod = _MEMORY.get(key)
    if mod is not None:
        mod.cached = "memory"
        return mod
    where = _where(key)
    if where is None:
        return None
    mod = _load(*where, key)
    if mod is None:
        return None
    mod.cached = "disk"
    _MEMORY[key] = mod
    return mod


def put(key: str, mod) -> None:
    """Remember ``mod`` for ``key`` in process and (best effort) on disk."""
    _check_key(key)
    _MEMORY[key] = mod
    where = _where(key)
    if where is None:
        return
    try:
        _write(*where, key, mod)
    except OSError:
        pass  # a read-only, full or odd cache directory must not break compilation


def clear_memory() -> None:
    _MEMORY.clear()


# ---------------------------------------------------------------------- files
def _open_dir(sub: str, create: bool) -> int | None:
    """A descriptor of the entry subdirectory ``sub`` (created if asked), which must be a real
    directory, not a symlink; None when it is missing or is something else."""
    if create:
        try:
            os.makedirs(sub, exist_ok=True)
        except OSError:
            return None
    try:
        return os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def _load(sub: str, name: str, key: str):
    dfd = _open_dir(sub, create=False)
    if dfd is None:
        return None
    try:
        blob = _read_entry(dfd, name)
        if blob is False:
            return None
        mod = None if blob is None else _decode(blob, key)
        if mod is None:
            _unlink(dfd, name)      # a bad entry: drop it, the caller recompiles and writes a new one
        return mod
    finally:
        os.close(dfd)


def _read_entry(dfd: int, name: str):
    """The entry's bytes; None when it exists but is not a readable regular file of a sane size;
    False when there is none."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return False
    except OSError as e:
        return None if e.errno in (errno.ELOOP, errno.ENXIO, errno.EACCES, errno.EISDIR) else False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _HEADER.size + len(_MAGIC) <= st.st_size <= MAX_ENTRY_BYTES:
            return None
        if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None     # written or writable by another user: its digest proves nothing about who made it
        chunks, left = [], st.st_size + 1      # one byte more: a file that grew is rejected below
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        blob = b"".join(chunks)
        return blob if len(blob) == st.st_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _unlink(dfd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dfd)     # unlink never follows a symlink: only the entry goes
    except OSError:
        pass


def _encode(key: str, mod) -> bytes:
    meta = json.dumps({"arch": mod.arch, "log": mod.log, "lowered_names": mod.lowered_names,
                       "resources": {k: vars(v) for k, v in mod.resources.items()},
                       "compile_seconds": mod.compile_seconds}).encode()
    ptx = (mod.ptx or "").encode()
    payload = meta + bytes(mod.cubin) + ptx
    head = (key.encode(), len(meta), len(mod.cubin), len(ptx), mod.ptx is not None)
    digest = _digest(*head, payload)
    return _MAGIC + _HEADER.pack(digest, *head) + payload


def _digest(key: bytes, nm: int, nc: int, np_: int, has_ptx: bool, payload: bytes) -> bytes:
    h = hashlib.sha256(_MAGIC)
    h.update(struct.pack("<64sQQQB", key, nm, nc, np_, has_ptx))
    h.update(payload)
    return h.digest()


def _write(sub: str, name: str, key: str, mod) -> None:
    blob = _encode(key, mod)
    dfd = _open_dir(sub, create=True)
    if dfd is None:
        return
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            _unlink(dfd, tmp)
            raise
    finally:
        os.close(dfd)


def _decode(blob: bytes, key: str):
    """The CompiledModule in ``blob`` when it is a well-formed entry written for ``key``, else None."""
    from .nvrtc import CompiledModule, KernelResources  # noqa: PLC0415

    if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + _HEADER.size:
        return None
    digest, k, nm, nc, np_, has_ptx = _HEADER.unpack_from(blob, len(_MAGIC))
    payload = blob[len(_MAGIC) + _HEADER.size:]
    if k != key.encode() or has_ptx not in (0, 1) or nm + nc + np_ != len(payload):
        return None
    if _digest(k, nm, nc, np_, has_ptx, payload) != digest:
        return None
    try:
        meta = json.loads(payload[:nm])
        ptx = payload[nm + nc:].decode() if has_ptx else None
        res = {}
        for name, v in meta["resources"].items():
            v = dict(v, perf_warnings=tuple(v.get("perf_warnings", ())))
            res[name] = KernelResources(**v)
        return CompiledModule(cubin=payload[nm:nm + nc], arch=str(meta["arch"]), ptx=ptx, log=str(meta["log"]),
                              resources=res, lowered_names=dict(meta["lowered_names"]), key=key,
                              compile_seconds=float(meta.get("compile_seconds", 0.0)))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, OverflowError, RecursionError):
        return None
