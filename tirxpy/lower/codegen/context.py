"""State shared by the expression and statement renderers of one kernel: C names, buffer
storage, the intrinsics used, hidden tensor-map parameters, hardware ids to compute up front."""
from __future__ import annotations

import keyword
from dataclasses import dataclass, field

from tirxpy.target import Target

from .ranges import Ranges

_CPP_WORDS = frozenset("""
alignas alignof and asm auto bool break case catch char class const constexpr const_cast continue decltype default
delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not nullptr operator or private protected public register reinterpret_cast return short signed
sizeof static static_assert static_cast struct switch template this throw true try typedef typeid typename union
unsigned using virtual void volatile wchar_t while xor half min max abs threadIdx blockIdx blockDim gridDim warpSize
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t main""".split())


def _ascii(name: str) -> str:
    """``name`` (a Python identifier) as a C one: each non-ASCII character as ``_u`` and its code point in hex.

        >>> _ascii("alpha"), _ascii("\u03b1"), _ascii("A\u00c4")
        ('alpha', '_u3b1', 'A_uc4')
    """
    return name if name.isascii() else "".join(c if c.isascii() else f"_u{ord(c):x}" for c in name)


@dataclass
class BufferInfo:
    """How a buffer is reached in C: ``cname`` is an array or pointer indexed by ``m``."""

    buffer: object
    cname: str
    storage: str
    smem_offset: int | None = None  # bytes from the start of dynamic shared memory (roots)


@dataclass
class TensorMapParam:
    """A hidden ``const __grid_constant__ CUtensorMap`` kernel parameter for a global buffer."""

    cname: str
    buffer: object  # the global Buffer (a kernel parameter)
    param_index: int  # position of that buffer among the kernel parameters
    box: tuple  # outermost first
    swizzle: int  # bytes: 0 / 32 / 64 / 128


@dataclass
class Context:
    kernel: object
    arch: Target
    ranges: Ranges
    active: object = None  # tirxpy.ir.analysis.ActiveThreads
    names: dict = field(default_factory=dict)  # id(obj) -> (obj, cname)
    taken: set = field(default_factory=set)
    buffers: dict = field(default_factory=dict)  # id(buffer) -> BufferInfo
    intrinsics: dict = field(default_factory=dict)  # name -> Intrinsic, first-use order
    tmaps: list = field(default_factory=list)
    ids: dict = field(default_factory=dict)  # hardware-id variable -> C initializer
    helpers: set = field(default_factory=set)  # extra helper snippets by key
    written: set = field(default_factory=set)  # id(buffer) of global buffers that may be written: not const
    # id(buffer) of global buffers the kernel stores to: stores, write operands of instructions, TMA stores (a
    # buffer whose address is only taken for a read operand is in ``written`` alone)
    stored: set = field(default_factory=set)
    # id(buffer) of a global buffer -> bytes of the widest instruction access through a pointer into it (a 16-byte
    # vector load or cp.async): its base address must be aligned to that, as the copies' vector plans assume
    access: dict = field(default_factory=dict)

    def name(self, obj, hint: str) -> str:
        """A unique C identifier for ``obj`` (stable per object)."""
        ent = self.names.get(id(obj))
        if ent is not None and ent[0] is obj:
            return ent[1]
        base = _ascii(hint) if hint.isidentifier() and not keyword.iskeyword(hint) else "v"
        if base in _CPP_WORDS or base.startswith(("tx_", "__")):
            base = base + "_"
        cand, k = base, 0
        while cand in self.taken:
            k += 1
            cand = f"{base}_{k}"
        self.taken.add(cand)
        self.names[id(obj)] = (obj, cand)
        return cand

    def buffer(self, buf) -> BufferInfo | None:
        ent = self.buffers.get(id(buf))
        return ent if ent is not None and ent.buffer is buf else None

    def use(self, entry) -> None:
        self.intrinsics.setdefault(entry.name, entry)
