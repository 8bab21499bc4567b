"""CPU tests of the Hopper GEMM: it compiles for sm_90a without register spills (NVRTC's ptxas
report), uses wgmma m64n256k16 / setmaxnreg / multicast TMA, the plan refuses bad tilings, the
tile scheduler is a bijection, and tirxpy_kernels.gemm raises typed errors for bad arguments."""
import pytest
import torch

import tirxpy_kernels
import tirxpy
from tirxpy_kernels.gemm_api import GemmArgumentError
from tirxpy_kernels.gemm_sm90 import gemm_sm90, plan
from tirxpy.lang.schedule import grouped_tile, tiles_of_unit


def test_default_kernel_compiles_without_spills_and_keeps_wgmma_loops_rolled():
    ck = tirxpy.compile(gemm_sm90(4096, 4096, 4096), arch="sm_90a")  # default: no cluster (CM=1)
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, r
    assert r.perf_warnings == (), r.perf_warnings       # e.g. ptxas serializing the wgmmas (C7515)
    assert "#pragma unroll 1" in ck.cuda_source and "tma_load_2d_multicast" not in ck.cuda_source


def test_cluster_kernel_compiles_for_sm90a_without_spills():
    ck = tirxpy.compile(gemm_sm90(4096, 4096, 4096, CM=2), arch="sm_90a")
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, r
    assert r.perf_warnings == (), r.perf_warnings
    src = ck.cuda_source
    for needle in ("wgmma_m64n256k16", "setmaxnreg_inc<232>", "setmaxnreg_dec<40>", "tma_load_2d_multicast",
                   "mbarrier_arrive_cluster", "stmatrix_x4", "tma_store_2d", "__launch_bounds__(384)"):
        assert needle in src, needle
    assert "C7508" not in ck.module.log       # setmaxnreg was not ignored


def test_plan_rejects_bad_tilings():
    assert plan(4096, 4096, 4096)["grid"] == 132
    for kw, msg in ((dict(BN=100), "BN = 100 must be a multiple of 16"), (dict(BN=320), "BN = 320"),
                    (dict(BN=48), "BN = 48"), (dict(CM=3), "CM = 3"), (dict(STAGES=1), "STAGES = 1"),
                    (dict(STAGES=6), "shared memory"), (dict(BK=32), "BK = 32")):
        with pytest.raises(ValueError, match=msg):
            plan(512, 512, 512, **kw)
    with pytest.raises(ValueError, match="16 bytes"):
        gemm_sm90(128, 128, 100)
    with pytest.raises(ValueError, match="MN-major B is loaded in 64-column boxes, so BN must be a multiple of 64"):
        gemm_sm90(256, 256, 128, BN=176, b_major="MN")
    with pytest.raises(ValueError, match="2 multicast slices of them, so BN must be a multiple of 128"):
        gemm_sm90(256, 256, 128, BN=192, CM=2, b_major="MN")
    assert gemm_sm90(256, 256, 128, BN=176, CM=2).launch.cluster == (2,)     # K-major B: 88-row slices


@pytest.mark.parametrize("BN,out_dtype,epi", [(256, "bfloat16", 64), (192, "bfloat16", 64), (176, "bfloat16", 16),
                                              (80, "bfloat16", 16), (96, "float16", 32), (96, "float32", 32),
                                              (176, "float32", 16), (112, "float32", 16)])
def test_output_chunks_divide_the_tile(BN, out_dtype, epi):
    """An output chunk is 128 bytes wide, or the widest power-of-two share of BN below that (a TMA box
    with a 32 / 64 / 128-byte swizzle)."""
    got = plan(512, 512, 512, BN=BN, out_dtype=out_dtype)["epi"]
    assert got == epi and BN % got == 0


