"""``T``: the authoring namespace for kernels.

Inside a ``@T.prim_func`` body (see :mod:`tirxpy.ir.parser`):

- ``T.launch(grid=(gx, gy), threads=n, cluster=(cx,), smem=bytes)`` as the first statement;
- hardware ids ``T.cta_id(dim)``, ``T.cluster_rank()``, ``T.cta_id_in_cluster(dim)``,
  ``T.warpgroup_id()``, ``T.warp_id()``, ``T.warp_id_in_wg()``, ``T.lane_id()``,
  ``T.thread_id()``, ``T.thread_id_in_wg()``, and ``T.elect_one()``;
- loops ``for i in T.serial(n)`` / ``T.serial(start, stop)`` / ``T.unroll(...)`` / ``T.rolled(...)``;
- allocations ``buf = T.alloc_shared(shape, dtype, layout=None)``, ``T.alloc_local``,
  ``T.alloc_tmem``, ``T.alloc_buffer(shape, dtype, scope=..., layout=...)``;
- scalar types and casts ``T.float32(1)``, ``T.int64(x)``, ``T.cast(x, "float16")``;
- ``T.select``, ``T.min``, ``T.max``, ``T.ceildiv``, math ``T.exp``, ``T.exp2``, ``T.log``,
  ``T.log2``, ``T.sqrt``, ``T.rsqrt``, ``T.abs``, ``T.tanh``, ``T.floor``, ``T.ceil``, ``T.fma``;
- intrinsics ``T.ptx.<name>(args...)`` / ``T.call_intrin("name", args...)``,
  ``T.address_of(buf[idx])``, ``T.evaluate(expr)``.

Statement macros: ``@T.macro`` marks a function whose body expands inline at each call in a kernel
body (see :mod:`tirxpy.ir.macro`).

Parameter annotations: ``T.Tensor(shape, dtype, scope="global", layout=None)`` and scalar
types (``n: T.int32``). ``T.parse_script(text)`` parses printed kernels.

    >>> from tirxpy import T
    >>> T.float32(1), T.int64(7), T.cast(T.int32(3), "float16")
    (T.float32(1.0), T.int64(7), T.float16(3.0))
    >>> T.ceildiv(T.thread_id() + 1, 32)
    (T.thread_id() + 32) // 32
"""
from __future__ import annotations

import difflib

from tirxpy.errors import shown

from . import ops
from .dtype import CANONICAL, DataType
from .errors import IRError, ParseError
from .expr import AddressOf, BufferLoad, Call, ElectOne, Expr, IntrinsicCall, ScopeId
from .intrin_sig import intrinsic_names, lookup_intrinsic_signature, unknown_intrinsic_message


# ---------------------------------------------------------------- types and constants
class DTypeCtor:
    """``T.float32`` etc.: an annotation for scalar parameters, a constant maker
    (``T.float32(1)``) and a cast (``T.float32(x)``)."""

    def __init__(self, name: str):
        self.__tirx_dtype__ = name
        self.dtype = DataType.get(name)

    def __call__(self, value):
        if isinstance(value, str) and self.dtype.is_float:
            try:
                value = float(str.__str__(value))   # (a str subclass as the plain str it holds)
            except ValueError:
                raise IRError(f"T.{self.dtype.name}({shown(value)}): give a number or 'inf' / 'nan'") from None
        return ops.cast(value, self.dtype)

    def __repr__(self):
        return f"T.{self.dtype.name}"


class TensorSpec:
    """``T.Tensor(shape, dtype, scope="global", layout=None)``: a tensor parameter's type."""

    def __init__(self, shape, dtype, scope: str = "global", layout=None):
        from .buffer import _check_layout, _check_shape, check_storage

        self.shape = _check_shape(shape)
        self.dtype = DataType.get(dtype)
        self.scope = check_storage(scope)
        self.layout = _check_layout(layout)

    def make(self, name: str, span=None):
        from .buffer import Buffer

        return Buffer(name, self.shape, self.dtype, self.scope, self.layout, span=span)

    def __repr__(self):
        return f"T.Tensor({self.shape}, {str(self.dtype)!r}, scope={self.scope!r})"


def Tensor(shape, dtype, scope: str = "global", layout=None) -> TensorSpec:
    """``T.Tensor(shape, dtype, scope="global", layout=None)``: the type of a tensor parameter,
    ``def k(A: T.Tensor((M, K), "bfloat16"), ...)``."""
    return TensorSpec(shape, dtype, scope, layout)


# ---------------------------------------------------------------- parser-only requests
def _need_parse(what: str):
    from .parser import in_parse

    if not in_parse():
        raise ParseError(f"{what} only works inside a @T.prim_func body",
                         hint="write it in a function decorated with @T.prim_func")


