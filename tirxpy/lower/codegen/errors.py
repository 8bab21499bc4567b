"""CodegenError: lowered IR that cannot become CUDA C++, pointing at the user's source line.

    >>> from tirxpy.ir.errors import Span
    >>> print(CodegenError("tmem buffer acc has no element address", Span("<doc>", 3), hint="use tcgen05 ld/st"))
    <doc>:3:0: error: tmem buffer acc has no element address
    hint: use tcgen05 ld/st
"""
from __future__ import annotations

from tirxpy.ir.errors import _Located


class CodegenError(_Located):
    """Lowered IR codegen cannot render (unsupported dtype, tmem element access, a primitive call
    left unlowered, an intrinsic operand of the wrong kind, a target that lacks an instruction)."""


def span_of(*nodes):
    """The first source span among ``nodes`` (None if none carries one)."""
    for n in nodes:
        s = getattr(n, "span", None)
        if s is not None:
            return s
    return None
