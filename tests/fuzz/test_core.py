"""Fuzz cases for the small core modules: the PNG decoder (tirxpy.viz), targets (tirxpy.target), the
@tirxpy.jit cache key and the dtype table. Hostile bytes, capabilities, arguments and names get a typed error
naming the fault, or a right answer; never a crash, a hang or a wrong cache hit."""
import struct
import zlib

import numpy as np
from harness import EXAMPLES, HOSTILE, Hostile, refuse
from hypothesis import given, settings
from hypothesis import strategies as st
from test_jit import Key as _Key        # a dict key that prints alike whatever its value

import tirxpy
from tirxpy.target import SUPPORTED_ARCHS, as_target, for_capability, supported_target
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


# ---------------------------------------------------------------------- targets
_KEYS = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=4), st.integers(-5, 120),
                  st.sampled_from([np.int64(9), np.float32(9.0), np.bool_(True), b"9"]))    # (hashable)
_JUNK = st.one_of(_KEYS, HOSTILE)


@FUZZ
@given(cap=st.one_of(_JUNK, st.lists(_JUNK, max_size=3), st.tuples(_JUNK, _JUNK)))
def test_random_capabilities(cap):
    def good(v, hi):
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < hi
    ok = isinstance(cap, (tuple, list)) and len(cap) == 2 and good(cap[0], 100) and good(cap[1], 10)
    refuse("target", lambda: as_target("sm_90a").runs_on(cap), names=["compute capability"],
           allow=lambda v: ok and v is (tuple(int(x) for x in cap) == (9, 0)))
    refuse("target", lambda: for_capability(cap), names=["compute capability", "target"],
           allow=lambda t: ok and cap[0] * 10 + cap[1] >= 80 and str(t).startswith(f"sm_{cap[0]}{cap[1]}"))


@FUZZ
@given(arch=st.one_of(st.text(max_size=8), st.text(st.characters(categories=["Nd"]), min_size=2, max_size=3).map(
    lambda d: "sm_" + d + "a")))
def test_random_arch_names(arch):
    refuse("target", lambda: supported_target(arch), names=["target"],
           allow=lambda t: arch in SUPPORTED_ARCHS and str(t) == arch)


# ---------------------------------------------------------------------- the @tirxpy.jit cache key
_SCALARS = st.one_of(st.integers(-3, 3), st.booleans(), st.sampled_from([0.0, -0.0, float("nan"), 1.0, 1, 0j, -0j]),
                     st.text(max_size=2), st.none(), st.sampled_from([np.float32(0.0), np.float32(-0.0), np.int64(1)]))


_ARGS = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=2), st.builds(_Key, st.integers(0, 2))), inner, max_size=3)),
    max_leaves=8)


def _twin(a, flip):
    """A copy of ``a`` with each zero float's sign flipped (``flip``) and each dict key a new equal object."""
    if isinstance(a, (list, tuple)):
        return type(a)(_twin(x, flip) for x in a)
    if isinstance(a, dict):
        return {(_Key(k.v) if isinstance(k, _Key) else k): _twin(x, flip) for k, x in a.items()}
    if flip and isinstance(a, (float, np.floating)) and a == 0:
        return -a
    return a


