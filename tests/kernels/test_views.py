"""tirxpy_kernels.views: which strided inputs the attention kernels read in place, and the ``strides=`` option's
checks. Properties over random slices of random tensors: a view is read in place exactly when TMA can address it
(innermost stride 1, the other strides positive multiples of 16 bytes, a 16-byte aligned address), and then with
the tensor's own elements."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy_kernels.errors import KernelConfigError
from tirxpy_kernels.views import check_strides, dense_strides, kernel_input, tma_view


@st.composite
def sliced(draw):
    """A 4-D view: a random base tensor, then a start, an end and a step along each dimension (some dimensions
    left at size 1), possibly two dimensions swapped."""
    base = [draw(st.integers(1, 6)) for _ in range(3)] + [draw(st.sampled_from([4, 8, 16, 24]))]
    dtype = draw(st.sampled_from([torch.bfloat16, torch.float32]))
    t = torch.arange(int(torch.tensor(base).prod()), dtype=torch.float32).reshape(base).to(dtype)
    idx = []
    for n in base:
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a + 1, n))
        idx.append(slice(a, b, draw(st.integers(1, 2))))
    t = t[tuple(idx)]
    if draw(st.booleans()):
        i, j = draw(st.permutations(range(4)))[:2]
        t = t.transpose(i, j)
    return t


def _readable(t):
    es = t.element_size()
    return (t.data_ptr() % 16 == 0 and (t.shape[-1] == 1 or t.stride(-1) == 1)
            and all(n == 1 or (s > 0 and s * es % 16 == 0) for n, s in zip(t.shape[:-1], t.stride()[:-1])))


@settings(max_examples=300, deadline=None)
@given(sliced())
def test_a_view_is_read_in_place_exactly_when_tma_can_address_it(t):
    view, strides = tma_view(t)
    if t.is_contiguous() and t.data_ptr() % 16 == 0:
        assert view is not None and strides is None and view.stride() == dense_strides(t.shape)
    elif not _readable(t):
        assert view is None and strides is None
    if view is None:
        return
    assert torch.equal(view, t)                                   # the same elements
    assert view.data_ptr() == t.data_ptr()                        # in place: no copy
    if strides is not None:
        assert view.stride() == strides and strides != dense_strides(t.shape)
        assert check_strides("k", ("t",), (tuple(t.shape),), (strides,), t.element_size()) == (strides,)


@settings(max_examples=200, deadline=None)
@given(sliced(), st.integers(1, 8))
def test_kernel_input_keeps_the_elements_and_pads_with_zero_rows(t, rows):
    got, strides = kernel_input(t, rows)
    n = t.shape[1]
    assert got.shape == (t.shape[0], max(n, rows)) + tuple(t.shape[2:])
    assert torch.equal(got[:, :n], t) and not got[:, n:].any()
    assert got.data_ptr() % 16 == 0
    if strides is None:
        assert got.stride() == dense_strides(got.shape)
    else:
        assert got.data_ptr() == t.data_ptr() and got.stride() == strides


def test_check_strides_normalizes_and_refuses_with_typed_errors():
    shapes = ((2, 8, 4, 64), (2, 8, 2, 64))
    dense = dense_strides(shapes[0])
    assert check_strides("k", ("q", "k"), shapes, None) is None
    assert check_strides("k", ("q", "k"), shapes, (dense, None)) is None      # dense entries fold to None
    fused = (8 * 8 * 64, 8 * 64, 64, 1)
    assert check_strides("k", ("q", "k"), shapes, (fused, None)) == (fused, None)
    for bad, match in [((dense,), "2 entries"), ([dense, None], "2 entries"), ((dense[:3], None), "4 ints"),
                       (((2.0,) + dense[1:], None), "4 ints"), (((4096, 512, 64, 2), None), "innermost stride is 1"),
                       (((4096, 516, 64, 1), None), "multiples of 8 elements"),
                       (((0, 512, 64, 1), None), "positive multiples")]:
        with pytest.raises(KernelConfigError, match=match):
            check_strides("k", ("q", "k"), shapes, bad)
