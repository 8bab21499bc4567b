"""Argument checks and packing (tirxpy/lower/packer.py; CPU: the checks run against device='cpu')."""
import ctypes
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tirxpy.lower.errors import LaunchError
from tirxpy.lower.packer import ArgPacker
from tirxpy.lower.params import ParamSpec


def packer(*specs, device="cpu"):
    return ArgPacker(specs, device=device)


def test_packs_pointers_and_scalars():
    x = torch.zeros(64, dtype=torch.bfloat16)
    p = packer(ParamSpec("x", dtype="bfloat16", shape=(64,)), ParamSpec("n", "scalar", "int32"),
               ParamSpec("alpha", "scalar", "float32"), ParamSpec("flag", "scalar", "bool"))
    addr = p.pack([x, -3, 1.5, True])
    raw = p.packed_bytes()
    assert struct.unpack_from("<Q", raw, 0)[0] == x.data_ptr()
    assert struct.unpack_from("<i", raw, 8)[0] == -3
    assert struct.unpack_from("<f", raw, 16)[0] == 1.5
    assert raw[24] == 1
    ptrs = (ctypes.c_void_p * 4).from_address(addr)
    assert ctypes.c_int32.from_address(ptrs[1]).value == -3
    assert ctypes.c_uint64.from_address(ptrs[0]).value == x.data_ptr()


def test_tensormap_slot_is_64_byte_aligned_and_copied():
    p = packer(ParamSpec("tm", "tensormap", box=(8, 8)), ParamSpec("n", "scalar", "int64"))
    blob = bytes(range(128))
    addr = p.pack([blob, 7])
    ptrs = (ctypes.c_void_p * 2).from_address(addr)
    assert ptrs[0] % 64 == 0 and ctypes.string_at(ptrs[0], 128) == blob
    assert ctypes.c_int64.from_address(ptrs[1]).value == 7
    with pytest.raises(LaunchError, match="parameter 'tm': an encoded tensor map is 128 bytes, got 3"):
        p.pack([b"abc", 7])


def test_one_tensor_behind_two_tensormap_slots_gets_each_slots_box(monkeypatch):
    # a kernel that loads B with a (64, 64) and a (256, 64) box: the maps must not share a cache entry
    from tirxpy.lower import tma

    monkeypatch.setattr(tma, "tensor_map_for", lambda t, box, layout, swizzle=None, param=None:
                        bytes(str(box).ljust(128), "ascii"))
    b = torch.zeros(512, 64, dtype=torch.bfloat16)
    spec = dict(dtype="bfloat16", shape=(512, 64), box=None)
    p = packer(ParamSpec("B", **spec), ParamSpec("B (64, 64)", "tensormap", "bfloat16", (512, 64), box=(64, 64)),
               ParamSpec("B (256, 64)", "tensormap", "bfloat16", (512, 64), box=(256, 64)))
    for _ in range(2):      # the second launch comes from the cache
        addr = p.pack([b, b, b])
        ptrs = (ctypes.c_void_p * 3).from_address(addr)
        assert ctypes.string_at(ptrs[1], 128).rstrip() == b"(64, 64)"
        assert ctypes.string_at(ptrs[2], 128).rstrip() == b"(256, 64)"


@pytest.mark.parametrize("spec, arg, msg", [
    (ParamSpec("x", dtype="bfloat16"), torch.zeros(4), r"parameter 'x': dtype is float32, the kernel expects bfloat16 — convert with \.to\(torch\.bfloat16\)"),
    (ParamSpec("x"), 3, "parameter 'x': expects a torch.Tensor, got int"),
    (ParamSpec("x", shape=(4, None)), torch.zeros(4), r"shape is \(4,\), the kernel expects \(4, \*\)"),
    (ParamSpec("x", shape=(4, 8)), torch.zeros(4, 9), r"shape is \(4, 9\), the kernel expects \(4, 8\)"),
    (ParamSpec("x", strides=(None, 1)), torch.zeros(8, 4).t(), r"strides are \(1, 4\), the kernel expects \(\*, 1\)"),
    (ParamSpec("x", dtype="float32", align=16), torch.zeros(8)[1:], "data pointer 0x[0-9a-f]+ is not 16-byte aligned"),
    (ParamSpec("n", "scalar", "int32"), 2 ** 31, r"value 2147483648 does not fit int32"),
    (ParamSpec("n", "scalar", "uint32"), -1, r"value -1 does not fit uint32"),
    (ParamSpec("n", "scalar", "int32"), 1.5, r"expects an integer \(int32\), got float"),
    (ParamSpec("n", "scalar", "int64"), True, r"expects an integer"),
    (ParamSpec("a", "scalar", "float32"), "x", r"expects a number \(float32\), got str"),
    (ParamSpec("b", "scalar", "bool"), 1.0, "expects a bool"),
])
def test_each_check_names_the_parameter(spec, arg, msg):
    with pytest.raises(LaunchError, match=msg) as ei:
        packer(spec).pack([arg])
    assert ei.value.param == spec.name