class LaunchRequest:
    def __init__(self, **kw):
        self.kw = kw


def launch(grid=(1,), threads=128, cluster=None, smem=None, pdl=False, may_alias=()):
    """``T.launch(grid=(gx, gy, gz), threads=n, cluster=(cx, cy, cz), smem=bytes, pdl=False, may_alias=())``: the
    launch configuration, the first statement of a kernel.

    ``grid``: CTAs per dimension (ints or scalar parameters); ``threads``: threads per CTA (1..1024);
    ``cluster``: CTAs per cluster (sm_90+; each extent divides the grid's); ``smem``: dynamic shared
    memory bytes (default: what the kernel's shared allocations need).

    ``pdl=True`` (sm_90+): programmatic dependent launch. The kernel is launched with CUDA's programmatic
    stream serialization, so its CTAs may start while the previous kernel in the stream is still finishing;
    in exchange it must call ``T.ptx.griddepcontrol_wait()`` (which returns once that kernel has completed
    and its memory is visible) before it touches global memory another kernel may write or read. The
    verifier refuses ``pdl=True`` without such a call; that it comes before every such access, in every thread
    that makes one, is the kernel's to keep. What the kernel does before it (barrier init,
    register setup) overlaps the previous kernel's end: the gap between back-to-back launches mostly goes,
    which short kernels feel most.

        T.launch(grid=(132,), threads=384, pdl=True)
        ...                                  # shared-memory setup only
        T.ptx.griddepcontrol_wait()          # every thread, before its first global load or store

    ``may_alias``: pairs of tensor parameter names that may be given memory they share. A launch refuses a tensor
    the kernel writes that shares memory with another tensor argument (the parameters are ``__restrict__``, and
    a kernel that reads what it also writes gets a race), except for the pairs named here, whose accesses the
    kernel orders itself (flags, barriers, proxy fences) and whose pointers it declares without ``__restrict__``.
    A distributed kernel that lands a peer's rows in the buffer its TMA loads read takes that buffer twice:

        T.launch(grid=(132,), threads=384, may_alias=(("A", "Landing"),))
    """
    _need_parse("T.launch(...)")
    return LaunchRequest(grid=grid, threads=threads, cluster=cluster, smem=smem, pdl=pdl, may_alias=may_alias)


class AllocRequest:
    def __init__(self, shape, dtype, storage, layout):
        self.shape, self.dtype, self.storage, self.layout = shape, dtype, storage, layout


def alloc_buffer(shape, dtype, scope="shared", layout=None):
    """``buf = T.alloc_buffer(shape, dtype, scope=..., layout=...)``."""
    _need_parse(f"T.alloc_buffer(...)")
    return AllocRequest(shape, dtype, scope, layout)


def alloc_shared(shape, dtype, layout=None, scope="shared"):
    """``buf = T.alloc_shared(shape, dtype, layout=None)``: shared memory (``scope="shared::cluster"`` for DSMEM)."""
    _need_parse("T.alloc_shared(...)")
    return AllocRequest(shape, dtype, scope, layout)


def alloc_local(shape, dtype, layout=None):
    """``buf = T.alloc_local(shape, dtype, layout=None)``: registers (layouts may place
    elements on thread axes, e.g. a WGMMA accumulator fragment)."""
    _need_parse("T.alloc_local(...)")
    return AllocRequest(shape, dtype, "local", layout)


def alloc_tmem(shape, dtype, layout=None):
    """``buf = T.alloc_tmem((lanes, cols), dtype, layout=None)``: Blackwell tensor memory."""
    _need_parse("T.alloc_tmem(...)")
    return AllocRequest(shape, dtype, "tmem", layout)


class LoopRange:
    def __init__(self, kind, start, stop):
        self.kind, self.start, self.stop = kind, start, stop


def _loop(kind, start, stop):
    if stop is None:
        start, stop = 0, start
    return LoopRange(kind, start, stop)


def serial(start, stop=None):
    """``for i in T.serial(n)`` / ``T.serial(start, stop)``: a device loop; the CUDA compiler may unroll it
    (:func:`rolled` keeps it a loop, :func:`unroll` unrolls it fully)."""
    return _loop("serial", start, stop)


def unroll(start, stop=None):
    """``for i in T.unroll(n)``: a device loop the compiler fully unrolls."""
    return _loop("unroll", start, stop)


def rolled(start, stop=None):
    """``for i in T.rolled(n)`` / ``T.rolled(start, stop)``: a device loop the compiler keeps a loop
    (``#pragma unroll 1``), where :func:`serial` leaves unrolling to the CUDA compiler, which unrolls most
    loops of known trip count. It computes the same as ``T.serial``; it is for a loop whose unrolled copies would
    keep more values live than the registers hold (each copy its own addresses), where ptxas spills. Fewer
    spills need not mean faster code: time both.

        for b in T.rolled(n_batches):       # for (...) under #pragma unroll 1
            ...
    """
    return _loop("rolled", start, stop)


