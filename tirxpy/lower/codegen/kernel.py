"""Assemble one CUDA C++ translation unit for a lowered kernel.

The unit has the fixed-width typedefs and fp16 / bf16 / fp8 headers, the intrinsic prelude
(``CUtensorMap``, ``tx_smem_addr``), one ``__device__ __forceinline__`` helper per intrinsic
used, and the ``extern "C" __global__`` entry with ``__launch_bounds__``: global tensors as
``T* __restrict__`` (``const`` when never written; plain ``T*`` for the parameters of ``T.launch(may_alias=...)``),
scalars by value, then one ``const __grid_constant__ CUtensorMap`` per distinct TMA box. Shared tiles are
carved from one ``extern __shared__ __align__(1024)`` array at static offsets (1024-byte aligned
for swizzled tiles, 128 otherwise: the plan :func:`tirxpy.ir.verify.shared_bytes` sizes).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St
from tirxpy.ir.analysis import annotate_active_threads
from tirxpy.ir.buffer import Buffer
from tirxpy.ir.visitor import first, shared_plan
from tirxpy.scope import Scope
from tirxpy.target import as_target

from .context import BufferInfo, Context
from .errors import CodegenError
from .expr import FLOOR_HELPERS, ExprRenderer
from .ranges import Ranges
from .stmt import StmtRenderer
from .types import TYPES_PRELUDE, ctype


@dataclass
class CudaUnit:
    """Generated source plus what the host needs to launch it."""

    source: str
    name: str
    arch: str
    kernel: object  # the lowered Kernel
    tmaps: list = field(default_factory=list)  # TensorMapParam, in signature order after the params
    smem_bytes: int = 0
    # names of the global tensors the kernel stores to (stores, write operands such as atomics and vector stores,
    # TMA stores); a tensor whose address is only taken for a read is not one, though its pointer is not const
    written: frozenset = frozenset()
    origins: dict = field(default_factory=dict)   # 1-based line of source -> the IR statement it renders
    intrinsics: tuple = ()                         # the intrinsic entries the unit's helpers render
    pinned: bool = False                           # launch bounds declare one CTA per SM (generate's pin_registers)
    # name of a global tensor -> bytes of the widest instruction access through a pointer into it (16 for a 16-byte
    # vector load; the element accesses of plain indexing not counted): its data pointer must be aligned to that
    access: dict = field(default_factory=dict)


def unlowered(s) -> CodegenError:
    what = f"Tx.{s.op}" if s.scope is Scope.THREAD else f"Tx.{s.scope.short}.{s.op}"
    return CodegenError(f"{what}(...) is a tile primitive that was not lowered to native IR", s.span,
                        hint="build through tirxpy.lower.build (it runs tirxpy.primitives.lower_calls), or write the "
                             "native instructions (T.ptx.*) and loops yourself")


def smem_plan(kernel) -> tuple:
    """``({id(Allocate): byte offset}, total bytes)``: :func:`tirxpy.ir.visitor.shared_plan`, the
    placement the verifier's ``shared_bytes`` counts."""
    return shared_plan(kernel.body)


def generate(kernel, target="sm_90a", pin_registers=False) -> CudaUnit:
    """CUDA C++ for a verified kernel without primitive calls, for ``target`` (a
    :class:`tirxpy.target.Target` or ``"sm_90a"``). ``pin_registers``: a kernel with ``setmaxnreg`` declares at
    least one CTA per SM (``__launch_bounds__(threads, 1)``), which fixes its register count at entry; ptxas
    ignores ``setmaxnreg`` where that count is not fixed (C7508), which :func:`tirxpy.lower.build.build` answers
    by generating the kernel again with the pin."""
    from tirxpy.intrinsics import render_helpers

    target = as_target(target)
    arch = str(target)
    L = kernel.launch
    ctx = Context(kernel, target, Ranges(L.threads, L.cluster_size))
    ctx.active = annotate_active_threads(kernel)
    kname = ctx.name(kernel, kernel.name)
    params = []
    for p in kernel.params:
        name = ctx.name(p, p.name)
        if isinstance(p, Buffer):
            if p.storage != "global":
                raise CodegenError(f"kernel parameter {p.name} is declared in {p.storage} memory; parameters are "
                                   f"global tensors", p.span or kernel.span,
                                   hint="declare it T.Tensor(shape, dtype) and copy it on chip in the kernel")
            ctx.buffers[id(p)] = BufferInfo(p, name, "global")
        params.append((p, name))
    offsets, smem = smem_plan(kernel)
    er = ExprRenderer(ctx)
    sr = StmtRenderer(ctx, er, offsets)
    sr.seq(kernel.body)

    sig = []
    aliased = {n for pair in kernel.launch.may_alias for n in pair}
    for p, name in params:
        if isinstance(p, Buffer):
            const = "" if id(p) in ctx.written else "const "
            restrict = "" if p.name in aliased else " __restrict__"      # T.launch(may_alias=...): may share memory
            sig.append(f"{const}{ctype(p.dtype, p.span)}*{restrict} {name}")
        else:
            sig.append(f"const {ctype(p.dtype, p.span)} {name}")
    for tm in ctx.tmaps:
        sig.append(f"const __grid_constant__ CUtensorMap {tm.cname}")

    out = [f"// tirxpy kernel `{kernel.name}` for {arch}" + (f" ({kernel.span})" if kernel.span else ""),
           TYPES_PRELUDE.rstrip("\n"), render_helpers(list(ctx.intrinsics.values()), target).rstrip("\n")]
    if "floor" in ctx.helpers:
        out.append(FLOOR_HELPERS.rstrip("\n"))
    pin = pin_registers and bool({"setmaxnreg_inc", "setmaxnreg_dec"} & set(ctx.intrinsics))
    bounds = f"{L.threads}, 1" if pin else f"{L.threads}"
    head = f'extern "C" __global__ void __launch_bounds__({bounds}) {kname}('
    if len(", ".join(sig)) + len(head) <= 110:
        head += ", ".join(sig) + ") {"
    else:
        head += "\n    " + ",\n    ".join(sig) + ") {"
    body = [head]
    if smem:
        body.append(f"  extern __shared__ __align__(1024) unsigned char tx_smem[];  // {smem} bytes")
    for var, init in ctx.ids.items():
        body.append(f"  const int {var} = {init};")
    first = ("\n\n".join(out) + "\n\n" + "\n".join(body)).count("\n") + 2    # 1-based line of sr.lines[0]
    body += sr.lines
    body.append("}")
    out.append("\n".join(body))
    source = "\n\n".join(out) + "\n"
    origins = {first + k: s for k, s in enumerate(sr.origins) if s is not None}
    written = frozenset(p.name for p, _ in params if isinstance(p, Buffer) and id(p) in ctx.stored)
    access = {p.name: ctx.access[id(p)] for p, _ in params if isinstance(p, Buffer) and id(p) in ctx.access}
    total = max(smem, L.smem or 0)
    return CudaUnit(source, kname, arch, kernel, list(ctx.tmaps), total, written, origins,
                    tuple(ctx.intrinsics.values()), pin, access)


def has_primitive_calls(kernel) -> bool:
    return first_primitive_call(kernel.body) is not None


def first_primitive_call(seq):
    """The first tile-primitive call under ``seq`` in source order, or None."""
    return first(seq, St.PrimitiveCall)


__all__ = ["CudaUnit", "generate", "smem_plan", "has_primitive_calls", "first_primitive_call", "unlowered", "E"]
