"""tirxpy_kernels.gemm on CPU tensors: every option and tensor kind is checked before the device, with the error that
names the argument; the operand orientation and the padded problem are what the kernel is built for."""
import pytest
import torch

import tirxpy_kernels
from tirxpy_kernels.gemm_api import GemmArgumentError, _fast_key, _orientation, _problem, check_tuning


def _bf(*shape):
    return torch.zeros(shape, dtype=torch.bfloat16)


A, B = _bf(256, 512), _bf(512, 512).t()


@pytest.mark.parametrize("kw,msg", [
    (dict(BM=128), "unknown tuning argument(s) ['BM']"),
    (dict(drop="turn"), "unknown tuning argument(s) ['drop']"),
    (dict(STAGES=-1), "STAGES = -1; a pipeline needs at least 2 stages"),
    (dict(BN=-1), "BN = -1 must be a multiple of 16 in [64, 256]"),
    (dict(BN=True), "BN must be an int, got True (bool)"),
    (dict(BN=128.0), "BN must be an int, got 128.0 (float)"),
    (dict(CM=True), "CM must be an int, got True (bool)"),
    (dict(CM=0), "the cluster size CM = 0 must be 1 or 2"),          # before the tile is chosen (fuzz: modulo by 0)
    (dict(CM=-2, BN=128), "the cluster size CM = -2 must be 1 or 2"),
    (dict(group=0), "group = 0 is out of range; it must be in [1, 2147483647]"),
    (dict(sms=0), "sms = 0 is out of range; it must be >= 1"),
    (dict(activation=["relu"]), "activation must be one of (None, 'relu', 'silu'), got ['relu']"),
    (dict(out_dtype="float32"), "out_dtype must be a torch.dtype"),
    (dict(out_dtype=[torch.float32]), "out_dtype must be a torch.dtype"),
    (dict(STORE="cta"), "unknown tuning argument(s) ['STORE']"),         # removed: no default chose it
    (dict(STAGGER=False), "unknown tuning argument(s) ['STAGGER']"),     # the cooperative schedule always staggers
    (dict(PINGPONG=2), "PINGPONG must be True or False (or None: the default), got 2"),
    (dict(PDL=None), "PDL must be True or False, got None"),
    (dict(SPLIT=[16, 1, 240]), "SPLIT must be a tuple (rows, wide, bn2) of ints, got [16, 1, 240]"),
    (dict(SPLIT=(16, 1, 240), PINGPONG=True), "SPLIT is a tiling of the cooperative deferred schedule"),
    (dict(BN=256, PINGPONG=True), "PINGPONG keeps a whole (128, 256) float32 tile"),
    (dict(BN=256, STAGES=6), "shared memory"),
    (dict(bias=torch.zeros(512).to_sparse()), "bias is a sparse tensor"),
    (dict(bias=torch.zeros(512, dtype=torch.int32)), "bias must be floating point"),
    (dict(gate=_bf(256, 511)), "gate has shape (256, 511); it must have the output's shape (256, 512)"),
    (dict(gate=torch.zeros(256, 512)), "pass gate.to(torch.bfloat16)"),
    (dict(gate=_bf(512, 256).t()), "gate must be contiguous"),
    (dict(gate=_bf(256, 512).to_sparse()), "gate is a sparse tensor"),
    (dict(gate=1.0), "gate must be a tensor of shape (256, 512)"),
    (dict(gate=_bf(256, 512), DEFER=True), "a gate is read chunk by chunk from global memory"),
])
def test_options_are_checked_before_the_device(kw, msg):
    with pytest.raises(GemmArgumentError) as e:
        tirxpy_kernels.gemm(A, B, **kw)
    assert msg in str(e.value) and str(e.value).startswith("gemm: ") and "gemm_sm90" not in str(e.value)


@pytest.mark.parametrize("a,msg", [
    (_bf(256, 512).to_sparse(), "a is a sparse tensor (layout torch.sparse_coo); pass a dense one (a.to_dense())"),
    (torch.nested.nested_tensor([torch.zeros(3, 512), torch.zeros(2, 512)]), "a is a nested tensor"),
    (torch.zeros((), dtype=torch.bfloat16), "a must be 2-D (a matrix), got shape ()"),
    (torch.zeros(256, 512, dtype=torch.complex64), "a has dtype torch.complex64"),
    ([[1.0]], "a must be a torch.Tensor, got list"),
])
def test_tensor_kinds_are_named(a, msg):
    with pytest.raises(GemmArgumentError) as e:
        tirxpy_kernels.gemm(a, B)
    assert msg in str(e.value)