def test_device_mismatch():
    p = packer(ParamSpec("x", dtype="float32"), device="cuda:0")
    with pytest.raises(LaunchError, match=r"parameter 'x': tensor is on cpu, the kernel runs on cuda:0 — move it with \.to\('cuda:0'\)"):
        p.pack([torch.zeros(4)])


def test_arg_count():
    with pytest.raises(LaunchError, match=r"the kernel takes 2 arguments \(x, n\), got 1"):
        packer(ParamSpec("x"), ParamSpec("n", "scalar", "int32")).pack([torch.zeros(1)])


def test_numpy_like_scalars_accepted():
    import numpy as np

    p = packer(ParamSpec("n", "scalar", "int32"), ParamSpec("a", "scalar", "float64"))
    p.pack([np.int64(5), np.float32(0.5)])
    assert struct.unpack_from("<i", p.packed_bytes(), 0)[0] == 5


def test_spec_dtype_without_torch_dtype():
    with pytest.raises(LaunchError, match="has no torch dtype"):
        packer(ParamSpec("x", dtype="float4_e2m1"))


_DT = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@st.composite
def _spec_and_tensor(draw):
    """A spec fixing dtype and shape (strides fully or partly fixed) and a tensor near it: maybe
    another dtype, shape, a transposed or sliced view, an offset (misaligned) pointer."""
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from(sorted(_DT)))
    strides, acc = [], 1
    for n in reversed(shape):
        strides.insert(0, acc)
        acc *= n
    strides = tuple(None if draw(st.booleans()) and n == 1 else s for n, s in zip(shape, strides))
    spec = ParamSpec("x", dtype=dtype, shape=shape, strides=strides, align=draw(st.sampled_from([1, 2, 16])))
    tshape = tuple(n + draw(st.sampled_from([0, 0, 0, 1])) for n in shape)
    tdtype = _DT[draw(st.sampled_from([dtype, dtype, dtype, "float32"]))]
    base = torch.zeros(sum(tshape) * 64 + 64, dtype=tdtype)
    off = draw(st.sampled_from([0, 0, 1]))
    t = base[off:off + torch.Size(tshape).numel()].view(tshape)
    if len(tshape) >= 2 and draw(st.booleans()):
        t = t.transpose(-1, -2)
    return spec, t


def _outcome(fn):
    try:
        return fn()
    except LaunchError as e:
        return str(e)


@settings(max_examples=300, deadline=None)
@given(_spec_and_tensor())
def test_fast_tensor_check_agrees_with_the_full_check(case):
    spec, t = case
    p = packer(spec)
    assert 0 in p._exact        # the spec fixes dtype and shape: the fast check applies
    assert _outcome(lambda: p._tensor(0, spec, t, {})) == _outcome(lambda: p._tensor_checked(0, spec, t))


def test_a_tensor_accepted_for_one_slot_is_still_checked_against_another():
    # the per-launch memo may only skip checks between slots with equal requirements
    x = torch.zeros(4, 8)
    p = packer(ParamSpec("x", dtype="float32", shape=(4, 8), strides=(8, 1)),
               ParamSpec("y", dtype="float32", shape=(8, 4), strides=(4, 1)))
    with pytest.raises(LaunchError, match=r"parameter 'y': shape is \(4, 8\), the kernel expects \(8, 4\)"):
        p.pack([x, x])
    p.pack([x, torch.zeros(8, 4)])
    with pytest.raises(LaunchError, match=r"parameter 'x': strides are \(1, 4\)"):  # a later launch re-checks
        p.pack([torch.zeros(8, 4).t(), torch.zeros(8, 4)])


# -- the straight-line pack (ArgPacker._fast) packs only what the checks accept, and packs it the same ----------
_SCALARS = ["int32", "uint32", "int64", "uint8", "float32", "float64", "bool"]


