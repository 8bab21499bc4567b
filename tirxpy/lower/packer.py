"""Argument checks and packing: :class:`ArgPacker` checks launch arguments against their
:class:`~tirxpy.lower.params.ParamSpec` (device, dtype, shape, strides, alignment; a tensor the
kernel writes shares no memory with another tensor argument, :func:`~tirxpy.lower.overlap.overlaps`;
a LaunchError names the parameter) and packs them into one buffer with a fixed ``void*`` array.

    >>> import torch
    >>> p = ArgPacker([ParamSpec("n", "scalar", "int32")], device="cpu")
    >>> p.pack([7]) == p.params_address, p.packed_bytes()[:4]
    (True, b'\\x07\\x00\\x00\\x00')
"""
from __future__ import annotations

import ctypes
import operator
import struct
from typing import Sequence

from tirxpy.errors import shown

from .errors import LaunchError
from .overlap import overlaps
from .params import _SCALAR_FMT, ParamSpec, _fmt_dims, _int_range, _torch_dtype, torch_dtype_name

_STRIDED = None             # torch.strided, set when the first ArgPacker imports torch
_grad_enabled = None        # torch.is_grad_enabled



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
        # (written slot, other tensor slot): the pairs a launch checks for shared memory (each pair once)
        written = [i for i, s in enumerate(self.specs) if s.kind == "tensor" and s.written]
        self._alias_pairs = tuple((w, j) for w in written for j, s in enumerate(self.specs)
                                  if j != w and s.kind == "tensor" and not (j in written and j < w)
                                  and s.name not in self.specs[w].may_alias and self.specs[w].name not in s.may_alias)
        self._fast = self._straight_line()

    def _straight_line(self):
        """A ``fast(args) -> bool`` that packs ``args`` when every check passes on its common path, else
        returns False (and :meth:`pack` runs the full checks, which name what is wrong); None when some
        slot has no fixed dtype and shape. Written out as one Python function per packer (no loop over
        the specs, no per-slot calls, so the common launch runs no interpreter loop), it accepts exactly
        what the checks of :meth:`_tensor` / :func:`scalar_value` accept on their fast paths: a tensor of the
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
        src += self._straight_line_aliases(env)
        src += [f"    PACK(MV, 0, {', '.join(vals)})" if vals else "    pass", "    return True"]
        # a tensor without strides or a data pointer (sparse, nested) raises in stride() / data_ptr(), args that
        # are no sequence in len(): the full checks then name what is wrong (a try block costs nothing when nothing raises)
        src = src[:1] + ["    try:"] + ["    " + ln for ln in src[1:]] + ["    except (RuntimeError, OverflowError, TypeError, struct.error):", "        return False"]
        exec(compile("\n".join(src), f"<ArgPacker.fast {', '.join(s.name for s in self.specs)}>", "exec"), env)
        return env["fast"]

    def _straight_line_aliases(self, env) -> list:
        """The fast path's lines for :attr:`_alias_pairs`: return False (the full checks then decide exactly,
        :meth:`_no_alias`) when the byte spans of a written tensor and another tensor argument intersect. A span's
        length is a constant where the spec fixes every stride, else computed from the tensor's strides."""
        import torch  # noqa: PLC0415

        env["EXT"] = _extent
        src, ext = [], {}
        for i in sorted({k for pair in self._alias_pairs for k in pair}):
            dt, shp, st, fixed, _ = self._exact[i]
            if fixed is None:
                n = shp.numel()
                ext[i] = str(0 if n == 0 else (sum((d - 1) * x for d, x in zip(shp, st)) + 1)
                             * torch.empty((), dtype=dt).element_size())
            else:
                ext[i] = f"e{i}"
                src.append(f"    e{i} = EXT(a{i})")
        for w, j in self._alias_pairs:
            if "0" not in (ext[w], ext[j]):
                src += [f"    if -{ext[j]} < p{j} - p{w} < {ext[w]}:", "        return False"]     # spans meet
        return src

    # -- checks ----------------------------------------------------------------------
    def _no_alias(self, args) -> None:
        """LaunchError naming the written tensor when it shares memory with another tensor argument: the
        kernel's parameters are ``__restrict__``, so what it writes must be no other argument's memory."""
        for w, j in self._alias_pairs:
            if overlaps(args[w], args[j]):
                sw, sj = self.specs[w], self.specs[j]
                what = "also writes" if sj.written else "reads"
                raise LaunchError(sw.name, f"shares memory with parameter {shown(sj.name)}, which the kernel {what} "
                                           f"while it writes {shown(sw.name)} (kernel parameters must not alias) — "
                                           "pass separate tensors: a fresh output, or a .clone() of the input")

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

    def check(self, args) -> None:
        """Check ``args`` against the specs (count, kinds, dtypes, devices, shapes, strides, alignment)
        without packing them or building tensor maps: needs no GPU."""
        specs = self.specs
        self._count(args)
        for i, (s, a) in enumerate(zip(specs, args)):
            if s.kind == "scalar":
                scalar_value(s, a)
            elif s.kind == "tensormap" and isinstance(a, (bytes, bytearray)):
                if len(a) != 128:
                    raise LaunchError(s.name, f"an encoded tensor map is 128 bytes, got {len(a)}")
            else:
                self._tensor_checked(i, s, a)
        self._no_alias(args)

    def pack(self, args) -> int:
        """Check ``args`` and write them into the buffer; returns the ``void**`` address."""
        fast = self._fast
        if fast is not None and fast(args):
            return self.params_address
        specs = self.specs
        self._count(args)
        if not specs:
            return self.params_address
        vals, seen, last = [], {}, self._tm_last
        for i, (s, a) in enumerate(zip(specs, args)):
            k = s.kind
            if k == "tensor":
                vals.append(self._tensor(i, s, a, seen))
            elif k == "scalar":
                vals.append(scalar_value(s, a))
            else:
                blob = self._tensormap(i, s, a, seen)
                if blob is not last.get(i):     # the buffer already holds this map otherwise
                    off = self._tm_off[i]
                    self._mv[off:off + 128] = blob
                    last[i] = blob
        if self._alias_pairs:
            self._no_alias(args)
        self._struct.pack_into(self._mv, 0, *vals)
        return self.params_address

    def _count(self, args) -> None:
        """LaunchError unless ``args`` is a tuple or list with one value per spec."""
        if not isinstance(args, (tuple, list)) or len(args) != len(self.specs):
            names = ", ".join(s.name for s in self.specs)
            n = len(args) if isinstance(args, (tuple, list)) else type(args).__name__
            raise LaunchError("args", f"the kernel takes {len(self.specs)} arguments ({names}), got {n}; pass them "
                                      f"as a tuple or list")

    def packed_bytes(self) -> bytes:
        return bytes(self._mv)


