"""Compiled-module cache: in process, and on disk keyed by source + options + NVRTC version.

The directory is ``$TIRXPY_CACHE_DIR`` (``off`` disables the disk cache), else
``$XDG_CACHE_HOME/tirxpy``, else ``~/.cache/tirxpy``. Entries are written atomically and carry
a checksum; a corrupted or unreadable entry is deleted and the module recompiled.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile

_FORMAT = 1
_MAGIC = b"TIRXPYC1"
_MEMORY: dict = {}
_OFF = ("off", "0", "none", "disabled")


def cache_dir() -> str | None:
    """Where cubins are cached on disk, or None when disabled (TIRXPY_CACHE_DIR=off)."""
    env = os.environ.get("TIRXPY_CACHE_DIR")
    if env is not None and env.strip().lower() in _OFF:
        return None
    if env:
        return os.path.expanduser(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tirxpy")


def make_key(source: str, options, names, emit_ptx: bool, nvrtc_version) -> str:
    h = hashlib.sha256()
    for part in (f"tirxpy-cache-{_FORMAT}", source, "\x1f".join(options), "\x1f".join(names), str(bool(emit_ptx)),
                 ".".join(map(str, nvrtc_version))):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def _path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, key[:2], key + ".cubin")


def get(key: str):
    """The cached CompiledModule for ``key`` (memory first, then disk), or None."""
    mod = _MEMORY.get(key)
    if mod is not None:
        mod.cached = "memory"
        return mod
    path = _path(key)
    if path is None or not os.path.exists(path):
        return None
    mod = _read(path, key)
    if mod is None:
        try:
            os.remove(path)  # corrupted: drop it, the caller recompiles
        except OSError:
            pass
        return None
    mod.cached = "disk"
    _MEMORY[key] = mod
    return mod


def put(key: str, mod) -> None:
    _MEMORY[key] = mod
    path = _path(key)
    if path is None:
        return
    try:
        _write(path, mod)
    except OSError:
        pass  # a read-only or full cache directory must not break compilation


def clear_memory() -> None:
    _MEMORY.clear()


def _write(path: str, mod) -> None:
    meta = json.dumps({"arch": mod.arch, "log": mod.log, "lowered_names": mod.lowered_names,
                       "resources": {k: vars(v) for k, v in mod.resources.items()},
                       "compile_seconds": mod.compile_seconds}).encode()
    ptx = (mod.ptx or "").encode()
    body = struct.pack("<QQQB", len(meta), len(mod.cubin), len(ptx), mod.ptx is not None) + meta + mod.cubin + ptx
    blob = _MAGIC + hashlib.sha256(body).digest() + body
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def _read(path: str, key: str):
    from .nvrtc import CompiledModule, KernelResources  # noqa: PLC0415

    try:
        with open(path, "rb") as f:
            blob = f.read()
        if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + 32 + 25:
            return None
        digest, body = blob[len(_MAGIC):len(_MAGIC) + 32], blob[len(_MAGIC) + 32:]
        if hashlib.sha256(body).digest() != digest:
            return None
        nm, nc, np_, has_ptx = struct.unpack_from("<QQQB", body)
        off = struct.calcsize("<QQQB")
        meta = json.loads(body[off:off + nm])
        cubin = body[off + nm:off + nm + nc]
        ptx = body[off + nm + nc:off + nm + nc + np_].decode() if has_ptx else None
        res = {k: KernelResources(**{**v, "perf_warnings": tuple(v.get("perf_warnings", ()))})
               for k, v in meta["resources"].items()}
        return CompiledModule(cubin=cubin, arch=meta["arch"], ptx=ptx, log=meta["log"], resources=res,
                              lowered_names=meta["lowered_names"], key=key,
                              compile_seconds=meta.get("compile_seconds", 0.0))
    except (OSError, ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None