@pytest.mark.parametrize("num_m,num_n,group", [(5, 3, 2), (16, 7, 8), (1, 9, 8), (9, 1, 4)])
def test_grouped_order_is_a_bijection(num_m, num_n, group):
    got = [grouped_tile(t, num_m, num_n, group) for t in range(num_m * num_n)]
    assert sorted(got) == [(m, n) for m in range(num_m) for n in range(num_n)]
    assert sum(tiles_of_unit(u, 4, num_m * num_n) for u in range(4)) == num_m * num_n


def _bf(*shape):
    return torch.randn(*shape).to(torch.bfloat16)


@pytest.mark.parametrize("args,kw,msg", [
    ((_bf(4, 8), "x"), {}, "b must be a torch.Tensor"),
    ((_bf(4, 8, 2), _bf(8, 4)), {}, "a must be 2-D"),
    ((torch.randn(4, 8), _bf(8, 4)), {}, "torch.bfloat16 or torch.float16"),
    ((_bf(4, 8), _bf(8, 4).half()), {}, "convert both to one dtype"),
    ((_bf(4, 8), _bf(7, 4)), {}, "shapes do not chain"),
    ((_bf(4, 8), _bf(8, 4)), dict(activation="gelu"), "activation must be one of"),
    ((_bf(4, 8), _bf(8, 4), torch.empty(4, 5)), {}, "out has shape"),
    ((_bf(4, 8), _bf(8, 4), torch.empty(4, 4, dtype=torch.int32)), {}, "out has dtype"),
    ((_bf(4, 8), _bf(8, 4), torch.empty(4, 4).t()), {}, "out must be contiguous"),
    ((_bf(4, 8), _bf(8, 4)), dict(bias=torch.randn(5)), r"bias must be a tensor of shape \(4,\)"),
    ((_bf(4, 8), _bf(8, 4)), {}, "the kernel runs on a CUDA GPU"),
])
def test_gemm_argument_errors(args, kw, msg):
    with pytest.raises(GemmArgumentError, match=msg):
        tirxpy_kernels.gemm(*args, **kw)


@pytest.mark.parametrize("kw,msg", [
    (dict(M=2 ** 31 + 128), r"M = 2147483776 is out of range; it must be in \[1, 2147483647\]"),
    (dict(N=2 ** 33), r"N = 8589934592 is out of range"), (dict(K=2 ** 31 + 64), r"K = 2147483712 is out of range"),
    (dict(group=10 ** 30), r"group = 10+ is out of range; it must be in \[1, 2147483647\]"),
    (dict(M=2 ** 31 - 1, N=2 ** 31 - 1), r"tiles of 128 x 256, past the 2147483647 .*: split the product"),
])
def test_sizes_past_the_kernels_32_bit_coordinates_are_refused(kw, msg):
    """The kernel's tile coordinates and tile index are 32-bit: a larger M, N, K, group or tile count would wrap
    them (or fail in the parser) instead of being named."""
    args = dict(M=256, N=256, K=256)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        gemm_sm90(args.pop("M"), args.pop("N"), args.pop("K"), **args)


def test_numpy_ints_are_ints():
    """Every int option takes a numpy int as the int it is (BN was refused as "not a multiple of 16", CM failed in
    the parser, PART was refused by the block scaling)."""
    import numpy as np

    i = np.int64
    assert gemm_sm90(i(256), i(256), i(256), BN=i(128), CM=i(2), STAGES=i(3), group=i(2), sms=i(8)).launch.cluster
    gemm_sm90(256, 256, 256, BN=i(128), dtype="float8_e4m3", scaling="block", PART=i(64), PASS=i(2))
    m = torch.empty(256, 512, dtype=torch.bfloat16, device="meta")
    tirxpy_kernels.gemm_api.check(m, m.t(), BN=i(128), CM=i(2))


def test_removed_knobs_are_refused():
    """STORE and STAGGER were A/B arms no default chose: each consumer stores its own rows, and the cooperative
    schedule always staggers its consumers."""
    for kw in (dict(STORE="cta"), dict(STAGGER=False)):
        with pytest.raises(ValueError, match=f"got an unexpected keyword argument '{next(iter(kw))}'"):
            gemm_sm90(256, 256, 128, BN=128, STAGES=2, **kw)


