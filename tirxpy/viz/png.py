"""A minimal PNG encoder / decoder (8-bit RGB, no interlace), written from the PNG spec
(ISO/IEC 15948: signature, IHDR, IDAT holding the zlib stream of filtered scanlines, IEND;
each chunk = length, type, data, CRC-32 of type + data).

    >>> import numpy as np
    >>> img = np.zeros((2, 3, 3), dtype=np.uint8); img[1, 2] = (255, 0, 10)
    >>> data = encode_png(img)
    >>> data[:8] == PNG_SIGNATURE
    True
    >>> back = decode_png(data)
    >>> back.shape, back[1, 2].tolist()
    ((2, 3, 3), [255, 0, 10])
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from tirxpy.layout.errors import LayoutError, LayoutTypeError
from tirxpy.errors import shown

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_PNG_PIXELS = 1 << 28
"""The most pixels :func:`decode_png` decodes (768 MiB of RGB): a header claiming more is refused before any
inflating, and the zlib stream is never inflated past what the header claims."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(image) -> bytes:
    """PNG bytes of an (H, W, 3) uint8 RGB image (every scanline with filter type 0)."""
    try:
        img = np.asarray(image)
    except Exception:   # noqa: BLE001  (ragged, or an object whose own array protocol raises)
        raise LayoutError(f"encode_png takes an (H, W, 3) uint8 array, got {shown(image, 60)}") from None
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise LayoutError(f"encode_png takes an (H, W, 3) uint8 array, got shape {img.shape} dtype {img.dtype}")
    h, w = img.shape[:2]
    if h < 1 or w < 1:
        raise LayoutError(f"a PNG needs at least one pixel, got {w}x{h}")
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)  # column 0: filter byte 0 (None)
    raw[:, 1:] = img.reshape(h, 3 * w)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit, colour type 2 (RGB)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + _chunk(b"IEND", b"")


def read_chunks(data: bytes) -> list:
    """[(type, payload)] of a PNG (bytes, bytearray or memoryview), checking the signature, every chunk's
    length against the data and every CRC."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise LayoutTypeError(f"a PNG is bytes (e.g. open(path, 'rb').read()), got {type(data).__name__:.60}")
    data = bytes(data)
    if data[:8] != PNG_SIGNATURE:
        raise LayoutError("not a PNG: the 8-byte signature is missing")
    out, pos = [], 8
    while pos < len(data):
        if pos + 8 > len(data):
            raise LayoutError("truncated PNG chunk header")
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if pos + 12 + n > len(data):
            raise LayoutError(f"truncated PNG: chunk {shown(kind)} claims {n} bytes, the data ends after "
                              f"{max(len(data) - pos - 12, 0)}")
        payload = data[pos + 8 : pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        if zlib.crc32(kind + payload) & 0xFFFFFFFF != crc:
            raise LayoutError(f"PNG chunk {shown(kind)} has a bad CRC")
        out.append((kind, payload))
        pos += 12 + n
    return out


def decode_png(data: bytes) -> np.ndarray:
    """Decode what :func:`encode_png` writes (8-bit RGB, filter 0 scanlines) to (H, W, 3)."""
    chunks = read_chunks(data)
    if not chunks or chunks[0][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise LayoutError("a PNG starts with IHDR and ends with IEND")
    if len(chunks[0][1]) != 13:
        raise LayoutError(f"PNG IHDR holds {len(chunks[0][1])} bytes; the PNG format has 13")
    w, h, depth, ctype, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, ctype, comp, filt, interlace) != (8, 2, 0, 0, 0):
        raise LayoutError("decode_png reads 8-bit RGB non-interlaced PNGs only")
    if not (w >= 1 and h >= 1 and w * h <= MAX_PNG_PIXELS):
        raise LayoutError(f"PNG IHDR claims {w}x{h} pixels; decode_png reads 1 to {MAX_PNG_PIXELS} pixels "
                          "(the limit MAX_PNG_PIXELS)")
    want = h * (1 + 3 * w)
    z = zlib.decompressobj()
    try:
        flat = z.decompress(b"".join(p for k, p in chunks if k == b"IDAT"), want + 1)
    except zlib.error as e:
        raise LayoutError(f"PNG IDAT is not a valid zlib stream ({e})") from None
    if len(flat) != want or not z.eof:
        raise LayoutError(f"PNG IDAT inflates to {'more than ' if len(flat) > want else ''}{len(flat)} bytes"
                          f"{'' if len(flat) > want or z.eof else ' (the stream is cut short)'}; a {w}x{h} "
                          f"RGB image has {want}")
    raw = np.frombuffer(flat, dtype=np.uint8).reshape(h, 1 + 3 * w)
    if raw[:, 0].any():
        raise LayoutError("decode_png reads filter type 0 scanlines only")
    return raw[:, 1:].reshape(h, w, 3).copy()
