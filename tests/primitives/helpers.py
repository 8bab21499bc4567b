"""Shared helpers for primitive tests: parse a kernel body, lower it, find what was chosen."""
from __future__ import annotations

import pytest

from tirxpy import T
from tirxpy.ir import IntrinsicCall
from tirxpy.primitives import DispatchError, lower_calls_traced


def kernel(params: str, body: str, threads: int = 128, grid: int = 1, prelude: str = "", verify: bool = True):
    """A kernel from a parameter list and an indented body (4 spaces)."""
    src = f"""
from tirxpy.layout import *
@T.prim_func
def k({params}):
    T.launch(grid=({grid},), threads={threads})
{body}
"""
    return T.parse_script(src, verify=verify)


def choices(k, arch="sm_90a"):
    """[(variant, lowered stmt)] per call site, in source order."""
    _, sites = lower_calls_traced(k, arch)
    return [(s.impl.variant, s.stmt) for s in sites]


def nodes(node, kind) -> list:
    """Every IR node of type ``kind`` under ``node`` (outer nodes before their operands)."""
    out = []

    def walk(n):
        if isinstance(n, kind):
            out.append(n)
        for _, v in n.fields():
            for x in (v if isinstance(v, tuple) else (v,)):
                if hasattr(x, "fields"):
                    walk(x)
    walk(node)
    return out


def calls(node) -> list:
    """Every IntrinsicCall under ``node`` (outer calls before their arguments)."""
    return nodes(node, IntrinsicCall)


def intrinsics(node) -> list:
    """Names of every IntrinsicCall under ``node``, in order."""
    return [c.name for c in calls(node)]


def rejected(k, arch="sm_90a") -> DispatchError:
    with pytest.raises(DispatchError) as ei:
        lower_calls_traced(k, arch)
    return ei.value


def reason(err: DispatchError, variant: str) -> str:
    for v, _, _, r in err.candidates:
        if v == variant:
            return r
    raise AssertionError(f"{variant} not among candidates {err.candidates}")


def has_build() -> bool:
    try:
        from tirxpy.lower.build import build  # noqa: F401
        return True
    except ImportError:
        return False


def compile_ok(k, arch="sm_90a"):
    """Build through NVRTC (skip when the build pipeline is absent); returns the compiled kernel."""
    if not has_build():
        pytest.skip("tirxpy.lower.build is not available yet")
    from tirxpy.lower.build import build
    ck = build(k, arch)
    assert ck.resources.spill_stores == 0 and ck.resources.spill_loads == 0
    return ck