def test_an_out_that_shares_memory_with_an_input_is_refused():
    with pytest.raises(GemmArgumentError, match="out shares memory with a, which the kernel reads"):
        tirxpy_kernels.gemm(A, B, A)
    w = _bf(1024, 512)
    with pytest.raises(GemmArgumentError, match="out shares memory with b"):
        tirxpy_kernels.gemm(A, w[:512].t(), w[256:512].view(256, 512))
    with pytest.raises(GemmArgumentError, match="out shares memory with gate"):
        g = _bf(256, 512)
        tirxpy_kernels.gemm(A, B, g, gate=g)
    kernels_out = _bf(512, 512)            # the other half of one storage: no overlap, so only the device is wrong
    with pytest.raises(GemmArgumentError, match="tensors are on cpu"):
        tirxpy_kernels.gemm(kernels_out[:256], B, kernels_out[256:])


def _odd(*shape):
    """A contiguous bf16 tensor of ``shape`` whose data starts 2 bytes past a 16-byte boundary."""
    n = torch.Size(shape).numel()
    t = torch.zeros(n + 8, dtype=torch.bfloat16)[1:1 + n].view(shape)
    assert t.data_ptr() % 16 == 2
    return t


def test_a_misaligned_out_is_named_before_the_device():
    """The kernel's TMA stores write ``out`` in place, and a copy would not be the caller's tensor: an ``out`` off a
    16-byte boundary is refused by the API, naming ``out`` (not the kernel's parameter ``C``), the offset and the
    fix, on any device, even next to misaligned inputs."""
    for a, b in ((A, B), (_odd(256, 512), _odd(512, 512).t())):
        with pytest.raises(GemmArgumentError) as e:
            tirxpy_kernels.gemm(a, b, _odd(256, 512))
        msg = str(e.value)
        assert msg.startswith("gemm: out starts 2 bytes past a 16-byte boundary (a view at an odd offset)")
        assert msg.endswith("pass a freshly allocated out (or out=None)")


@pytest.mark.parametrize("kw", [
    dict(a=_odd(256, 512)),
    dict(b=_odd(512, 512).t()),
    dict(b=_odd(512, 512)),                                    # row-major b: read MN-major
    dict(gate=_odd(256, 512)),
    dict(a=_odd(256, 512), b=_odd(512, 512).t(), gate=_odd(256, 512), bias=torch.zeros(512)),
    dict(a=_odd(64, 32), b=_bf(32, 48)),                       # a problem the kernel runs on padded copies
])
def test_a_misaligned_input_gets_past_the_checks(kw):
    """An input at an odd offset is copied to an aligned tensor, so the checks take it: the call fails only at the
    device, as the same call with aligned inputs does."""
    args = dict(a=A, b=B, out=None) | kw
    with pytest.raises(GemmArgumentError, match="gemm: tensors are on cpu; the kernel runs on a CUDA GPU"):
        tirxpy_kernels.gemm(args.pop("a"), args.pop("b"), args.pop("out"), **args)
    tirxpy_kernels.gemm_api.check(kw.get("a", A), kw.get("b", B), gate=kw.get("gate"), bias=kw.get("bias"))


@pytest.mark.parametrize("b", [_odd(512, 512).t(), _odd(512, 512), _bf(1024, 1024)[1:513, 2:514]])
def test_checked_hands_the_kernel_aligned_copies_of_misaligned_inputs(b):
    """:func:`_checked` returns the inputs the kernel reads: an aligned tensor as it is, a misaligned one as an
    aligned copy holding the same values (with the same strides where it is dense), planned in the copy's layout."""
    from tirxpy_kernels.gemm_api import _checked

    a = _odd(256, 512).copy_(torch.randn(256, 512))
    b = b.copy_(torch.randn(512, 512))
    gate = _odd(256, 512).copy_(torch.randn(256, 512))
    ka, kb, kg, plan = _checked(a, b, None, None, None, None, {}, gate)
    for t, k in ((a, ka), (b, kb), (gate, kg)):
        assert k.data_ptr() % 16 == 0 and k.data_ptr() != t.data_ptr() and torch.equal(k, t)
    assert ka.stride() == a.stride() and kg.stride() == gate.stride()
    assert kb.stride() == (b.stride() if b.is_contiguous() or b.t().is_contiguous() else (512, 1))
    assert plan[7:9] == (_orientation(ka, 1)[0], _orientation(kb, 0)[0])
    ka, kb, kg, _ = _checked(A, B, None, None, None, None, {}, None)
    assert ka is A and kb is B and kg is None


