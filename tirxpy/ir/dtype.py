"""Element and scalar types.

Canonical names (the strings other layers use): ``bool``, ``int8`` .. ``int64``, ``uint8`` ..
``uint64``, ``float16``, ``bfloat16``, ``float32``, ``float64``, ``float8_e4m3``,
``float8_e5m2``, ``float6_e2m3``, ``float6_e3m2``, ``float4_e2m1``. Aliases: ``bf16``,
``f16``, ``f32``, ``f64``, ``tf32`` (float32 storage, ``is_tf32`` set), ``e4m3``, ``e5m2``,
``i8`` .. ``i64``, ``u8`` .. ``u64``, ``pred``. Handle types: ``mbarrier`` (a shared-memory
u64 mbarrier, addressed by a 32-bit shared address), ``smem_addr`` (u32 shared address),
``descriptor`` (u64 matrix descriptor), and pointers ``ptr(element, storage)``.

    >>> from tirxpy.ir.dtype import DataType, ptr
    >>> DataType.get("bf16")
    bfloat16
    >>> DataType.get("bf16").bits, DataType.get("e4m3").is_float, DataType.get("u32").is_int
    (16, True, True)
    >>> DataType.get("tf32").is_tf32, DataType.get("tf32") == DataType.get("float32")
    (True, False)
    >>> ptr("uint64", "shared")
    ptr[uint64, shared]
    >>> DataType.get("mbarrier").is_handle
    True
"""
from __future__ import annotations

import operator

from tirxpy.dtype_table import ALIASES, SPECS, TF32_FORMAT
from tirxpy.errors import shown

from .errors import IRError

_CODES = ("bool", "int", "uint", "float", "handle")


class DataType:
    """A scalar type: ``code`` (bool/int/uint/float/handle), ``bits`` and the canonical ``name``.

    Compare with ``==`` (by name and flags) or look up with :meth:`get`.
    """

    __slots__ = ("name", "code", "bits", "is_tf32", "exp_bits", "man_bits")

    def __init__(self, name: str, code: str, bits: int, *, is_tf32: bool = False, exp_bits=None, man_bits=None):
        if code not in _CODES:
            raise IRError(f"dtype code must be one of {_CODES}, got {shown(code)}")
        self.name = name
        self.code = code
        self.bits = bits
        self.is_tf32 = is_tf32
        self.exp_bits = exp_bits
        self.man_bits = man_bits

    # ---- classification ----
    @property
    def is_float(self) -> bool:
        return self.code == "float"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.code in ("int", "uint")

    @property
    def is_signed(self) -> bool:
        return self.code == "int" or self.code == "float"

    @property
    def is_uint(self) -> bool:
        return self.code == "uint"

    @property
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def is_pointer(self) -> bool:
        return False

    @property
    def bytes(self) -> float:
        """Bytes per element (fractional for sub-byte types: float4 is 0.5)."""
        return self.bits / 8

    @property
    def itemsize(self) -> int:
        """Bytes one element occupies in memory: ``bits // 8``, and 1 for bool (a byte per flag, as in
        torch and numpy). Sub-byte floats are packed, several per byte: IRError."""
        if self.is_bool:
            return 1
        if self.bits % 8:
            raise IRError(f"{self.name} is {self.bits} bits: packed several per byte, it has no whole-byte size")
        return self.bits // 8

    def min_value(self):
        if self.is_uint or self.is_bool:
            return 0
        if self.is_int:
            return -(1 << (self.bits - 1))
        return None

    def max_value(self):
        if self.is_bool:
            return 1
        if self.is_uint:
            return (1 << self.bits) - 1
        if self.is_int:
            return (1 << (self.bits - 1)) - 1
        return None

    def wrap(self, v: int) -> int:
        """Wrap a Python int into this integer type's range (two's complement)."""
        if self.is_bool:
            return int(bool(v))
        m = 1 << self.bits
        v %= m
        if self.code == "int" and v >= m // 2:
            v -= m
        return v

    # ---- identity ----
    def _key(self):
        return (self.name, self.is_tf32)

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = DataType.get(other)
            except IRError:
                return False
        return isinstance(other, DataType) and type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self) -> str:
        return "tfloat32" if self.is_tf32 else self.name

    __str__ = __repr__

    @staticmethod
    def get(name) -> "DataType":
        """Look a dtype up by canonical name or alias (a DataType passes through)."""
        if isinstance(name, DataType):
            return name
        try:
            cons = getattr(name, "__tirx_dtype__", None)
        except Exception:   # noqa: BLE001  (a __getattr__ of its own that raises: no dtype constructor)
            cons = None
        if cons is not None:
            return DataType.get(cons)
        if isinstance(name, str):
            key = name.strip()
            if key in _TABLE:
                return _TABLE[key]
            if key.startswith("ptr[") and key.endswith("]"):
                el, _, st = key[4:-1].partition(",")
                return ptr(el.strip(), st.strip() or "global")
        import difflib

        try:
            close = difflib.get_close_matches(str(name), list(_TABLE), n=3)
        except Exception:   # noqa: BLE001  (a name whose own __str__ raises: no suggestion)
            close = []
        extra = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise IRError(f"unknown dtype {shown(name)}{extra} Canonical names: {', '.join(CANONICAL)}")


