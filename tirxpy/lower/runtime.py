"""Load cubins with the CUDA driver and launch kernels on torch's current stream.

    mod = load_module(compile_cuda(src, "sm_90a"))
    k = mod.function("my_kernel")
    launch(k, grid=(132,), block=(128,), args=[x, y, 1.5],
           specs=[ParamSpec("x", dtype="bfloat16"), ParamSpec("y", dtype="float32"), ParamSpec("alpha", "scalar", "float32")],
           cluster=(2, 1, 1), smem_bytes=200_000)

Every argument is checked against its ParamSpec before launch (device, dtype, shape, strides,
alignment) and a LaunchError names the parameter. The launch path is lean: each Launcher
owns one argument buffer and a fixed ``void*`` array; a launch packs values with one
``struct.pack_into`` and passes the array's address to the driver. ``Launcher.bind`` (and
``CompiledKernel.bind``) checks and packs once into a private copy (tirxpy/lower/bound_launch.py):
launching that is the driver call alone.
"""
from __future__ import annotations

import ctypes
import operator
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from .errors import DriverError, LaunchError

# ---------------------------------------------------------------- driver access
_DRV = None


def _driver():
    global _DRV
    if _DRV is None:
        try:
            from cuda.bindings import driver  # noqa: PLC0415
        except ImportError as e:  # pragma: no cover
            raise DriverError("cuda-bindings is not installed: pip install 'cuda-bindings>=13.0,<14'") from e
        _DRV = driver
    return _DRV


def _check(err, call: str, what: str = ""):
    drv = _driver()
    if err != drv.CUresult.CUDA_SUCCESS:
        try:
            _, name = drv.cuGetErrorName(err)
            _, text = drv.cuGetErrorString(err)
            desc = f"{name.decode()}: {text.decode()}"
        except Exception:  # noqa: BLE001 - the error name is best effort
            desc = str(err)
        raise DriverError(f"{call} failed ({desc})" + (f" for {what}" if what else ""))


_CTX: dict = {}


def ensure_context(device_index: int | None = None) -> int:
    """Make torch's CUDA context (the device's primary context) current on this thread."""
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        raise DriverError("no CUDA GPU is available (torch.cuda.is_available() is False); "
                          "tirxpy kernels need an NVIDIA GPU to run")
    torch.cuda.init()
    idx = torch.cuda.current_device() if device_index is None else int(device_index)
    drv = _driver()
    ctx = _CTX.get(idx)
    if ctx is None:
        _check(drv.cuInit(0)[0], "cuInit")
        err, dev = drv.cuDeviceGet(idx)
        _check(err, "cuDeviceGet")
        err, ctx = drv.cuDevicePrimaryCtxRetain(dev)
        _check(err, "cuDevicePrimaryCtxRetain")
        _CTX[idx] = ctx
    _check(drv.cuCtxSetCurrent(ctx)[0], "cuCtxSetCurrent")
    return idx


def _stream_getter():
    import torch  # noqa: PLC0415

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda idx: torch.cuda.current_stream(idx).cuda_stream