# ---------------------------------------------------------------- ids
def cta_id(dim: int = 0):
    """``T.cta_id(dim=0)``: the CTA index along grid dimension ``dim`` (0, 1, 2), ``blockIdx``."""
    return ScopeId("cta_id", dim)


def cta_id_in_cluster(dim: int = 0):
    """``T.cta_id_in_cluster(dim=0)``: the CTA index inside its cluster along ``dim``."""
    return ScopeId("cta_id_in_cluster", dim)


def cluster_rank():
    """``T.cluster_rank()``: the CTA's rank in its cluster (0 .. cluster size - 1, ``%cluster_ctarank``)."""
    return ScopeId("cluster_rank")


def warpgroup_id():
    """``T.warpgroup_id()``: the warpgroup (4 warps, 128 threads) index in the CTA."""
    return ScopeId("warpgroup_id")


def warp_id():
    """``T.warp_id()``: the warp index in the CTA (``threadIdx.x / 32``)."""
    return ScopeId("warp_id")


def warp_id_in_wg():
    """``T.warp_id_in_wg()``: the warp index inside its warpgroup (0..3)."""
    return ScopeId("warp_id_in_wg")


def lane_id():
    """``T.lane_id()``: the lane index inside its warp (0..31)."""
    return ScopeId("lane_id")


def thread_id():
    """``T.thread_id()``: the thread index in the CTA (``threadIdx.x``)."""
    return ScopeId("thread_id")


def thread_id_in_wg():
    """``T.thread_id_in_wg()``: the thread index inside its warpgroup (0..127)."""
    return ScopeId("thread_id_in_wg")


def elect_one():
    """True in exactly one thread of the active set: the issuing thread for single-thread
    instructions (TMA, tcgen05.mma, mbarrier expect-tx)."""
    return ElectOne()


# ---------------------------------------------------------------- expressions
def cast(value, dtype):
    """``T.cast(value, dtype)``: ``value`` converted to ``dtype`` (a name such as ``"float16"`` or ``T.float16``)."""
    return ops.cast(value, dtype)


def select(cond, t, f):
    """``T.select(cond, t, f)``: ``t`` where ``cond`` holds, else ``f`` (both evaluated; no branch)."""
    return ops.select(cond, t, f)


def min(a, b):  # noqa: A001 - the T namespace mirrors TVMScript
    """``T.min(a, b)``: the smaller of two scalars."""
    return ops.minimum(a, b)


def max(a, b):  # noqa: A001
    """``T.max(a, b)``: the larger of two scalars."""
    return ops.maximum(a, b)