def test_the_kernel_plan_names_every_derived_size():
    """kernel_plan resolves what the kernel's parts read: chunk widths, rounds, boxes, the split's narrow width."""
    from tirxpy_kernels.gemm_plan import kernel_plan

    p = kernel_plan(4096, 2112, 7168, BN=176)
    assert (p.chunk_cols, p.chunks, p.boxes_per_round, p.rounds, p.defer) == (16, 11, 4, 3, True)
    p = kernel_plan(4096, 4096, 4096, CM=2, b_major="MN")
    assert (p.b_rows_per_cta, p.b_boxes, p.a_boxes, p.multicast_mask, p.empty_arrivals, p.cluster) == \
        (128, 2, 1, 3, 4, (2,))
    p = kernel_plan(4096, 4096, 4096, BN=192, PINGPONG=True, a_major="MN")
    assert (p.stages, p.empty_arrivals, p.a_boxes, p.defer, p.narrow_bn) == (4, 1, 2, False, 192)
    assert kernel_plan(4096, 4096, 4096, DEFER=False).neg_zero_guard
    assert not kernel_plan(4096, 4096, 4096, DEFER=False, activation="relu").neg_zero_guard


@pytest.mark.parametrize("shape,kw", [
    ((1104, 904, 704), dict(a_major="MN", b_major="MN")),      # deferred epilogue, ragged N
    ((1104, 1024, 704), dict(activation="silu")),
    # a fused bias keeps the plain epilogue; with silu, at the width tirxpy_kernels.gemm caps it to (widest_bn)
    ((1104, 1024, 704), dict(bias=True, activation="silu", BN=192)),
    # stored at once: a 16-bit output converted chunk by chunk made ptxas serialize every wgmma (C7514)
    # until the accumulator is rewritten (+ -0.0) ahead of the reads; float32 needs no such write
    ((1104, 904, 704), dict(DEFER=False)),
    ((1104, 904, 704), dict(DEFER=False, BN=192, dtype="float16", out_dtype="float16")),
    ((1104, 904, 704), dict(out_dtype="float32")),
    # the gate (ReLU's backward) next to a ping-pong tile's two accumulators: the MLP backward's product
    ((8192, 8192, 2048), dict(BN=192, PINGPONG=True, b_major="MN", gate=True)),
])
def test_epilogue_variants_compile_without_spills(shape, kw):
    """No spills and no ptxas performance remark (serialized wgmma) for each epilogue."""
    ck = tirxpy.compile(gemm_sm90(*shape, **kw), arch="sm_90a")
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, (shape, kw, r)
    assert r.perf_warnings == (), (shape, kw, r.perf_warnings)


@pytest.mark.parametrize("shape,kw,msg", [
    ((8, 4096, 1024), dict(BN=176, PINGPONG=True), "M = 8 is smaller than one tile (128)"),
    ((4096, 8, 1024), {}, "N = 8 is smaller than one tile (256)"),
    ((256, 200, 128), dict(BN=256), "N = 200 is smaller than one tile (256)"),
    ((256, 256, 32), {}, "K = 32 is smaller than one tile (64)"),
])
def test_problems_smaller_than_a_tile_are_refused(shape, kw, msg):
    """Each TMA box must fit inside its tensor: the kernel builder says which dimension to pad (it used to
    fail later, in lowering, with the box's region)."""
    with pytest.raises(ValueError, match=r"pad .* with zeros \(tirxpy_kernels.gemm does this for you\)") as e:
        gemm_sm90(*shape, **kw)
    assert msg in str(e.value)