@st.composite
def _slots_and_args(draw):
    """A tensor spec and tensor as above (or one that meets the spec, maybe at a misaligned offset), a
    scalar spec and a value near or past its range (maybe of another Python type), and the tensor again
    in a second slot with the same requirements or not."""
    spec, t = draw(_spec_and_tensor())
    if draw(st.booleans()):     # the spec's own dtype and shape, contiguous, maybe at an offset
        n = torch.Size(spec.shape).numel()
        off = draw(st.sampled_from([0, 1, 8]))
        t = torch.zeros(n + 8, dtype=_DT[spec.dtype])[off:off + n].view(spec.shape)
    sdt = draw(st.sampled_from(_SCALARS))
    v = draw(st.one_of(st.integers(-2 ** 65, 2 ** 65), st.sampled_from([0, 1, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32,
                                                                        255, 256, -129, 2 ** 63, 2 ** 64 - 1]),
                       st.floats(allow_nan=False, width=32), st.booleans()))
    second = draw(st.sampled_from(["same", "same spec, other tensor", "other spec"]))
    specs = [spec, ParamSpec("n", "scalar", sdt)]
    args = [t, v]
    if second == "same":
        specs.append(spec)
        args.append(t)
    elif second == "same spec, other tensor":
        specs.append(spec)
        args.append(torch.zeros(spec.shape, dtype=_DT[spec.dtype]))
    else:
        specs.append(ParamSpec("y", dtype="float32", shape=(2, 3), strides=(3, 1)))
        args.append(t)
    return specs, args


@settings(max_examples=400, deadline=None)
@given(_slots_and_args())
def test_straight_line_pack_packs_only_what_the_checks_accept(case):
    specs, args = case
    p = packer(*specs)
    assert p._fast is not None          # every slot fixes dtype and shape: the straight line exists
    if p._fast(args):
        fast_bytes = p.packed_bytes()
        p._mv[:] = bytes(len(p._mv))
        p._fast = None
        p.pack(args)                    # the full checks accept it too, and write the same bytes
        assert p.packed_bytes() == fast_bytes


def test_straight_line_pack_takes_the_common_case_and_declines_the_rest():
    x, y = torch.zeros(4, 8), torch.zeros(8, 4)
    p = packer(ParamSpec("x", dtype="float32", shape=(4, 8), strides=(8, 1)), ParamSpec("n", "scalar", "int32"),
               ParamSpec("a", "scalar", "float32"), ParamSpec("x2", dtype="float32", shape=(4, 8), strides=(8, 1)))
    assert p._fast([x, 3, 0.5, x]) and p._fast([x, -2 ** 31, 1e30, torch.zeros(4, 8)])
    raw = p.packed_bytes()
    assert struct.unpack_from("<Qi", raw, 0) == (x.data_ptr(), -2 ** 31)
    for args in ([x, 2 ** 31, 0.5, x], [x, True, 0.5, x], [x, 3, 1, x], [y.t(), 3, 0.5, x], [x, 3, 0.5, y],
                 [x.double(), 3, 0.5, x], [x, 3, 0.5], [torch.zeros(40)[1:33].view(4, 8), 3, 0.5, x]):
        assert not p._fast(args), args
    p.pack([x, 3, 1, x])                 # an int for a float32 slot: declined above, accepted by the full check
    assert struct.unpack_from("<f", p.packed_bytes(), 16)[0] == 1.0     # every slot 8-byte aligned
    with pytest.raises(LaunchError, match=r"parameter 'x2': shape is \(8, 4\)"):
        p.pack([x, 3, 0.5, y])
    assert packer(ParamSpec("x", dtype="float32"))._fast is None    # no fixed shape: the checks only


def test_gemm_launch_arguments_take_the_straight_line():
    # tirxpy_kernels.gemm's repeated calls: seven slots (A, B, Bias, C and the three tensor maps)
    from tirxpy_kernels.gemm_sm90 import gemm_sm90
    from tirxpy.lower.build import host_specs, lower_primitives
    from tirxpy.lower.codegen.kernel import generate

    unit = generate(lower_primitives(gemm_sm90(512, 512, 256, BN=256), "sm_90a"), "sm_90a")
    p = packer(*host_specs(unit.kernel, unit.tmaps, unit.written))
    assert [s.name for s in p.specs if s.written] == ["C"]        # the TMA-stored output: checked against A, B, Bias
    a, b = torch.zeros(512, 256, dtype=torch.bfloat16), torch.zeros(512, 256, dtype=torch.bfloat16)
    bias, c = torch.zeros(1, 1, dtype=torch.bfloat16), torch.zeros(512, 512, dtype=torch.bfloat16)
    base = (a, b, bias, c)
    args = base + tuple(base[t.param_index] for t in unit.tmaps)
    assert not p._fast(args)            # no tensor map encoded yet: the full path encodes them
    for i, s in enumerate(p.specs):     # (the encoder needs the driver; stand-ins for the CPU)
        if s.kind == "tensormap":
            p._tm_cache[(i, args[i].data_ptr())] = bytes([i]) * 128
    assert p._fast(args)
    for i, s in enumerate(p.specs):
        if s.kind == "tensormap":
            assert p.packed_bytes()[p._tm_off[i]:p._tm_off[i] + 128] == bytes([i]) * 128


