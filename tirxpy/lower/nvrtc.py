"""Compile CUDA C++ to a cubin (and PTX on request) with NVRTC from the pip wheels, no system toolkit.

``compile_cuda(source, arch)`` returns a CompiledModule with the cubin and per-kernel resources
(registers, spills, stack, static shared memory) parsed from ptxas's verbose report. Results
are cached in process and on disk (tirxpy.lower.cache).
"""
from __future__ import annotations

import glob
import hashlib
import itertools
import os
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

from tirxpy.target import supported_target
from tirxpy.errors import shown

from . import cache as _cache
from .errors import CompileError, CompileOptionError, ToolchainError


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel (bytes unless said otherwise)."""

    name: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    static_smem: int = 0
    barriers: int = 0
    perf_warnings: tuple = ()   # ptxas "Potential Performance Loss" remarks, e.g. serialized wgmma (C7515), and
    #                             its notes of a warpgroup.wait it injected (C7517)

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass
class CompiledModule:
    """The output of one NVRTC compilation."""

    cubin: bytes
    arch: str
    ptx: str | None = None
    log: str = ""
    resources: dict = field(default_factory=dict)  # kernel (lowered) name -> KernelResources
    lowered_names: dict = field(default_factory=dict)  # name expression -> mangled name
    key: str = ""
    compile_seconds: float = 0.0
    cached: str | None = None  # None (compiled now), "memory" or "disk"

    def kernel_name(self, name: str) -> str:
        """The symbol to load for ``name`` (a name expression's mangled name, or ``name`` itself)."""
        return self.lowered_names.get(name, name)

    def resources_of(self, name: str) -> KernelResources:
        sym = self.kernel_name(name)
        if sym not in self.resources:
            raise KeyError(f"no kernel {shown(name)} in this module; kernels: {sorted(self.resources)}")
        return self.resources[sym]


def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # noqa: PLC0415 - heavy, import on first compile
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ToolchainError("cuda-bindings is not installed: pip install 'cuda-bindings>=13.0,<14' "
                             "nvidia-cuda-nvrtc==13.0.* nvidia-cuda-runtime==13.0.*") from e
    return nvrtc


@lru_cache(maxsize=1)
def nvrtc_version() -> tuple:
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _ok(err, "nvrtcVersion")
    return (major, minor)


@lru_cache(maxsize=1)
def include_dirs() -> tuple:
    """CUDA header directories from the nvidia-* wheels (cuda_bf16.h, cuda/std, nv/target)."""
    dirs = []
    try:
        import nvidia  # noqa: PLC0415

        for root in nvidia.__path__:
            for sub in ("cu13/include", "cuda_runtime/include", "cuda_nvrtc/include", "cuda_cccl/include",
                        "cu13/include/cccl"):
                p = os.path.join(root, sub)
                if os.path.isdir(p):
                    dirs.append(p)
    except ImportError:
        pass
    extra = os.environ.get("TIRXPY_CUDA_INCLUDE")
    if extra:
        dirs = extra.split(os.pathsep) + dirs
    return tuple(dirs)


def _ok(err, call: str, prog=None, source: str = ""):
    nvrtc = _nvrtc()
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _log(prog) if prog is not None else ""
        raise CompileError(f"{call} failed: {err.name}" + (f"\n{log}" if log else ""), log, source)


def _log(prog) -> str:
    nvrtc = _nvrtc()
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or n <= 1:
        return ""
    buf = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\x00").decode(errors="replace")


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_PERF = re.compile(r"(\(C\d+\) )?Potential Performance Loss: (.*?) in the function '([^']+)'")
_PERF_UNNAMED = re.compile(r"(\(C\d+\) )?Potential Performance Loss: (.*)")
_WAIT = re.compile(r"(\(C\d+\) )?(warpgroup\.wait is injected .*?) in function '([^']+)'")


def parse_ptxas_log(log: str) -> dict:
    """ptxas -v report -> {kernel symbol: KernelResources} (entry functions only). Performance remarks are the
    "Potential Performance Loss" lines and the notes of a ``warpgroup.wait`` ptxas injected (C7517). A remark that
    names no function (e.g. ``(C7508) ... 'setmaxnreg' ignored``, printed before its entry) goes to every entry
    of the report."""
    entries, current, props_of, frames, perf, unnamed = {}, None, None, {}, {}, []
    for line in log.splitlines():
        m = _PERF.search(line) or _WAIT.search(line)
        if m:
            perf.setdefault(m.group(3), []).append(((m.group(1) or "") + m.group(2)).strip())
            continue
        m = _PERF_UNNAMED.search(line)
        if m:
            unnamed.append(((m.group(1) or "") + m.group(2)).strip())
            continue
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            entries[current] = {}
            continue
        m = _PROPS.search(line)
        if m:
            props_of = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and props_of is not None:
            frames[props_of] = tuple(int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m and current is not None:
            entries[current] = dict(registers=int(m.group(1)), barriers=int(m.group(2) or 0),
                                    static_smem=int(m.group(3) or 0))
    out = {}
    for name, used in entries.items():
        stack, st, ld = frames.get(name, (0, 0, 0))
        out[name] = KernelResources(name, spill_stores=st, spill_loads=ld, stack_bytes=stack,
                                    perf_warnings=tuple(perf.get(name, ())) + tuple(unnamed), **used)
    return out


#: NVRTC options a caller may add (``name`` or ``name=value``; ``-D`` / ``-U`` / ``-I`` take their value attached).
#: The target comes from ``arch=``, and the options tirxpy itself relies on (-std, -default-device, ptxas -v)
#: are not the caller's to change.
OPTIONS = ("-lineinfo", "--generate-line-info", "-G", "--device-debug", "--use_fast_math", "-use_fast_math",
           "--ftz", "--prec-div", "--prec-sqrt", "--fmad", "--maxrregcount", "-maxrregcount", "--ptxas-options",
           "-Xptxas", "--dopt", "--extra-device-vectorization", "--disable-warnings", "-w", "--restrict",
           "--define-macro", "--undefine-macro", "--include-path", "-D...", "-U...", "-I...", "--display-error-number",
           "--diag-suppress", "--diag-error", "--diag-warn", "--device-int128")
_ATTACHED = ("-D", "-U", "-I")


def check_options(options) -> tuple:
    """``options`` as a tuple of NVRTC option strings, each one of :data:`OPTIONS`; CompileOptionError
    (naming the option and listing the valid ones) otherwise.

        >>> check_options(["-lineinfo", "--maxrregcount=128", "-DTILE=64"])
        ('-lineinfo', '--maxrregcount=128', '-DTILE=64')
    """
    if isinstance(options, (str, bytes)) or not isinstance(options, (tuple, list)):
        raise CompileOptionError(f"options= takes a list of NVRTC option strings, got {type(options).__name__} "
                                 f"{shown(options, 60)}; e.g. options=['-lineinfo']")
    out = []
    for o in options:
        if not isinstance(o, str) or not o.startswith("-") or "\x00" in o:
            raise CompileOptionError(f"NVRTC option {shown(o, 60)} is not an option string; write e.g. '-lineinfo' or "
                                     f"'--maxrregcount=128'")
        name = o.split("=", 1)[0]
        if o[:2] in _ATTACHED:
            if not o[2:].strip():
                raise CompileOptionError(f"NVRTC option {shown(o)} needs its value attached, e.g. '-DTILE=64' or "
                                         f"'-I/path/to/headers'")
        elif name not in OPTIONS:
            hint = " (the target is build(..., arch=...))" if name in ("--gpu-architecture", "-arch") else ""
            raise CompileOptionError(f"unknown or unsupported NVRTC option {shown(name, 60)}{hint}; valid: "
                                     f"{', '.join(OPTIONS)}")
        out.append(o)
    return tuple(out)


def build_options(arch, options=()) -> list:
    """NVRTC options for ``arch`` (a Target or ``"sm_90a"``) plus the caller's checked ``options``."""
    a = supported_target(arch)
    opts = [f"--gpu-architecture={a}", "-std=c++17", "--ptxas-options=-v", "-default-device"]
    opts += [f"-I{d}" for d in include_dirs()]
    opts += list(check_options(options))
    return opts


def _wheel_id(info: str) -> str:
    """``name==version`` from a ``*.dist-info`` directory name (``nvidia_cuda_crt-13.0.88.dist-info``)."""
    name, _, version = os.path.basename(info)[:-len(".dist-info")].partition("-")
    return f"{name.replace('_', '-')}=={version}"


def _ships(info: str, prefix: str) -> bool:
    try:
        with open(os.path.join(info, "RECORD"), encoding="utf-8") as f:
            return any(line.startswith(prefix) for line in f)
    except OSError:
        return False


@lru_cache(maxsize=None)
def _header_identity(d: str) -> str:
    """What the headers under include directory ``d`` are, independent of where they are installed:
    ``name==version+...:relative/dir`` of the nvidia-* wheels that ship them, else ``d`` plus a digest
    of its files' relative paths, sizes and modification times."""
    try:
        import nvidia  # noqa: PLC0415

        for root in nvidia.__path__:
            rel = os.path.relpath(d, root)
            if rel.startswith(".."):
                continue
            prefix = "nvidia/" + rel.replace(os.sep, "/") + "/"
            owners = sorted(_wheel_id(info) for info in glob.glob(os.path.join(os.path.dirname(root), "nvidia*.dist-info"))
                            if _ships(info, prefix))
            if owners:       # several wheels share a directory (cu13/include: runtime, crt, nvrtc, ...)
                return "+".join(owners) + ":" + rel
    except ImportError:
        pass
    h = hashlib.sha256()
    for base, dirs, files in os.walk(d):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(base, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, d)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return f"{d}#{h.hexdigest()[:16]}"


def key_options(opts) -> list:
    """The options as the cache key sees them: ``-I<dir>`` names the headers' package and version
    (see _header_identity), so a cache directory stays valid when the environment moves."""
    return ["-I" + _header_identity(o[2:]) if o.startswith("-I") else o for o in opts]


def compile_cuda(source: str, arch, *, name_expressions=None, emit_ptx: bool = False, options=(),
                 cache: bool = True, filename: str = "tirxpy_kernel.cu") -> CompiledModule:
    """Compile ``source`` for ``arch`` ('sm_80' / 'sm_90a' / 'sm_100a'); cached by source + options + NVRTC version.

    ``name_expressions`` (e.g. ``["my_kernel<128>"]``) are instantiated and their mangled names
    recorded in ``lowered_names``. ``emit_ptx`` also keeps the PTX text.
    """
    if not isinstance(source, str):
        raise CompileOptionError(f"source must be a str of CUDA C++, got {type(source).__name__}")
    target = supported_target(arch)
    opts = build_options(target, options)
    names = tuple(name_expressions or ())
    key = _cache.make_key(source, key_options(opts), names, emit_ptx, nvrtc_version())
    if cache:
        hit = _cache.get(key)
        if hit is not None and hit.log:     # (an entry without ptxas' log came from an unlogged compile: redo it)
            return hit
    mod = _compile(source, str(target), opts, names, emit_ptx, filename)
    mod.key = key
    if cache:
        _cache.put(key, mod)
    return mod


_PROGRAMS = itertools.count(1)
"""Numbers the NVRTC programs of this process (:func:`program_name`)."""


def program_name(filename: str) -> str:
    """The name an NVRTC program of ``filename`` gets: the name with a number of its own in this process
    (``k.cu`` -> ``k.7.cu``). Some NVRTC 13.0 builds hand back the cubin of an earlier program of the same name and
    the same code, comments aside, without running ptxas: the log is empty, so the registers, spills and ptxas
    remarks (``setmaxnreg`` ignored, C7508) would be missing, and :func:`tirxpy.lower.build.build` would keep a kernel
    whose ``setmaxnreg`` ptxas dropped. A name used once makes every compile run ptxas and log.

        >>> a, b = program_name("k.cu"), program_name("k.cu")
        >>> a != b and a.startswith("k.") and a.endswith(".cu")
        True
    """
    stem, dot, ext = filename.rpartition(".")
    n = next(_PROGRAMS)
    return f"{stem}.{n}.{ext}" if dot else f"{filename}.{n}"


def _compile(source, arch, opts, names, emit_ptx, filename) -> CompiledModule:
    nvrtc = _nvrtc()
    t0 = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), program_name(filename).encode(), 0, [], [])
    _ok(err, "nvrtcCreateProgram")
    try:
        for n in names:
            _ok(nvrtc.nvrtcAddNameExpression(prog, n.encode())[0], f"nvrtcAddNameExpression({n!r})", prog)
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _log(prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            errors = [ln for ln in log.splitlines() if "error" in ln][:10]
            head = "\n".join(errors) if errors else log[:2000]
            raise CompileError(f"NVRTC could not compile {filename} for {arch}:\n{head}\n(full log in .log)", log, source)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _ok(err, "nvrtcGetCUBINSize", prog)
        cubin = b" " * size
        _ok(nvrtc.nvrtcGetCUBIN(prog, cubin)[0], "nvrtcGetCUBIN", prog)
        ptx = None
        if emit_ptx:
            err, size = nvrtc.nvrtcGetPTXSize(prog)
            _ok(err, "nvrtcGetPTXSize", prog)
            buf = b" " * size
            _ok(nvrtc.nvrtcGetPTX(prog, buf)[0], "nvrtcGetPTX", prog)
            ptx = buf.rstrip(b"\x00").decode()
        lowered = {}
        for n in names:
            err, low = nvrtc.nvrtcGetLoweredName(prog, n.encode())
            _ok(err, f"nvrtcGetLoweredName({n!r})", prog)
            lowered[n] = low.decode() if isinstance(low, bytes) else str(low)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CompiledModule(cubin=cubin, arch=arch, ptx=ptx, log=log, resources=parse_ptxas_log(log),
                          lowered_names=lowered, compile_seconds=time.perf_counter() - t0)


def ptx_only(source: str, arch, options=()) -> str | None:
    """The PTX NVRTC generates for ``source`` on ``arch`` without running ptxas (``compute_XX`` target), or
    None when even that fails: what a ptxas error's line number refers to."""
    a = supported_target(arch)
    opts = [f"--gpu-architecture=compute_{a.sm}{a.suffix}", "-std=c++17", "-default-device"]
    opts += [f"-I{d}" for d in include_dirs()] + list(check_options(options))
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"ptx_only.cu", 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return None
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
        return buf.rstrip(b"\x00").decode(errors="replace")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