class _Kernel:
    """A compiled kernel's stand-in: records the tensors each launch (or bound launch) hands it."""

    def __init__(self, log):
        self.log = log

    def __call__(self, *args):
        self.log.append(args)

    def bind(self, *args):
        return lambda: self.log.append(args)


@pytest.fixture
def cpu_launches(monkeypatch):
    """gemm on CPU tensors up to the launch: the device check passes and each compiled kernel is a :class:`_Kernel`
    recording its arguments (the list returned), with empty launch caches."""
    from tirxpy_kernels import gemm_api
    from tirxpy_kernels.launch_cache import LaunchCache

    log = []
    monkeypatch.setattr(gemm_api, "_device", lambda a, *rest: a.device)
    monkeypatch.setattr(gemm_api, "compiled", lambda k, target: _Kernel(log))
    monkeypatch.setattr(gemm_api, "_FAST", LaunchCache("test"))
    monkeypatch.setattr(gemm_api, "_BOUND", LaunchCache("test bound"))
    return log


def test_the_kernel_never_gets_a_misaligned_input(cpu_launches):
    """A misaligned input reaches the kernel as an aligned copy of its values, on the first call and on calls like an
    earlier one (which skip the checks for aligned inputs, bound or launched directly): an earlier aligned call's
    stored launch is not taken, and a misaligned call stores none."""
    from tirxpy_kernels import gemm_api

    log = cpu_launches
    a, b, g = _odd(256, 512).copy_(torch.randn(256, 512)), _odd(512, 512).copy_(torch.randn(512, 512)).t(), \
        _odd(256, 512).copy_(torch.randn(256, 512))
    for bias in (None, torch.zeros(512)):       # bound, and (a float32 bias converted per call) launched directly
        del log[:]
        tirxpy_kernels.gemm(A, B, bias=bias, gate=_bf(256, 512))      # aligned: stores its launch
        tirxpy_kernels.gemm(A, B, bias=bias, gate=_bf(256, 512))      # taken
        assert len(gemm_api._FAST) == 1 and len(log) == 2
        for _ in range(2):
            for x, y, gate in ((a, B, _bf(256, 512)), (A, b, _bf(256, 512)), (A, B, g), (a, b, g)):
                del log[:]
                tirxpy_kernels.gemm(x, y, bias=bias, gate=gate)
                (args,) = log
                assert all(t.data_ptr() % 16 == 0 for t in args)
                # A is a, B is b.t() (b column-major: K-major, read as (N, K)), then the bias, the gate and out
                assert torch.equal(args[0], x) and torch.equal(args[1], y.t()) and torch.equal(args[3], gate)
        assert len(gemm_api._FAST) == 1
        gemm_api._FAST.clear()
    with pytest.raises(GemmArgumentError, match="gemm: out starts 2 bytes past a 16-byte boundary"):
        tirxpy_kernels.gemm(A, B, _odd(256, 512))        # like a stored call, but out is the caller's: refused


@pytest.mark.parametrize("kw", [dict(), dict(BN=192, PINGPONG=None), dict(PINGPONG=True), dict(DEFER=True),
                                dict(sms=1), dict(sms=None), dict(activation="silu", bias=torch.zeros(512)),
                                dict(out_dtype=torch.float32, DEFER=False), dict(SPLIT=None), dict(PDL=0),
                                dict(gate=_bf(256, 512)), dict(gate=torch.zeros(256, 512), out_dtype=torch.float32)])
def test_a_right_call_on_cpu_gets_the_device_error(kw):
    with pytest.raises(GemmArgumentError, match="gemm: tensors are on cpu; the kernel runs on a CUDA GPU"):
        tirxpy_kernels.gemm(A, B, **kw)


def test_meta_tensors_and_inputs_that_require_grad():
    """Meta tensors are a device fault (checked last); inputs that require grad are read as values."""
    m = torch.zeros(256, 512, dtype=torch.bfloat16, device="meta")
    with pytest.raises(GemmArgumentError, match="all tensors must be on one device, got \\['cpu', 'meta'\\]"):
        tirxpy_kernels.gemm(m, B)
    with pytest.raises(GemmArgumentError, match="tensors are on meta"):
        tirxpy_kernels.gemm(m, torch.zeros(512, 512, dtype=torch.bfloat16, device="meta"))
    with pytest.raises(GemmArgumentError, match="tensors are on cpu"):
        tirxpy_kernels.gemm(A.clone().requires_grad_(), B)