def test_gate_is_checked():
    with pytest.raises(ValueError, match="a gate .* takes 16-bit inputs"):
        gemm_sm90(256, 256, 256, BN=128, dtype="float8_e4m3", scaling="tensor", gate=True)
    with pytest.raises(ValueError, match="deferred tile has no registers for: use DEFER=False or None"):
        gemm_sm90(256, 256, 128, BN=128, STAGES=2, DEFER=True, gate=True)
    with pytest.raises(ValueError, match="gate must be True or False"):
        gemm_sm90(256, 256, 128, BN=128, STAGES=2, gate="yes")


def test_defer_is_checked():
    with pytest.raises(ValueError, match="float32 output .* use DEFER=False"):
        gemm_sm90(256, 256, 128, BN=128, STAGES=2, out_dtype="float32", DEFER=True)
    with pytest.raises(ValueError, match="DEFER must be True or False"):
        gemm_sm90(256, 256, 128, BN=128, STAGES=2, DEFER="yes")


@pytest.mark.parametrize("shape,kw", [
    ((4096, 2112, 7168), dict(BN=176, PINGPONG=True)),                      # choose_tile's N = 2112 tile
    ((8192, 8192, 8192), dict(BN=192, PINGPONG=True)),                      # the widest ping-pong tile (4 stages)
    ((1104, 904, 704), dict(BN=192, PINGPONG=True, a_major="MN", b_major="MN")),
    ((1104, 1024, 704), dict(BN=176, PINGPONG=True, bias=True, activation="silu", out_dtype="float32")),
    ((1104, 1024, 704), dict(BN=128, PINGPONG=True, CM=2)),
])
def test_pingpong_compiles_without_spills(shape, kw):
    """Ping-pong keeps a whole (128, BN) float32 tile per consumer thread (BN registers, up to 192):
    no spills, no serialized wgmma, two m64 wgmma per k-step, the turn barriers."""
    ck = tirxpy.compile(gemm_sm90(*shape, **kw), arch="sm_90a")
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, (shape, kw, r)
    assert r.perf_warnings == (), r.perf_warnings
    src = ck.cuda_source
    assert f"wgmma_m64n{kw['BN']}k16" in src
    # the turn: tile i's k-loop waits on the other consumer's barrier, which is handed over after its k-loop
    assert "tx_barrier_sync(4 - c, 256);" in src and "tx_barrier_arrive(c + 3, 256);" in src


def test_pingpong_is_checked():
    with pytest.raises(ValueError, match=r"PINGPONG keeps a whole \(128, 256\) float32 tile .* use BN <= 192"):
        gemm_sm90(512, 512, 128, BN=256, PINGPONG=True)
    with pytest.raises(ValueError, match="with PINGPONG each consumer stores its own tile"):
        gemm_sm90(512, 512, 128, BN=128, PINGPONG=True, DEFER=True)
    with pytest.raises(ValueError, match="PINGPONG must be True or False"):
        gemm_sm90(512, 512, 128, BN=128, PINGPONG="yes")
    with pytest.raises(ValueError, match="drop='turn' removes the ping-pong turns"):
        gemm_sm90(512, 512, 128, BN=128, drop="turn")
    # each consumer's two staging buffers are one output chunk wide: 5 stages fit at BN = 176 (16 columns)
    assert plan(4096, 2112, 7168, BN=176, STAGES=5, PINGPONG=True)["smem"] <= 232448
    with pytest.raises(ValueError, match="shared memory"):
        plan(4096, 4096, 4096, BN=192, STAGES=5, PINGPONG=True)


def test_the_cooperative_schedule_staggers_its_consumers():
    """Consumer 1 waits on named barrier 5 until consumer 0 has issued its first k-block (consumer 0 arrives there,
    or at once in a CTA without tiles); ping-pong, whose turns already offset the consumers, has no such barrier."""
    def arrives(**kw):
        src = tirxpy.compile(gemm_sm90(512, 512, 256, BN=128, STAGES=2, **kw), arch="sm_90a").cuda_source
        return src.count("tx_barrier_sync(5, 256);"), src.count("tx_barrier_arrive(5, 256);")

    assert arrives() == arrives(DEFER=False) == (1, 2)
    assert arrives(PINGPONG=True) == (0, 0)


