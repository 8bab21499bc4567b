"""Whether two tensors share memory (tirxpy/lower/overlap.py): exact on strided views, conservative past its
search budget."""
import itertools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy.lower.overlap import overlaps, span


def _bytes(t):
    """The addresses of every byte of ``t``'s elements (the brute-force answer)."""
    es, out = t.element_size(), set()
    for idx in itertools.product(*(range(n) for n in t.shape)):
        at = t.data_ptr() + sum(i * s for i, s in zip(idx, t.stride())) * es
        out.update(range(at, at + es))
    return out


_BASE = torch.zeros(1024, dtype=torch.uint8)
_VIEW = st.tuples(st.sampled_from([torch.uint8, torch.int16, torch.float32, torch.float64]),
                  st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0, 1, 2, 3, 5, 8, 12])), min_size=1,
                           max_size=3),
                  st.integers(0, 8))        # at most 8 + 3 * 3 * 12 + 1 = 117 elements of 8 bytes: inside 1024


def _view(spec):
    """A view of the one 1024-byte buffer: ``(dtype, [(size, stride)], element offset)`` (the views all fit)."""
    dt, dims, off = spec
    shape, strides = [n for n, _ in dims], [s for _, s in dims]
    return _BASE.view(dt).as_strided(shape, strides, off)


@settings(max_examples=400, deadline=None)
@given(_VIEW, _VIEW)
def test_overlaps_is_exact_on_strided_views_of_one_buffer(a, b):
    x, y = _view(a), _view(b)
    assert overlaps(x, y) == bool(_bytes(x) & _bytes(y)) == overlaps(y, x)


def test_interleaved_views_do_not_overlap_and_views_of_one_row_do():
    w = torch.zeros(8, 8)
    assert overlaps(w, w) and overlaps(w[:4], w[3:]) and overlaps(w[:, 0], w[5]) and overlaps(w, w.t())
    assert not overlaps(w[:4], w[4:]) and not overlaps(w, torch.zeros(8, 8))
    assert not overlaps(w[:, ::2], w[:, 1::2]) and not overlaps(w[::2], w[1::2])
    qkv = torch.zeros(2, 16, 3, 4, 64, dtype=torch.bfloat16)      # the slices of a packed projection
    q, k, v = qkv.unbind(2)
    assert not overlaps(k, v) and not overlaps(q, v) and overlaps(k, qkv[:, 3, 1, 2])
    assert overlaps(qkv.view(torch.uint8)[:, :, 2, 0, 1:2], v)          # one byte inside v's first element
    assert not overlaps(qkv.view(torch.uint8)[:, :, 1, 3, -1:], v)      # k's last byte before each row of v


def test_no_memory_no_elements_and_other_devices_share_nothing():
    w = torch.zeros(8, 8)
    assert not overlaps(w[:0], w) and not overlaps(w, w[:, :0])
    assert not overlaps(torch.zeros(2, device="meta"), torch.zeros(2, device="meta"))
    assert not overlaps(w, torch.zeros(8, 8, device="meta"))


def test_past_its_budget_the_search_answers_may_share():
    w = torch.zeros(8, 8)
    assert overlaps(w[:, ::2], w[:, 1::2], budget=0)               # spans intersect: no steps to tell them apart
    assert not overlaps(w[:4], w[4:], budget=0)                    # disjoint spans need no search


def test_span_runs_from_the_first_byte_to_the_end_of_the_last_element():
    x = torch.zeros(4, 4, dtype=torch.float16)
    assert span(x) == (x.data_ptr(), x.data_ptr() + 32)
    assert span(x[1:, ::2]) == (x.data_ptr() + 8, x.data_ptr() + 8 + (2 * 4 + 2 + 1) * 2)
    b0, b1 = span(x[:0])
    assert b0 == b1