def test_check_tuning_names_the_option():
    check_tuning({"BN": 176, "PINGPONG": 1, "SPLIT": None, "sms": None})
    with pytest.raises(GemmArgumentError, match=r"gemm: DEFER must be True or False \(or None: the default\), got 'on'"):
        check_tuning({"DEFER": "on"})


def _major_of_original(t, kdim):
    """The orientation rule as tirxpy_kernels.gemm has always applied it (for the check below)."""
    al = lambda n: n * t.element_size() % 16 == 0  # noqa: E731
    if kdim == 1:
        if t.stride(1) == 1 and al(t.size(1)) and t.is_contiguous():
            return "K"
        if t.stride(0) == 1 and al(t.size(0)) and t.t().is_contiguous():
            return "MN"
        return "MN" if al(t.size(0)) and not al(t.size(1)) else "K"
    if t.stride(0) == 1 and al(t.size(0)) and t.t().is_contiguous():
        return "K"
    if t.stride(1) == 1 and al(t.size(1)) and t.is_contiguous():
        return "MN"
    return "MN" if al(t.size(1)) and not al(t.size(0)) else "K"


@pytest.mark.parametrize("t", [_bf(256, 512), _bf(512, 256).t(), _bf(256, 515), _bf(515, 256).t(), _bf(260, 515),
                               _bf(256, 1024)[:, ::2], _bf(1, 512).expand(256, 512)])
@pytest.mark.parametrize("kdim", [0, 1])
def test_orientation_follows_the_rule(t, kdim):
    major, transposed, copied = _orientation(t, kdim)
    assert major == _major_of_original(t, kdim)
    v = t.t() if transposed else t
    if not copied:
        assert v.is_contiguous()


def test_problem_pads_what_tma_needs():
    assert _problem(_bf(100, 30), _bf(30, 7), 100, 7, 30, torch.bfloat16) == (128, 256, 64, "K", "K")
    assert _problem(A, B, 256, 512, 512, torch.bfloat16) == (256, 512, 512, "K", "K")
    a, b = _bf(256, 515), _bf(512, 515).t()          # K = 515 unaligned, M and N aligned: MN-major copies
    assert _problem(a, b, 256, 512, 515, torch.bfloat16) == (256, 512, 515, "MN", "MN")
    a, b = _bf(260, 515), _bf(515, 517)             # nothing aligned: K-major copies, K and N padded to 16 bytes
    assert _problem(a, b, 260, 517, 515, torch.bfloat16) == (260, 520, 520, "K", "K")
    assert _problem(A, _bf(512, 517), 256, 517, 512, torch.float32)[1] == 520


def test_fast_path_keys_only_plain_arguments():
    assert _fast_key(A, B, None, None, None, None, {}) is not None
    assert _fast_key(A, B, None, None, None, None, {"SPLIT": (16, 1, 240)}) is not None
    assert _fast_key(A, B, None, None, ["relu"], None, {}) is None
    assert _fast_key(A, B, None, None, None, None, {"BN": [1]}) is None
    assert _fast_key(A, None, None, None, None, None, {}) is None
    assert _fast_key(A.to_sparse_csr(), B, None, None, None, None, {}) is None     # no strides
    # a COO tensor has strides (0, 0) but its layout is in the key: never the key of an accepted dense call
    dense, coo = _fast_key(A, B, None, None, None, None, {}), _fast_key(A.to_sparse(), B, None, None, None, None, {})
    assert coo is None or coo != dense
    assert _fast_key(A, B, None, None, None, None, {"PDL": 1}) != _fast_key(A, B, None, None, None, None, {"PDL": True})


def test_planning_a_huge_problem_is_quick():
    """The balanced-split search stops past 1 / margin rounds (where no split can gain the margin), so planning a
    2^20-square problem on meta tensors takes no longer than a small one."""
    import time

    from tirxpy_kernels.gemm_sm90 import balanced_split

    big = torch.empty(1 << 20, 1 << 20, dtype=torch.bfloat16, device="meta")
    t0 = time.monotonic()
    with pytest.raises(GemmArgumentError, match="tensors are on meta"):
        tirxpy_kernels.gemm(big, big.t())
    assert time.monotonic() - t0 < 2.0
    assert balanced_split(1 << 20, 1 << 20, 4096) is None and balanced_split(8192, 8192, 8192) == (32, 2, 240)