def test_choose_tile_minimizes_its_cost_model():
    """choose_tile against a brute-force evaluation of schedule_cost over every schedule and allowed width, and
    the rankings the model was fitted to (same-process A/B runs on the H100, docs/performance.md):
    ping-pong 176 (5 stages) at N = 2112, 24576 x 1536 and 7168 x 2048; cooperative 256 with a balanced split
    at 4096^3, 8192^3 (1.4-1.8% ahead of ping-pong 192), 4096 x 16384 x 8192, 1024 x 7168 x 2048,
    4096 x 7168 x 7168 (level with ping-pong 176), 16384 x 16384 x 4096 and 8192 x 8192 x 4096, and where N is a
    multiple of 256 at K = 2048 (8192 x 2048 x 2048, 4096 x 4096 x 2048, 8192 x 4096 x 2048, 4096 x 8192 x 2048:
    4.3-6.1% ahead of ping-pong, each on two or three H100s)."""
    from tirxpy_kernels.gemm_sm90 import _PP_EFFICIENCY, bn_candidates, choose_tile, schedule_cost, tile_cost

    for M, N, K, cm, bm in [(4096, 4096, 4096, 1, "K"), (8192, 8192, 8192, 1, "K"), (4096, 2112, 7168, 1, "MN"),
                            (4096, 2112, 7168, 2, "K"), (300, 904, 64, 1, "K"), (4096, 24576, 1536, 1, "K")]:
        options = [(bn, pp) for pp in (False, True) for bn in bn_candidates(cm, bm) if not pp or bn in _PP_EFFICIENCY]
        bn, pp = choose_tile(M, N, K, 132, cm, bm)
        assert (bn, pp) in options
        cost = [schedule_cost(M, N, K, b, p, 132, cm, bm) for b, p in options]
        assert schedule_cost(M, N, K, bn, pp, 132, cm, bm) == min(cost)
        assert all(c <= tile_cost(M, N, K, b, p, 132, cm) for c, (b, p) in zip(cost, options))
        gemm_sm90(M, N, K, BN=bn, PINGPONG=pp, CM=cm, b_major=bm)      # builds
        for only in (False, True):
            if any(p == only for _, p in options):
                assert choose_tile(M, N, K, 132, cm, bm, only)[1] is only
            else:
                with pytest.raises(ValueError, match="no ping-pong tile width for CM = 2"):
                    choose_tile(M, N, K, 132, cm, bm, only)
    # the cooperative widths: whole tiles at N = 2112 (12 of 176, K-major B only; 11 of 192 otherwise)
    assert choose_tile(4096, 2112, 7168, PINGPONG=False) == (176, False) and plan(4096, 2112, 64, BN=176)["tiles"] == 32 * 12
    assert choose_tile(4096, 2112, 7168, b_major="MN", PINGPONG=False) == (192, False)
    with pytest.raises(ValueError, match="MN-major B is loaded in 64-column boxes"):
        gemm_sm90(4096, 2112, 7168, BN=176, b_major="MN")
    assert choose_tile(4096, 2112, 7168, CM=2) == (128, False)
    expected = {(4096, 4096, 4096): (256, False), (4096, 7168, 7168): (256, False), (8192, 8192, 8192): (256, False),
                (4096, 16384, 8192): (256, False), (1024, 7168, 2048): (256, False), (16384, 16384, 4096): (256, False),
                (8192, 8192, 4096): (256, False), (8192, 2048, 2048): (256, False), (4096, 4096, 2048): (256, False),
                (8192, 4096, 2048): (256, False), (4096, 8192, 2048): (256, False), (8192, 6144, 2048): (176, True),
                (4096, 2112, 7168): (176, True), (4096, 24576, 1536): (176, True), (4096, 7168, 2048): (176, True)}
    for shape, tile in expected.items():
        assert choose_tile(*shape) == tile, shape


