"""Matrix descriptors: bit packing of the WGMMA shared-memory descriptor (PTX ISA 9.7.15.5.1.2.2
"Matrix Descriptor Format") and the tcgen05 shared-memory and instruction descriptors (PTX ISA
9.7.16.4.1 "Shared memory descriptor", 9.7.16.4.2 "Instruction descriptor", Tables 42-44).

The ``*_from_layout`` entry points read swizzle / LBO / SBO off the operand's layout
(tirxpy.layout.atoms.smem_descriptor_strides), so no offsets are typed in by hand.

    >>> hex(wgmma_smem_desc(0x400, lbo=16, sbo=1024, swizzle=128))
    '0x4000004000010040'
    >>> hex(tcgen05_instr_desc("float32", "bfloat16", "bfloat16", m=128, n=256))
    '0x8400490'
"""
from __future__ import annotations
from tirxpy.errors import shown

from .errors import DescriptorError, IntrinsicError

#: The start-address field of both shared-memory descriptors (bits 0-13): the shared::cta byte address
#: ``>> 4``, of which the hardware keeps address bits 4-17 (a shared::cta address is below 2**18). Every
#: renderer of the field (Python, C++, PTX, the simulator) reads these two numbers.
START_ADDRESS_MASK, START_ADDRESS_SHIFT = 0x3FFFF, 4

# swizzle width in bytes -> 2-bit WGMMA field (bits 62-63)
WGMMA_SWIZZLE = {0: 0, 128: 1, 64: 2, 32: 3}
# swizzle -> 3-bit tcgen05 field (bits 61-63); "128B_base32B" is 128-byte swizzle with 32-byte atomicity
TCGEN05_SWIZZLE = {0: 0, "128B_base32B": 1, 128: 2, 64: 4, 32: 6}
#: The immediate operand of a wgmma that, when 1, makes a descriptor operand MN-major (transposed).
WGMMA_TRANSPOSE = {"a_desc": "trans_a", "b_desc": "trans_b"}
#: The tcgen05 instruction-descriptor bit that, when set, makes a descriptor operand MN-major
#: (PTX ISA Table 42: transpose A / B).
IDESC_TRANSPOSE_BIT = {"a_desc": 15, "b_desc": 16}


def _field(value: int, bits: int, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << bits):
        raise DescriptorError(f"{what} = {shown(value)} does not fit its {bits}-bit field (0..{(1 << bits) - 1})")
    return value


def _bytes16(value: int, what: str) -> int:
    """A byte address / offset stored >> 4 in a 14-bit field (so < 256 KiB, 16-byte aligned)."""
    if not isinstance(value, int) or value < 0 or value % 16:
        raise DescriptorError(f"{what} = {shown(value)} bytes must be a non-negative multiple of 16")
    return _field(start_field(value) if what == "start address" else value >> 4, 14,
                  f"{what} >> 4 (bytes {value})")


def wgmma_smem_desc(start_addr: int, lbo: int, sbo: int, swizzle: int = 128, base_offset: int = 0) -> int:
    """64-bit WGMMA descriptor: start address (bits 0-13, >>4), LBO (16-29, >>4), SBO (32-45, >>4),
    matrix base offset (49-51), swizzle mode (62-63: 0 none, 1 128B, 2 64B, 3 32B).

    ``start_addr`` is the shared::cta byte address (only bits 4-17 are kept, as the hardware does).
    """
    if swizzle not in WGMMA_SWIZZLE:
        raise DescriptorError(f"WGMMA swizzle must be one of {sorted(WGMMA_SWIZZLE)} bytes, got {shown(swizzle)}")
    d = _bytes16(start_addr, "start address")
    d |= _bytes16(lbo, "leading byte offset") << 16
    d |= _bytes16(sbo, "stride byte offset") << 32
    d |= _field(base_offset, 3, "matrix base offset") << 49
    d |= WGMMA_SWIZZLE[swizzle] << 62
    return d


