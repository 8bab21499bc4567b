"""TMA tensor maps: cuTensorMapEncodeTiled parameters derived from a tensor's shape / strides and
the shared tile's shape and layout (pure Python, checked on CPU), and the encoding itself
(driver call, GPU machine only), cached.

Dimensions are given outermost-first like torch (``shape=(rows, cols)``) and reported
innermost-first like the driver (``global_dims[0]`` is the contiguous dimension).

    >>> p = tma_params(shape=(256, 512), strides=(512, 1), dtype="bfloat16", box=(64, 64), swizzle=128)
    >>> p.global_dims, p.global_strides, p.box_dims, p.swizzle, p.box_bytes
    ((512, 256), (1024,), (64, 64), 3, 8192)
"""
from __future__ import annotations

from dataclasses import dataclass

from tirxpy.ir.dtype import DataType
from tirxpy.errors import shown

from .errors import TmaError

# CUtensorMapDataType
DTYPE_ENUM = {
    "uint8": 0, "int8": 0, "bool": 0, "float8_e4m3": 0, "float8_e5m2": 0,
    "uint16": 1, "int16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
    "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "tfloat32": 11,
}
#: bytes per element of each dtype TMA moves (tirxpy.ir.dtype is the one table of sizes)
DTYPE_BYTES = {n: DataType.get(n).itemsize for n in DTYPE_ENUM}
SWIZZLE_ENUM = {0: 0, 32: 1, 64: 2, 128: 3}  # CUtensorMapSwizzle
L2_ENUM = {0: 0, 64: 1, 128: 2, 256: 3}  # CUtensorMapL2promotion
OOB_ENUM = {"zero": 0, "nan": 1}  # CUtensorMapFloatOOBfill