def test_ping_pong_tiles_up_to_176_wide_take_five_stages():
    """default_stages: 5 for ping-pong at BN <= 176 (they fit next to its one-chunk staging buffers), 4 for
    the cooperative schedule and ping-pong 192 (5 do not fit there); gemm_sm90 builds with it when STAGES is
    not given."""
    from tirxpy_kernels.gemm_sm90 import default_stages

    assert [default_stages(bn, True) for bn in (128, 176, 192)] == [5, 5, 4]
    assert {default_stages(bn) for bn in (128, 176, 192, 256)} == {4}
    for bn, pp in [(176, True), (128, True), (192, True), (256, False), (176, False)]:
        st = default_stages(bn, pp)
        plan(4096, 4096, 4096, BN=bn, STAGES=st, PINGPONG=pp)                    # fits
        built = str(gemm_sm90(4096, 2112, 7168, BN=bn, PINGPONG=pp))
        assert built == str(gemm_sm90(4096, 2112, 7168, BN=bn, PINGPONG=pp, STAGES=st))
        assert built != str(gemm_sm90(4096, 2112, 7168, BN=bn, PINGPONG=pp, STAGES=st - 1))


def test_gemm_api_fills_in_the_tile():
    """tirxpy_kernels.gemm takes BN and PINGPONG from choose_tile when given neither, the width for a given
    schedule, the cooperative schedule for a given BN or a cooperative-only option (DEFER)."""
    from tirxpy_kernels.gemm_api import _tile

    assert _tile({}, 8192, 8192, 8192, 132) == dict(BN=256, PINGPONG=False, SPLIT=(32, 2, 240))
    assert _tile({}, 4096, 2112, 7168, 132) == dict(BN=176, PINGPONG=True)
    assert _tile({}, 4096, 4096, 4096, 132) == dict(BN=256, PINGPONG=False, SPLIT=(16, 1, 240))
    assert _tile(dict(SPLIT=None), 4096, 4096, 4096, 132) == dict(SPLIT=None, BN=256, PINGPONG=False)
    assert _tile({}, 4096, 4096, 4096, 132, b_major="MN") == dict(BN=256, PINGPONG=False)     # SPLIT: K-major B
    assert _tile({}, 2048, 2048, 2048, 132) == dict(BN=256, PINGPONG=False)       # one round: nothing to balance
    assert _tile(dict(PINGPONG=False), 4096, 2112, 7168, 132) == dict(BN=176, PINGPONG=False)
    assert _tile(dict(DEFER=False), 8192, 8192, 8192, 132) == dict(DEFER=False, BN=256, PINGPONG=False)
    assert _tile(dict(BN=128), 8192, 8192, 8192, 132) == dict(BN=128)


@pytest.mark.parametrize("cm,pp", [(1, False), (1, True), (2, False)])
def test_fused_bias_silu_tile_is_the_widest_without_spills(cm, pp):
    """A fused bias + silu into a 16-bit output needs registers next to the accumulator: the tile tirxpy_kernels.gemm
    picks for it (capped by widest_bn) compiles without spills, and at CM = 1 the next wider width of the same
    schedule does spill -- the cap is where the compiler puts it, not a guess. Ping-pong has no wider width
    (widest_bn(True) for any epilogue): the fused epilogue keeps the full 192. CM = 2 cooperative: 256 compiles
    without spills since the walk's divisions are constant at 4096^3, but the cap stays (widest_bn)."""
    from tirxpy_kernels.gemm_api import _tile
    from tirxpy_kernels.gemm_sm90 import bn_candidates, widest_bn

    t = _tile(dict(CM=cm, PINGPONG=pp), 4096, 4096, 4096, 132, "K", True, "silu", "bfloat16")
    cap = max(b for b in bn_candidates(cm) if b <= widest_bn(pp, True, "silu", "bfloat16"))
    assert t["BN"] <= cap
    fused = dict(bias=True, activation="silu", CM=cm, PINGPONG=pp)
    for bn in {t["BN"], cap}:
        assert tirxpy.compile(gemm_sm90(4096, 4096, 4096, **dict(fused, BN=bn)), arch="sm_90a").resources.spills == 0
    if pp:
        assert cap == widest_bn(True) == 192
        with pytest.raises(ValueError, match="use BN <= 192"):
            gemm_sm90(4096, 4096, 4096, **dict(fused, BN=208))
    elif cm == 1:
        wider = min(b for b in (192, 256) if b > cap and b in bn_candidates(cm))
        spills = tirxpy.compile(gemm_sm90(4096, 4096, 4096, **dict(fused, BN=wider)), arch="sm_90a").resources.spills
        assert spills > 0
    # the cap only binds for that epilogue: plain outputs, f32 outputs and relu keep the full widths
    assert _tile({}, 4096, 4096, 4096, 132, "K", True, "silu", "float32") == dict(BN=256, PINGPONG=False)
    assert _tile({}, 4096, 4096, 4096, 132, "K", True, "relu", "bfloat16") == dict(BN=256, PINGPONG=False)