def ceildiv(a, b):
    """``(a + b - 1) // b`` (Python ints stay ints)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return -(-a // b)
    return ops.floordiv(ops.sub(ops.add(a, b), 1), b)


_MATH_DOC = {
    "abs": "``T.abs(x)``: absolute value of a float or integer scalar.",
    "fma": "``T.fma(a, b, c)``: ``a * b + c`` with one rounding, on float scalars of one dtype.",
    "floor": "``T.floor(x)``: the largest integral value <= x, as a float.",
    "ceil": "``T.ceil(x)``: the smallest integral value >= x, as a float.",
}
_MATH1 = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "floor", "ceil", "sin", "cos")


def _math(name, nargs):
    def fn(*args):
        if len(args) != nargs:
            raise IRError(f"T.{name} takes {nargs} argument(s), got {len(args)}")
        vals = [a if isinstance(a, Expr) else ops.const(float(a) if name != "abs" else a) for a in args]
        dt = vals[0].dtype
        if dt is None or (not dt.is_float and not (name == "abs" and dt.is_int)):
            raise IRError(f"T.{name} works on floats, got {dt}", hint=f"cast first: T.{name}(T.float32(x))")
        for v in vals[1:]:
            if v.dtype != dt:
                raise IRError(f"T.{name} arguments have different dtypes {dt} and {v.dtype}",
                              hint=f"cast them to one type, e.g. T.cast(x, \"{dt}\")")
        return Call(name, vals, dt)

    fn.__name__ = name
    fn.__doc__ = _MATH_DOC.get(name, f"``T.{name}(x)``: {name} of a float scalar (the CUDA math library, full precision).")
    return fn


def address_of(target):
    """A pointer to an element (``buf[i, j]``) or to the start of a region (``smem[stage]``)."""
    from .buffer import Buffer, BufferRegion

    if isinstance(target, Buffer):
        target = target.full()
    if not isinstance(target, (BufferLoad, BufferRegion)):
        raise IRError(f"T.address_of takes a buffer element or region, got {shown(target)}",
                      hint="write T.address_of(buf[i]) or T.address_of(smem[stage])")
    return AddressOf(target)


def _intrinsic_arg(a, name, k):
    from .buffer import Buffer, BufferRegion

    if isinstance(a, (Expr, Buffer, BufferRegion)):
        return a
    if isinstance(a, (bool, int, float)):
        return ops.const(a)
    raise IRError(f"argument {k} of intrinsic {name} is {shown(a)} ({type(a).__name__})",
                  hint="pass expressions, buffer elements or regions (smem[stage]); compile-time options go in the intrinsic's name")


def call_intrin(name: str, *args):
    """``T.call_intrin("name", args...)``: an intrinsic by its registered name."""
    sig = lookup_intrinsic_signature(name)
    if sig is None:
        msg, hint = unknown_intrinsic_message(name)
        raise ParseError(msg, hint=hint)
    if sig.n_args is not None and len(args) != sig.n_args:
        raise IRError(sig.arity_message(len(args)))
    return IntrinsicCall(name, [_intrinsic_arg(a, name, k) for k, a in enumerate(args)], sig.ret_dtype)


class IntrinsicRef:
    """``T.ptx.<name>``: calling it builds an :class:`IntrinsicCall`."""

    def __init__(self, name):
        self.__tirx_intrinsic__ = name

    def __call__(self, *args):
        return call_intrin(self.__tirx_intrinsic__, *args)

    def __repr__(self):
        return f"T.ptx.{self.__tirx_intrinsic__}"


_REF_TYPES: dict = {}


def _ref_type(sig):
    """``IntrinsicRef``, or a subclass whose docstring is the entry's help (what ``help(T.ptx.<name>)`` prints:
    the arguments, the PTX, targets and operands, from the intrinsics table)."""
    if not sig.doc:
        return IntrinsicRef
    t = _REF_TYPES.get(sig.name)
    if t is None or t.__doc__ != sig.doc:
        t = type(sig.name, (IntrinsicRef,), {"__doc__": sig.doc, "__module__": __name__,
                                              "__qualname__": f"T.ptx.{sig.name}"})
        _REF_TYPES[sig.name] = t
    return t


class _Ptx:
    """``T.ptx.<name>`` resolves through the intrinsic signature registry; ``help(T.ptx.<name>)`` prints
    the call's arguments, the instruction, its targets and each operand (e.g. ``help(T.ptx.mbarrier_init)``:
    ``T.ptx.mbarrier_init(bar, count)``, ``bar`` a shared-memory address, ``count`` a uint32)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        sig = lookup_intrinsic_signature(name)
        if sig is None:
            msg, hint = unknown_intrinsic_message(name)
            raise ParseError(msg, hint=hint)
        return _ref_type(sig)(name)

    def __dir__(self):
        return intrinsic_names()

    def __repr__(self):
        return "T.ptx"


def evaluate(expr):
    """``T.evaluate(expr)``: a statement that evaluates ``expr``."""
    from .stmt import Evaluate

    return Evaluate(ops.const(expr))


# ---------------------------------------------------------------- namespace object
class _TNamespace:
    __doc__ = __doc__  # help(T) prints what the module docstring says: every member of T

    def __init__(self):
        from .jit_hooks import macro, prim_func, parse_script

        d = self.__dict__
        for fn in (Tensor, launch, alloc_buffer, alloc_shared, alloc_local, alloc_tmem, serial, unroll, rolled,
                   cta_id, cta_id_in_cluster, cluster_rank, warpgroup_id, warp_id, warp_id_in_wg, lane_id, thread_id,
                   thread_id_in_wg, elect_one, cast, select, ceildiv, address_of, call_intrin, evaluate):
            d[fn.__name__] = fn
        d["min"], d["max"] = min, max
        for name in _MATH1:
            d[name] = _math(name, 1)
        d["fma"] = _math("fma", 3)
        d["ptx"] = _Ptx()
        d["prim_func"] = prim_func
        d["macro"] = macro
        d["parse_script"] = parse_script
        names = set(CANONICAL) | {"bf16", "f16", "f32", "f64", "tf32", "e4m3", "e5m2", "i8", "i16", "i32", "i64",
                                  "u8", "u16", "u32", "u64", "pred"}
        for n in names:
            d[n] = DTypeCtor(n)
        d["bool"] = DTypeCtor("bool")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # protocol lookups (help, pickle, copy) see no member
            raise AttributeError(name)
        close = difflib.get_close_matches(name, [k for k in self.__dict__ if not k.startswith("_")], n=3)
        hint = f"did you mean {', '.join('T.' + c for c in close)}?" if close else "see help(tirxpy.ir.script) for the T namespace"
        raise ParseError(f"T has no member {shown(name)}", hint=hint)

    def __repr__(self):
        return "T"


T = _TNamespace()