def tcgen05_smem_desc(start_addr: int, lbo: int, sbo: int, swizzle=128, base_offset: int = 0,
                      lbo_absolute: bool = False) -> int:
    """64-bit tcgen05 shared-memory descriptor: start (0-13), LBO (16-29), SBO (32-45) all >>4,
    fixed 0b001 (46-48), base offset (49-51), LBO mode (52: 1 = absolute address),
    swizzle (61-63: 0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B)."""
    if swizzle not in TCGEN05_SWIZZLE:
        raise DescriptorError(f"tcgen05 swizzle must be one of {list(TCGEN05_SWIZZLE)}, got {shown(swizzle)}")
    d = _bytes16(start_addr, "start address")
    d |= _bytes16(lbo, "leading byte offset") << 16
    d |= _bytes16(sbo, "stride byte offset") << 32
    d |= 0b001 << 46
    d |= _field(base_offset, 3, "matrix base offset") << 49
    d |= int(bool(lbo_absolute)) << 52
    d |= TCGEN05_SWIZZLE[swizzle] << 61
    return d


_SWIZZLE_OF = {"wgmma": {v: k for k, v in WGMMA_SWIZZLE.items()}, "tcgen05": {v: k for k, v in TCGEN05_SWIZZLE.items()}}
_FIELD14 = (1 << 14) - 1


def smem_desc_fields(desc: int, family: str = "wgmma") -> tuple:
    """``(start address, LBO, SBO, swizzle)`` of a shared-memory descriptor of ``family`` (``"wgmma"`` /
    ``"tcgen05"``), the first three in bytes: the fields :func:`wgmma_smem_desc` / :func:`tcgen05_smem_desc`
    pack, read back. ``swizzle`` is 0, 32, 64, 128 or ``"128B_base32B"``, and None for a reserved code.

        >>> smem_desc_fields(wgmma_smem_desc(0x400, lbo=16, sbo=1024, swizzle=128))
        (1024, 16, 1024, 128)
        >>> smem_desc_fields(tcgen05_smem_desc(0x800, lbo=16, sbo=512, swizzle=64), "tcgen05")
        (2048, 16, 512, 64)
    """
    desc = int(desc)
    start = (desc & _FIELD14) << START_ADDRESS_SHIFT
    lbo = ((desc >> 16) & _FIELD14) << 4
    sbo = ((desc >> 32) & _FIELD14) << 4
    code = (desc >> 62) & 3 if family == "wgmma" else (desc >> 61) & 7
    return start, lbo, sbo, _SWIZZLE_OF[family].get(code)


def desc_major(family: str, operand: str, named: dict) -> str:
    """The major-ness (``"K"`` / ``"MN"``) in which an instruction of ``family`` reads its descriptor
    ``operand``, from the call's arguments ``named`` (operand name -> IR argument): wgmma's constant
    :data:`WGMMA_TRANSPOSE` immediate, tcgen05's :data:`IDESC_TRANSPOSE_BIT` of a constant instruction
    descriptor. A descriptor whose immediate is not a constant, or that has none (tcgen05.cp's source),
    is K-major. Codegen and the simulator both build the operand's descriptor in this major-ness.

        >>> from tirxpy.ir import IntImm
        >>> desc_major("wgmma", "b_desc", {"trans_b": IntImm(1)}), desc_major("tcgen05", "a_desc", {"idesc": IntImm(0)})
        ('MN', 'K')
    """
    from tirxpy.ir.expr import IntImm  # noqa: PLC0415 - the IR, one layer down

    if family == "wgmma":
        t = named.get(WGMMA_TRANSPOSE.get(operand))
        return "MN" if isinstance(t, IntImm) and t.value == 1 else "K"
    idesc, bit = named.get("idesc"), IDESC_TRANSPOSE_BIT.get(operand)
    return "MN" if isinstance(idesc, IntImm) and bit is not None and (idesc.value >> bit) & 1 else "K"


