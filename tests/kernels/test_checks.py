"""tirxpy_kernels.checks: the tensor kinds the torch entry points take, the alignment rule (an input off the boundary
copied, an ``out`` refused), and the memory-overlap test for ``out`` (tirxpy.lower.overlap's)."""
import pytest
import torch

from tirxpy_kernels.checks import aligned, aligned_input, dense_tensor, misalignment, overlaps
from tirxpy.errors import ArgumentError


@pytest.mark.parametrize("t,msg", [
    ("x", "f: x must be a torch.Tensor, got str"),
    (torch.zeros(2, 3).to_sparse(), "f: x is a sparse tensor (layout torch.sparse_coo); pass a dense one (x.to_dense())"),
    (torch.zeros(2, 3).to_sparse_csr(), "f: x is a sparse tensor (layout torch.sparse_csr)"),
    (torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(1, 3)]), "f: x is a nested tensor"),
    (torch.zeros(2, 3, 4), "f: x must be 2-D (a matrix), got shape (2, 3, 4)"),
])
def test_dense_tensor_names_the_kind(t, msg):
    with pytest.raises(ArgumentError) as e:
        dense_tensor("f", "x", t, 2, "(a matrix)", ArgumentError)
    assert msg in str(e.value)


def test_dense_tensor_takes_views_and_meta():
    for t in (torch.zeros(4, 6)[:, ::2], torch.zeros(3, 4).t(), torch.zeros(1, 4).expand(3, 4),
              torch.zeros(3, 4, device="meta"), torch.zeros(3, 4, requires_grad=True)):
        dense_tensor("f", "x", t, 2, "(a matrix)", ArgumentError)


def test_overlaps():
    w = torch.zeros(8, 8)
    assert overlaps(w, w) and overlaps(w[:4], w[3:]) and overlaps(w[:, 0], w[5])
    assert not overlaps(w[:4], w[4:]) and not overlaps(w, torch.zeros(8, 8))
    assert not overlaps(w[:, ::2], w[:, 1::2])      # interleaved columns share no element
    assert not overlaps(torch.zeros(2, device="meta"), torch.zeros(2, device="meta"))
    assert not overlaps(w[:0], w)


def test_aligned_names_the_argument_the_offset_and_the_fix():
    """The rule for an output the caller gave: refused off the boundary."""
    flat = torch.zeros(64, dtype=torch.bfloat16)
    aligned("f", "x", flat[8:], ArgumentError)                      # 16 bytes in: aligned
    aligned("f", "x", torch.zeros(4, device="meta"), ArgumentError)  # no memory: address 0
    with pytest.raises(ArgumentError) as e:
        aligned("f", "x", flat[3:], ArgumentError)
    assert str(e.value).startswith("f: x starts 6 bytes past a 16-byte boundary (a view at an odd offset)")
    assert str(e.value).endswith("need 16-byte aligned addresses: pass x.clone()")
    with pytest.raises(ArgumentError, match="pass a fresh out$"):
        aligned("f", "out", flat[1:], ArgumentError, fix="a fresh out")
    aligned("f", "x", flat[2:], ArgumentError, align=4)
    with pytest.raises(ArgumentError, match="x starts 2 bytes past a 4-byte boundary"):
        aligned("f", "x", flat[1:], ArgumentError, align=4)


class _NoStorage(torch.Tensor):
    """A tensor subclass whose data pointer cannot be read (as a functorch batched tensor's)."""

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")


def test_misalignment_is_the_offset_past_the_boundary():
    flat = torch.zeros(64, dtype=torch.bfloat16)
    assert [misalignment("f", "x", flat[i:], ArgumentError) for i in (0, 1, 3, 8, 9)] == [0, 2, 6, 0, 2]
    assert misalignment("f", "x", flat[2:], ArgumentError, align=4) == 0
    assert misalignment("f", "x", torch.zeros(4, device="meta"), ArgumentError) == 0     # no memory: address 0
    for check in (misalignment, aligned, aligned_input):
        with pytest.raises(ArgumentError, match="^f: x has no data pointer .*; pass a plain torch tensor$"):
            check("f", "x", torch.zeros(4).as_subclass(_NoStorage), ArgumentError)


@pytest.mark.parametrize("make", [
    lambda f: f[1:1 + 48].view(6, 8),                   # contiguous, 2 bytes off
    lambda f: f[3:3 + 48].view(8, 6).t(),               # column-major, 6 bytes off
    lambda f: f[1:1 + 96].view(6, 16)[:, :8],           # rows 16 apart: not dense
    lambda f: f[5:5 + 8].expand(6, 8),                  # stride 0
])
def test_aligned_input_copies_a_misaligned_input(make):
    """An input off the boundary comes back as an aligned copy holding the same values, with the same strides where
    it is dense (a kernel planned for its layout reads the copy alike), dense otherwise."""
    f = torch.arange(128, dtype=torch.bfloat16)
    t = make(f)
    c = aligned_input("f", "x", t, ArgumentError)
    assert t.data_ptr() % 16 and c.data_ptr() % 16 == 0 and c.data_ptr() != t.data_ptr() and torch.equal(c, t)
    dense = t.is_contiguous() or t.t().is_contiguous()
    assert c.stride() == (t.stride() if dense else (8, 1))
    assert c.is_contiguous() or c.t().is_contiguous()


def test_aligned_input_keeps_an_aligned_input():
    """An input on the boundary (or without memory) is handed on as it is: no copy."""
    f = torch.arange(128, dtype=torch.bfloat16)        # a fresh allocation: on the boundary
    for t in (f[8:56].view(6, 8), f[8:56].view(8, 6).t(), f[16:].view(7, 16)[:, :8], torch.zeros(3, 4, device="meta")):
        assert aligned_input("f", "x", t, ArgumentError) is t
    t = f[2:10]
    assert aligned_input("f", "x", t, ArgumentError, align=4) is t
