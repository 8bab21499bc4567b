"""tirxpy_kernels/quantize_sm90.py and quantize_api.py: the plan, the reference's rule against float64, the kernel in the
simulator (bit-exact against the reference, NaN-poisoned outputs, ragged shapes, outliers), NVRTC builds without
spills, the API's typed errors, and the GPU.

GPU (marker gpu): python -m pytest -q -m gpu tests/kernels/test_quantize_fp8.py
(``--sim``: the GPU test's small shapes in the simulator, on any machine)
"""
import numpy as np
import pytest
import torch

from tirxpy.errors import ArgumentError
from tirxpy_kernels.bench import main as bench_main
from tirxpy_kernels.errors import KernelConfigError
from tirxpy_kernels.quantize_api import (QuantizeArgumentError, expand_scales, group_scales, quantize_fp8,
                                  reference)
from tirxpy_kernels.quantize_sm90 import (FP8_MAX, MAX_TOKEN_K, SCALE_FLOOR, padded_shape, plan,
                                  quantize_fp8_kernel, scales_shape,
                                  scales_storage, scales_view)
from tests.primitives.helpers import compile_ok
from tests.sim_plugin import device, launch, skip_large

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
NAME = {E4M3: "float8_e4m3", E5M2: "float8_e5m2"}


def inputs(M, K, dev="cpu", seed=0, dtype=torch.bfloat16):
    """Normal values times 3, an all-zero row, a row of tiny values, and outliers (1e4 and -3e3)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn(M, K, device=dev, generator=g) * 3
    x[0] = 0
    if M > 2:
        x[2] = x[2] * 1e-30
    x[M // 2, K // 3] = 1e4
    x[M - 1, K - 1] = -3e3
    return x.to(dtype)


def check_against_reference(x, q, s, granularity, dtype=E4M3, pow2=False, rcp=False):
    """Bit-exact against :func:`reference` (the same float32 operations); every element written."""
    rq, rs = reference(x, granularity, dtype=dtype, pow2_scales=pow2, rcp=rcp)
    assert not torch.isnan(s).any() and not torch.isnan(q.float()).any()
    assert torch.equal(s, rs)
    diff = (q.view(torch.uint8) != rq.view(torch.uint8)).nonzero()
    assert len(diff) == 0, f"{len(diff)} elements differ, first {diff[:4].tolist()}"


# ---------------------------------------------------------------- plan
def test_plan_tiles_and_padding():
    assert plan("1x128", 8192, 7168) == ("1x128", 32, 128, 4, 4, 4)
    assert plan("1x128", 64, 128, 2).lanes == 8 and plan("1x128", 64, 128, 8, lanes=16).rows == 64
    with pytest.raises(KernelConfigError, match="lanes must be 4, 8 or 16 and vecs = 2 a multiple"):
        plan("1x128", 64, 128, 2, lanes=4)
    assert plan("128x128", 300, 200)[1:3] == (128, 128)
    for K in (256, 300, 1000, 4096, 7168, 16384, 20000, MAX_TOKEN_K):
        p = plan("token", 1, K)
        assert p.cols >= K and 32 * 8 * p.warps <= K and p.warps <= 16 and p.vecs <= 8
    assert padded_shape("1x128", 5, 64) == (32, 128) and padded_shape("token", 7, 100) == (7, 256)
    assert padded_shape("128x128", 1000, 7168) == (1000, 7168)
    assert scales_shape("1x128", 5, 129) == (5, 2) and scales_shape("128x128", 129, 128) == (2, 1)
    with pytest.raises(KernelConfigError, match="smaller than one 1x128 tile"):
        plan("1x128", 31, 128)
    with pytest.raises(KernelConfigError, match="past 32768; use '1x128' groups"):
        plan("token", 4, MAX_TOKEN_K + 8)
    with pytest.raises(KernelConfigError, match="granularity must be one of"):
        plan("1x64", 128, 128)
    assert [plan("128x128", 128, 128, v).warps for v in (None, 2, 4, 8)] == [16, 32, 16, 8]
    with pytest.raises(KernelConfigError, match="vecs = 3 must be 2, 4 or 8"):
        plan("128x128", 128, 128, 3)


# ---------------------------------------------------------------- the reference against float64
@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_reference_follows_the_rule_in_float64(granularity, dtype):
    M, K = 150, 300
    x = inputs(M, K, seed=3)
    fmax = FP8_MAX[NAME[dtype]]
    q, s = reference(x, granularity, dtype=dtype)
    # scales: float64 amax / fp8_max rounded once to float32 (floor 2^-126 for the all-zero group)
    xd = x.double().abs()
    gr, gc = (1, K) if granularity == "token" else (1, 128) if granularity == "1x128" else (128, 128)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            amax = xd[i * gr:(i + 1) * gr, j * gc:(j + 1) * gc].max().item()
            assert s[i, j].item() == torch.tensor(max(amax / fmax, SCALE_FLOOR), dtype=torch.float32).item()
    # values: |x_q| <= fp8_max and x_q * scale within half an fp8 ulp of x (3 or 2 mantissa bits)
    se = expand_scales(s.double(), granularity, M, K)
    y = x.double() / se
    assert y.abs().max() <= fmax * (1 + 2 ** -20)
    man = 3 if dtype == E4M3 else 2
    min_normal = 2.0 ** (-6 if dtype == E4M3 else -14)
    ulp = torch.exp2(torch.floor(torch.log2(y.abs().clamp(min=min_normal))) - man)
    assert ((q.double() - y).abs() <= ulp / 2 * (1 + 2 ** -20)).all()
    assert (q[0].double() == 0).all()          # the all-zero row


def test_reference_pow2_scales_are_the_next_power_of_two():
    x = inputs(64, 384, seed=4)
    s = group_scales(x, "1x128")
    p = group_scales(x, "1x128", pow2_scales=True)
    assert torch.equal(torch.exp2(torch.log2(p).round()), p)          # powers of two
    assert (p >= s).all() and (p < 2 * s).all()
    q, _ = reference(x, "1x128", pow2_scales=True)
    assert q.float().abs().max() <= 448


# ---------------------------------------------------------------- div="exact": the quotient without a division per element
def _fma32(a, b, c):
    """float32 ``a * b + c`` rounded once: the float64 sum rounded to odd (exact error by TwoSum), then to float32."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    p = a * b                                   # exact: 24 x 24 bits
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    odd = (err != 0) & ((s.view(np.uint64) & 1) == 0)
    s = np.where(odd, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def _exact_quotient(x, s):
    """The kernel's ``div="exact"`` steps (quantize_sm90.quantize_fp8_kernel) in numpy, with its intrinsics' models."""
    from types import SimpleNamespace

    from tirxpy_kernels.quantize_sm90 import _mant_model, _neg_inv_exp_model

    ctx = SimpleNamespace(arg=lambda name: s)
    m, npow = _mant_model(ctx), _neg_inv_exp_model(ctx)
    nrcp = np.float32(-1.0) / m
    nx = x * npow
    q = nx * nrcp
    for _ in range(2):
        q = _fma32(_fma32(m, q, nx), nrcp, q)
    return q


@pytest.mark.parametrize("call,msg", [
    (lambda x: reference(x, "bogus"), "reference: granularity must be one of"),
    (lambda x: reference(x, None), "reference: granularity must be one of"),
    (lambda x: reference("x", "token"), "reference: x must be a torch.Tensor, got str"),
    (lambda x: reference(None, "token"), "reference: x must be a torch.Tensor, got NoneType"),
    (lambda x: reference(x[0], "token"), "reference: x must be 2-D (M, K)"),
    (lambda x: reference(x[:0], "1x128"), "reference: x must be a non-empty floating-point"),
    (lambda x: reference(x.int(), "token"), "reference: x must be a non-empty floating-point"),
    (lambda x: reference(x.to_sparse(), "token"), "reference: x is a sparse tensor"),
    (lambda x: reference(x, "token", dtype=torch.int8), "reference: dtype must be torch.float8_e4m3fn"),
    (lambda x: reference(x, "token", dtype="e4m3"), "reference: dtype must be torch.float8_e4m3fn"),
    (lambda x: reference(x, "token", pow2_scales="yes"), "reference: pow2_scales must be True or False"),
    (lambda x: reference(x, "token", rcp=None), "reference: rcp must be True or False"),
    (lambda x: group_scales(x, "1X128"), "group_scales: granularity must be one of"),
    (lambda x: expand_scales(torch.ones(4, 1), "row", 4, 8), "expand_scales: granularity must be one of"),
    (lambda x: expand_scales("x", "token", 4, 8), "expand_scales: s must be the (4, 1) scales of a 'token' "
                                                  "quantization of an (4, 8) input, got str"),
    (lambda x: expand_scales(torch.ones(4, 1), "1x128", 4, 300), "expand_scales: s must be the (4, 3) scales"),
    (lambda x: expand_scales(torch.ones(1, 1), "128x128", 129, 8), "expand_scales: s must be the (2, 1) scales"),
    (lambda x: expand_scales(torch.ones(4, 1), "token", "4", 8), "expand_scales: M must be a positive int"),
    (lambda x: expand_scales(torch.ones(4, 1), "token", 4, -8), "expand_scales: K must be a positive int"),
])
def test_the_torch_rule_functions_name_bad_arguments(call, msg):
    """reference() (which quantize_fp8's device error recommends), group_scales and expand_scales name a bad argument
    (a bad granularity was a KeyError, a non-tensor x an AttributeError, a bad dtype a KeyError)."""
    with pytest.raises(QuantizeArgumentError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        call(torch.ones(4, 8, dtype=torch.bfloat16))


def test_exact_division_steps_round_like_division():
    """x' = x 2^-e, q = x' RN(1/m) refined twice by the exact remainder m q - x' gives RN(x / s) bit for bit:
    scales from the floor 2^-126 to 2^118, powers of two among them, |x| up to 448 s (bf16), signed zeros."""
    rng = np.random.default_rng(7)
    n = 1 << 18
    e = rng.integers(-126, 119, n).astype(np.float64)
    s = np.maximum((rng.uniform(1, 2, n) * np.exp2(e)).astype(np.float32), np.float32(2.0 ** -126))
    s[:n // 8] = np.exp2(e[:n // 8]).astype(np.float32)
    x = (np.exp2(rng.uniform(-40, np.log2(448.0), n)) * s * rng.choice([-1.0, 1.0], n)).astype(np.float32)
    x = torch.from_numpy(x).bfloat16().float().numpy()
    x[:64], x[64:128] = 0.0, -0.0
    with np.errstate(under="ignore"):
        ref, got = x / s, _exact_quotient(x, s)
    diff = np.nonzero(ref.view(np.uint32) != got.view(np.uint32))[0]
    assert len(diff) == 0, f"{len(diff)} quotients differ, first x = {x[diff[:3]]}, s = {s[diff[:3]]}"


# ---------------------------------------------------------------- the kernel in the simulator
SIM_CASES = [  # (granularity, M, K, dtype, pow2, div): ragged M and K, every option
    ("1x128", 40, 200, E4M3, False, "exact"),
    ("1x128", 33, 136, E5M2, True, "exact"),
    ("1x128", 32, 301, E4M3, False, "rcp"),       # K odd: element-wise loads and stores
    ("1x128", 32, 128, E4M3, False, "ieee"),
    ("1x128", 40, 256, E4M3, True, dict(vecs=2)),        # 8 lanes to a row
    ("1x128", 64, 136, E4M3, False, dict(lanes=16)),     # 16 lanes to a row, 4 rows a thread
    ("token", 3, 300, E4M3, False, "exact"),
    ("token", 2, 1100, E4M3, True, "rcp"),
    ("128x128", 130, 200, E4M3, False, "exact"),
    ("128x128", 128, 136, E5M2, True, "exact"),
    ("128x128", 256, 128, E4M3, False, "ieee"),
]


@pytest.mark.parametrize("granularity,M,K,dtype,pow2,div", SIM_CASES)
def test_simulated_kernel_is_bit_exact(granularity, M, K, dtype, pow2, div):
    from tirxpy.sim import run

    x = inputs(M, K, seed=M + K)
    q = torch.full((M, K), float("nan")).to(dtype)
    s = torch.full(scales_storage(granularity, M, K), float("nan"))
    kw = div if isinstance(div, dict) else dict(div=div)        # a dict: tile options, exact division
    res = run(quantize_fp8_kernel(granularity, M, K, out_dtype=NAME[dtype], pow2=pow2, **kw), x, q, s)
    assert not res.problems
    check_against_reference(x, q, scales_view(s, granularity), granularity, dtype, pow2, div == "rcp")


@pytest.mark.parametrize("vecs", [2, 8])
def test_simulated_block_tiles(vecs):
    """"128x128" with 1024 and 256 threads (the default is 512)."""
    from tirxpy.sim import run

    x = inputs(130, 136, seed=vecs)
    q = torch.full((130, 136), float("nan")).to(E4M3)
    s = torch.full(scales_storage("128x128", 130, 136), float("nan"))
    run(quantize_fp8_kernel("128x128", 130, 136, vecs=vecs), x, q, s)
    check_against_reference(x, q, s, "128x128")


def test_simulated_float16_input():
    from tirxpy.sim import run

    x = inputs(32, 128, seed=9, dtype=torch.float16)
    q = torch.full((32, 128), float("nan")).to(E4M3)
    s = torch.full((1, 32), float("nan"))           # "1x128" scales are written group-major
    run(quantize_fp8_kernel("1x128", 32, 128, in_dtype="float16"), x, q, s)
    check_against_reference(x, q, s.t(), "1x128")


def test_1x128_scales_are_a_group_major_view():
    """``"1x128"`` scales come as the ``(M, KB)`` view of a ``(KB, M)`` tensor written group-major, which the FP8
    GEMM's block scaling reads as it is."""
    assert scales_storage("1x128", 64, 300) == (3, 64) and scales_storage("token", 64, 300) == (64, 1)
    st = torch.arange(6.0).reshape(3, 2)
    v = scales_view(st, "1x128")
    assert v.shape == (2, 3) and v.stride() == (1, 2) and v[1, 2] == st[2, 1]
    assert scales_view(st, "128x128") is st


def test_bench_sim_runs_every_granularity(capsys):
    assert bench_main(["quantize", "--sim", "--seed", "2", "--shapes", "40x136"]) == 0
    out = capsys.readouterr().out
    assert out.count("bit-exact vs reference: True") == 3 and "seed 2" in out


@pytest.mark.parametrize("argv,msg", [
    (["quantize", "--granularity", "1x64"], "--granularity: '1x64' is not one of token, 1x128, 128x128"),
    (["quantize", "--tune", "vecs=0"], "vecs = 0 is out of range"),
    (["quantize", "--tune", "div=fast"], "div must be one of ('exact', 'ieee', 'rcp')"),
    (["quantize", "--shapes", "64x70000", "--granularity", "token"], "past 32768"),
    (["quantize", "--sim", "--tune", "vecs=2"], "--tune does not apply"),
])
def test_bench_bad_arguments_exit_2(argv, msg, capsys):
    assert bench_main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and "Traceback" not in err


# ---------------------------------------------------------------- builds
@pytest.mark.parametrize("granularity,M,K,kw", [("1x128", 8192, 7168, {}), ("1x128", 4096, 7168, dict(div="rcp")),
                                                ("128x128", 8192, 7168, dict(pow2=True)),
                                                ("token", 8192, 7168, {}), ("token", 64, MAX_TOKEN_K, {})])
def test_compiles_without_spills(granularity, M, K, kw):
    ck = compile_ok(quantize_fp8_kernel(granularity, M, K, **kw), "sm_90a")
    assert ck.resources.registers <= (128 if granularity != "1x128" else 64)


# ---------------------------------------------------------------- API errors (before the device)
def _bad(call, msg):
    with pytest.raises(QuantizeArgumentError, match=msg) as e:
        call()
    assert isinstance(e.value, ArgumentError) and isinstance(e.value, ValueError)


def test_api_typed_errors_name_the_fix():
    x = torch.zeros(64, 256, dtype=torch.bfloat16)
    _bad(lambda: quantize_fp8(x.float(), "token"), r"dtype torch.float32; pass a bfloat16 or float16 tensor")
    _bad(lambda: quantize_fp8(x[0], "token"), r"2-D \(M, K\) tensor, got shape \(256,\); reshape it")
    _bad(lambda: quantize_fp8(x[:0], "token"), "non-empty")
    _bad(lambda: quantize_fp8(x, "1x64"), r"granularity must be one of \('token', '1x128', '128x128'\)")
    _bad(lambda: quantize_fp8(x, "token", dtype=torch.int8), "dtype must be torch.float8_e4m3fn or torch.float8_e5m2")
    _bad(lambda: quantize_fp8(x, "token", pow2_scales=1), "pow2_scales must be True or False")
    _bad(lambda: quantize_fp8(x.t(), "token"), r"must be row-major contiguous; pass x.contiguous\(\)")
    _bad(lambda: quantize_fp8(x, "token"), r"x is on cpu; the kernel runs on a CUDA GPU \(x.cuda\(\)\)")
    _bad(lambda: quantize_fp8([[1.0]], "token"), "x must be a torch.Tensor, got list")
    _bad(lambda: quantize_fp8(torch.zeros(4, 40000, dtype=torch.bfloat16), "token"), "past 32768; use '1x128'")


def _odd(M, K, dev="cpu", dtype=torch.bfloat16):
    """A contiguous ``(M, K)`` tensor whose data starts 2 bytes past a 16-byte boundary."""
    t = torch.zeros(M * K + 8, dtype=dtype, device=dev)[1:1 + M * K].view(M, K)
    assert t.data_ptr() % 16 == 2
    return t


def test_a_misaligned_x_gets_past_the_checks():
    """``x`` at an odd offset is quantized from an aligned copy, so the checks take it: the call fails only at the
    device, as the same call with an aligned ``x`` does; its cache key is an aligned ``x``'s (the entry is the
    compiled kernel, which every launch hands an aligned ``x``)."""
    from tirxpy_kernels.quantize_api import _key

    odd = _odd(64, 256)
    for gran in ("token", "1x128", "128x128"):
        _bad(lambda: quantize_fp8(odd, gran), r"^quantize_fp8: x is on cpu; the kernel runs on a CUDA GPU")
    x = torch.zeros(64, 256, dtype=torch.bfloat16)
    assert _key(odd, "token", E4M3, False) == _key(x, "token", E4M3, False)


@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
def test_the_kernel_never_gets_a_misaligned_x(monkeypatch, granularity):
    """A call that finds its kernel in the cache (no checks) hands it ``x`` itself where ``x`` starts on a 16-byte
    boundary and an aligned copy of its values where it does not, on every call."""
    import tirxpy_kernels.quantize_api as api
    from tirxpy_kernels.launch_cache import LaunchCache

    launched = []
    monkeypatch.setattr(api, "_CACHE", LaunchCache("test"))
    M, K = padded_shape(granularity, 64, 256)
    x = inputs(M, K)
    api._CACHE.put(api._key(x, granularity, E4M3, False), (lambda *args: launched.append(args), M, K))
    odd = _odd(M, K).copy_(x)
    for t in (x, odd, odd):
        del launched[:]
        q, s = quantize_fp8(t, granularity)
        ((X, Q, S),) = launched
        assert (X is t) == (t is x) and X.data_ptr() % 16 == 0 and torch.equal(X, t)
        assert Q.shape == q.shape == (M, K) and Q.data_ptr() % 16 == 0 and S.data_ptr() % 16 == 0


def test_api_refuses_other_tensor_kinds_and_unlaunchable_sizes_before_the_device():
    """A nested or sparse ``x`` is named as such (not an internal torch error); a row count past the grid's y
    dimension (65535 row tiles) or an input past 2**31 elements once padded to a tile is refused before the
    device check and before any padded copy is made."""
    x = torch.zeros(4, 256, dtype=torch.bfloat16)
    _bad(lambda: quantize_fp8(torch.nested.nested_tensor([x, x]), "1x128"), r"x is a nested tensor; pass a dense")
    _bad(lambda: quantize_fp8(x.to_sparse(), "1x128"), r"x is a sparse tensor .*x.to_dense\(\)")
    meta = dict(dtype=torch.bfloat16, device="meta")
    _bad(lambda: quantize_fp8(torch.empty(2 ** 22, 128, **meta), "1x128"), r"M = 4194304 rows .*\(split the rows")
    _bad(lambda: quantize_fp8(torch.empty(9 * 2 ** 20, 128, **meta), "128x128"), r"65535 .*\(split the rows")
    _bad(lambda: quantize_fp8(torch.empty(1, 2 ** 27, **meta), "1x128"), r"x padded to one tile, 32 x 134217728")
    _bad(lambda: quantize_fp8(torch.empty(2 ** 20, 2 ** 12, **meta), "token"), r"4294967296 elements")


def test_factory_checks_lanes_and_the_row_tiles():
    with pytest.raises(KernelConfigError, match=r"lanes must be an int, got 8.0"):
        quantize_fp8_kernel("1x128", 64, 256, lanes=8.0)
    with pytest.raises(KernelConfigError, match=r"past the 65535 a grid's y dimension holds"):
        quantize_fp8_kernel("1x128", 2 ** 22, 128)
    quantize_fp8_kernel("1x128", np.int64(64), np.int64(256), lanes=np.int64(8))


def test_the_launch_cache_key_tells_option_types_apart(monkeypatch):
    """``pow2_scales=1`` equals ``True`` in Python but is refused: a call with it must not find the entry a call
    with ``True`` left (the key carries each option's type)."""
    import tirxpy_kernels.quantize_api as api

    keys = []

    class Recorder:
        def get(self, key):
            keys.append(key)

    monkeypatch.setattr(api, "_CACHE", Recorder())
    x = torch.zeros(64, 256, dtype=torch.bfloat16)
    for flag in (True, 1):
        with pytest.raises(QuantizeArgumentError):
            quantize_fp8(x, "token", pow2_scales=flag)
    assert len(keys) == 2 and keys[0] != keys[1]


# ---------------------------------------------------------------- GPU (or --sim)
@pytest.mark.gpu
@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
@pytest.mark.parametrize("M,K", [(1, 64), (7, 200), (130, 300), (333, 1000), (1000, 7168), (4096, 7168), (129, 20000)])
def test_gpu_kernel_matches_reference(granularity, M, K, sim_mode):
    skip_large(sim_mode, M * K, 1 << 15)
    dev = device(sim_mode)
    x = inputs(M, K, dev, seed=int(torch.seed() % 2 ** 31))
    Mp, Kp = padded_shape(granularity, M, K)
    if (Mp, Kp) != (M, K):
        xp = torch.zeros(Mp, Kp, dtype=x.dtype, device=dev)
        xp[:M, :K] = x
        x, M, K = xp, Mp, Kp
    for dtype, pow2, div in ((E4M3, False, "exact"), (E5M2, True, "exact"), (E4M3, False, "rcp")):
        q = torch.full((M, K), float("nan"), device=dev).to(dtype)             # poisoned: every element written
        s = torch.full(scales_storage(granularity, M, K), float("nan"), device=dev)
        launch(quantize_fp8_kernel(granularity, M, K, out_dtype=NAME[dtype], pow2=pow2, div=div), x, q, s,
               sim=sim_mode)
        check_against_reference(x, q, scales_view(s, granularity), granularity, dtype, pow2, div == "rcp")


@pytest.mark.gpu
@pytest.mark.parametrize("vecs", [2, 8])
def test_gpu_block_tiles(vecs, sim_mode):
    """"128x128" with 1024 and 256 threads, every option."""
    dev = device(sim_mode)
    for M, K in ((130, 200),) if sim_mode else ((130, 300), (1000, 7168)):
        x = inputs(M, K, dev, seed=int(torch.seed() % 2 ** 31))
        for dtype, pow2, div in ((E4M3, False, "exact"), (E5M2, True, "exact"), (E4M3, False, "rcp")):
            q = torch.full((M, K), float("nan"), device=dev).to(dtype)
            s = torch.full(scales_storage("128x128", M, K), float("nan"), device=dev)
            launch(quantize_fp8_kernel("128x128", M, K, out_dtype=NAME[dtype], pow2=pow2, div=div, vecs=vecs), x, q, s,
                   sim=sim_mode)
            check_against_reference(x, q, s, "128x128", dtype, pow2, div == "rcp")


@pytest.mark.gpu
@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
def test_gpu_api_quantizes_a_misaligned_x(granularity):
    """``x`` a view 2 bytes past a 16-byte boundary (the kernel's vector loads need one): quantized from an aligned
    copy, bit-exact against the reference and equal to the aligned ``x``'s result, on the first call and from the
    launch cache; ragged shapes take the zero-padded path."""
    for M, K, dt in ((64, 256, torch.bfloat16), (5, 136, torch.float16), (300, 4100, torch.bfloat16)):
        x = inputs(M, K, "cuda", seed=M, dtype=dt)
        odd = _odd(M, K, "cuda", dt).copy_(x)
        want = quantize_fp8(x, granularity)
        for _ in range(2):                                  # the second call takes the launch cache
            q, s = quantize_fp8(odd, granularity)
            assert q.shape == (M, K) and s.shape == scales_shape(granularity, M, K)
            check_against_reference(odd, q, s, granularity)
            assert torch.equal(q.view(torch.uint8), want[0].view(torch.uint8)) and torch.equal(s, want[1])
        assert torch.equal(odd, x)                          # read, not written


@pytest.mark.gpu
@pytest.mark.parametrize("granularity", ["token", "1x128", "128x128"])
def test_gpu_api(granularity):
    for M, K, dt in ((1, 64, torch.bfloat16), (5, 136, torch.float16), (300, 4100, torch.bfloat16),
                     (2048, 7168, torch.bfloat16)):
        x = inputs(M, K, "cuda", seed=M, dtype=dt)
        for _ in range(2):                                  # the second call takes the launch cache
            q, s = quantize_fp8(x, granularity)
            assert q.shape == (M, K) and q.dtype == E4M3 and s.shape == scales_shape(granularity, M, K)
            check_against_reference(x, q, s, granularity)
        q, s = quantize_fp8(x, granularity, dtype=E5M2, pow2_scales=True)
        check_against_reference(x, q, s, granularity, E5M2, True)