def test_pdl_is_the_default_and_waits_before_any_global_access():
    """``PDL`` (default on): the kernel is launched with programmatic stream serialization, and every thread
    runs ``griddepcontrol.wait`` after the shared-memory barrier setup, before the first TMA load; it never
    triggers its dependents early (that broke the pairing of CTAs on TPCs and ran 5-11% slower)."""
    for kw in (dict(BN=176, PINGPONG=True), dict(CM=2)):
        k = gemm_sm90(4096, 2112, 7168, **kw)
        assert k.launch.pdl is True
        body = tirxpy.compile(k, arch="sm_90a").cuda_source.split("__global__", 1)[1]
        assert body.count("tx_griddepcontrol_wait();") == 1 and "launch_dependents" not in body
        assert body.index("tx_mbarrier_init") < body.index("tx_griddepcontrol_wait();") < body.index("tx_tma_load")
    k = gemm_sm90(4096, 2112, 7168, BN=176, PINGPONG=True, PDL=False)
    assert k.launch.pdl is False and "griddepcontrol" not in tirxpy.compile(k, arch="sm_90a").cuda_source
    with pytest.raises(ValueError, match="PDL must be True or False, got 'yes'"):
        gemm_sm90(256, 256, 128, BN=128, PDL="yes")


def test_split_kernel_compiles_without_spills_with_both_wgmma_widths():
    """SPLIT: a wide tile's m64n256k16 and a narrow tile's m64n240k16 (into a prefix of the same accumulator)
    in one kernel, without spills or serialized wgmma; 528 tiles on 132 CTAs."""
    k = gemm_sm90(4096, 4096, 4096, SPLIT=(16, 1, 240))
    assert [int(g) for g in k.launch.grid] == [132] and plan(4096, 4096, 4096, split=(16, 1, 240))["tiles"] == 528
    ck = tirxpy.compile(k, arch="sm_90a")
    r = ck.resources
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_bytes == 0, r
    assert r.perf_warnings == (), r.perf_warnings
    assert "wgmma_m64n256k16" in ck.cuda_source and "wgmma_m64n240k16" in ck.cuda_source