# ---------------------------------------------------------------- tcgen05 instruction descriptor
_D_TYPE = {"float16": 0, "float32": 1, "int32": 2}
_KIND_TYPES = {
    "tf32": {"float32": 2},
    "f16": {"float16": 0, "bfloat16": 1},
    "f8f6f4": {"float8_e4m3": 0, "float8_e5m2": 1, "float6_e2m3": 3, "float6_e3m2": 4, "float4_e2m1": 5},
    "i8": {"uint8": 0, "int8": 1},
}


def mma_kind(a: str, b: str) -> str:
    """The tcgen05.mma ``.kind`` for input dtypes a, b (float32 means tf32)."""
    for kind, types in _KIND_TYPES.items():
        if a in types and b in types and (kind != "f16" or a == b):
            return kind
    raise DescriptorError(f"no tcgen05.mma kind takes A={shown(a)} with B={shown(b)}; kinds and their dtypes: "
                          f"{_KIND_TYPES}")


def _mn(m: int, n: int, cta_group: int, block_scaled: bool = False):
    ms = (64, 128) if cta_group == 1 else (128, 256)
    if cta_group not in (1, 2):
        raise DescriptorError(f"cta_group must be 1 or 2, got {shown(cta_group)}")
    if m not in ms or (block_scaled and m == 64):
        raise DescriptorError(f"M = {shown(m)} is not a tcgen05.mma shape for cta_group::{cta_group}; use one of {ms}")
    step = 16 if m in (128, 256) else 8
    if not isinstance(n, int) or n % step or not step <= n <= 256:
        raise DescriptorError(f"N = {shown(n)} must be a multiple of {step} in [{step}, 256] for M = {m}")


def tcgen05_instr_desc(d: str, a: str, b: str, m: int, n: int, *, a_major: str = "K", b_major: str = "K",
                       negate_a: bool = False, negate_b: bool = False, saturate: bool = False,
                       cta_group: int = 1, max_shift: int = 0) -> int:
    """32-bit instruction descriptor for kinds tf32 / f16 / f8f6f4 / i8 (PTX ISA Table 42):
    D type (4-5), A type (7-9), B type (10-12), negate A/B (13, 14), transpose A/B (15, 16:
    1 = MN-major), N >> 3 (17-22), M >> 4 (24-28), max shift (30-31)."""
    kind = mma_kind(a, b)
    if d not in _D_TYPE or (kind == "i8") != (d == "int32") or (kind == "tf32" and d != "float32"):
        raise DescriptorError(f"accumulator dtype {shown(d)} does not go with kind::{kind} "
                              f"({'int32' if kind == 'i8' else 'float32' + ('' if kind == 'tf32' else ' or float16')})")
    _mn(m, n, cta_group)
    for what, v in (("a_major", a_major), ("b_major", b_major)):
        if v not in ("K", "MN"):
            raise DescriptorError(f"{what} must be 'K' or 'MN', got {shown(v)}")
    if kind == "i8" and (negate_a or negate_b):
        raise DescriptorError("kind::i8 cannot negate A or B")
    types = _KIND_TYPES[kind]
    x = _D_TYPE[d] << 4
    x |= int(saturate) << 3
    x |= types[a] << 7 | types[b] << 10
    x |= int(negate_a) << 13 | int(negate_b) << 14
    x |= int(a_major == "MN") << IDESC_TRANSPOSE_BIT["a_desc"] | int(b_major == "MN") << IDESC_TRANSPOSE_BIT["b_desc"]
    x |= (n >> 3) << 17
    x |= (m >> 4) << 24
    x |= _field(max_shift, 2, "max shift") << 30
    return x


_BS_TYPES = {
    "mxf8f6f4": {"float8_e4m3": 0, "float8_e5m2": 1, "float6_e2m3": 3, "float6_e3m2": 4, "float4_e2m1": 5},
    "mxf4": {"float4_e2m1": 1},
    "mxf4nvf4": {"float4_e2m1": 1},
}
_SCALE_TYPE = {"float8_e4m3": 0, "ue4m3": 0, "ue8m0": 1}


