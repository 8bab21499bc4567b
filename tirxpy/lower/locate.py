"""Point a failed compile back at the kernel: which intrinsic, which line of the user's source.

NVRTC reports front-end errors at a line of the generated CUDA (``k.cu(57): error: ...``) and ptxas
errors at a line of the PTX (``ptxas application ptx input, line 34; error : ...``). A generated line
maps to the IR statement it was rendered from (``CudaUnit.origins``) and so to that statement's span;
a line inside an intrinsic's helper, or a PTX instruction spelled by an intrinsic's template, maps to
that intrinsic and to the first statement that calls it.
"""
from __future__ import annotations

import re

from .errors import CompileError

_CU_LINE = re.compile(r"\((\d+)\): (?:catastrophic )?error")
_PTX_LINE = re.compile(r"ptxas[^\n]*?, line (\d+); error")
_HELPER = re.compile(r"__device__ __forceinline__ .*?\btx_(\w+)\(")
_CALL = re.compile(r"\btx_(\w+)\s*[<(]")


def _opcodes(entry) -> set:
    """The PTX opcodes (``popc.b32``) an intrinsic's template spells."""
    out = set()
    for ln in entry.template.replace(";", "\n").splitlines():
        tok = ln.strip().split()
        if tok and tok[0].startswith("@") and len(tok) > 1:
            tok = tok[1:]
        if tok and re.fullmatch(r"[a-z][\w.:]*", tok[0]):
            out.add(tok[0])
    return out


def _first_call(unit, name):
    for line, stmt in sorted(unit.origins.items()):
        text = unit.source.splitlines()[line - 1]
        if f"tx_{name}(" in text or f"tx_{name}<" in text:
            return stmt
    return None


def _helper_at(unit, line: int):
    """The intrinsic whose helper spans ``line`` of the unit, or None."""
    lines = unit.source.splitlines()
    for k in range(min(line, len(lines)) - 1, -1, -1):
        m = _HELPER.search(lines[k])
        if m:
            return m.group(1)
        if lines[k] == "}" and k != line - 1:
            return None
    return None


def locate(unit, log: str, ptx_of=None):
    """``(intrinsic name or None, IR statement or None)`` the first error of ``log`` comes from.
    ``ptx_of()`` returns the unit's PTX (needed for ptxas errors only)."""
    by_name = {e.name: e for e in unit.intrinsics}
    m = _CU_LINE.search(log)
    if m:
        line = int(m.group(1))
        name = _helper_at(unit, line)
        if name is not None:
            return name, _first_call(unit, name)
        stmt = unit.origins.get(line)
        text = unit.source.splitlines()[line - 1] if 0 < line <= unit.source.count("\n") else ""
        called = [n for n in _CALL.findall(text) if n in by_name]
        return (called[0] if called else None), stmt
    m = _PTX_LINE.search(log)
    if m and ptx_of is not None:
        ptx = ptx_of()
        lines = ptx.splitlines() if ptx else []
        n = int(m.group(1))
        if 0 < n <= len(lines):
            tok = lines[n - 1].strip().split()
            if tok and tok[0].startswith("@") and len(tok) > 1:
                tok = tok[1:]
            op = tok[0].rstrip(";") if tok else ""
            for e in unit.intrinsics:
                if op in _opcodes(e):
                    return e.name, _first_call(unit, e.name)
    return None, None


def located(err: CompileError, unit, ptx_of=None) -> CompileError:
    """``err`` with the intrinsic and the kernel source line it comes from named first, when known."""
    name, stmt = locate(unit, err.log, ptx_of)
    if name is None and stmt is None:
        return err
    span = getattr(stmt, "span", None)
    where = f"{span}: " if span is not None else ""
    what = f"intrinsic {name}" if name else "this statement"
    src = span.source_line().strip() if span is not None else ""
    head = f"{where}error: {what} does not compile for {unit.arch}" + (f"\n    {src}" if src else "")
    out = CompileError(f"{head}\n{err}", err.log, err.source)
    out.intrinsic, out.span = name, span
    return out
