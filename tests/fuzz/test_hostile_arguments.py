"""Fuzz: the public entry points with a hostile value in one argument, every other argument good.

Two kinds of value, each in every argument position of each call:

- the harness's :class:`~harness.Hostile` (every method raises): no argument takes it, so each call refuses it with
  the library's typed error, judging it by its type before anything formats, compares, hashes or iterates it;
- an ``int`` or ``str`` subclass whose ``str`` / ``repr`` / ``format`` raise (a value of a type an argument takes,
  in range or not): each call takes it or refuses it, and a refusal shows it without running its own formatting.

The entry points: the layout library, targets, ``tirxpy.jit``, ``tirxpy.compile``, ``tirxpy.sim`` (``run`` and the
model registry), ``tirxpy.viz``, ``tirxpy.testing``, and the kernel library's plans and ``check_*`` functions (the
arguments a caller gives them: not the names and bounds the library passes its own checks)."""
import numpy as np
import pytest
import torch
from harness import Hostile, UnprintableInt, UnprintableStr, accept, refuse
from test_sim import axpy       # the simulator fuzz's kernel: X, Y, a float32 a and an int32 n

import tirxpy
import tirxpy.layout as L
import tirxpy.sim as SIM
import tirxpy.target as TG
import tirxpy.testing as TT
import tirxpy.viz as V
from tirxpy import T
from tirxpy.layout import Iter, S, TileLayout, laneid

AREA = "public entry points, hostile arguments"




L8 = TileLayout(S[(8, 16):(16, 1)])
LANES = TileLayout(S[(8, 4):(4 @ laneid, 1 @ laneid)])
SW = L.ComposeLayout(0, 2, 3, TileLayout(S[(8, 8):(8, 1)]))


