"""``build(kernel, arch)``: verify, lower tile primitives, generate CUDA C++, compile (cached) and
return a :class:`CompiledKernel` you can inspect on any machine and call on torch tensors.

    >>> from tirxpy import T
    >>> import tirxpy
    >>> @T.prim_func
    ... def scale(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
    ...     T.launch(grid=(2,), threads=128)
    ...     i = T.cta_id(0) * 128 + T.thread_id()
    ...     B[i] = A[i] * T.float32(2)
    >>> k = tirxpy.compile(scale, arch="sm_90a")
    >>> "__launch_bounds__(128) scale(" in k.cuda_source, k.resources.spills
    (True, 0)
    >>> [(s.name, s.kind, s.dtype, s.shape) for s in k.specs]
    [('A', 'tensor', 'float32', (256,)), ('B', 'tensor', 'float32', (256,))]
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import warnings

import numpy as np

from tirxpy.ir import Buffer, Kernel, verify
from tirxpy.scope import Scope
from tirxpy.target import supported_target
from tirxpy.errors import shown

from .codegen.errors import CodegenError
from .codegen.kernel import CudaUnit, first_primitive_call, generate, unlowered
from .errors import CompileError, LaunchError, PerformanceWarning, ToolchainError
from .runtime import ParamSpec

_TABLE_ROWS = 1 << 20    # largest global layout compared element by element against a strided map
_SCALARS = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
            "float64")


class CompiledKernel:
    """A built kernel: ``cuda_source``, ``ptx``, ``sass``, ``resources``; call it with torch tensors
    and Python numbers in parameter order to launch on torch's current stream."""

    def __init__(self, unit: CudaUnit, module, options=()):
        self.unit, self.module, self.options = unit, module, tuple(options)
        self.kernel = unit.kernel
        self.name, self.arch = unit.name, unit.arch
        self.smem_bytes = unit.smem_bytes
        L = self.kernel.launch
        self.threads = L.threads
        self.cluster = None if L.cluster is None else tuple(L.cluster) + (1,) * (3 - len(L.cluster))
        self.pdl = L.pdl
        self.specs = host_specs(self.kernel, unit.tmaps, unit.written, unit.access)
        self._nparams = len(self.kernel.params)
        self._tm_index = tuple(t.param_index for t in unit.tmaps)
        self._grid, self._grid_fn = grid_plan(self.kernel)
        self._block = (self.threads, 1, 1)
        self._launcher = None
        self._checker = None
        self._ptx = None
        self._sass = None

    # ------------------------------------------------------------------ inspection
    @property
    def cuda_source(self) -> str:
        return self.unit.source

    @property
    def resources(self):
        """:class:`~tirxpy.lower.nvrtc.KernelResources` from ptxas: registers, spills, stack, smem."""
        return self.module.resources_of(self.name)

    @property
    def ptx(self) -> str:
        if self._ptx is None:
            from .nvrtc import compile_cuda

            self._ptx = compile_cuda(self.cuda_source, self.arch, emit_ptx=True, options=self.options).ptx
        return self._ptx

    @property
    def sass(self) -> str:
        """SASS from cuobjdump / nvdisasm (on PATH or in an nvidia-* wheel)."""
        if self._sass is None:
            self._sass = disassemble(self.module.cubin)
        return self._sass

    def summary(self) -> dict:
        r = self.resources
        return {"name": self.kernel.name, "arch": self.arch, "registers": r.registers, "spills": r.spills,
                "stack": r.stack_bytes, "smem": self.smem_bytes + r.static_smem, "threads": self.threads}

    def __repr__(self) -> str:
        s = self.summary()
        return (f"<CompiledKernel {s['name']} {s['arch']}: {s['registers']} registers, {s['spills']} B spilled, "
                f"{s['smem']} B smem, {s['threads']} threads>")

    # ------------------------------------------------------------------ launch
    def _load(self):
        from .runtime import load_module

        fn = load_module(self.module).function(self.name)
        self._launcher = fn.launcher(self.specs)
        return self._launcher

    def check(self, *args) -> tuple:
        """Check a call's arguments (count, kinds, dtypes, devices, shapes, strides, alignment) and the grid
        they give, without a GPU; returns the grid. A call runs these checks before it loads the kernel, so a
        wrong argument is reported as such even where no GPU exists."""
        from .runtime import ArgPacker

        if self._checker is None:
            import torch

            idx = torch.cuda.current_device() if torch.cuda.is_available() else 0
            self._checker = ArgPacker(self.specs, torch.device("cuda", idx))
        self._count(args)
        self._checker.check(args + tuple([args[i] for i in self._tm_index]))
        return self._args_and_grid(args)[1]

    def __call__(self, *args):
        ln = self._launcher
        if ln is None:
            self.check(*args)
            ln = self._load()
        args, grid = self._args_and_grid(args)
        ln(grid, self._block, args, smem_bytes=self.smem_bytes, cluster=self.cluster, pdl=self.pdl)

    def bind(self, *args):
        """Check and pack the arguments once: the returned launch runs the kernel with them on torch's
        current stream (``bl()``, or ``bl(stream=s)``) with no per-call checks, one driver call.

        It keeps the tensors' device addresses, not the tensors: like a captured CUDA graph it may only run
        while tensors with those addresses, shapes, strides and dtypes are alive (:func:`tirxpy_kernels.gemm`
        keys its bound launches by exactly those). Bad arguments raise the same LaunchError as a call,
        here.

            >>> bl = ck.bind(x, y)          # doctest: +SKIP
            >>> for _ in range(100):        # doctest: +SKIP
            ...     bl()                    # the same as ck(x, y), minus the checks
        """
        ln = self._launcher
        if ln is None:
            self.check(*args)
            ln = self._load()
        args, grid = self._args_and_grid(args)
        return ln.bind(grid, self._block, args, smem_bytes=self.smem_bytes, cluster=self.cluster, pdl=self.pdl)

    def _count(self, args):
        if len(args) != self._nparams:
            names = ", ".join(p.name for p in self.kernel.params)
            raise LaunchError("args", f"{self.name} takes {self._nparams} arguments ({names}), got {len(args)}")

    def _args_and_grid(self, args):
        """The launch arguments (tensor-map slots appended) and the grid, for a call with ``args``."""
        self._count(args)
        if self._tm_index:
            args = args + tuple([args[i] for i in self._tm_index])
        grid = self._grid
        if self._grid_fn is not None:
            from .packer import scalar_value  # noqa: PLC0415

            # the grid is computed from the scalars' values as passed (numpy / torch ints as Python ints)
            vals = tuple(scalar_value(s, a) if s.kind == "scalar" else a for s, a in zip(self.specs, args))
            try:
                grid = self._grid_fn(vals)
            except (TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise LaunchError("grid", f"cannot evaluate the grid from the arguments: {e}") from None
            check_grid(grid, self.cluster)
        return args, grid


def check_grid(grid, cluster=None) -> None:
    """LaunchError unless every grid extent is an int in [1, limit] (x < 2**31, y and z < 65536) and a
    multiple of the cluster extent."""
    from tirxpy.ir.verify import MAX_GRID

    for d, (g, hi) in enumerate(zip(grid, MAX_GRID)):
        if not isinstance(g, int) or not 1 <= g <= hi:
            raise LaunchError("grid", f"the arguments give grid extent {shown(g)} in dimension {'xyz'[d]}, outside "
                                      f"[1, {hi}] — check the scalar arguments the grid is computed from")
        if cluster is not None and g % cluster[d]:
            raise LaunchError("grid", f"the arguments give grid extent {g} in dimension {'xyz'[d]}, not a multiple of "
                                      f"the cluster extent {cluster[d]}")


# ---------------------------------------------------------------------- host plan
def _merged_strides(lay, shape):
    """Per-dimension strides (None for extent-1 dimensions) when the layout's shard iterators
    split exactly at the dimensions of ``shape`` (innermost first) and the iterators inside each
    dimension merge into one (outer stride = inner stride x inner extent): then the layout is
    that strided map, exactly. None when this closed form does not decide."""
    its = [(i.extent, i.stride) for i in lay.shard if i.extent != 1]
    strides, j = [], len(its)
    for n in reversed(shape):
        if n == 1:
            strides.append(None)
            continue
        need, first, expect = n, None, None
        while need > 1:
            if j == 0:
                return None
            e, st = its[j - 1]
            if need % e or (expect is not None and st != expect):
                return None
            first = st if first is None else first
            expect, need, j = st * e, need // e, j - 1
        strides.append(first)
    return None if j else list(reversed(strides))


def tensor_strides(buf: Buffer):
    """``(shape, strides)`` a torch tensor must have for a global buffer: the per-dimension
    strides of a strided layout (row-major by default), else a 1-D contiguous storage of the
    layout's footprint."""
    from tirxpy.layout import TileLayout

    lay = buf.layout
    if isinstance(lay, TileLayout) and "rank" in lay.offset and all(it.axis.name != "rank" for it in lay.shard):
        # a peer's tensor (tirxpy.layout.ranks): the rank offset says whose memory, not where in it
        lay = TileLayout.from_iters(lay.shard, lay.replica, {k: v for k, v in lay.offset.items() if k != "rank"})
    if isinstance(lay, TileLayout) and set(lay.axes()) <= {"m"} and not lay.replica:
        shape = buf.shape
        zero = lay.apply(*([0] * len(shape)), shape=shape).get("m", 0)
        strides = []
        for d, n in enumerate(shape):
            if n == 1:
                strides.append(None)
                continue
            c = [0] * len(shape)
            c[d] = 1
            strides.append(lay.apply(*c, shape=shape).get("m", 0) - zero)
        if zero == 0 and all(s is None or s > 0 for s in strides):
            if _merged_strides(lay, shape) == strides:     # closed form: no walk over every element
                return tuple(shape), tuple(strides)
            if lay.size() > _TABLE_ROWS:                   # too large to compare element by element
                from tirxpy.ir.buffer import footprint

                return (footprint(lay),), (1,)
            names, t = lay.owner_table()
            got = t[:, 0, names.index("m")] if "m" in names else np.zeros(lay.size(), dtype=np.int64)
            idx = np.indices(shape).reshape(len(shape), -1)
            want = sum(idx[d] * (s or 0) for d, s in enumerate(strides))
            if np.array_equal(got, want):
                return tuple(shape), tuple(strides)
    from tirxpy.ir.buffer import footprint

    return (footprint(lay),), (1,)


def host_specs(kernel, tmaps=(), written=(), access=None) -> tuple:
    """One :class:`~tirxpy.lower.runtime.ParamSpec` per kernel parameter, then one per hidden
    tensor map (fed the same tensor as its buffer). ``written``: the names of the tensor parameters the
    kernel writes (:attr:`~tirxpy.lower.codegen.CudaUnit.written`), whose specs say so: a launch refuses
    such a tensor when it shares memory with another argument.

    A tensor's ``align`` is what the kernel's accesses to it need of its data pointer: 16 bytes for a tensor a
    TMA map covers; else the widest access the code makes through a pointer into it (``access``, a name's bytes:
    :attr:`~tirxpy.lower.codegen.CudaUnit.access`, e.g. 16 for 16-byte vector loads of a bf16 tensor), and at
    least its element's bytes. A launch refuses a tensor off that boundary (a :class:`LaunchError` naming it)
    instead of the misaligned-address fault the device would raise."""
    specs = []
    tm_bufs = {id(t.buffer) for t in tmaps}
    access = access or {}
    alias: dict = {}            # name -> the names T.launch(may_alias=...) pairs it with
    for x, y in kernel.launch.may_alias:
        alias.setdefault(x, set()).add(y)
        alias.setdefault(y, set()).add(x)
    for p in kernel.params:
        if isinstance(p, Buffer):
            shape, strides = tensor_strides(p)
            align = 16 if id(p) in tm_bufs else max(1, p.dtype.bits // 8, access.get(p.name, 1))
            specs.append(ParamSpec(p.name, "tensor", p.dtype.name, shape, strides, align, written=p.name in written,
                                   may_alias=alias.get(p.name, ())))
        else:
            if p.dtype.name not in _SCALARS:
                raise CodegenError(f"scalar parameter {p.name} is {p.dtype}; the host passes scalars of "
                                   f"{', '.join(_SCALARS)}", p.span or kernel.span,
                                   hint=f"declare it T.float32 and cast inside the kernel: T.cast({p.name}, \"{p.dtype}\")")
            specs.append(ParamSpec(p.name, "scalar", p.dtype.name))
    for t in tmaps:
        shape, strides = tensor_strides(t.buffer)
        specs.append(ParamSpec(f"{t.buffer.name} (TMA box {t.box})", "tensormap", t.buffer.dtype.name, shape, strides,
                               16, box=t.box, swizzle=t.swizzle))
    return tuple(specs)


def grid_plan(kernel):
    """``(static grid, None)`` or ``(None, fn(args) -> grid)`` evaluating grid expressions of
    scalar parameters on the host (floor semantics, like the IR)."""
    from tirxpy.ir import IntImm

    grid = list(kernel.launch.grid) + [IntImm(1)] * (3 - len(kernel.launch.grid))
    if all(isinstance(g, IntImm) for g in grid):
        return tuple(g.value for g in grid), None
    index = {id(p): i for i, p in enumerate(kernel.params)}
    text = "lambda a: (" + ", ".join(_py(g, index, kernel) for g in grid) + ",)"
    return None, eval(text, {"max": max, "min": min})  # noqa: S307 - text built from IR nodes only


def _py(e, index, kernel) -> str:
    from tirxpy.ir import expr as E

    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.Shl: "<<", E.Shr: ">>",
           E.BitAnd: "&", E.BitOr: "|", E.BitXor: "^"}
    if isinstance(e, E.IntImm):
        return str(e.value)
    if isinstance(e, E.Var) and id(e) in index:
        return f"a[{index[id(e)]}]"
    if type(e) in ops:
        return f"({_py(e.a, index, kernel)} {ops[type(e)]} {_py(e.b, index, kernel)})"
    if isinstance(e, (E.Min, E.Max)):
        return f"{'min' if isinstance(e, E.Min) else 'max'}({_py(e.a, index, kernel)}, {_py(e.b, index, kernel)})"
    if isinstance(e, E.Cast) and e.dtype.is_int:
        return f"int({_py(e.value, index, kernel)})"
    raise CodegenError(f"the grid extent `{e}` is not an integer expression of scalar parameters",
                       e.span or kernel.launch.span or kernel.span,
                       hint="compute grid extents from scalar kernel parameters with + - * // % min max")


# ---------------------------------------------------------------------- build
def lower_primitives(kernel, target):
    """Replace tile-primitive calls by native IR (``tirxpy.primitives.lower_calls``) for ``target``."""
    call = first_primitive_call(kernel.body)
    if call is None:
        return kernel
    what = f"Tx.{call.op}" if call.scope is Scope.THREAD else f"Tx.{call.scope.short}.{call.op}"
    try:
        from tirxpy.primitives import lower_calls
    except ImportError as e:
        raise CodegenError(f"{what}(...) needs the tile-primitive lowering (tirxpy.primitives.lower_calls), which "
                           f"is not available ({e})", call.span,
                           hint="write the native instructions (T.ptx.*) and loops for this call") from None
    lowered = lower_calls(kernel, target)
    left = first_primitive_call(lowered.body)
    if left is not None:
        raise unlowered(left)
    return lowered


def build(kernel, arch: str = "sm_90a", *, options=()) -> CompiledKernel:
    """Verify ``kernel``, lower its primitives, generate CUDA C++ and compile it for ``arch``.

    ``arch`` (``"sm_90a"`` or a :class:`tirxpy.target.Target`) is parsed here, once; verification,
    lowering, codegen and NVRTC all read the one Target. Builds are memoized on the kernel object per
    (arch, options); NVRTC output is cached on disk and in process by source text.
    """
    from .nvrtc import check_options, compile_cuda

    if not isinstance(kernel, Kernel):
        try:
            jitted = hasattr(kernel, "factory")
        except Exception:   # noqa: BLE001  (a __getattr__ of its own that raises: not a factory)
            jitted = False
        hint = ("call the @tirxpy.jit factory with its arguments first: build(make_kernel(...))"
                if jitted else "decorate the kernel function with @T.prim_func")
        raise CodegenError(f"build() takes a kernel (a @T.prim_func), got {type(kernel).__name__}", None, hint=hint)
    target = supported_target(arch)
    arch = str(target)
    options = check_options(options)
    key = (arch, options)
    memo = kernel.__dict__.setdefault("_tirxpy_builds", {})
    hit = memo.get(key)
    if hit is not None:
        return hit
    verify(kernel, target)
    lowered = lower_primitives(kernel, target)
    if lowered is not kernel:
        verify(lowered, target)
    unit = generate(lowered, target)
    try:
        mod = compile_cuda(unit.source, target, options=options, filename=f"{unit.name}.cu")
    except CompileError as e:       # name the intrinsic and the kernel line the compiler's log points at
        from .locate import located
        from .nvrtc import ptx_only

        raise located(e, unit, lambda: ptx_only(unit.source, target, options)) from None
    ck = CompiledKernel(unit, mod, options)
    if _setmaxnreg_ignored(ck):      # ptxas needs the register count at entry fixed: generate it with the pin
        pinned = generate(lowered, target, pin_registers=True)
        ck = CompiledKernel(pinned, compile_cuda(pinned.source, target, options=options, filename=f"{unit.name}.cu"),
                            options)
    memo[key] = ck
    _warn_performance(ck)
    return ck


def _setmaxnreg_ignored(ck) -> bool:
    """Whether ptxas reported the kernel's ``setmaxnreg`` ignored (C7508) in a unit generated without the pin."""
    if ck.unit.pinned:
        return False
    try:
        return any(r.startswith("(C7508)") for r in ck.resources.perf_warnings)
    except KeyError:
        return False


def _warn_performance(ck) -> None:
    """A :class:`~tirxpy.lower.errors.PerformanceWarning` for each ptxas performance remark on the kernel."""
    try:
        remarks = ck.resources.perf_warnings
    except KeyError:        # no ptxas report for this symbol (nothing to say)
        return
    for r in remarks:
        hint = (" -- ptxas waits after every wgmma of the kernel when it cannot follow each one's accumulator "
                "registers from issue to wait (e.g. wgmmas of different shapes on one accumulator under "
                "run-time branches); look for the branch or write that breaks the pipeline" if "C7515" in r else
                " -- the kernel runs with the register count at entry everywhere; tirxpy pins it with "
                "__launch_bounds__(threads, 1) when the kernel has setmaxnreg" if "C7508" in r else
                " -- ptxas waits there for the wgmmas in flight before a read of registers it takes to be written by a "
                "wgmma; the line is the PTX's (CompiledKernel.ptx); reading those registers after a wait of your own, "
                "or giving them a plain definition ahead of the loop, can remove it" if "warpgroup.wait" in r else "")
        warnings.warn(f"{ck.name}: ptxas: {r}{hint}", PerformanceWarning, stacklevel=3)


compile = build  # noqa: A001 - tirxpy.compile(kernel, arch=...) reads naturally


# ---------------------------------------------------------------------- SASS
_NO_DISASSEMBLER = ("put the CUDA toolkit's nvdisasm (or cuobjdump with nvdisasm beside it) on PATH (or set "
                    "CUDA_HOME), or pip install nvidia-cuda-nvdisasm; cuda_source, ptx and resources work without it")


def find_disassembler():
    """Path of ``nvdisasm`` or else ``cuobjdump`` (PATH, $CUDA_HOME/bin, nvidia-* wheels), or None. ``nvdisasm``
    comes first: it reads a cubin alone, while CUDA 13's ``cuobjdump -sass`` runs ``nvdisasm`` itself."""
    for tool in ("nvdisasm", "cuobjdump"):
        p = shutil.which(tool)
        if p:
            return p
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    try:
        import nvidia

        roots += [os.path.join(r, "*") for r in nvidia.__path__]
    except ImportError:
        pass
    for tool in ("nvdisasm", "cuobjdump"):
        for root in filter(None, roots):
            hits = sorted(glob.glob(os.path.join(root, "bin", tool)))
            if hits:
                return hits[0]
    return None


def disassemble(cubin: bytes) -> str:
    tool = find_disassembler()
    if tool is None:
        raise ToolchainError(f"no SASS disassembler found: {_NO_DISASSEMBLER}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        args = [tool, "-sass", path] if os.path.basename(tool).startswith("cuobjdump") else [tool, "-c", path]
        res = subprocess.run(args, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        hint = f"; {_NO_DISASSEMBLER}" if "nvdisasm" in res.stderr and "cuobjdump" in os.path.basename(tool) else ""
        raise ToolchainError(f"{os.path.basename(tool)} failed ({res.returncode}): {res.stderr.strip()[:500]}{hint}")
    return res.stdout