def _extent(t) -> int:
    """Bytes from dense tensor ``t``'s first element to the end of its last (0 without elements)."""
    if t.numel() == 0:
        return 0
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()


def scalar_value(s, v):
    """The value scalar parameter ``s`` passes for ``v`` (a Python int, float or bool; numpy / torch scalars
    converted), LaunchError naming the parameter when ``v`` is no value of ``s.dtype``."""
    if s.dtype == "bool":
        if type(v).__name__ in ("bool", "bool_"):      # Python and numpy bools (numpy 1: bool_, numpy 2: bool)
            return bool(v)
        try:
            iv = operator.index(v)
        except Exception:   # noqa: BLE001  (no __index__, or one of its own that raises)
            iv = None
        if iv not in (0, 1):
            raise LaunchError(s.name, f"expects a bool, got {type(v).__name__} {shown(v, 80)}; pass True / False (or 0 "
                                      "/ 1)")
        return bool(iv)
    if s.dtype.startswith(("int", "uint")):
        if type(v) is not int:      # (an int subclass too: its own comparisons and format are its code)
            if isinstance(v, bool) or not hasattr(type(v), "__index__"):
                raise LaunchError(s.name, f"expects an integer ({s.dtype}), got {type(v).__name__} {shown(v, 80)}")
            v = _convert(s, v, operator.index, "an integer")
        lo, hi = _int_range(s.dtype)
        if not lo <= v <= hi:
            raise LaunchError(s.name, f"value {v} does not fit {s.dtype} [{lo}, {hi}]")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        if isinstance(v, bool) or not hasattr(type(v), "__float__"):
            raise LaunchError(s.name, f"expects a number ({s.dtype}), got {type(v).__name__}")
    v = _convert(s, v, float, "a number")
    try:
        struct.pack("<" + _SCALAR_FMT[s.dtype], v)
    except (OverflowError, struct.error):
        raise LaunchError(s.name, f"value {shown(v)} does not fit {s.dtype}") from None
    return v


def _convert(s, v, to, what):
    """``to(v)`` for a number-like argument (a numpy or torch scalar), LaunchError when it is not one."""
    try:
        return to(v)
    except Exception as e:  # noqa: BLE001  (not a number, or a conversion of its own that raises)
        raise LaunchError(s.name, f"expects {what} ({s.dtype}), got {type(v).__name__} ({e})") from None