def _cases(tmp):
    """(name, function, positional arguments, keyword arguments): good calls, one argument of which is replaced."""
    import tirxpy_kernels.attention_api as attention_api
    import tirxpy_kernels.attention_bwd_plan as attention_bwd_plan
    import tirxpy_kernels.attention_plan as attention_plan
    import tirxpy_kernels.attention_varlen_api as attention_varlen_api
    import tirxpy_kernels.gemm_api as gemm_api
    import tirxpy_kernels.gemm_fp8_plan as gemm_fp8_plan
    import tirxpy_kernels.gemm_plan as gemm_plan
    import tirxpy_kernels.gemm_sm100_plan as gemm_sm100_plan
    import tirxpy_kernels.quantize_sm90 as quantize_sm90
    import tirxpy_kernels.rmsnorm_silu as rmsnorm_silu
    from tirxpy_kernels import errors as kernel_errors

    q = torch.zeros(1, 128, 4, 64, dtype=torch.bfloat16)
    cases = [
        # layouts
        ("Iter", Iter, (4, 1, "m"), {}),
        ("TileLayout", TileLayout, (), {"shard": [Iter(4, 1)], "replica": (), "offset": {"m": 1}}),
        ("TileLayout.from_iters", TileLayout.from_iters, ([Iter(4, 1)], [], {"m": 0}), {}),
        ("S[extent : stride]", lambda e, s: S[e : s], (4, 1), {}),
        ("SwizzleLayout", L.SwizzleLayout, (0, 1, 1), {"axis": "m"}),
        ("ComposeLayout", L.ComposeLayout, (0, 2, 3, L8), {"swizzle_inner": True}),
        ("Axis.register", L.Axis.register, ("zz_fuzz_axis", "thread", ("warp", "thread"), 32), {}),
        ("swizzle_for", L.swizzle_for, (128, "bf16"), {}),
        ("swizzle_128B", L.swizzle_128B, ("bf16",), {}),
        ("dtype_bits", L.dtype_bits, ("bf16",), {}),
        ("hardware_swizzle_bytes", L.hardware_swizzle_bytes, (L.swizzle_128B("bf16"), "bf16"), {}),
        ("wgmma_a_fragment", L.wgmma_a_fragment, ("f16",), {}),
        ("mma_m16n8k16_a", L.mma_m16n8k16_a, ("f16",), {}),
        ("canonicalize", L.canonicalize, (L8,), {}),
        ("equivalent", L.equivalent, (L8, L8), {}),
        ("direct_sum", L.direct_sum, (L8, L8), {}),
        ("group", L.group, (L8, (8, 16)), {}),
        ("permute_dims", L.permute_dims, (L8, (8, 16), (1, 0)), {}),
        ("slice_layout", L.slice_layout, (L8, ((0, 2), (0, 2)), (8, 16)), {}),
        ("split_iter", L.split_iter, (Iter(8, 1), 2), {}),
        ("tile_product", L.tile_product, (L8, L8, (8, 16), (2, 2)), {}),
        ("compose", L.compose, (L8, TileLayout(S[4 : 1])), {}),
        ("pack", L.pack, (L8, 2), {}),
        ("unpack", L.unpack, (L8, 2), {}),
        ("bitxor", L.bitxor, (1, 2), {}),
        ("ldmatrix_layout", L.ldmatrix_layout, (4,), {"trans": False, "grid": (2, 2)}),
        ("mma_smem_layout", L.mma_smem_layout, (64, 64, "bf16"), {"major": "K", "swizzle": 128}),
        ("wgmma_smem_layout", L.wgmma_smem_layout, (64, 64, "bf16"), {"major": "K", "swizzle": 128}),
        ("smem_descriptor_strides", L.smem_descriptor_strides, (L.mma_smem_layout(64, 64, "bf16"), "bf16"),
         {"major": "K", "shape": (64, 64)}),
        ("tmem_accumulator", L.tmem_accumulator, (128, 64), {"lane_base": 0, "col": 0}),
        ("tmem_accumulator 64", L.tmem_accumulator, (64, 64), {"lane_base": 16, "col": 0}),
        ("tmem_ld_layout", L.tmem_ld_layout, ("32x32b",), {"num": 1}),
        ("tmem_ld_tmem_layout", L.tmem_ld_tmem_layout, ("16x128b",), {"num": 1, "lane_base": 16, "col": 0}),
        ("tmem_warpx4_layout", L.tmem_warpx4_layout, (4,), {"col": 0}),
        ("wgmma_accumulator", L.wgmma_accumulator, (64,), {}),
        ("table", L.table, (L8,), {"shape": (8, 16), "show": ["m"]}),
        ("sharded", L.sharded, ((8, 8), 2), {"dim": 0}),
        ("peer_of", L.peer_of, (L.sharded((8, 8), 2), ((0, 4), (0, 8)), (8, 8)), {"me": 0, "world": 2}),
        ("L.apply", L8.apply, (0, 1), {"shape": (8, 16)}),
        ("L.owners", L8.owners, (1,), {}),
        ("L.elements_at", L8.elements_at, (), {"m": 1, "shape": (8, 16)}),
        ("L.span", L8.span, ("m",), {}),
        ("L.slice", L8.slice, (((0, 2), (0, 2)), (8, 16)), {}),
        ("L.tile", L8.tile, (L8, (8, 16), (2, 2)), {}),
        ("L.dense_box_mismatch", L8.dense_box_mismatch, ((8, 16),), {}),
        ("ComposeLayout.apply", SW.apply, (1,), {}),
        # targets, jit, compile
        ("as_target", TG.as_target, ("sm_90a",), {}),
        ("for_capability", TG.for_capability, ((9, 0),), {}),
        ("Target", TG.Target, (90, "a"), {}),
        ("Target.runs_on", TG.as_target("sm_90a").runs_on, ((9, 0),), {}),
        ("jit", tirxpy.jit, (lambda n: 0,), {}),
        ("jit factory", tirxpy.jit(lambda n, d="x": n), (3,), {"d": "y"}),
        ("compile", tirxpy.compile, (axpy, "sm_90a"), {"options": ["-lineinfo"]}),
        ("T.Tensor", T.Tensor, ((4, 8), "float32"), {"scope": "global", "layout": None}),
        ("T.float32", T.float32, (1.0,), {}),
        ("T.parse_script", T.parse_script, ("x",), {"env": None, "verify": True}),
        # simulator
        ("sim.run", SIM.run, (axpy, np.zeros(64, np.float32), np.zeros(64, np.float32), 1.0, 64),
         {"arch": None, "seed": 0, "check": True, "max_steps": 400000, "ctas": [0]}),
        ("sim.has_model", SIM.has_model, ("mbarrier_init",), {}),
        # pictures
        ("encode_png", V.encode_png, (np.zeros((2, 2, 3), np.uint8),), {}),
        ("decode_png", V.decode_png, (V.encode_png(np.zeros((2, 2, 3), np.uint8)),), {}),
        ("owner_color", V.owner_color, ({"laneid": 1},), {}),
        ("render_svg", V.render_svg, (LANES,), {"shape": (8, 4), "show": ["laneid"]}),
        ("plot", V.plot, (LANES, str(tmp / "layout.svg")), {"shape": (8, 4), "show": ["laneid"]}),
        # testing
        ("kernel_args", TT.kernel_args, (axpy,), {"values": None, "scalars": {"n": 4}}),
        ("shapes", TT.shapes, (8,), {"max_rank": 3, "rank": None}),
        ("regions", TT.regions, ((2, 2),), {}),
        ("owner_set", TT.owner_set, ([{"m": 1}],), {}),
        ("memory_layouts", TT.memory_layouts, (), {"max_shard": 4, "max_size": 256}),
        # the kernel library's plans and checks
        ("int_option", kernel_errors.int_option, ("w", "N", 4), {"lo": 1, "hi": 8}),
        ("flag_option", kernel_errors.flag_option, ("w", "F", True), {}),
        ("gemm_plan.plan", gemm_plan.plan, (256, 256, 256), {"BN": 128, "STAGES": 4, "sms": 132, "group": 8}),
        ("gemm_plan.check_options", gemm_plan.check_options, (), {"BN": 128, "STAGES": None, "CM": 1, "group": 8,
                                                                 "PINGPONG": False, "SPLIT": None, "sms": 132}),
        ("gemm_plan.check_config", gemm_plan.check_config, (256, 256, 256), {"BN": 128, "dtype": "bfloat16",
                                                                            "activation": None, "bias": False}),
        ("gemm_fp8_plan.check_pass", gemm_fp8_plan.check_pass, ("block", 128, 128, 4), {"PASS": None}),
        ("gemm_fp8_plan.check_scaling", gemm_fp8_plan.check_scaling, ("float8_e4m3", "block"),
         {"a_major": "K", "b_major": "K", "BN": 256, "CM": 1, "PINGPONG": False, "SPLIT": None, "PART": None}),
        ("gemm_fp8_plan.block_part", gemm_fp8_plan.block_part, (256,), {"PART": 64}),
        ("attention_plan.plan", attention_plan.plan, (1, 2, 2, 256, 256, 64), {"dtype": "bfloat16", "causal": False}),
        ("attention_plan.check_options", attention_plan.check_options, (), {"BN": 64, "STAGES": 2, "NC": 1}),
        ("attention_plan.check_scale", attention_plan.check_scale, ("w", 0.5), {}),
        ("attention_bwd_plan.plan", attention_bwd_plan.plan, (1, 2, 2, 256, 256, 64), {"causal": False}),
        ("gemm_sm100_plan.plan", gemm_sm100_plan.plan, (256, 256, 128), {"BN": 64, "STAGES": 2, "ctas": 2}),
        ("quantize_sm90.check_config", quantize_sm90.check_config, ("1x128", 128, 256), {"pow2": False}),
        ("rmsnorm_silu.check_eps", rmsnorm_silu.check_eps, (1e-6,), {}),
        ("gemm_api.check_dtype", gemm_api.check_dtype, ("gemm", "a", q), {}),
        ("gemm_api.check_tuning", gemm_api.check_tuning, ({"BN": 128},), {}),
        ("attention_api.check_dtype", attention_api.check_dtype, ("attention", "q", q), {}),
        ("attention_api.check_tuning", attention_api.check_tuning, ({"BN": 64},), {}),
        ("attention_varlen_api.check_lengths", attention_varlen_api.check_lengths, ([0, 100, 300], [0, 100, 300], 300,
                                                                                   300, 200, 200), {}),
    ]
    return cases


