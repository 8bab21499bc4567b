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


def _png(ihdr: bytes, idat: bytes) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _ihdr(w, h, *rest):
    return struct.pack(">IIBBBBB", w, h, *(rest or (8, 2, 0, 0, 0)))


def _zeros_stream(n: int) -> bytes:
    """A zlib stream of ``n`` zero bytes, built without holding them (a small input that inflates to ``n``)."""
    z, block, out = zlib.compressobj(9), bytes(1 << 20), []
    for _ in range(n >> 20):
        out.append(z.compress(block))
    return b"".join(out) + z.flush()


@pytest.mark.parametrize("data, msg", [
    (None, "a PNG is bytes"), (5, "a PNG is bytes"),
    (_png(b"\0\0", zlib.compress(b"\0\0\0\0")), "IHDR holds 2 bytes"),
    (_png(_ihdr(1, 1), b"xx"), "not a valid zlib stream"),
    (_png(_ihdr(5, 5), zlib.compress(b"\0\0\0\0")), "inflates to 4 bytes; a 5x5 RGB image has 80"),
    (_png(_ihdr(1, 1), zlib.compress(bytes(4))[:-3]), "cut short"),
    (_png(_ihdr(0, 0), zlib.compress(b"")), "claims 0x0 pixels"),
    (_png(_ihdr(1, 1, 8, 2, 1, 0, 0), zlib.compress(bytes(4))), "8-bit RGB"),
    (_png(_ihdr(2**31, 2**31), zlib.compress(b"")), "MAX_PNG_PIXELS"),
    (PNG_SIGNATURE + struct.pack(">I", 100) + b"IHDR" + b"abc", "chunk b'IHDR' claims 100 bytes"),
    (PNG_SIGNATURE + struct.pack(">I", 2**32 - 1) + b"IHDR", "truncated PNG"),
])
def test_malformed_pngs_are_refused(data, msg):
    with pytest.raises(LayoutError, match=msg):
        decode_png(data)


def test_a_zlib_bomb_is_not_inflated_past_the_header():
    """A 1x1 header over a stream of 256 MiB of zeros: refused after inflating at most 5 bytes."""
    bomb = _png(_ihdr(1, 1), _zeros_stream(256 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(LayoutError, match="inflates to more than 5 bytes; a 1x1 RGB image has 4"):
        decode_png(bomb)


def test_decode_takes_bytes_likes():
    data = encode_png(np.full((2, 2, 3), 7, dtype=np.uint8))
    assert (decode_png(bytearray(data)) == 7).all() and (decode_png(memoryview(data)) == 7).all()