# ---------------------------------------------------------------- dtypes
_TORCH_NAMES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float16": "float16", "bfloat16": "bfloat16",
    "float32": "float32", "float64": "float64", "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2",
}
_SCALAR_FMT = {"bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "uint64": "Q", "float16": "e", "float32": "f", "float64": "d"}
_SCALAR_RANGE = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _int_range(dtype: str) -> tuple:
    """``(lo, hi)`` of an integer scalar dtype ('int32', 'uint8', ...)."""
    bits = _SCALAR_RANGE.get(dtype)
    return (-(1 << bits), (1 << bits) - 1) if bits else (0, (1 << int(dtype[4:])) - 1)


def torch_dtype_name(dt, param: str = "tensor") -> str:
    """torch.dtype -> canonical dtype string ('bfloat16', 'float8_e4m3', ...)."""
    name = str(dt).replace("torch.", "")
    if name not in _TORCH_NAMES:
        raise LaunchError(param, f"torch dtype {dt} has no tirxpy dtype; supported: {sorted(_TORCH_NAMES.values())}")
    return _TORCH_NAMES[name]


# ---------------------------------------------------------------- parameter specs
KINDS = ("tensor", "scalar", "tensormap")
_STRIDED = None             # torch.strided, set when the first ArgPacker imports torch
_grad_enabled = None        # torch.is_grad_enabled


@dataclass(frozen=True)
class ParamSpec:
    """What a kernel parameter accepts.

    - ``tensor``: a torch tensor passed as a device pointer. ``dtype`` (None: any), ``shape`` /
      ``strides`` (element strides; None or None entries: any), ``align`` (bytes of data_ptr).
    - ``scalar``: a Python number of ``dtype``.
    - ``tensormap``: a torch tensor turned into a TMA map for the shared tile ``box`` with
      ``layout`` (or explicit ``swizzle``); or a ready 128-byte encoded map.
    """

    name: str
    kind: str = "tensor"
    dtype: str | None = None
    shape: tuple | None = None
    strides: tuple | None = None
    align: int = 16
    box: tuple | None = None
    layout: Any = None
    swizzle: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise LaunchError(self.name, f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "scalar" and self.dtype not in _SCALAR_FMT:
            raise LaunchError(self.name, f"a scalar parameter needs a dtype among {sorted(_SCALAR_FMT)}, got {self.dtype!r}")
        if self.kind == "tensormap" and self.box is None:
            raise LaunchError(self.name, "a tensormap parameter needs box=(shared tile shape, outermost first)")
        if not isinstance(self.align, int) or self.align < 1 or self.align & (self.align - 1):
            raise LaunchError(self.name, f"align must be a power of two, got {self.align!r}")


class ArgPacker:
    """Checks launch arguments against specs and packs them into one buffer with a ``void*`` array.

    ``device`` is a torch.device (or string) every tensor must be on; CPU tests pass "cpu".
    """

    def __init__(self, specs: Sequence[ParamSpec], device="cuda:0"):
        import torch  # noqa: PLC0415

        global _STRIDED, _grad_enabled
        _STRIDED, _grad_enabled = torch.strided, torch.is_grad_enabled
        self.specs = tuple(specs)
        self.device = torch.device(device)
        self._tensor_type = torch.Tensor
        self._torch_dtype = {}
        # slot -> (dtype, shape, strides, positions of the fixed strides or None for all, align)
        # when the spec fixes dtype and shape: the fast check of _tensor. Equal requirements share
        # one tuple, so a tensor accepted for one slot is accepted for the next by identity.
        self._exact = {}
        interned: dict = {}
        fmt, off, slots, tmaps = "<", 0, [], []
        for i, s in enumerate(self.specs):
            if s.dtype is not None and s.kind != "scalar":
                self._torch_dtype[i] = _torch_dtype(s.dtype, s.name)
                if s.shape is not None and None not in s.shape and s.strides is not None \
                        and len(s.strides) == len(s.shape):
                    fixed = tuple(d for d, st in enumerate(s.strides) if st is not None)
                    ex = (self._torch_dtype[i], torch.Size(s.shape), tuple(s.strides),
                          None if len(fixed) == len(s.strides) else fixed, s.align)
                    self._exact[i] = interned.setdefault(ex, ex)
            if s.kind == "tensormap":
                tmaps.append(i)
                continue
            code = "Q" if s.kind == "tensor" else _SCALAR_FMT[s.dtype]
            pad = (-off) % 8
            fmt += "x" * pad
            off += pad
            slots.append((i, off))
            fmt += code
            off += struct.calcsize("<" + code)
        self._struct = struct.Struct(fmt)
        tm_off = {}
        off = (off + 63) // 64 * 64
        for i in tmaps:
            tm_off[i] = off
            off += 128
        self.nbytes = max(off, 8)
        self._raw = (ctypes.c_char * (self.nbytes + 64))()
        base = ctypes.addressof(self._raw)
        self._shift = (-base) % 64
        self._mv = memoryview(self._raw).cast("B")[self._shift:self._shift + self.nbytes]
        addr = {i: base + self._shift + o for i, o in slots}
        addr.update({i: base + self._shift + o for i, o in tm_off.items()})
        self._ptrs = (ctypes.c_void_p * max(len(self.specs), 1))(*[addr[i] for i in range(len(self.specs))])
        self.params_address = ctypes.addressof(self._ptrs)
        self._tm_off = tm_off
        self._tm_cache: dict = {}
        self._tm_last: dict = {}    # slot -> the map object last written into the buffer
        self._fast = self._straight_line()

    def _straight_line(self):
        """A ``fast(args) -> bool`` that packs ``args`` when every check passes on its common path, else
        returns False (and :meth:`pack` runs the full checks, which name what is wrong); None when some
        slot has no fixed dtype and shape. Written out as one Python function per packer (no loop over
        the specs, no per-slot calls: half of ``pack``'s time for a GEMM's seven slots), it accepts exactly
        what the checks of :meth:`_tensor` / :meth:`_scalar` accept on their fast paths: a tensor of the
        spec's dtype, shape, device and fixed strides with an aligned pointer (the same object in a later
        slot with the same requirements is not checked again), a tensor map already in the cache for that
        pointer, an ``int`` in range / a ``float`` / a ``bool`` for scalars of those kinds."""
        import torch  # noqa: PLC0415

        env = {"struct": struct, "_T": torch.Tensor, "DEV": self.device, "PACK": self._struct.pack_into, "MV": self._mv,
               "TMC": self._tm_cache, "LAST": self._tm_last, "GRAD": torch.is_grad_enabled}
        src = ["def fast(args):", f"    if len(args) != {len(self.specs)}:", "        return False"]
        vals, first = [], {}
        for i, s in enumerate(self.specs):
            src.append(f"    a{i} = args[{i}]")
            if s.kind == "scalar":
                if s.dtype == "bool":
                    src.append(f"    if a{i}.__class__ is not bool:")
                elif s.dtype.startswith(("int", "uint")):
                    lo, hi = _int_range(s.dtype)
                    src.append(f"    if a{i}.__class__ is not int or not {lo} <= a{i} <= {hi}:")
                else:
                    src.append(f"    if a{i}.__class__ is not float:")
                src.append("        return False")
                vals.append(f"a{i}")
                continue
            ex = self._exact.get(i)
            if ex is None or (s.kind == "tensormap" and ex[3] is not None):
                return None
            dt, shp, st, fixed, align = ex
            env[f"DT{i}"], env[f"SH{i}"], env[f"ST{i}"] = dt, shp, st
            strides = f"a{i}.stride() != ST{i}" if fixed is None else \
                " or ".join(f"a{i}.stride({d}) != {st[d]}" for d in fixed) or "False"
            check = [f"if not isinstance(a{i}, _T) or a{i}.dtype is not DT{i} or a{i}.shape != SH{i} "
                     f"or a{i}.device != DEV or (a{i}.requires_grad and GRAD()) or {strides}:", "    return False",
                     f"p{i} = a{i}.data_ptr()", f"if p{i} % {align}:", "    return False"]
            j = first.setdefault(id(ex), i)
            if j != i:      # equal requirements (interned): the same object needs no second check
                src += [f"    if a{i} is a{j}:", f"        p{i} = p{j}", "    else:"] + ["        " + c for c in check]
            else:
                src += ["    " + c for c in check]
            if s.kind == "tensormap":
                o = self._tm_off[i]
                src += [f"    b = TMC.get(({i}, p{i}))", "    if b is None:", "        return False",
                        f"    if b is not LAST.get({i}):", f"        MV[{o}:{o + 128}] = b", f"        LAST[{i}] = b"]
            else:
                vals.append(f"p{i}")
        src += [f"    PACK(MV, 0, {', '.join(vals)})" if vals else "    pass", "    return True"]
        # a tensor without strides or a data pointer (sparse, nested) raises in stride() / data_ptr(): the full
        # checks then name what is wrong (a try block costs nothing when nothing raises)
        src = src[:1] + ["    try:"] + ["    " + ln for ln in src[1:]] + ["    except (RuntimeError, OverflowError, struct.error):", "        return False"]
        exec(compile("\n".join(src), f"<ArgPacker.fast {', '.join(s.name for s in self.specs)}>", "exec"), env)
        return env["fast"]

    # -- checks ----------------------------------------------------------------------
    def _tensor(self, i, s, t, seen=None):
        """``t``'s data pointer once it meets spec ``s`` of slot ``i`` (LaunchError otherwise).

        The common case is fast: a spec that fixes dtype and shape, met exactly, is accepted with a
        few comparisons, and ``seen`` (``id -> (requirements, pointer)`` for this launch's
        arguments) accepts a tensor already accepted for equal requirements at once. Anything else
        takes the full check, which names what is wrong."""
        ex = self._exact.get(i)
        if ex is not None:
            if seen is not None:
                hit = seen.get(id(t))
                if hit is not None and hit[0] is ex:
                    return hit[1]
            if isinstance(t, self._tensor_type) and t.dtype is ex[0] and t.shape == ex[1] and t.device == self.device \
                    and t.layout is _STRIDED and not (t.requires_grad and _grad_enabled()):
                st = t.stride()
                if st == ex[2] if ex[3] is None else all(st[d] == ex[2][d] for d in ex[3]):
                    ptr = t.data_ptr()
                    if not ptr % ex[4]:
                        if seen is not None:
                            seen[id(t)] = (ex, ptr)
                        return ptr
        return self._tensor_checked(i, s, t)

    def _tensor_checked(self, i, s, t):
        import torch  # noqa: PLC0415

        if not isinstance(t, torch.Tensor):
            raise LaunchError(s.name, f"expects a torch.Tensor, got {type(t).__name__}")
        if t.layout is not torch.strided or t.is_nested:
            what = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
            raise LaunchError(s.name, f"is a {what} tensor; a kernel takes dense (torch.strided) tensors — convert "
                                      f"with .to_dense()")
        want = self._torch_dtype.get(i)
        if want is not None and t.dtype != want:
            raise LaunchError(s.name, f"dtype is {torch_dtype_name(t.dtype, s.name)}, the kernel expects {s.dtype} — "
                                      f"convert with .to({want})")
        if t.device != self.device:
            raise LaunchError(s.name, f"tensor is on {t.device}, the kernel runs on {self.device} — move it with "
                                      f".to('{self.device}')")
        if t.requires_grad and torch.is_grad_enabled():
            raise LaunchError(s.name, "tensor requires grad, but autograd does not see a tirxpy kernel (its result would "
                                      "have no gradient) — call the kernel under torch.no_grad() or pass .detach()")
        if s.shape is not None:
            shp = tuple(t.shape)
            if len(shp) != len(s.shape) or any(e is not None and e != g for e, g in zip(s.shape, shp)):
                raise LaunchError(s.name, f"shape is {shp}, the kernel expects {_fmt_dims(s.shape)}")
        if s.strides is not None:
            st = t.stride()
            if len(st) != len(s.strides) or any(e is not None and e != g for e, g in zip(s.strides, st)):
                raise LaunchError(s.name, f"strides are {st}, the kernel expects {_fmt_dims(s.strides)} "
                                          f"(elements) — call .contiguous() or make a copy with the expected layout")
        ptr = t.data_ptr()
        if ptr % s.align:
            raise LaunchError(s.name, f"data pointer 0x{ptr:x} is not {s.align}-byte aligned (offset {ptr % s.align}); "
                                      f"TMA / vector accesses need it — use a fresh allocation or .clone()")
        return ptr

    def _tensormap(self, i, s, t, seen=None) -> bytes:
        if isinstance(t, (bytes, bytearray)):
            if len(t) != 128:
                raise LaunchError(s.name, f"an encoded tensor map is 128 bytes, got {len(t)}")
            return bytes(t)
        ptr = self._tensor(i, s, t, seen)
        # one map per parameter slot: a tensor behind two slots (two TMA boxes of one operand) needs
        # both; when the spec fixes dtype, shape and every stride the pointer alone tells maps apart
        ex = self._exact.get(i)
        key = (i, ptr) if ex is not None and ex[3] is None else (i, ptr, tuple(t.shape), t.stride(), t.dtype)
        blob = self._tm_cache.get(key)
        if blob is None:
            from .errors import TmaError  # noqa: PLC0415
            from .tma import tensor_map_for  # noqa: PLC0415

            try:
                blob = tensor_map_for(t, s.box, s.layout, swizzle=s.swizzle, param=s.name)
            except TmaError as e:
                raise LaunchError(s.name, str(e)) from e
            if len(self._tm_cache) > 256:
                self._tm_cache.clear()
            self._tm_cache[key] = blob
        return blob

    def _scalar(self, s, v):
        if s.dtype == "bool":
            if not isinstance(v, (bool, int)):
                raise LaunchError(s.name, f"expects a bool, got {type(v).__name__}")
            return bool(v)
        if s.dtype.startswith(("int", "uint")):
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, bool) or not hasattr(v, "__index__"):
                    raise LaunchError(s.name, f"expects an integer ({s.dtype}), got {type(v).__name__} {v!r:.80}")
                v = _convert(s, v, operator.index, "an integer")
            lo, hi = _int_range(s.dtype)
            if not lo <= v <= hi:
                raise LaunchError(s.name, f"value {v} does not fit {s.dtype} [{lo}, {hi}]")
            return v
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            if isinstance(v, bool) or not hasattr(v, "__float__"):
                raise LaunchError(s.name, f"expects a number ({s.dtype}), got {type(v).__name__}")
        v = _convert(s, v, float, "a number")
        try:
            struct.pack("<" + _SCALAR_FMT[s.dtype], v)
        except (OverflowError, struct.error):
            raise LaunchError(s.name, f"value {v!r} does not fit {s.dtype}") from None
        return v

    def check(self, args) -> None:
        """Check ``args`` against the specs (count, kinds, dtypes, devices, shapes, strides, alignment)
        without packing them or building tensor maps: needs no GPU."""
        specs = self.specs
        if not isinstance(args, (tuple, list)) or len(args) != len(specs):
            names = ", ".join(s.name for s in specs)
            n = len(args) if isinstance(args, (tuple, list)) else type(args).__name__
            raise LaunchError("args", f"the kernel takes {len(specs)} arguments ({names}), got {n}")
        for i, (s, a) in enumerate(zip(specs, args)):
            if s.kind == "scalar":
                self._scalar(s, a)
            elif s.kind == "tensormap" and isinstance(a, (bytes, bytearray)):
                if len(a) != 128:
                    raise LaunchError(s.name, f"an encoded tensor map is 128 bytes, got {len(a)}")
            else:
                self._tensor_checked(i, s, a)

    def pack(self, args) -> int:
        """Check ``args`` and write them into the buffer; returns the ``void**`` address."""
        fast = self._fast
        if fast is not None and fast(args):
            return self.params_address
        specs = self.specs
        if len(args) != len(specs):
            names = ", ".join(s.name for s in specs)
            raise LaunchError("args", f"the kernel takes {len(specs)} arguments ({names}), got {len(args)}")
        if not specs:
            return self.params_address
        vals, seen, last = [], {}, self._tm_last
        for i, (s, a) in enumerate(zip(specs, args)):
            k = s.kind
            if k == "tensor":
                vals.append(self._tensor(i, s, a, seen))
            elif k == "scalar":
                vals.append(self._scalar(s, a))
            else:
                blob = self._tensormap(i, s, a, seen)
                if blob is not last.get(i):     # the buffer already holds this map otherwise
                    off = self._tm_off[i]
                    self._mv[off:off + 128] = blob
                    last[i] = blob
        self._struct.pack_into(self._mv, 0, *vals)
        return self.params_address

    def packed_bytes(self) -> bytes:
        return bytes(self._mv)


def _convert(s, v, to, what):
    """``to(v)`` for a number-like argument (a numpy or torch scalar), LaunchError when it is not one."""
    try:
        return to(v)
    except (TypeError, ValueError, OverflowError, RuntimeError) as e:
        raise LaunchError(s.name, f"expects {what} ({s.dtype}), got {type(v).__name__} ({e})") from None


def _fmt_dims(dims) -> str:
    return "(" + ", ".join("*" if d is None else str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _torch_dtype(name: str, param: str):
    import torch  # noqa: PLC0415

    inv = {v: k for k, v in _TORCH_NAMES.items()}
    if name not in inv or not hasattr(torch, inv[name]):
        raise LaunchError(param, f"dtype {name!r} has no torch dtype; use one of {sorted(inv)}")
    return getattr(torch, inv[name])


# ---------------------------------------------------------------- modules and kernels
class Module:
    """A cubin loaded on one device."""

    def __init__(self, cubin: bytes, device_index: int, compiled=None):
        drv = _driver()
        self.device_index = device_index
        self.compiled = compiled
        self._image = ctypes.create_string_buffer(cubin, len(cubin))  # keep the image alive
        err, self.handle = drv.cuModuleLoadData(ctypes.addressof(self._image))
        _check(err, "cuModuleLoadData", "the cubin (was it compiled for this GPU's arch?)")
        self._functions: dict = {}

    def function(self, name: str) -> "Kernel":
        k = self._functions.get(name)
        if k is None:
            sym = self.compiled.kernel_name(name) if self.compiled is not None else name
            err, h = _driver().cuModuleGetFunction(self.handle, sym.encode())
            if err != _driver().CUresult.CUDA_SUCCESS:
                known = sorted(self.compiled.resources) if self.compiled is not None else []
                raise DriverError(f"no kernel {name!r} in the module (cuModuleGetFunction: {err.name}); "
                                  f"kernels: {known} — declare it extern \"C\" or pass name_expressions")
            k = self._functions[name] = Kernel(self, name, h)
        return k


def _parse_arch(arch: str) -> tuple:
    digits = arch.removeprefix("sm_").rstrip("af")
    return int(digits[:-1]), int(digits[-1]), arch.endswith(("a", "f"))


def cubin_runs_on(arch: str, capability: tuple) -> bool:
    """Whether a cubin compiled for ``arch`` ("sm_80", "sm_90a") runs on a GPU of compute
    ``capability`` ((9, 0) for an H100): same major version and no newer minor version; an
    arch-specific target ("sm_90a") only on exactly that GPU.

        >>> cubin_runs_on("sm_80", (8, 6)), cubin_runs_on("sm_80", (9, 0)), cubin_runs_on("sm_90a", (9, 0))
        (True, False, True)
    """
    major, minor, specific = _parse_arch(arch)
    if specific:
        return (major, minor) == tuple(capability)
    return major == capability[0] and minor <= capability[1]


def arch_for(capability: tuple) -> str:
    """The target to build for a GPU of this compute capability: (9, 0) -> "sm_90a",
    (10, 0) -> "sm_100a" (the arch-specific targets that have wgmma / tcgen05), else "sm_XY"."""
    major, minor = capability
    return {(9, 0): "sm_90a", (10, 0): "sm_100a"}.get((major, minor), f"sm_{major}{minor}")


def device_arch(device=None) -> str:
    """The arch to build for torch's current (or the given) CUDA device."""
    import torch  # noqa: PLC0415

    return arch_for(torch.cuda.get_device_capability(device))


def load_module(cubin, device=None) -> Module:
    """Load a cubin (bytes or CompiledModule) into torch's context on ``device`` (default: current)."""
    compiled = None
    if hasattr(cubin, "cubin"):
        compiled, cubin = cubin, cubin.cubin
    if isinstance(device, str) or device is not None and not isinstance(device, int):
        import torch  # noqa: PLC0415

        device = torch.device(device).index
    idx = ensure_context(device)
    arch = getattr(compiled, "arch", None)
    if arch:
        import torch  # noqa: PLC0415

        cap = torch.cuda.get_device_capability(idx)
        if not cubin_runs_on(arch, cap):
            raise LaunchError("arch", f"the kernel was compiled for {arch}, but GPU {idx} "
                                      f"({torch.cuda.get_device_name(idx)}) is sm_{cap[0]}{cap[1]}; a cubin runs only "
                                      f"on its own architecture. Build with arch='{arch_for(cap)}' (instructions "
                                      f"whose lowest target is older run there too)")
    return Module(bytes(cubin), idx, compiled)


class Kernel:
    """A kernel function handle plus its launch machinery."""

    def __init__(self, module: Module, name: str, handle):
        self.module, self.name, self.handle = module, name, handle
        self.device_index = module.device_index
        self._max_dyn_smem = 48 * 1024
        self._launchers: dict = {}
        self._configs: dict = {}
        self._stream = _stream_getter()
        self._optin = None

    def attribute(self, attr: str) -> int:
        drv = _driver()
        err, v = drv.cuFuncGetAttribute(getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{attr.upper()}"),
                                        self.handle)
        _check(err, "cuFuncGetAttribute", attr)
        return v

    def _smem_optin(self) -> int:
        if self._optin is None:
            drv = _driver()
            err, dev = drv.cuDeviceGet(self.device_index)
            _check(err, "cuDeviceGet")
            err, v = drv.cuDeviceGetAttribute(
                drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev)
            _check(err, "cuDeviceGetAttribute")
            self._optin = v
        return self._optin

    def set_max_dynamic_smem(self, nbytes: int) -> None:
        """Raise the kernel's dynamic shared-memory limit (needed above 48 KiB)."""
        limit = self._smem_optin() - self.attribute("shared_size_bytes")
        if nbytes > limit:
            raise LaunchError("smem_bytes", f"{nbytes} bytes of dynamic shared memory exceed this GPU's limit of "
                                            f"{limit} (opt-in maximum minus the kernel's static shared memory)")
        drv = _driver()
        _check(drv.cuFuncSetAttribute(self.handle,
                                      drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      int(nbytes))[0], "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
        self._max_dyn_smem = nbytes

    def launcher(self, specs: Sequence[ParamSpec], backend: str | None = None) -> "Launcher":
        """The Launcher for these parameter specs (made once; ``backend``: see Launcher)."""
        key = (tuple(specs), backend)
        ln = self._launchers.get(key)
        if ln is None:
            import torch  # noqa: PLC0415

            ln = self._launchers[key] = Launcher(self, ArgPacker(key[0], torch.device("cuda", self.device_index)),
                                                 backend)
        return ln

    def _config(self, grid, block, smem, cluster, pdl=False):
        """A cuda-bindings ``CUlaunchConfig`` with a cluster-dimension attribute (``cluster`` not None) and the
        programmatic-stream-serialization one (``pdl``)."""
        key = (grid, block, smem, cluster, pdl)
        cfg = self._configs.get(key)
        if cfg is None:
            drv = _driver()
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
            cfg.sharedMemBytes = smem
            attrs = []
            if cluster is not None:
                attr = drv.CUlaunchAttribute()
                attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
                attrs.append(attr)
            if pdl:
                attr = drv.CUlaunchAttribute()
                attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                attr.value.programmaticStreamSerializationAllowed = 1
                attrs.append(attr)
            cfg.attrs = attrs
            cfg.numAttrs = len(attrs)
            if cluster is not None and cluster[0] * cluster[1] * cluster[2] > 8:
                _check(drv.cuFuncSetAttribute(
                    self.handle, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)[0],
                    "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")
            self._configs[key] = cfg
        return cfg


_GRID_MAX = ((1 << 31) - 1, 65535, 65535)
_BLOCK_MAX = (1024, 1024, 64)


def _dim3(v, what) -> tuple:
    if isinstance(v, int):
        v = (v,)
    try:
        v = tuple(int(x) for x in v)
    except (TypeError, ValueError):
        raise LaunchError(what, f"must be an int or a tuple of up to 3 ints, got {v!r}") from None
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise LaunchError(what, f"must be 1-3 positive ints, got {v}")
    return v + (1,) * (3 - len(v))


class _LaunchAttr(ctypes.Structure):
    """``CUlaunchAttribute`` (cuda.h): an id, padding to 8 bytes, a 64-byte value union."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


class _LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig`` (cuda.h), passed by address to ``cuLaunchKernelEx``."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("numAttrs", ctypes.c_uint)]


def _make_config(grid, block, smem, stream, cluster, pdl=False):
    """A ``CUlaunchConfig`` for ``cuLaunchKernelEx`` with optional cluster-dimension and programmatic-stream-
    serialization (``pdl``) attributes; returns ``(struct, attrs, address)`` (keep the first two alive while
    the address is used)."""
    cfg = _LaunchConfig(*grid, *block, smem, stream or None, None, 0)
    attrs = (_LaunchAttr * 2)()
    n = 0
    drv = _driver()
    if cluster is not None:
        attrs[n].id = int(drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attrs[n].value[0], attrs[n].value[1], attrs[n].value[2] = cluster
        n += 1
    if pdl:
        attrs[n].id = int(drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        attrs[n].value[0] = 1
        n += 1
    if n:
        cfg.attrs, cfg.numAttrs = ctypes.addressof(attrs), n
    return cfg, attrs, ctypes.addressof(cfg)


_LAUNCH_EX = []


def _launch_ex_ctypes():
    """libcuda's ``cuLaunchKernelEx`` as a ctypes function that keeps the GIL (PyDLL: no release /
    re-acquire around a call of a few microseconds), or None where libcuda cannot be opened this way."""
    if not _LAUNCH_EX:
        fn = None
        try:
            fn = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
            fn.argtypes = [ctypes.c_void_p] * 4
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _LAUNCH_EX.append(fn)
    return _LAUNCH_EX[0]


class Launcher:
    """A kernel bound to parameter specs; call it to launch.

    The launch path: pack the arguments (checked) into the bound buffer, look up a prepared
    ``CUlaunchConfig`` by ``(grid, block, cluster, smem, stream)`` and make one ctypes call to
    libcuda's ``cuLaunchKernelEx`` with four pointer arguments (``backend="ctypes"``, the
    default). ``backend="bindings"`` goes through cuda-bindings' ``cuLaunchKernel`` instead
    (measured on the H100 host: 7.44 vs 7.14 us per whole launch; the bare driver call alone
    costs 5.2 us there, so the launcher adds about 0.8 us); it is
    also the fallback where libcuda cannot be opened with ctypes.
    """

    def __init__(self, kernel: Kernel, packer: ArgPacker, backend: str | None = None):
        if backend not in (None, "ctypes", "bindings"):
            raise LaunchError("backend", f"must be 'ctypes' or 'bindings', got {backend!r}")
        self.kernel, self.packer = kernel, packer
        self._dims: dict = {}
        self._cfgs: dict = {}
        drv = _driver()
        fn = _launch_ex_ctypes() if backend != "bindings" else None
        if backend == "ctypes" and fn is None:
            raise LaunchError("backend", "libcuda.so.1 could not be opened with ctypes; use backend='bindings'")
        self.backend = "ctypes" if fn is not None else "bindings"
        self._fn = fn
        self._fh = int(kernel.handle) if fn is not None else None
        self._launch_plain = drv.cuLaunchKernel
        self._success = drv.CUresult.CUDA_SUCCESS
        self._streams: dict = {}

    def _checked_dims(self, grid, block, cluster):
        key = (grid, block, cluster)
        d = self._dims.get(key)
        if d is None:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
            for what, dims, his in (("grid", g, _GRID_MAX), ("block", b, _BLOCK_MAX)):
                for d, (n, hi) in enumerate(zip(dims, his)):
                    if n > hi:
                        raise LaunchError(what, f"{dims} has {n} in dimension {'xyz'[d]}; at most {hi}")
            if b[0] * b[1] * b[2] > 1024:
                raise LaunchError("block", f"{b} has {b[0] * b[1] * b[2]} threads; a CTA has at most 1024")
            c = None
            if cluster is not None:
                c = _dim3(cluster, "cluster")
                if any(gi % ci for gi, ci in zip(g, c)):
                    raise LaunchError("cluster", f"cluster dims {c} must divide the grid {g} in every dimension")
                if c[0] * c[1] * c[2] > 16:
                    raise LaunchError("cluster", f"{c} has {c[0] * c[1] * c[2]} CTAs; a cluster has at most 16")
            d = self._dims[key] = (g, b, c)
        return d

    def _prepare(self, key, grid, block, cluster, smem_bytes, stream, pdl=False):
        """Checked dims, the dynamic shared-memory limit raised, a CUlaunchConfig for the key."""
        g, b, c = self._checked_dims(grid, block, cluster)
        k = self.kernel
        if smem_bytes > k._max_dyn_smem:
            k.set_max_dynamic_smem(smem_bytes)
        if c is not None:
            k._config(g, b, smem_bytes, c)   # sets the non-portable cluster function attribute when needed
        if len(self._cfgs) > 64:
            self._cfgs.clear()
        entry = self._cfgs[key] = _make_config(g, b, smem_bytes, stream, c, pdl)
        return entry

    def __call__(self, grid, block, args, *, smem_bytes: int = 0, cluster=None, stream=None, pdl=False) -> None:
        self._launch(self.packer.pack(args), grid, block, smem_bytes, cluster, stream, pdl)

    def bind(self, grid, block, args, *, smem_bytes: int = 0, cluster=None, pdl=False):
        """Check and pack ``args`` now; the returned :class:`~tirxpy.lower.bound_launch.BoundLaunch` launches
        with them later, without checks (it keeps their addresses, not the tensors)."""
        from .bound_launch import BoundLaunch, PackedArgs  # noqa: PLC0415

        self.packer.pack(args)
        self._checked_dims(grid, block, cluster)
        return BoundLaunch(self, PackedArgs(self.packer), grid, block, smem_bytes, cluster, pdl)

    def _launch(self, params, grid, block, smem_bytes, cluster, stream, pdl) -> None:
        """One launch with packed ``params`` (a ``void**`` address) on ``stream`` (None: torch's current one)."""
        k = self.kernel
        if stream is None:
            stream = k._stream(k.device_index)
        elif not isinstance(stream, int):
            stream = getattr(stream, "cuda_stream", stream)
        fn = self._fn
        if fn is not None:
            key = (grid, block, cluster, smem_bytes, stream, pdl)
            entry = self._cfgs.get(key)
            if entry is None:
                entry = self._prepare(key, grid, block, cluster, smem_bytes, stream, pdl)
            err = fn(entry[2], self._fh, params, None)
            if err == 0:
                return
            self._error(err, params, grid, block, smem_bytes, cluster, stream, pdl)
            return
        d = self._dims.get((grid, block, cluster))
        g, b, c = d if d is not None else self._checked_dims(grid, block, cluster)
        if smem_bytes > k._max_dyn_smem:
            k.set_max_dynamic_smem(smem_bytes)
        drv = _driver()
        if c is None and not pdl:
            st = self._streams.get(stream)  # a CUstream object per handle: the binding converts ints each call
            if st is None:
                st = self._streams[stream] = drv.CUstream(stream)
            (err,) = self._launch_plain(k.handle, g[0], g[1], g[2], b[0], b[1], b[2], smem_bytes, st, params, 0)
        else:
            cfg = k._config(g, b, smem_bytes, c, pdl)
            cfg.hStream = drv.CUstream(stream)
            (err,) = drv.cuLaunchKernelEx(cfg, k.handle, params, 0)
        if err != self._success:
            self._error(int(err), params, grid, block, smem_bytes, cluster, stream, pdl)

    def _error(self, err, params, grid, block, smem_bytes, cluster, stream, pdl=False):
        drv = _driver()
        k = self.kernel
        code = drv.CUresult(err)
        if code == drv.CUresult.CUDA_ERROR_INVALID_CONTEXT and not getattr(self, "_retrying", False):
            ensure_context(k.device_index)     # e.g. a new thread: make torch's context current, retry once
            self._retrying = True
            try:
                return self._launch(params, grid, block, smem_bytes, cluster, stream, pdl)
            finally:
                self._retrying = False
        g, b, _ = self._checked_dims(grid, block, cluster)
        _check(code, "cuLaunchKernelEx" if (cluster is not None or pdl or self._fn is not None) else "cuLaunchKernel",
               f"kernel {k.name} grid {g} block {b}")


def _infer_specs(args) -> tuple:
    import torch  # noqa: PLC0415

    specs = []
    ctypes_dt = {ctypes.c_int32: "int32", ctypes.c_uint32: "uint32", ctypes.c_int64: "int64",
                 ctypes.c_uint64: "uint64", ctypes.c_float: "float32", ctypes.c_double: "float64",
                 ctypes.c_bool: "bool", ctypes.c_int8: "int8", ctypes.c_uint8: "uint8",
                 ctypes.c_int16: "int16", ctypes.c_uint16: "uint16"}
    for i, a in enumerate(args):
        name = f"arg{i}"
        if isinstance(a, torch.Tensor):
            specs.append(ParamSpec(name, "tensor", align=1))
        elif type(a) in ctypes_dt:
            specs.append(ParamSpec(name, "scalar", ctypes_dt[type(a)]))
        elif isinstance(a, (bytes, bytearray)) and len(a) == 128:
            specs.append(ParamSpec(name, "tensormap", box=(1,)))
        else:
            raise LaunchError(name, f"cannot tell the C type of {type(a).__name__} {a!r} without specs; pass "
                                    f"specs=[ParamSpec(...)] or a ctypes scalar such as ctypes.c_int32(5)")
    return tuple(specs)


def launch(kernel: Kernel, grid, block, args=(), *, specs: Sequence[ParamSpec] | None = None, cluster=None,
           smem_bytes: int = 0, stream=None, pdl: bool = False) -> None:
    """Check ``args`` against ``specs`` and launch ``kernel`` on torch's current stream (``pdl``: with
    programmatic stream serialization; the kernel must then execute ``griddepcontrol.wait`` before it
    touches global memory, see :func:`tirxpy.T.launch`)."""
    args = list(args)
    if specs is None:
        specs = _infer_specs(args)
        args = [a.value if isinstance(a, ctypes._SimpleCData) else a for a in args]
    kernel.launcher(specs)(grid, block, args, smem_bytes=smem_bytes, cluster=cluster, stream=stream, pdl=pdl)
