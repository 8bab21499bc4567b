"""Parameter specs and the launch path's dtype tables (tirxpy/lower/params.py)."""
import ctypes

import pytest
import torch

from tirxpy.lower.errors import LaunchError
from tirxpy.lower.params import ParamSpec, _fmt_dims, _infer_specs, torch_dtype_name


@pytest.mark.parametrize("kw, msg", [
    (dict(kind="array"), "kind must be one of"), (dict(kind="scalar", dtype="float8_e4m3"), "scalar parameter needs a dtype"),
    (dict(kind="tensormap"), "needs box="), (dict(align=3), "power of two"),
])
def test_bad_specs(kw, msg):
    with pytest.raises(LaunchError, match=msg):
        ParamSpec("p", **kw)


def test_specs_are_inferred_from_ctypes_scalars_tensors_and_encoded_maps():
    specs = _infer_specs([torch.zeros(1), ctypes.c_int32(3), ctypes.c_float(1.0), bytes(128)])
    assert [(s.kind, s.dtype) for s in specs] == [("tensor", None), ("scalar", "int32"), ("scalar", "float32"),
                                                  ("tensormap", None)]
    with pytest.raises(LaunchError, match=r"parameter 'arg0': cannot tell the C type of int 5 without specs"):
        _infer_specs([5])
    assert torch_dtype_name(torch.float8_e4m3fn) == "float8_e4m3"
    with pytest.raises(LaunchError, match="has no tirxpy dtype"):
        torch_dtype_name(torch.complex64, "z")


def test_dims_print_free_entries_as_stars():
    assert _fmt_dims((128, None)) == "(128, *)" and _fmt_dims((4,)) == "(4,)"


@pytest.mark.parametrize("kw, msg", [
    (dict(shape=5), "shape must be a tuple of ints >= 0 or None"), (dict(shape=("a",)), "shape must be a tuple"),
    (dict(strides=(1.5,)), "strides must be a tuple"), (dict(shape=(-1,)), "shape must be a tuple"),
    (dict(kind="tensormap", box=(0,)), "box must be a tuple of ints >= 1"),
    (dict(kind="tensormap", box=(None,)), "box must be a tuple of ints >= 1"),
    (dict(kind="scalar", dtype=["int32"]), "dtype must be a dtype name"), (dict(kind=["tensor"]), "kind must be one of"),
    (dict(align=True), "align must be a power of two"),
    (dict(written="yes"), "written= says a tensor parameter is written: True or False"),
    (dict(kind="scalar", dtype="int32", written=True), r"only for kind 'tensor'\), got True for kind 'scalar'"),
])
def test_bad_spec_fields_are_named(kw, msg):
    with pytest.raises(LaunchError, match=msg):
        ParamSpec("p", **kw)


def test_spec_fields_are_normalized():
    import numpy as np

    s = ParamSpec("p", shape=[np.int64(4), None], strides=[1, None], align=np.int64(16))
    assert s.shape == (4, None) and s.strides == (1, None) and s.align == 16 and type(s.align) is int
    assert hash(s) == hash(ParamSpec("p", shape=(4, None), strides=(1, None)))
    with pytest.raises(LaunchError, match="name is a str"):
        ParamSpec(5)