def tcgen05_block_scaled_instr_desc(kind: str, a: str, b: str, m: int, n: int, *, scale_dtype: str = "ue8m0",
                                    a_major: str = "K", b_major: str = "K", a_scale_id: int = 0,
                                    b_scale_id: int = 0, negate_a: bool = False, negate_b: bool = False,
                                    cta_group: int = 1, k96: bool = False) -> int:
    """32-bit instruction descriptor for kinds mxf8f6f4 / mxf4 / mxf4nvf4 (PTX ISA Tables 43-44):
    B scale-factor id (4-5), A type (7-9), B type (10-12; 10-11 for mxf4*), negate (13, 14),
    transpose (15, 16), N >> 3 (17-22), scale type (23: 0 UE4M3, 1 UE8M0), M >> 7 (27-28),
    A scale-factor id (29-30), K = 96 (31, mxf4* only)."""
    if kind not in _BS_TYPES:
        raise DescriptorError(f"block-scaled kind must be one of {sorted(_BS_TYPES)}, got {shown(kind)}")
    types = _BS_TYPES[kind]
    for what, t in (("A", a), ("B", b)):
        if t not in types:
            raise DescriptorError(f"kind::{kind} takes {what} of dtype {sorted(types)}, got {shown(t)}")
    if scale_dtype not in _SCALE_TYPE:
        raise DescriptorError(f"scale dtype must be 'ue8m0' or 'ue4m3', got {shown(scale_dtype)}")
    if kind == "mxf8f6f4" and _SCALE_TYPE[scale_dtype] != 1:
        raise DescriptorError("kind::mxf8f6f4 takes UE8M0 scale factors only")
    if kind == "mxf4" and _SCALE_TYPE[scale_dtype] != 1:
        raise DescriptorError("kind::mxf4 takes UE8M0 scale factors only (use kind::mxf4nvf4 for UE4M3)")
    _mn(m, n, cta_group, block_scaled=True)
    ids = (0, 1, 2, 3) if kind == "mxf8f6f4" else (0, 2)
    for what, v in (("a_scale_id", a_scale_id), ("b_scale_id", b_scale_id)):
        if v not in ids:
            raise DescriptorError(f"{what} = {shown(v)} must be one of {ids} for kind::{kind}")
    if k96 and kind == "mxf8f6f4":
        raise DescriptorError("the K = 96 bit exists only for kind::mxf4 / mxf4nvf4")
    x = b_scale_id << 4
    x |= types[a] << 7 | types[b] << 10
    x |= int(negate_a) << 13 | int(negate_b) << 14
    x |= int(a_major == "MN") << IDESC_TRANSPOSE_BIT["a_desc"] | int(b_major == "MN") << IDESC_TRANSPOSE_BIT["b_desc"]
    x |= (n >> 3) << 17
    x |= _SCALE_TYPE[scale_dtype] << 23
    x |= (m >> 7) << 27
    x |= a_scale_id << 29
    x |= int(k96) << 31
    return x


# ---------------------------------------------------------------- from layouts
def _strides(layout, dtype, major, shape):
    from tirxpy.layout.atoms import smem_descriptor_strides  # noqa: PLC0415 - layout atoms, one layer down

    return smem_descriptor_strides(layout, dtype, major, shape=shape)


def wgmma_smem_desc_from_layout(layout, dtype, start_addr: int = 0, *, major: str = "K", shape=None,
                                base_offset: int = 0) -> int:
    """WGMMA descriptor of an operand tile whose shared-memory layout is ``layout``.

        >>> from tirxpy.layout.atoms import mma_smem_layout
        >>> L = mma_smem_layout(64, 64, "bfloat16", "K", 128)
        >>> wgmma_smem_desc_from_layout(L, "bfloat16") == wgmma_smem_desc(0, lbo=16, sbo=1024, swizzle=128)
        True
    """
    s = _strides(layout, dtype, major, shape)
    return wgmma_smem_desc(start_addr, 16 if s.lbo is None else s.lbo, s.sbo, s.swizzle, base_offset)


