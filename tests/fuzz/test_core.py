"""Fuzz cases for the small core modules: the PNG decoder (tirxpy.viz), targets (tirxpy.target), the
@tirxpy.jit cache key and the dtype table. Hostile bytes, capabilities, arguments and names get a typed error
naming the fault, or a right answer; never a crash, a hang or a wrong cache hit."""
import struct
import zlib

import numpy as np
from harness import EXAMPLES, refuse
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy.viz import decode_png, encode_png

FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None)


# ---------------------------------------------------------------------- PNG bytes
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


@st.composite
def _mutated_pngs(draw):
    """A valid PNG, then one of: bytes flipped, cut, a chunk's payload replaced (CRC kept right)."""
    img = np.full((draw(st.integers(1, 4)), draw(st.integers(1, 4)), 3), 9, dtype=np.uint8)
    data = bytearray(encode_png(img))
    how = draw(st.sampled_from(["flip", "cut", "ihdr", "idat"]))
    if how == "flip":
        for at in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=4)):
            data[at] ^= draw(st.integers(1, 255))
    elif how == "cut":
        data = data[:draw(st.integers(0, len(data) - 1))]
    else:
        payload = draw(st.binary(max_size=40)) if how == "idat" else struct.pack(
            ">IIBBBBB", draw(st.integers(0, 2**32 - 1)), draw(st.integers(0, 2**32 - 1)),
            *draw(st.tuples(*[st.sampled_from([0, 8, 2, 1, 255])] * 5)))
        if how == "idat" and draw(st.booleans()):
            payload = zlib.compress(payload)
        kind = b"IHDR" if how == "ihdr" else b"IDAT"
        data = bytearray(b"\x89PNG\r\n\x1a\n" + (_chunk(kind, payload) if how == "ihdr" else _chunk(
            b"IHDR", struct.pack(">IIBBBBB", img.shape[1], img.shape[0], 8, 2, 0, 0, 0))) +
            (_chunk(b"IDAT", payload) if how == "idat" else _chunk(b"IDAT", zlib.compress(bytes(4)))) +
            _chunk(b"IEND", b""))
    return bytes(data)


@FUZZ
@given(_mutated_pngs())
def test_mutated_pngs_decode_or_are_refused(data):
    refuse("viz png", lambda: decode_png(data), names=["PNG", "IHDR", "IDAT", "CRC", "decode_png"],
           allow=lambda v: isinstance(v, np.ndarray) and v.ndim == 3 and v.shape[2] == 3 and v.dtype == np.uint8)
