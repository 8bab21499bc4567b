"""``tirxpy.explain(kernel, arch="sm_90a") -> str``: per call site, the implementation chosen
and the native instructions it emits.

One block per call site, in source order::

    kernel.py:81  Tx.cta.copy(Y[row], xf)  [cta; the whole CTA (256 threads)]
      -> copy/reg_mem_vec (priority 20, sm_80)
         emits: cvt.bfloat16.float32 x16, vst_global_v4_b32 x2
         passed over ldmatrix: dst is 'global' and src is 'local'; ldmatrix moves registers <- shared

"emits" counts intrinsics by table name, element loads / stores of global and shared memory,
conversions and float math, statically (a loop body counts once). Up to ``verbose`` candidates
passed over are listed with their reasons (those for other targets are only counted).

The kernel is lowered (as :func:`tirxpy.primitives.lower_calls` would) to find the choices;
a call with no applicable implementation raises its :class:`DispatchError`.
"""
from __future__ import annotations

from collections import Counter

from tirxpy.ir import expr as E
from tirxpy.ir import stmt as St


def _walk_counts(s, acc: Counter, operand=False):
    """Count the native operations in lowered IR: intrinsics by name, element loads / stores by
    storage, math builtins by name (register reads / writes and address computations are not counted)."""
    if isinstance(s, E.IntrinsicCall):
        acc[s.name] += 1
        for a in s.args:
            if isinstance(a, (E.Expr, St.Stmt)) and not isinstance(a, E.BufferLoad):  # element operands are addresses
                _walk_counts(a, acc, operand=True)
        return acc
    if isinstance(s, E.AddressOf):
        return acc
    if isinstance(s, E.BufferLoad) and s.buffer.storage != "local":
        acc[f"ld.{s.buffer.storage}"] += 1
    elif isinstance(s, St.BufferStore) and s.buffer.storage != "local":
        acc[f"st.{s.buffer.storage}"] += 1
    elif isinstance(s, E.Call):
        acc[s.name] += 1
    elif isinstance(s, E.Cast) and s.value.dtype is not None and s.value.dtype != s.dtype:
        acc[f"cvt.{s.dtype}.{s.value.dtype}"] += 1
    elif isinstance(s, E.BinaryOp) and s.dtype is not None and s.dtype.is_float:
        acc[f"{type(s).__name__.lower()}.{s.dtype}"] += 1
    for _, v in s.fields():
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, (E.Expr, St.Stmt)):
                _walk_counts(x, acc)
    return acc


def emitted_ops(stmt) -> Counter:
    """Static count (loop bodies counted once) of intrinsics and element loads/stores in ``stmt``."""
    return _walk_counts(stmt, Counter())


def _call_text(call) -> str:
    from tirxpy.ir.printer import node_text

    try:
        return node_text(call).strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - printing is best effort here
        return f"Tx.{call.op}(...)"


def explain(kernel, arch="sm_90a", verbose: int = 2) -> str:
    """Text: for every primitive call of ``kernel``, the chosen implementation and its instructions,
    and up to ``verbose`` candidates passed over before it (candidates for other targets are
    only counted)."""
    from tirxpy.errors import ArgumentError
    from tirxpy.ir.kernel import Kernel

    from .lower_pass import lower_calls_traced

    if not isinstance(kernel, Kernel):
        raise ArgumentError(f"explain(kernel) takes a kernel (a @T.prim_func or T.parse_script result), got "
                            f"{type(kernel).__name__}")
    _, sites = lower_calls_traced(kernel, arch)
    lines = [f"{kernel.name} for {arch}: {len(sites)} primitive call site(s)"]
    for s in sites:
        where = f"{s.call.span.file}:{s.call.span.line}" if s.call.span is not None else "<no source>"
        lines.append(f"{where}  {_call_text(s.call)}  [{s.call.scope}; {s.threads.describe()}]")
        i = s.impl
        lines.append(f"  -> {i.op}/{i.variant} (priority {i.priority}, {i.target_text()})")
        counts = emitted_ops(s.stmt)
        if counts:
            lines.append("     emits: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
        shown = [(r, why) for r, why in s.rejected if not why.startswith("target ")]  # other targets: noise here
        for r, why in shown[:verbose]:
            lines.append(f"     passed over {r.variant}: {why}")
        if len(s.rejected) > min(len(shown), verbose):
            lines.append(f"     (+{len(s.rejected) - min(len(shown), verbose)} more candidates passed over; "
                         "see DispatchError with dispatch= or explain(..., verbose=99))")
    return "\n".join(lines)