class PointerType(DataType):
    """A pointer to ``element`` in a storage scope: ``ptr("uint64", "shared")``.

    Shared-memory pointers are 32-bit shared-window addresses; others are 64-bit.
    """

    __slots__ = ("element", "storage")

    def __init__(self, element, storage: str = "global"):
        element = DataType.get(element)
        bits = 32 if storage.startswith("shared") else 64
        super().__init__(f"ptr[{element.name}, {storage}]", "handle", bits)
        self.element = element
        self.storage = storage

    @property
    def is_pointer(self) -> bool:
        return True

    def _key(self):
        return (self.name,)


def ptr(element, storage: str = "global") -> PointerType:
    """Pointer type to ``element`` in ``storage`` (global, shared, shared::cluster, local, tmem)."""
    from .buffer import check_storage

    return PointerType(element, check_storage(storage))


CANONICAL = tuple(n for n, *_ in SPECS)
_TABLE: dict[str, DataType] = {n: DataType(n, c, b, **kw) for n, c, b, kw in SPECS}
for _a, _n in ALIASES.items():
    _TABLE[_a] = _TABLE[_n]
_TABLE["tf32"] = _TABLE["tfloat32"] = DataType("float32", "float", 32, is_tf32=True, **TF32_FORMAT)
# Handle types for barriers, shared addresses and descriptors.
_TABLE["mbarrier"] = PointerType(_TABLE["uint64"], "shared")
_TABLE["smem_addr"] = DataType("smem_addr", "handle", 32)
_TABLE["descriptor"] = DataType("descriptor", "handle", 64)

bool_ = _TABLE["bool"]
int32 = _TABLE["int32"]
int64 = _TABLE["int64"]
float32 = _TABLE["float32"]


#: torch dtype names (``str(torch.bfloat16)`` without ``torch.``) -> canonical tirxpy names: the one
#: place the two spellings meet.
TORCH_NAMES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
    "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "float16": "float16", "bfloat16": "bfloat16",
    "float32": "float32", "float64": "float64", "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2",
}
_TORCH_OF = {v: k for k, v in TORCH_NAMES.items()}


def from_torch(dt) -> DataType | None:
    """The tirxpy dtype of a torch dtype (``torch.float8_e4m3fn`` -> float8_e4m3), or None when tirxpy
    has none (complex, quantized, ...). Reads the dtype's name only: torch is not imported.

        >>> from_torch("torch.bfloat16"), from_torch("float8_e4m3fn"), from_torch("torch.complex64")
        (bfloat16, float8_e4m3, None)
    """
    name = TORCH_NAMES.get(str(dt).removeprefix("torch."))
    return None if name is None else _TABLE[name]


def to_torch(dtype):
    """The torch dtype of a tirxpy dtype (``"bf16"`` -> ``torch.bfloat16``); IRError when torch has none."""
    dt = DataType.get(dtype)
    name = _TORCH_OF.get(dt.name) if not dt.is_tf32 else None
    if name is None:
        raise IRError(f"{dt} has no torch dtype; torch has {', '.join(sorted(_TORCH_OF))}")
    import torch  # noqa: PLC0415 - only callers that hold torch tensors ask

    return getattr(torch, name)


def py_int_fits(v: int, dt: DataType) -> bool:
    lo, hi = dt.min_value(), dt.max_value()
    return lo is None or lo <= operator.index(v) <= hi