def tcgen05_smem_desc_from_layout(layout, dtype, start_addr: int = 0, *, major: str = "K", shape=None,
                                  base_offset: int = 0) -> int:
    """tcgen05 shared-memory descriptor of an operand tile whose layout is ``layout``."""
    s = _strides(layout, dtype, major, shape)
    return tcgen05_smem_desc(start_addr, 16 if s.lbo is None else s.lbo, s.sbo, s.swizzle, base_offset)


def desc_start_field(start_addr: int) -> int:
    """The 14-bit start-address field for ``start_addr`` (checked: a non-negative multiple of 16): add
    this to a descriptor built at address 0 to move it."""
    return _bytes16(start_addr, "start address")


def start_field(addr):
    """The start-address field of ``addr`` unchecked: ``(addr & 0x3FFFF) >> 4``, for a Python int or a
    numpy uint64 array (the simulator's per-lane addresses)."""
    return (addr & START_ADDRESS_MASK) >> START_ADDRESS_SHIFT


def start_field_cxx(addr: str) -> str:
    """C++ text of the start-address field of the 32-bit address expression ``addr``.

        >>> start_field_cxx("a")
        '(((a) & 0x3FFFFu) >> 4)'
    """
    return f"((({addr}) & 0x{START_ADDRESS_MASK:X}u) >> {START_ADDRESS_SHIFT})"


def start_field_ptx(reg: str) -> str:
    """PTX lines that turn the 64-bit register ``reg`` holding an address into its start-address field."""
    return f"and.b64 {reg}, {reg}, 0x{START_ADDRESS_MASK:X};\n        shr.b64 {reg}, {reg}, {START_ADDRESS_SHIFT};"


def smem_desc(family: str, layout, dtype, *, major: str = "K", shape=None) -> int:
    """The shared-memory descriptor at address 0 of an operand tile with ``layout``, for ``family``
    ``"wgmma"`` or ``"tcgen05"``: the one layout -> descriptor path (primitives, codegen and the
    simulator all call it)."""
    if family not in ("wgmma", "tcgen05"):
        raise DescriptorError(f"descriptor family must be 'wgmma' or 'tcgen05', got {shown(family, 40)}")
    fn = wgmma_smem_desc_from_layout if family == "wgmma" else tcgen05_smem_desc_from_layout
    return fn(layout, dtype, 0, major=major, shape=shape)


def region_desc(family: str, region, major: str = "K") -> int:
    """The descriptor at address 0 of a 2-D shared view ``region`` (a BufferRegion, (mn, k)).

    A view narrower in K than the swizzle atom (a k16 step of a 64-wide 128-byte-swizzled tile) has no
    descriptor of its own; the hardware reads it through the descriptor of the buffer's whole K extent
    (K: the last kept dimension, MN-major: the one before it) started at the view, which this returns.
    LayoutError or DescriptorError when neither has one."""
    from tirxpy.layout import LayoutError  # noqa: PLC0415

    dt = str(region.buffer.dtype)
    try:
        return smem_desc(family, region.layout, dt, major=major, shape=region.shape)
    except (LayoutError, IntrinsicError) as err:
        wide = _whole_k(region, major)
        if wide is None:
            raise err from None
        return smem_desc(family, wide.layout, dt, major=major, shape=wide.shape)


def _whole_k(reg, major):
    """The view extended to the buffer's whole K extent, or None when that changes nothing."""
    from tirxpy.ir import ops  # noqa: PLC0415
    from tirxpy.ir.buffer import BufferRegion  # noqa: PLC0415

    kept = [d for d, sq in enumerate(reg.squeeze) if not sq]
    if len(kept) != 2:
        return None
    d = kept[1] if major == "K" else kept[0]
    buf = reg.buffer
    if reg.extents[d] == buf.shape[d]:
        return None
    starts, extents = list(reg.starts), list(reg.extents)
    starts[d], extents[d] = ops.const(0), buf.shape[d]
    return BufferRegion(buf, starts, extents, reg.squeeze)