@pytest.mark.parametrize("kw,msg", [
    (dict(SPLIT=(16, 1)), "SPLIT must be a tuple (rows, wide, bn2) of ints, got (16, 1)"),
    (dict(SPLIT=[16, 1, 240]), "SPLIT must be a tuple"),
    (dict(SPLIT=(16, 1, 240), BN=192, PINGPONG=True), "got PINGPONG=True, CM=1, DEFER=False"),
    (dict(SPLIT=(16, 1, 240), CM=2), "got PINGPONG=False, CM=2"),
    (dict(SPLIT=(16, 1, 240), DEFER=False), "DEFER=False"),
    (dict(SPLIT=(16, 1, 240), b_major="MN"), "b_major='MN'"),
    (dict(SPLIT=(16, 1, 176)), "narrow width 176 must be a multiple of 16 in (192, 256)"),
    (dict(SPLIT=(16, 1, 256)), "narrow width 256"),
    (dict(SPLIT=(16, 1, 232)), "narrow width 232"),
    (dict(SPLIT=(0, 1, 240)), "rows must be in [1, 32]"),
    (dict(SPLIT=(33, 1, 240)), "rows must be in [1, 32]"),
    (dict(SPLIT=(16, 16, 240)), "wide < 16"),
    (dict(SPLIT=(16, -1, 240)), "wide < 16"),
])
def test_split_is_checked(kw, msg):
    with pytest.raises(ValueError) as e:
        gemm_sm90(4096, 4096, 4096, **kw)
    assert msg in str(e.value)


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (8192, 8192, 14336), (8192, 28672, 4096), (3000, 3000, 1032)])
def test_balanced_split_with_rows_max_ends_its_rows_a_band_short_of_it(M, N, K):
    """``rows_max``: the split rows stay at most ``rows_max`` and a multiple of the group (4) short of it, and the
    split still lowers the busiest CTA's work below the plain grid's (or there is none)."""
    from tirxpy_kernels.gemm_sm90 import _split_widths, _unit_loads, balanced_split

    TM, TN, KT = -(-M // 128), -(-N // 256), -(-K // 64)
    plain = _unit_loads([256] * (TM * TN), KT, min(132, TM * TN)).max()
    found = 0
    for rows_max in range(1, TM + 1):
        sp = balanced_split(M, N, K, rows_max=rows_max)
        if sp is None:
            continue
        found += 1
        rows, wide, bn2 = sp
        assert rows <= rows_max and (rows_max - rows) % 4 == 0
        widths = _split_widths(rows, wide, -(-(N - wide * 256) // bn2), bn2, TM, TN, 256, 4)
        assert _unit_loads(widths, KT, min(132, len(widths))).max() < plain
    assert found > 0


def test_balanced_split_lowers_the_busiest_ctas_work():
    """balanced_split against the plain grid in its own cost model: at 4096^3 the busiest CTA of the plain grid
    does four 256-wide tiles, of the split grid three and one 240-wide; no split where the plain grid is one
    round or less, or for tiles other than 256 wide; it never picks a split that does not lower the busiest
    CTA's work by the margin."""
    import numpy as np

    from tirxpy_kernels.gemm_plan import _TILE_OVERHEAD as OV
    from tirxpy_kernels.gemm_sm90 import _split_widths, _unit_loads, balanced_split

    assert balanced_split(4096, 4096, 4096) == (16, 1, 240)
    loads = _unit_loads(_split_widths(16, 1, 16, 240, 32, 16, 256, 4), 64, 132)
    plain = _unit_loads([256] * 512, 64, 132)
    assert np.isclose(plain.max(), 4 * (64 * 256 + OV * 256))     # a tile: its k-blocks and its turn
    assert np.isclose(loads.max(), 3 * (64 * 256 + OV * 256) + 64 * 240 + OV * 256)
    assert np.isclose(loads.sum() - plain.sum(), 16 * OV * 256)        # 16 more tiles, the same columns
    assert balanced_split(2048, 2048, 2048) is None and balanced_split(4096, 4096, 4096, BN=192) is None
    for M, N, K in [(4096, 8192, 4096), (8192, 2048, 3000), (3000, 5000, 700)]:
        sp = balanced_split(M, N, K)
        if sp is None:
            continue
        rows, wide, bn2 = sp
        narrow = -(-(N - wide * 256) // bn2)
        tm, tn = -(-M // 128), -(-N // 256)
        w = _split_widths(rows, wide, narrow, bn2, tm, tn, 256, 4)
        kt = -(-K // 64)
        assert _unit_loads(w, kt, min(len(w), 132)).max() <= 0.995 * _unit_loads([256] * (tm * tn), kt, 132).max()