def _same(a, b) -> bool:
    """Equal as arguments: one type throughout, floats bit for bit (the reference for the cache key)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (float, complex, np.floating)):
        return repr(a) == repr(b)
    return a == b


@FUZZ
@given(a=_ARGS, other=st.one_of(_ARGS.map(lambda b: ("any", b)), st.booleans().map(lambda f: ("twin", f))))
def test_jit_builds_once_per_distinct_argument(a, other):
    f = tirxpy.jit(lambda x: object())
    b = _twin(a, other[1]) if other[0] == "twin" else other[1]
    refuse("jit", lambda: (f(a) is f(b)) == _same(a, b) and f(a) is f(a), allow=lambda v: v is True)


# ---------------------------------------------------------------------- pictures of layouts
@FUZZ
@given(owner=st.one_of(_JUNK, st.dictionaries(st.one_of(st.sampled_from(["laneid", "warpid", "m", "tx", "TLane"]),
                                                         _KEYS), st.one_of(_JUNK, st.integers(0, 2**70)), max_size=3)))
def test_random_owners_get_a_colour_or_are_refused(owner):
    from tirxpy.viz import owner_color

    def ok(rgb):
        ints = isinstance(owner, dict) and all(isinstance(a, str) and isinstance(v, (int, np.integer))
                                               and not isinstance(v, bool) for a, v in owner.items())
        return ints and len(rgb) == 3 and all(isinstance(c, int) and 0 <= c <= 255 for c in rgb)
    refuse("viz", lambda: owner_color(owner), names=["owner_color"], allow=ok)


@FUZZ
@given(thing=_JUNK)
def test_random_things_to_draw_are_refused(thing):
    from tirxpy.layout.grid import table
    from tirxpy.viz import render_image, render_svg

    for draw in (render_image, render_svg, table):
        refuse("viz", lambda: draw(thing), names=["TileLayout"])


# ---------------------------------------------------------------------- values whose repr raises
class _Unprintable:
    """A value whose ``__repr__`` and ``__str__`` raise: an error message that shows it must not run them."""

    def __repr__(self):
        raise ZeroDivisionError("the value's own __repr__ ran")

    def __str__(self):
        raise ZeroDivisionError("the value's own __str__ ran")


def test_an_unprintable_value_is_refused_by_the_core_entry_points():
    """The refusal names the value as ``<_Unprintable object>`` (:func:`tirxpy.errors.shown`) instead of letting its
    own ``__repr__`` replace the error; so for the harness's :class:`~harness.Hostile`, whose every method raises."""
    from tirxpy import T
    from tirxpy.intrinsics import register_intrinsic
    from tirxpy.layout import S, TileLayout, laneid

    lay = TileLayout(S[(8, 4):(4 @ laneid, 1 @ laneid)])
    for bad in (_Unprintable(), Hostile()):
        for fn in (lambda: TileLayout(bad), lambda: as_target(bad), lambda: lay.elements_at(bad),
                   lambda: lay.owners(bad), lambda: S[bad], lambda: tirxpy.compile(bad),
                   lambda: T.Tensor(bad, "float32"), lambda: T.Tensor((4,), bad),
                   lambda: register_intrinsic(bad, "mov.b32 {r}, 0;", []), lambda: tirxpy.jit(bad)):
            refuse("core unprintable values", fn, names=[type(bad).__name__])
        refuse("core unprintable values", lambda: T.Tensor((-1, bad), "float32"), names=["extent -1"])


def test_a_huge_argument_is_shown_in_a_short_message():
    """:func:`tirxpy.errors.shown` bounds what it shows of built-in containers, strings and numbers (the first 32
    items, 6 levels, 400 characters of a str or int), so a refusal of a huge argument is short and quick; an item
    whose repr raises is named by its type in place."""
    from tirxpy.errors import shown
    from tirxpy.layout import LayoutError, S, TileLayout

    assert len(shown(list(range(10 ** 6)))) < 300 and shown(list(range(40))).endswith("31, ...]")
    assert len(shown("x" * 10 ** 6)) == 400 and len(shown(10 ** 1000)) == 400
    # past Python's own limit on an int's digits (its repr raises): its size
    assert shown(10 ** 5000) == "<int of about 5000 digits>" and shown(-10 ** 5000) == "<int of about 5000 digits>"
    assert shown([1, _Unprintable(), "a"]) == "[1, <_Unprintable object>, 'a']"
    assert shown((8, 16)) == "(8, 16)" and shown({"m": 1}) == "{'m': 1}"
    nested = [[[[[[[[1]]]]]]]]
    assert shown(nested) == "[[[[[[[...]]]]]]]"
    try:
        TileLayout(S[(8, 4):(4, 1)]).elements_at(m=list(range(10 ** 6)))
    except LayoutError as e:
        assert len(str(e)) < 1000, len(str(e))
    else:
        raise AssertionError("elements_at took a list as a coordinate")