@dataclass(frozen=True)
class TmaParams:
    """Arguments of cuTensorMapEncodeTiled (innermost dimension first) plus what the kernel needs."""

    dtype: str
    dtype_enum: int
    rank: int
    global_dims: tuple
    global_strides: tuple  # bytes, dims 1..rank-1
    box_dims: tuple
    element_strides: tuple
    interleave: int = 0
    swizzle: int = 0
    l2_promotion: int = 2
    oob_fill: int = 0

    @property
    def box_bytes(self) -> int:
        """Bytes one load of the box moves (the mbarrier's expect_tx count)."""
        n = DTYPE_BYTES[self.dtype]
        for b, e in zip(self.box_dims, self.element_strides):
            n *= -(-b // e)
        return n


def _ints(xs, what) -> tuple:
    try:
        xs = tuple(int(x) for x in xs)
    except (TypeError, ValueError):
        raise TmaError(f"{what} must be a sequence of ints, got {shown(xs)}") from None
    return xs


def tma_params(shape, strides, dtype: str, box, *, swizzle: int = 0, data_ptr: int | None = None,
               element_strides=None, l2_promotion: int = 128, oob_fill: str = "zero",
               param: str = "tensor") -> TmaParams:
    """Validate and derive the tensor-map parameters (outermost-first inputs, element strides).

    Requires: rank 1..5; innermost stride 1; other strides multiples of 16 bytes (< 2**40);
    the global address 16-byte aligned; box dims in [1, 256] with the inner box a multiple of
    16 bytes and at most the swizzle width. Errors name ``param``.
    """
    if dtype not in DTYPE_ENUM:
        raise TmaError(f"{param}: TMA cannot move dtype {shown(dtype)}; supported: {sorted(DTYPE_ENUM)}")
    shape, strides, box = _ints(shape, "shape"), _ints(strides, "strides"), _ints(box, "box")
    rank = len(shape)
    if not 1 <= rank <= 5:
        raise TmaError(f"{param}: a TMA tensor has rank 1..5, this one has rank {rank}; reshape / view it")
    if len(strides) != rank or len(box) != rank:
        raise TmaError(f"{param}: shape {shape}, strides {strides} and box {box} must have the same rank")
    es = _ints(element_strides, "element_strides") if element_strides is not None else (1,) * rank
    if len(es) != rank:
        raise TmaError(f"{param}: element_strides {es} must have rank {rank}")
    nbytes = DTYPE_BYTES[dtype]
    if data_ptr is not None and data_ptr % 16:
        raise TmaError(f"{param}: TMA needs a 16-byte aligned global address, got 0x{data_ptr:x} "
                       f"(offset {data_ptr % 16} bytes); use an aligned allocation or .contiguous() copy")
    if any(s <= 0 for s in shape) or any(s >= 1 << 32 for s in shape):
        raise TmaError(f"{param}: every dimension must be in [1, 2**32), got shape {shape}")
    if strides[-1] != 1:
        raise TmaError(f"{param}: the innermost dimension must be contiguous (stride 1), got strides {strides}; "
                       f"call .contiguous() or transpose the tile instead")
    gstrides = tuple(s * nbytes for s in reversed(strides[:-1]))
    for i, g in enumerate(gstrides, start=1):
        if g % 16 or not 0 < g < 1 << 40:
            raise TmaError(f"{param}: stride of dimension {rank - 1 - i} is {g} bytes; TMA needs a positive multiple of 16 "
                           f"bytes below 2**40 (pad the row to a multiple of {16 // _gcd(nbytes, 16)} elements)")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise TmaError(f"{param}: box dimension {i} is {b}; each box dimension must be in [1, 256]")
    for i, e in enumerate(es):
        if not 1 <= e <= 8:
            raise TmaError(f"{param}: element stride {e} of dimension {i} must be in [1, 8]")
    inner = box[-1] * nbytes
    if inner % 16:
        raise TmaError(f"{param}: the inner box dimension is {inner} bytes; it must be a multiple of 16 bytes")
    if swizzle not in SWIZZLE_ENUM:
        raise TmaError(f"{param}: swizzle must be 0, 32, 64 or 128 bytes, got {shown(swizzle)}")
    if swizzle and inner > swizzle:
        raise TmaError(f"{param}: a {swizzle}B swizzle needs the inner box dimension <= {swizzle} bytes, got "
                       f"{box[-1]} x {nbytes} = {inner} bytes; split the tile into boxes of "
                       f"{swizzle // nbytes} elements")
    if l2_promotion not in L2_ENUM:
        raise TmaError(f"{param}: l2_promotion must be 0, 64, 128 or 256 bytes, got {shown(l2_promotion)}")
    if oob_fill not in OOB_ENUM:
        raise TmaError(f"{param}: oob_fill must be 'zero' or 'nan', got {shown(oob_fill)}")
    if oob_fill == "nan" and not dtype.startswith(("float", "bfloat")):
        raise TmaError(f"{param}: oob_fill='nan' needs a floating-point dtype, got {dtype}")
    return TmaParams(dtype, DTYPE_ENUM[dtype], rank, tuple(reversed(shape)), gstrides, tuple(reversed(box)),
                     tuple(reversed(es)), 0, SWIZZLE_ENUM[swizzle], L2_ENUM[l2_promotion], OOB_ENUM[oob_fill])


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def swizzle_of_layout(layout, dtype: str, box) -> int:
    """Swizzle width (0 / 32 / 64 / 128 bytes) of the shared tile's layout, after checking that its
    unswizzled part is the dense row-major box TMA writes."""
    from tirxpy.layout import ComposeLayout, TileLayout, hardware_swizzle_bytes, swizzle_for  # noqa: PLC0415

    box = _ints(box, "box")
    if isinstance(layout, ComposeLayout):
        mode = hardware_swizzle_bytes(layout.swizzle, dtype)
        if mode is None:
            raise TmaError(f"the shared tile's swizzle {shown(layout.swizzle)} is not a TMA swizzle for {dtype} "
                           f"(those are {[swizzle_for(m, dtype) for m in (32, 64, 128)]})")
    elif isinstance(layout, TileLayout):
        mode = 0
    else:
        raise TmaError(f"the shared tile layout must be a TileLayout or ComposeLayout, got {type(layout).__name__}")
    wrong = layout.dense_box_mismatch(box)
    if wrong:
        el, got, want = wrong
        raise TmaError(f"the shared tile layout is not the dense row-major box {box} TMA writes: element "
                       f"{el} is at offset {got}, TMA puts it at {want}")
    return mode


def tma_params_for(tensor, box, layout=None, *, swizzle: int | None = None, param: str = "tensor", **kw) -> TmaParams:
    """Parameters for a torch tensor and the shared tile (``box`` shape, ``layout`` for the swizzle)."""
    from .runtime import torch_dtype_name  # noqa: PLC0415

    dtype = torch_dtype_name(tensor.dtype, param)
    if swizzle is None:
        swizzle = 0 if layout is None else swizzle_of_layout(layout, dtype, box)
    return tma_params(tuple(tensor.shape), tuple(tensor.stride()), dtype, box, swizzle=swizzle,
                      data_ptr=tensor.data_ptr(), param=param, **kw)


_ENCODED: dict = {}


def encode_tensor_map(params: TmaParams, global_address: int) -> bytes:
    """The 128-byte CUtensorMap for ``params`` at ``global_address`` (driver call; cached)."""
    key = (params, int(global_address))
    blob = _ENCODED.get(key)
    if blob is not None:
        return blob
    import ctypes  # noqa: PLC0415

    from .runtime import _check, _driver  # noqa: PLC0415

    drv = _driver()
    err, tmap = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType(params.dtype_enum), params.rank, int(global_address),
        [drv.cuuint64_t(x) for x in params.global_dims], [drv.cuuint64_t(x) for x in params.global_strides],
        [drv.cuuint32_t(x) for x in params.box_dims], [drv.cuuint32_t(x) for x in params.element_strides],
        drv.CUtensorMapInterleave(params.interleave), drv.CUtensorMapSwizzle(params.swizzle),
        drv.CUtensorMapL2promotion(params.l2_promotion), drv.CUtensorMapFloatOOBfill(params.oob_fill))
    _check(err, "cuTensorMapEncodeTiled", f"{params}")
    blob = ctypes.string_at(tmap.getPtr(), 128)
    if len(_ENCODED) > 4096:
        _ENCODED.clear()
    _ENCODED[key] = blob
    return blob


def tensor_map_for(tensor, box, layout=None, **kw) -> bytes:
    """Derive, validate and encode (cached) the tensor map of ``tensor`` for the shared tile."""
    return encode_tensor_map(tma_params_for(tensor, box, layout, **kw), tensor.data_ptr())
