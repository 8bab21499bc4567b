"""tirxpy_kernels.checks: the tensor kinds and alignments the torch entry points take, and the memory-overlap test
for ``out`` (tirxpy.lower.overlap's)."""
import pytest
import torch

from tirxpy_kernels.checks import aligned, dense_tensor, overlaps
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