def _spec(name, written=False, strides=(8, 1)):
    return ParamSpec(name, dtype="float32", shape=(4, 8), strides=strides, align=4, written=written)


def test_a_written_tensor_that_shares_memory_with_another_argument_is_refused():
    """A tensor the kernel writes may share no memory with another tensor argument (the parameters are
    ``__restrict__``): the check, the full pack and the straight line all refuse it, naming the written one."""
    buf = torch.zeros(12, 8)
    x, y = buf[:4], buf[4:8]
    p = packer(_spec("x"), _spec("y", written=True), ParamSpec("n", "scalar", "int32"))
    assert p._fast([x, y, 1]) and p._fast([x, buf[8:], 1])      # neighbours in one buffer share nothing
    p.check([x, y, 1])
    for args, other in (([x, x, 1], "x"), ([x, buf[2:6], 1], "x")):
        assert not p._fast(args)
        for fn in (p.pack, p.check):
            with pytest.raises(LaunchError, match=rf"parameter 'y': shares memory with parameter '{other}', which the "
                                                  rf"kernel reads while it writes 'y' \(kernel parameters must not "
                                                  rf"alias\) — pass separate tensors"):
                fn(args)
    both = packer(_spec("y", written=True), _spec("z", written=True))
    with pytest.raises(LaunchError, match="parameter 'y': shares memory with parameter 'z', which the kernel also "
                                          "writes"):
        both.pack([x, buf[:4]])
    packer(_spec("x"), _spec("x2")).pack([x, x])            # two read-only slots may take one tensor


def test_a_pair_the_kernel_declares_may_share_memory():
    """``may_alias`` (from ``T.launch(may_alias=...)``) exempts exactly its pairs: a written tensor may take the
    memory of the parameter it names, and is still refused where it shares memory with any other."""
    buf = torch.zeros(8, 8)
    a, d = buf[:4], buf[:4]
    p = packer(ParamSpec("a", dtype="float32", shape=(4, 8), strides=(8, 1), align=4, may_alias={"d"}),
               ParamSpec("d", dtype="float32", shape=(4, 8), strides=(8, 1), align=4, written=True,
                         may_alias={"a"}), _spec("x"))
    p.check([a, d, buf[4:]])
    assert p.pack([a, d, buf[4:]]) == p.params_address
    with pytest.raises(LaunchError, match="parameter 'd': shares memory with parameter 'x'"):
        p.pack([a, d, buf[2:6]])
    with pytest.raises(LaunchError, match=r"may_alias= is a set of parameter names"):
        ParamSpec("a", may_alias=3)


