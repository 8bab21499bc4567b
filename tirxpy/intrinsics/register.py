"""register_intrinsic: add a new instruction with one call, use it in the kernel on the next line.

    >>> from tirxpy.intrinsics import register_intrinsic
    >>> popc = register_intrinsic("demo_popc", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
    ...                           ret="r", memory=False, replace=True)
    >>> popc.__tirx_intrinsic__, popc.n_args, popc.ret_dtype
    ('demo_popc', 1, 'uint32')
"""
from __future__ import annotations

from typing import Sequence

from .entry import Intrinsic, Operand
from .errors import RegistrationError
from .table import add


def _operand(spec) -> Operand:
    if isinstance(spec, Operand):
        return spec
    if isinstance(spec, dict):
        return Operand(**spec)
    if isinstance(spec, (tuple, list)) and 2 <= len(spec) <= 5:
        return Operand(*spec)
    raise RegistrationError(
        f"operand {spec!r}: give an Operand, a dict of its fields, or a tuple (name, kind[, dtype[, access[, count]]]) "
        f"such as ('x', 'reg', 'uint32') or ('d', 'reg', 'float32', 'w', 4)")


def register_intrinsic(name: str, template: str, operands: Sequence = (), *, ret: str | None = None,
                       lowest: str = "sm_80", highest: str | None = None, scope: str = "thread",
                       checks: Sequence = (), memory: bool = True, doc: str = "", replace: bool = False,
                       **kw) -> Intrinsic:
    """Create an entry from a PTX template and put it in the table (and the IR parser's signatures).

    ``template`` names operands in braces: ``"popc.b32 {r}, {x};"``. Returns the entry; it can be
    called inside a kernel directly (``popc(x)``) or as ``T.ptx.<name>(x)``.

    ``cxx=`` (pure integer arithmetic: ``ret=`` and ``memory=False``, scalar read operands): a C++
    expression of the returned value that the helper returns instead of running the asm, so the C++
    compiler folds constants through the call (:mod:`tirxpy.intrinsics.entry`):

        >>> add = register_intrinsic("demo_add", "add.u32 {r}, {x}, {y};", [("r", "reg", "uint32", "w"),
        ...                          ("x", "reg", "uint32"), ("y", "reg", "uint32")], ret="r", memory=False,
        ...                          cxx="{x} + {y}", replace=True)
        >>> add.render_helper().splitlines()[1]
        '  return (unsigned)(x + y);'
    """
    if not isinstance(template, str) or not template.strip():
        raise RegistrationError(f"register_intrinsic({name!r}): template must be a non-empty PTX string")
    ops = [_operand(s) for s in operands]
    return add(Intrinsic(name, template, ops, ret=ret, lowest=lowest, highest=highest, scope=scope, checks=checks,
                         memory=memory, doc=doc, **kw), replace=replace)
