"""What the verifier knows about tile primitives: the op-spec registry.

``register_op_spec(name, min_scope=..., max_scope=..., n_operands=(lo, hi),
operand_storage={position: (storages...)}, same_dtype=..., same_shape=...)``. The primitives
layer registers more; the IR pre-registers the common ones with minimal rules.

    >>> from tirxpy.ir.op_spec import lookup_op_spec
    >>> spec = lookup_op_spec("copy_async")
    >>> spec.operand_storage[0]
    ('shared', 'shared::cluster', 'global', 'tmem')
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tirxpy.scope import Scope

from .buffer import check_storage
from .errors import IRError


@dataclass(frozen=True)
class OpSpec:
    """Rules for primitive ``name``: scope range, operand count, storage scope per operand
    position, and whether the tensor operands share a dtype / element count."""

    name: str
    min_scope: Scope = Scope.THREAD
    max_scope: Scope = Scope.CLUSTER
    n_operands: tuple = (0, None)
    operand_storage: dict = field(default_factory=dict)
    same_dtype: bool = False
    same_shape: bool = False
    doc: str = ""


_OPS: dict[str, OpSpec] = {}


def register_op_spec(name: str, *, min_scope="thread", max_scope="cluster", n_operands=(0, None),
                     operand_storage=None, same_dtype=False, same_shape=False, doc="") -> OpSpec:
    """Register (or replace) the verifier rules of primitive ``name``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise IRError(f"a primitive name is an identifier, got {name!r}")
    if isinstance(n_operands, int):
        n_operands = (n_operands, n_operands)
    st = {}
    for pos, allowed in dict(operand_storage or {}).items():
        if isinstance(allowed, str):
            allowed = (allowed,)
        st[int(pos)] = tuple(check_storage(a) for a in allowed)
    spec = OpSpec(name, Scope.get(min_scope), Scope.get(max_scope), tuple(n_operands), st, same_dtype, same_shape, doc)
    if spec.min_scope > spec.max_scope:
        raise IRError(f"min_scope {spec.min_scope} is wider than max_scope {spec.max_scope}")
    _OPS[name] = spec
    return spec


def lookup_op_spec(name: str) -> OpSpec | None:
    return _OPS.get(name)


def op_names() -> list[str]:
    return sorted(_OPS)


_ANY = ("global", "shared", "shared::cluster", "local", "tmem")
_ONCHIP = ("shared", "shared::cluster", "local", "tmem")
register_op_spec("copy", n_operands=2, same_shape=True, doc="dst <- src, synchronous")
register_op_spec("copy_async", n_operands=2, same_shape=True,
                 operand_storage={0: ("shared", "shared::cluster", "global", "tmem"), 1: ("global", "shared", "shared::cluster")},
                 doc="asynchronous bulk/TMA/cp.async/tcgen05.cp copy dst <- src; one side is shared memory")
register_op_spec("fill", n_operands=(1, 2), doc="dst <- value")
register_op_spec("cast", n_operands=2, same_shape=True, doc="dst <- cast(src)")
register_op_spec("gemm", n_operands=(3, 4), operand_storage={0: ("local", "shared", "tmem")},
                 doc="C (+)= A @ B")
register_op_spec("gemm_async", n_operands=(3, 4),
                 operand_storage={0: ("local", "tmem"), 1: ("shared", "local", "tmem"), 2: ("shared",)},
                 doc="asynchronous tensor-core C (+)= A @ B (wgmma / tcgen05)")
for _op in ("map", "unary", "exp", "exp2", "sqrt", "rsqrt", "abs", "neg", "relu"):
    register_op_spec(_op, n_operands=(1, 3), operand_storage={0: _ONCHIP}, doc="elementwise dst <- f(src)")
for _op in ("binary", "add", "sub", "mul", "div", "maximum", "minimum", "fma"):
    register_op_spec(_op, n_operands=(2, 4), operand_storage={0: _ONCHIP}, doc="elementwise dst <- a op b")
for _op in ("reduce", "sum", "max", "min"):
    register_op_spec(_op, n_operands=(2, 3), operand_storage={0: _ONCHIP, 1: _ONCHIP}, doc="dst <- reduce(src)")
