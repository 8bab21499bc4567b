"""Lowered IR -> one CUDA C++ translation unit.

    types.py    dtype -> C++ type, exact literals, the typedef prelude
    ranges.py   integer ranges of expressions (non-negativity, address tightening)
    address.py  element addresses from layouts (sympy, swizzles included)
    expr.py     expressions; intrin.py intrinsic calls by operand kind (TMA maps, descriptors)
    stmt.py     statements and allocations; kernel.py the unit and its entry signature
"""
from .errors import CodegenError
from .kernel import CudaUnit, generate, smem_plan

__all__ = ["CodegenError", "CudaUnit", "generate", "smem_plan"]