def test_fast_path_key_fixes_every_shape_stride_dtype_and_option():
    """Two calls share a launch only when everything the checks and the plan read is equal: the operands'
    shapes, strides, dtypes and devices, out's and bias's, the activation, out_dtype and every option."""
    base = _fast_key(A, B, None, None, None, None, {})
    assert base == _fast_key(_bf(256, 512), _bf(512, 512).t(), None, None, None, None, {})
    others = [
        _fast_key(_bf(256, 512), _bf(512, 512), None, None, None, None, {}),              # b's strides
        _fast_key(_bf(256, 1024)[:, :512], B, None, None, None, None, {}),                 # a's strides
        _fast_key(A.half(), B.half(), None, None, None, None, {}),                         # dtypes
        _fast_key(A, B, _bf(256, 512), None, None, None, {}),                              # an out
        _fast_key(A, B, None, torch.zeros(512), None, None, {}),                           # a bias
        _fast_key(A, B, None, torch.zeros(512, dtype=torch.bfloat16), None, None, {}),     # its dtype
        _fast_key(A, B, None, None, "relu", None, {}),
        _fast_key(A, B, None, None, None, torch.float32, {}),
        _fast_key(A, B, None, None, None, None, {"BN": 192}),
        _fast_key(A, B, None, None, None, None, {"SPLIT": None}),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_an_mn_major_a_at_a_split_shape_builds_its_narrow_tiles():
    """An MN-major a (a.t() of a contiguous (K, M) tensor) at 4096^3 gets the balanced split, whose narrow tiles
    read A's stage MN-major too (transpose_a): the kernel tirxpy_kernels.gemm builds for it compiles for sm_90a without
    spills, with both wgmma widths."""
    import tirxpy
    from tirxpy_kernels.gemm_api import _major, _tile
    from tirxpy_kernels.gemm_sm90 import gemm_sm90

    a = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta").t()
    assert _major(a, 1) == "MN"
    tuning = _tile({}, 4096, 4096, 4096, 132)
    assert tuning["SPLIT"] == (16, 1, 240)
    ck = tirxpy.compile(gemm_sm90(4096, 4096, 4096, a_major="MN", sms=132, **tuning), arch="sm_90a")
    assert ck.resources.spills == 0 and ck.resources.perf_warnings == ()
    assert "wgmma_m64n256k16" in ck.cuda_source and "wgmma_m64n240k16" in ck.cuda_source


def test_the_cluster_size_is_1_or_2_of_any_int_kind():
    """gemm_plan.check_cluster, the one check of CM (options, plan, tile choice): numpy ints pass, and 0, -1, 3, a
    bool or a float are refused naming CM, also where the tile is chosen (CM = 0 divided by zero there)."""
    import numpy as np

    from tirxpy_kernels.errors import KernelConfigError
    from tirxpy_kernels.gemm_plan import check_cluster, choose_tile

    check_cluster(np.int64(2))
    assert choose_tile(4096, 4096, 4096, CM=np.int32(2)) == choose_tile(4096, 4096, 4096, CM=2)
    for bad in (0, -1, 3, True, 2.0):
        with pytest.raises(KernelConfigError, match=r"the cluster size CM = .* must be 1 or 2 \(an int\)"):
            choose_tile(4096, 4096, 4096, CM=bad)


def test_the_split_search_is_bounded_on_huge_grids(monkeypatch):
    """``balanced_split`` weighs each candidate split over every tile; on a grid of millions of tiles (a huge
    ``sms`` keeps it under the rounds bound) or a thin band (``group=1``) it weighs none and finds none, rather
    than search for minutes, and the call goes on to its next check."""
    from tirxpy_kernels import gemm_plan

    assert gemm_plan.balanced_split(4096, 4096, 4096) == (16, 1, 240)        # an ordinary grid is searched

    def weighed(*args, **kw):
        raise AssertionError("a split was weighed")

    monkeypatch.setattr(gemm_plan, "_unit_loads", weighed)
    assert gemm_plan.balanced_split(256_000, 256_000, 4096, sms=100_000) is None
    assert gemm_plan.balanced_split(422_400, 512, 4096, group=1) is None
    with pytest.raises(AssertionError, match="weighed"):
        gemm_plan.balanced_split(4096, 4096, 4096)
    a = torch.empty(256_000, 4096, dtype=torch.bfloat16, device="meta")
    with pytest.raises(GemmArgumentError, match="CUDA GPU"):
        tirxpy_kernels.gemm(a, a.t(), sms=10 ** 6)