# arguments the library passes itself (names and bounds of its own checks), not a caller's
_OWN = {("int_option", 0), ("int_option", 1), ("int_option", "lo"), ("int_option", "hi"), ("flag_option", 0),
        ("flag_option", 1), ("attention_plan.check_scale", 0), ("gemm_api.check_dtype", 0),
        ("gemm_api.check_dtype", 1), ("attention_api.check_dtype", 0), ("attention_api.check_dtype", 1),
        ("attention_varlen_api.check_lengths", 2), ("attention_varlen_api.check_lengths", 3)}
# a Hostile that a call may take: an argument the rest of the call leaves unused
_UNUSED = {("gemm_fp8_plan.check_pass", 0)}        # (a scaling other than 'block' takes no PASS: None is the answer)
_NAMES = [c[0] for c in _cases(__import__("pathlib").Path("/tmp"))]
_REGISTERS = {"Axis.register"}      # a value it takes is registered for the rest of the process: Hostile only


def _calls(case, make):
    """``(slot, call)`` for each argument of ``case`` replaced by ``make()``."""
    name, fn, args, kw = case
    for slot in [i for i in range(len(args))] + list(kw):
        if (name, slot) in _OWN:
            continue
        a, k = list(args), dict(kw)
        if isinstance(slot, int):
            a[slot] = make()
        else:
            k[slot] = make()
        yield slot, (lambda a=a, k=k: fn(*a, **k))


