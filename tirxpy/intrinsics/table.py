"""The intrinsic table: every entry by name, shape-parameterized families, and the link to the
IR parser (each entry's signature is registered so ``T.ptx.<name>(...)`` parses).

    >>> from tirxpy.intrinsics import get, lookup
    >>> get("mbarrier_init").n_args
    2
    >>> lookup("wgmma_m64n64k16_f32_bf16_bf16_ss").ptx
    'wgmma.mma_async.m64n64k16.f32.bf16.bf16'
"""
from __future__ import annotations

import re
from typing import Callable, Iterator

from tirxpy.ir.intrin_sig import add_signature_resolver, register_intrinsic_signature
from tirxpy.errors import shown

from .entry import Intrinsic
from .errors import IntrinsicError, OperandError, RegistrationError

_TABLE: dict[str, Intrinsic] = {}
_FAMILIES: dict[str, "Family"] = {}


def add(entry: Intrinsic, *, replace: bool = False) -> Intrinsic:
    """Put ``entry`` in the table and announce its signature to the IR parser."""
    old = _TABLE.get(entry.name)
    if old is not None and old is not entry and not replace:
        raise RegistrationError(
            f"an intrinsic named {shown(entry.name)} already exists ({old.ptx}); pick another name or pass "
            "replace=True")
    _TABLE[entry.name] = entry
    _announce(entry)
    return entry


def _announce(e: Intrinsic) -> None:
    """Register ``e``'s signature with the IR parser: arity, argument names and the text ``help`` prints."""
    register_intrinsic_signature(e.name, e.ret_dtype, e.n_args, e.scope, params=[o.name for o in e.args],
                                 doc=e.help_text())


def sync_ir_signatures() -> int:
    """(Re-)register every known entry's signature with the IR parser; returns how many."""
    for e in _TABLE.values():
        _announce(e)
    return len(_TABLE)


class Family:
    """Entries generated on demand from validated shape parameters (wgmma N, tcgen05.ld shape x repeat).

    ``build(**params)`` returns the entry (and raises OperandError for invalid parameters);
    ``pattern`` parses an entry name back into parameters so ``lookup(name)`` can create it.
    ``examples()`` yields parameter sets that together cover every template variant (tests
    compile these).
    """

    def __init__(self, prefix: str, build: Callable[..., Intrinsic], pattern: str,
                 parse: Callable[[re.Match], dict], examples: Callable[[], Iterator[dict]]):
        self.prefix, self._build, self.pattern, self._parse, self.examples = prefix, build, re.compile(pattern), parse, examples
        _FAMILIES[prefix] = self

    def get(self, **params) -> Intrinsic:
        e = self._build(**params)
        have = _TABLE.get(e.name)
        return have if have is not None else add(e)

    def from_name(self, name: str) -> Intrinsic | None:
        m = self.pattern.fullmatch(name)
        return None if m is None else self.get(**self._parse(m))

    def __repr__(self) -> str:
        return f"Family({self.prefix})"


def get(name: str) -> Intrinsic:
    """The entry called ``name`` (generated on demand for family names); IntrinsicError if none."""
    if not isinstance(name, str):
        raise IntrinsicError(f"an intrinsic is named by a str, got {type(name).__name__} {shown(name, 60)}")
    e = lookup(name)
    if e is None:
        close = [n for n in _TABLE if n.startswith(name.split("_")[0])][:8]
        hint = f"; similar: {close}" if close else ""
        raise IntrinsicError(f"no intrinsic named {shown(name)}{hint}. Add one with "
                             "tirxpy.intrinsics.register_intrinsic(...)")
    return e


def _resolve_signature(name: str) -> str | None:
    """The IR parser's resolver: generate (and so announce) the family member ``name``; the family's
    reason when its parameters are invalid (``tcgen05_ld_16x128b_x128``: the repeat passes 64)."""
    try:
        lookup(name)
    except OperandError as e:
        return str(e)
    return None


def lookup(name: str) -> Intrinsic | None:
    """The entry called ``name`` (generated on demand for family names), or None (also for a name that is no str)."""
    if not isinstance(name, str):
        return None
    e = _TABLE.get(name)
    if e is not None:
        return e
    for fam in _FAMILIES.values():
        if name.startswith(fam.prefix):
            e = fam.from_name(name)
            if e is not None:
                return e
    return None


def family(prefix: str) -> Family:
    if prefix not in _FAMILIES:
        raise IntrinsicError(f"no intrinsic family {shown(prefix)}; families: {sorted(_FAMILIES)}")
    return _FAMILIES[prefix]


def entries() -> list[Intrinsic]:
    """Every entry created so far (static rows and generated ones)."""
    return list(_TABLE.values())


def families() -> list[Family]:
    return list(_FAMILIES.values())


add_signature_resolver(_resolve_signature)
