"""A kernel that calls each given entry once with dummy operands, so ptxas really assembles them.

Used by the compile tests (every table row for its lowest target) and handy for checking a
newly registered intrinsic: ``compile_cuda(exercise_source([my]), "sm_90a")``.

    >>> from tirxpy.intrinsics import get
    >>> src = exercise_source([get("clock")])
    >>> "tx_clock()" in src and "__global__" in src
    True
"""
from __future__ import annotations

from typing import Iterable

from .entry import Intrinsic
from .render import render_helpers
from .table import get


def _dummy(o, k: int) -> str:
    if o.kind == "imm":
        return str(o.values[0] if o.values else 0)
    if o.kind == "pred":
        return f"(p[{k}] != 0ull)"
    if o.kind == "smem_addr":
        return f"tx_smem_addr(smem + {8 * (k % 8)})"
    if o.kind == "smem_addr16":
        return f"(tx_smem_addr(smem + {16 * (k % 8)}) >> 4)"
    if o.kind == "tensormap":
        return "&tmap"
    if o.kind == "gmem_ptr":
        return f"(void*)(p + {k})"
    return f"({o.ctype})p[{k}]"


def _call(e: Intrinsic) -> str:
    lines, args, after = [], [], []
    for k, o in enumerate(e.args, start=1):
        if o.vector:
            lines.append(f"{o.ctype} v{k}[{o.count}];")
            if o.access != "w":
                lines.append(f"for (int j = 0; j < {o.count}; ++j) v{k}[j] = ({o.ctype})p[j + {k}];")
            if o.is_output:
                after.append(f"for (int j = 0; j < {o.count}; ++j) p[j + 64] += (unsigned long long)v{k}[j];")
            args.append(f"v{k}")
        elif o.is_output:
            lines.append(f"{'bool' if o.kind == 'pred' else o.ctype} v{k};")
            after.append(f"p[{k + 64}] = (unsigned long long)v{k};")
            args.append(f"v{k}")
        else:
            args.append(_dummy(o, k))
    call = e.render_call(args)
    if e.ret is not None:
        call = f"p[63] = (unsigned long long)({call})"
    return "\n      ".join(lines + [call + ";"] + after)


def exercise_source(entries: Iterable[Intrinsic | str], kernel: str = "tx_exercise") -> str:
    """CUDA C++: the helpers plus ``kernel(unsigned long long* p, CUtensorMap tmap)`` calling each once."""
    es = []
    for e in entries:
        e = get(e) if isinstance(e, str) else e
        if all(x.name != e.name for x in es):
            es.append(e)
    cases = "\n".join(f"    case {i}: {{\n      {_call(e)}\n      break;\n    }}" for i, e in enumerate(es))
    return (render_helpers(es) + f"""
extern "C" __global__ void {kernel}(unsigned long long* p, const __grid_constant__ CUtensorMap tmap) {{
  __shared__ alignas(128) unsigned long long smem[1024];
  smem[threadIdx.x] = p[threadIdx.x];
  switch (p[0]) {{
{cases}
  }}
  p[threadIdx.x] = smem[threadIdx.x];
}}
""")