@pytest.mark.parametrize("name", _NAMES)
def test_a_hostile_argument_is_refused_by_type(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # (a taken value can name a file: plot's path as a str subclass)
    case = next(c for c in _cases(tmp_path) if c[0] == name)
    for slot, call in _calls(case, Hostile):
        allow = (lambda v: True) if (name, slot) in _UNUSED else None
        refuse(AREA, call, allow=allow, seconds=20)


@pytest.mark.parametrize("name", [n for n in _NAMES if n not in _REGISTERS])
def test_an_int_or_str_whose_formatting_raises_is_taken_or_refused(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # (plot's path "nosuch" as a str subclass is taken: it writes nosuch.png / .svg)
    case = next(c for c in _cases(tmp_path) if c[0] == name)
    for make in (lambda: UnprintableInt(-7), lambda: UnprintableInt(3), lambda: UnprintableInt(10 ** 12),
                 lambda: UnprintableStr("nosuch")):
        for slot, call in _calls(case, make):
            refuse(AREA, call, allow=lambda v: True, seconds=20)


def test_an_int_too_long_to_print_is_refused_by_type():
    """An int of 5000 digits, past the 4300 that ``str()`` converts, as a tensor extent, a kernel option, a layout
    extent or coordinate: the refusal shows its size (formatting it would raise Python's own ``ValueError`` in place
    of the typed error)."""
    import tirxpy_kernels.rmsnorm_silu as RS
    from tirxpy_kernels.attention_bwd_plan import plan
    from tirxpy_kernels.attention_bwd_sm90 import attention_bwd_sm90

    huge = 10 ** 5000
    lay = L.TileLayout(L.S[(4, 8) : (1 @ L.m, 1 @ L.laneid)])
    for call, named in ((lambda: T.Tensor((huge,), "float32"), "int of about 5000 digits"),
                        (lambda: T.Tensor((2, -huge), "float32"), "int of about 5000 digits"),
                        (lambda: attention_bwd_sm90(1, 2, 2, 256, 256, 64, sms=huge), "sms = <int of about"),
                        (lambda: plan(1, 2, 2, 256, 256, 64, TAIL=-huge), "TAIL = <int of about"),
                        (lambda: lay.apply(huge), "coordinate <int of about 5000 digits>"),
                        (lambda: L.TileLayout(L.S[(huge, 8) : (1 @ L.m, 1 @ L.laneid)]), "int of about 5000"),
                        (lambda: L.TileLayout(L.S[(4, 8) : (-huge @ L.m, 1 @ L.laneid)]), "int of about 5000"),
                        # past every float's range: refused where it would become a float
                        (lambda: T.float32(huge), "past the range of float32"),
                        (lambda: SIM.run(axpy, np.zeros(64, np.float32), np.zeros(64, np.float32), -huge, 3),
                         "overflows float32"),
                        (lambda: RS.check_eps(huge), "eps must be a finite float")):
        refuse(AREA, call, names=[named])


def test_the_model_registry_refuses_a_hostile_name_or_model():
    """(Apart from the table above: a call these take registers its model for the rest of the process.)"""
    for call in (lambda: SIM.register_model(Hostile(), lambda ctx: None),
                 lambda: SIM.register_model("zz_fuzz_hostile_model", Hostile()),
                 lambda: SIM.register_model(UnprintableInt(3), lambda ctx: None),
                 lambda: SIM.register_family(Hostile(), lambda ctx: None),
                 lambda: SIM.register_family("zz_fuzz_hostile_.*", Hostile())):
        refuse(AREA, call, names=["register_"])


def test_a_value_of_a_taken_type_is_shown_as_the_plain_value_it_holds():
    """Refusals past the type check (out of range, inconsistent) format the plain int / str, not the subclass."""
    refuse(AREA, lambda: TG.as_target(UnprintableStr("sm_70")), names=["older than sm_80"])
    refuse(AREA, lambda: L.ldmatrix_layout(4, grid=(UnprintableInt(2), UnprintableInt(3))), names=["grid (2, 3)"])
    refuse(AREA, lambda: L.ldmatrix_layout(4, grid=(Hostile(), 2)), names=["ldmatrix grid"])
    refuse(AREA, lambda: L.ldmatrix_layout(4, grid=(UnprintableInt(0), 4)), names=["ldmatrix grid"])
    refuse(AREA, lambda: T.float32(UnprintableStr("x")), names=["T.float32"])
    refuse(AREA, lambda: T.Tensor((4,), "float32", scope=UnprintableStr("nosuch")), names=["storage scope"])


def test_an_intrinsic_named_by_a_str_subclass_is_registered_under_the_plain_str():
    from tirxpy.intrinsics import register_intrinsic

    accept(AREA, lambda: register_intrinsic(UnprintableStr("fz_unprintable_name"), UnprintableStr("popc.b32 {r}, {x};"),
                                            [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")], ret="r",
                                            replace=True),
           lambda e: type(e.name) is str and type(e.template) is str and "T.ptx.fz_unprintable_name" in e.help_text())


@pytest.mark.parametrize("name", [n for n in _NAMES if n not in _REGISTERS])
def test_every_entry_point_takes_or_refuses_an_int_too_long_to_print(name, tmp_path, monkeypatch):
    """Plus and minus ``10 ** 5000`` in every argument of every entry point of the table: taken, or refused by a
    typed error (not Python's ``ValueError`` from formatting it, nor its ``OverflowError`` from making it a float)."""
    monkeypatch.chdir(tmp_path)
    case = next(c for c in _cases(tmp_path) if c[0] == name)
    for make in (lambda: 10 ** 5000, lambda: -10 ** 5000):
        for slot, call in _calls(case, make):
            refuse(AREA, call, allow=lambda v: True, seconds=20)
