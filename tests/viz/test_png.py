"""The PNG encoder, checked by an independent reading of the PNG format in the test."""
import struct
import zlib

import numpy as np
import pytest

from tirxpy.layout import LayoutError
from tirxpy.viz.png import PNG_SIGNATURE, decode_png, encode_png, read_chunks


def independent_decode(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, payload = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])[0] == zlib.crc32(kind + payload)
        chunks.append((kind, payload))
        pos += 12 + n
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, ctype, comp, filt, inter) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(p for k, p in chunks if k == b"IDAT"))
    rows = [raw[r * (1 + 3 * w) : (r + 1) * (1 + 3 * w)] for r in range(h)]
    assert all(row[0] == 0 for row in rows)
    return w, h, [[tuple(row[1 + 3 * x : 4 + 3 * x]) for x in range(w)] for row in rows]


def test_roundtrip_and_format():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    data = encode_png(img)
    w, h, px = independent_decode(data)
    assert (w, h) == (7, 5)
    assert px[4][6] == tuple(int(v) for v in img[4, 6])
    assert (decode_png(data) == img).all()


def test_bad_crc_detected():
    data = bytearray(encode_png(np.zeros((1, 1, 3), dtype=np.uint8)))
    data[20] ^= 0xFF  # inside the IHDR payload
    with pytest.raises(LayoutError, match="bad CRC"):
        read_chunks(bytes(data))


def test_bad_inputs():
    with pytest.raises(LayoutError, match=r"\(H, W, 3\) uint8 array, got shape \(2, 2\)"):
        encode_png(np.zeros((2, 2), dtype=np.uint8))
    with pytest.raises(LayoutError, match="at least one pixel"):
        encode_png(np.zeros((0, 2, 3), dtype=np.uint8))
    with pytest.raises(LayoutError, match="signature is missing"):
        decode_png(b"GIF89a")
    assert PNG_SIGNATURE == b"\x89PNG\r\n\x1a\n"