def test_the_launch_check_and_the_signature_follow_may_alias():
    """A kernel whose ``T.launch`` declares ``(A, L)`` may alias takes one tensor for both, and its CUDA signature
    drops ``__restrict__`` from those two pointers alone."""
    from tirxpy import T
    from tirxpy.lower.build import host_specs
    from tirxpy.lower.codegen.kernel import generate

    @T.prim_func
    def land(A: T.Tensor((32,), "float32"), L: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32")):
        T.launch(grid=(1,), threads=32, may_alias=(("A", "L"),))
        L[T.thread_id()] = Y[T.thread_id()]
        Y[T.thread_id()] = A[T.thread_id()]

    unit = generate(land, "sm_90a")
    assert "float* L" in unit.source and "const float* A" in unit.source and "float* __restrict__ Y" in unit.source
    p = packer(*host_specs(land, unit.tmaps, unit.written))
    x, y = torch.zeros(32), torch.zeros(32)
    p.check([x, x, y])
    with pytest.raises(LaunchError, match="parameter 'L': shares memory with parameter 'Y'"):
        p.check([x, x, x])


def test_interleaved_views_that_share_no_element_are_taken():
    """The ``k`` and ``v`` slices of one packed tensor interleave: their spans intersect, so the straight line
    declines them and the full check tells them apart exactly (they share no byte)."""
    kv = torch.zeros(4, 2, 8)
    k, v = kv[:, 0], kv[:, 1]
    p = packer(_spec("k", True, strides=(16, 1)), _spec("v", True, strides=(16, 1)))
    assert not p._fast([k, v])
    assert p.pack([k, v]) == p.params_address
    assert struct.unpack_from("<QQ", p.packed_bytes(), 0) == (k.data_ptr(), v.data_ptr())
    free = packer(_spec("k", True, strides=(None, 1)), _spec("x"))      # a free stride: the span is measured
    assert free._fast([k, torch.zeros(4, 8)]) and not free._fast([k, kv.view(8, 8)[:4]])
    with pytest.raises(LaunchError, match="parameter 'k': shares memory with parameter 'x'"):
        free.pack([k, kv.view(8, 8)[:4]])


# ---------------------------------------------------------------------- what the fast paths must decline
def test_sparse_grad_and_overflowing_arguments_get_the_full_checks():
    spec = ParamSpec("x", dtype="float32", shape=(8,), strides=(1,), align=4)
    p = packer(spec, ParamSpec("a", "scalar", "float32"), ParamSpec("h", "scalar", "float16"))
    assert p._fast is not None
    x = torch.zeros(8)
    p.pack([x, 1.0, 2.0])
    with pytest.raises(LaunchError, match=r"'x': is a sparse_coo tensor; a kernel takes dense"):
        p.pack([x.to_sparse(), 1.0, 2.0])
    with pytest.raises(LaunchError, match=r"'x': tensor requires grad.*torch.no_grad\(\)"):
        p.pack([torch.zeros(8, requires_grad=True), 1.0, 2.0])
    with torch.no_grad():
        p.pack([torch.zeros(8, requires_grad=True), 1.0, 2.0])
    with pytest.raises(LaunchError, match=r"'a': value 1e\+300 does not fit float32"):
        p.pack([x, 1e300, 2.0])
    with pytest.raises(LaunchError, match=r"'h': value 70000.0 does not fit float16"):
        p.pack([x, 1.0, 70000.0])
    assert _outcome(lambda: p._tensor(0, spec, x.to_sparse(), {})) == _outcome(lambda: p._tensor_checked(0, spec, x.to_sparse()))


@pytest.mark.parametrize("value, msg", [
    (__import__("numpy").arange(3), r"'n': expects an integer \(int32\), got ndarray"),
    (torch.arange(3), r"'n': expects an integer \(int32\), got Tensor"),
    (True, r"'n': expects an integer \(int32\), got bool"),
])
def test_integer_scalars_that_are_not_one_number(value, msg):
    p = packer(ParamSpec("n", "scalar", "int32"))
    with pytest.raises(LaunchError, match=msg):
        p.pack([value])


def test_check_needs_no_packing():
    p = packer(ParamSpec("x", dtype="float32", shape=(8,)), ParamSpec("t", "tensormap", "float32", box=(8,)))
    p.check([torch.zeros(8), torch.zeros(8)])
    p.check([torch.zeros(8), bytes(128)])
    with pytest.raises(LaunchError, match="an encoded tensor map is 128 bytes, got 3"):
        p.check([torch.zeros(8), b"abc"])
    with pytest.raises(LaunchError, match=r"the kernel takes 2 arguments \(x, t\), got 1"):
        p.check([torch.zeros(8)])
    with pytest.raises(LaunchError, match=r"got int"):
        p.check(5)


@pytest.mark.parametrize("args", [None, 5, (x for x in [1])])
def test_pack_names_args_that_are_no_sequence(args):
    with pytest.raises(LaunchError, match=r"the kernel takes 1 arguments \(n\), got \w+; pass them as a tuple or list"):
        packer(ParamSpec("n", "scalar", "int32")).pack(args)


def test_bool_scalars_take_numpy_bools_and_0_1_only():
    import numpy as np

    p = packer(ParamSpec("b", "scalar", "bool"))
    for v, want in ((np.True_, b"\x01"), (np.False_, b"\x00"), (1, b"\x01"), (np.int64(0), b"\x00")):
        p.pack([v])
        assert p.packed_bytes()[:1] == want
    for v in (5, -1, 2.0, "yes", torch.ones(2)):
        with pytest.raises(LaunchError, match="'b': expects a bool, got"):
            p.pack([v])
