"""register_intrinsic: add a new instruction with one call, use it in the kernel on the next line.

    >>> from tirxpy.intrinsics import register_intrinsic
    >>> popc = register_intrinsic("demo_popc", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
    ...                           ret="r", memory=False, replace=True)
    >>> popc.__tirx_intrinsic__, popc.n_args, popc.ret_dtype
    ('demo_popc', 1, 'uint32')
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from tirxpy.errors import shown

from .entry import Intrinsic, Operand
from .errors import RegistrationError
from .table import add


_OPERAND_FIELDS = tuple(f.name for f in dataclasses.fields(Operand))
_EXTRA = {"why_highest": str, "modifiers": (tuple, list), "ptx": str, "cxx": str}
MAX_OPERANDS = 160      #: most operands one entry has (a tcgen05.ld of 128 registers plus its addresses)
_USER: set = set()      # names registered through register_intrinsic (replace=True may re-register only these)


def _operand(k: int, spec) -> Operand:
    if isinstance(spec, Operand):
        return spec
    if isinstance(spec, dict):
        extra = [f for f in spec if f not in _OPERAND_FIELDS]
        if extra:
            raise RegistrationError(f"operand {k} {shown(spec, 80)}: unknown field(s) {shown(extra, 80)}; an operand "
                                    f"has {', '.join(_OPERAND_FIELDS)}")
        if "name" not in spec or "kind" not in spec:
            raise RegistrationError(f"operand {k} {shown(spec, 80)}: needs at least 'name' and 'kind'")
        return Operand(**spec)
    if isinstance(spec, (tuple, list)) and 2 <= len(spec) <= 5:
        return Operand(*spec)
    raise RegistrationError(
        f"operand {k} {shown(spec, 80)}: give an Operand, a dict of its fields, or a tuple (name, kind[, dtype[, "
        "access[, count]]]) such as ('x', 'reg', 'uint32') or ('d', 'reg', 'float32', 'w', 4)")


def _check_name(name, replace) -> None:
    from .table import _FAMILIES, _TABLE  # noqa: PLC0415

    if not isinstance(name, str):
        raise RegistrationError(f"register_intrinsic: name must be a str, got {type(name).__name__} {shown(name, 60)}")
    if not isinstance(replace, bool):
        raise RegistrationError(f"register_intrinsic({shown(name)}): replace= must be True or False, got "
                                f"{shown(replace, 60)}")
    for fam in _FAMILIES.values():
        if fam.pattern.fullmatch(name):
            raise RegistrationError(f"register_intrinsic({shown(name)}): the name is one of the generated family "
                                    f"{shown(fam.prefix)}'s entries; pick another name")
    if replace and name in _TABLE and name not in _USER:
        raise RegistrationError(f"register_intrinsic({shown(name)}): {shown(name)} is a built-in entry; replace=True "
                                f"re-registers only names registered with register_intrinsic — pick another name")


def register_intrinsic(name: str, template: str, operands: Sequence = (), *, ret: str | None = None,
                       lowest: str = "sm_80", highest: str | None = None, scope: str = "thread",
                       checks: Sequence = (), memory: bool = True, doc: str = "", replace: bool = False,
                       **kw) -> Intrinsic:
    """Create an entry from a PTX template and put it in the table (and the IR parser's signatures).

    ``template`` names operands in braces: ``"popc.b32 {r}, {x};"``. Returns the entry; it can be
    called inside a kernel directly (``popc(x)``) or as ``T.ptx.<name>(x)``.

    Every field is checked here, and a RegistrationError names the one that is wrong: ``name`` (a Python
    and C identifier, not a built-in or generated entry's), ``template`` (printable ASCII PTX with no
    backslashes, no predicate guard without its instruction, its last statement ended by ``;`` (or ``}``),
    whose ``{names}`` are exactly the operands), ``operands`` (a list; each an Operand, a dict of its
    fields or a tuple), ``ret``, ``lowest`` / ``highest`` (targets NVRTC compiles for, highest not below
    lowest), ``scope``, ``checks`` (callables), ``memory`` / ``replace`` (bools), ``doc`` and the keywords
    ``why_highest``, ``modifiers``, ``ptx``, ``cxx``.

    ``cxx=`` (pure integer arithmetic: ``ret=`` and ``memory=False``, scalar read operands): a C++
    expression of the returned value that the helper returns instead of running the asm, so the C++
    compiler folds constants through the call (:mod:`tirxpy.intrinsics.entry`):

        >>> add = register_intrinsic("demo_add", "add.u32 {r}, {x}, {y};", [("r", "reg", "uint32", "w"),
        ...                          ("x", "reg", "uint32"), ("y", "reg", "uint32")], ret="r", memory=False,
        ...                          cxx="{x} + {y}", replace=True)
        >>> add.render_helper().splitlines()[1]
        '  return (unsigned)(x + y);'
    """
    # str subclasses as the plain str they hold (their own methods are their code)
    name, template = (str.__str__(v) if isinstance(v, str) else v for v in (name, template))
    _check_name(name, replace)
    if not isinstance(template, str) or not template.strip():
        raise RegistrationError(f"register_intrinsic({shown(name)}): template must be a non-empty PTX string")
    if isinstance(operands, (str, bytes, dict)) or not isinstance(operands, (tuple, list)):
        raise RegistrationError(f"register_intrinsic({shown(name)}): operands must be a list of operands, got "
                                f"{type(operands).__name__} {shown(operands, 60)}")
    if len(operands) > MAX_OPERANDS:
        raise RegistrationError(f"register_intrinsic({shown(name)}): {len(operands)} operands, at most {MAX_OPERANDS}")
    for f, v in kw.items():
        if f not in _EXTRA:
            raise RegistrationError(f"register_intrinsic({shown(name)}): unknown keyword {shown(f, 60)}; the keywords "
                                    "are ret, lowest, highest, scope, checks, memory, doc, replace, "
                                    f"{', '.join(_EXTRA)}")
        if not isinstance(v, _EXTRA[f]) or isinstance(v, str) and f == "modifiers":
            raise RegistrationError(f"register_intrinsic({shown(name)}): {f}= has the wrong type {type(v).__name__}")
    ops = [_operand(k, s) for k, s in enumerate(operands)]
    entry = add(Intrinsic(name, template, ops, ret=ret, lowest=lowest, highest=highest, scope=scope, checks=checks,
                          memory=memory, doc=doc, **kw), replace=replace)
    _USER.add(name)
    return entry
