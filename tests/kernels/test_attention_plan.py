"""tirxpy_kernels/attention_plan.py: every error of :func:`plan` and the defaults it resolves (persistence,
CHAIN, where O is staged, the short causal head dim 256 plan)."""
import pytest

from tirxpy_kernels.attention_plan import plan


@pytest.mark.parametrize("kw,msg", [
    (dict(dtype="float32"), "dtype must be one of ('bfloat16', 'float16')"),
    (dict(D=96), "head dim 96 is not supported; use one of (64, 128, 256)"),
    (dict(H=6, HKV=4), "6 query heads do not split into 4 key / value head groups"),
    (dict(BN=40), "BN = 40 must be a multiple of 16 in [16, 256]"),
    (dict(NC=4), "NC = 4 consumer warpgroups; use 1 or 2"),
    (dict(NC=3), "NC = 3 consumer warpgroups; use 1 or 2"),
    (dict(STAGES=0), "STAGES = 0 must be at least 1"),
    (dict(D=256, BN=128, STAGES=3), "over the 232448 a CTA may have"),
    (dict(SQ=0), "must be positive"),
    (dict(NC=1, PINGPONG=True), "PINGPONG schedules two consumer warpgroups (NC = 2)"),
    (dict(D=256, BN=80, PERSIST=True, OSTAGE="own"), "OSTAGE='own' stages O in its own (128 x 256) buffer"),
    (dict(OSTAGE="regs"), "OSTAGE = 'regs'; use 'own'"),
    (dict(PERSIST=False, OSTAGE="own"), "OSTAGE='own' is for CTAs of several tiles (PERSIST=True, or VARLEN with PAIRS)"),
    (dict(PAIRS=True), "PAIRS puts two query tiles of a packed sequence in one slot of the VARLEN tile map"),
    (dict(VARLEN=True, PAIRS=2), "PAIRS must be True or False (or None: the default)"),
    (dict(PERSIST=True, CHAIN=True, OSTAGE="q"), "CHAIN stores a tile's O while the next tile's Q is in use"),
    (dict(PERSIST=False, CHAIN=True), "CHAIN runs a tile's first key block under the previous tile's last P V"),
    (dict(BN=144, PERSIST=True, CHAIN=True), "CHAIN double-buffers Q (128 x 128) next to the O buffer"),
    (dict(sms=0), "sms = 0 must be the GPU's SM count"),
])
def test_plan_errors(kw, msg):
    args = dict(B=1, H=4, HKV=2, SQ=256, SK=256, D=128)
    args.update(kw)
    with pytest.raises(ValueError) as e:
        plan(**args)
    assert msg in str(e.value)


def test_chain_is_the_default_where_it_fits():
    """CHAIN (double-buffered Q, the next tile's block 0 under this tile's last P V) comes with persistence
    where shared memory allows: not with BN = 144 at head dim 128, nor without persistent CTAs."""
    assert plan(1, 4, 2, 1024, 1024, 128)["chain"] and plan(1, 4, 2, 1024, 1024, 64, causal=True)["chain"]
    assert not plan(1, 4, 2, 1024, 1024, 128, BN=144)["chain"]      # persistent, but no room for a second Q
    assert plan(1, 4, 2, 1024, 1024, 128, BN=144)["persist"]
    assert not plan(1, 4, 2, 1024, 1024, 128, PERSIST=False)["chain"]
    p = plan(1, 4, 2, 1024, 1024, 128)
    assert p["smem"] <= 232448 and p["smem"] - plan(1, 4, 2, 1024, 1024, 128, CHAIN=False)["smem"] == 128 * 128 * 2 + 16


def test_persistent_plan_launches_at_most_one_cta_per_sm():
    """Persistent by default where the O staging buffer fits (head dims 64 / 128) and a tile reads
    at most 32 key blocks (64 when causal); not at 256 past 32 blocks, not for long keys."""
    p = plan(8, 16, 16, 4096, 4096, 128, sms=132)
    assert p["persist"] and p["grid"] == (132, 1, 1) and p["tiles"] == 32 * 16 * 8
    assert plan(1, 1, 1, 256, 256, 64, sms=132)["grid"] == (2, 1, 1)       # fewer tiles than SMs
    q = plan(8, 16, 16, 4096, 4096, 256)
    assert not q["persist"] and q["grid"] == (32, 16, 8)
    assert plan(8, 16, 16, 4096, 4096, 128, PERSIST=False)["grid"] == (32, 16, 8)
    assert plan(2, 16, 16, 16384, 16384, 128)["grid"] == (128, 16, 2)     # 128 key blocks per tile
    assert plan(8, 16, 16, 4096, 4096, 128, causal=True)["grid"] == (132, 1, 1)
    for D in (64, 128):     # causal 8k (64 key blocks) persists, non-causal 8k and causal 16k do not
        assert plan(4, 16, 16, 8192, 8192, D, causal=True)["persist"]
        assert not plan(4, 16, 16, 8192, 8192, D)["persist"]
        assert not plan(2, 16, 16, 16384, 16384, D, causal=True)["persist"]
    assert plan(8, 16, 16, 4096, 4096, 128, causal=True, PERSIST=True, sms=100)["grid"] == (100, 1, 1)
    # causal persistent CTAs walk pairs of query tiles: 3 query tiles -> 2 pairs per head
    assert plan(1, 2, 2, 300, 300, 64, causal=True, PERSIST=True)["work"] == 4


def test_head_dim_256_persists_with_o_over_the_last_k_v_stages():
    """Head dim 256 has no room for an O buffer of its own: persistent CTAs stage O over the tile's last
    K / V stages. Default: persistent up to 32 key blocks, 64
    when causal; one tile per CTA stages O over Q."""
    for S, causal, persist in [(1024, False, True), (2048, False, True), (4096, False, False),
                               (1024, True, True), (4096, True, True), (8192, True, False)]:
        p = plan(1, 16, 16, S, S, 256, causal=causal)
        assert (p["persist"], p["ostage"], p["chain"]) == (persist, "kv" if persist else "q", False), (S, causal, p)
        assert p["smem"] == plan(1, 16, 16, S, S, 256, causal=causal, PERSIST=False)["smem"]
    with pytest.raises(ValueError, match="OSTAGE='kv' stages consumer 0's O rows over the last K stage .* BN >= 64"):
        plan(1, 16, 16, 1024, 1024, 256, OSTAGE="kv", PERSIST=True, BN=48)
    assert plan(1, 16, 16, 1024, 1024, 128)["ostage"] == "own"          # head dim 128 keeps its own buffer


def test_short_causal_head_dim_256_takes_64_key_blocks_without_turns():
    """Causal head dim 256 with at most 1024 keys: 64-key blocks (they end where the 128-row query tiles
    do) and no ping-pong turns; longer or non-causal: 80-key blocks with turns (:func:`tirxpy_kernels.attention_plan.default_config`)."""
    short = plan(B=32, H=16, HKV=16, SQ=1024, SK=1024, D=256, causal=True)
    assert (short["BN"], short["pingpong"], short["persist"], short["ostage"]) == (64, False, True, "kv")
    for kw in (dict(SQ=2048, SK=2048, causal=True), dict(SQ=1024, SK=1024, causal=False)):
        p = plan(B=16, H=16, HKV=16, D=256, **kw)
        assert (p["BN"], p["pingpong"]) == (80, True), kw
    assert plan(B=32, H=16, HKV=16, SQ=1024, SK=1024, D=256, causal=True, BN=80)["pingpong"] is True
    assert plan(B=32, H=16, HKV=16, SQ=1024, SK=1024, D=128, causal=True)["BN"] == 128


def test_the_plan_is_one_object_with_named_derived_constants():
    """The kernel is built from the plan alone: every derived constant is a named field, and ``p[name]`` reads
    the same field (unknown names are a KeyError naming the fields)."""
    p = plan(8, 16, 4, 4096, 4000, 128, causal=True)
    assert (p.BM, p.q_tiles, p.kv_blocks, p.group, p.d_chunks, p.ragged) == (128, 32, 32, 4, 2, True)
    assert (p.q_buffers, p.o_own, p.o_over_kv, p.q_after_o, p.units) == (2, True, False, False, 132)
    assert p.regs == (24, 240) and p.q_release_arrivals == 8 and p.dispatch is None
    assert p["BM"] == p.BM and p["chain"] is p.chain
    with pytest.raises(KeyError, match="no field 'bm'"):
        p["bm"]
    q = plan(1, 2, 2, 4096, 4096, 256, causal=True, PERSIST=True, OSTAGE="q", sms=4)
    assert (q.q_after_o, q.q_release_arrivals, q.regs, q.dispatch) == (True, 2, (48, 224), "wgmma_folded")
    assert plan(1, 2, 2, 256, 256, 64, NC=1).regs == (40, 232)


def test_default_rules_agree_with_the_plan():
    """Each ``default_*`` rule is what :func:`plan` resolves when the option is left out."""
    from tirxpy_kernels.attention_plan import default_ostage, default_persist, default_stages

    assert default_stages(64, False, 4096, 128, 3) == 3 == plan(1, 2, 2, 4096, 4096, 64).STAGES
    assert default_stages(64, True, 4096, 128, 3) == 2 == plan(1, 2, 2, 4096, 4096, 64, causal=True).STAGES
    assert default_persist(4096, 128, False) and not default_persist(8192, 128, False)
    assert default_persist(8192, 128, True) and not default_persist(16384, 128, True)
    assert (default_ostage(True, True), default_ostage(True, False), default_ostage(False, True)) == ("own", "kv", "q")


@pytest.mark.parametrize("kw,msg", [
    (dict(SQ=2 ** 31), "SQ = 2147483648 is out of range"),
    (dict(B=2 ** 16, H=2 ** 15, HKV=1, SQ=128 * 2 ** 2), "tiles, past the 2147483647"),
    (dict(B=70000, SK=8192, PERSIST=False), "H = 4, B = 70000 must be at most 65535 there: pass PERSIST=True"),
])
def test_sizes_past_32_bits_and_grids_past_the_hardware_are_refused(kw, msg):
    args = dict(B=1, H=4, HKV=2, SQ=256, SK=256, D=128)
    args.update(kw)
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        plan(**args)


def test_a_batch_or_head_count_past_the_grid_defaults_to_persistent_ctas():
    # long keys default to one tile per CTA, a (tiles, H, B) grid; past 65535 heads or sequences it cannot launch
    assert not plan(8, 4, 4, 256, 8192, 64).persist
    assert plan(70000, 4, 4, 256, 8192, 64).persist and plan(1, 70000, 70000, 256, 8192, 64).persist


def test_numpy_ints_are_taken_as_ints():
    import numpy as np

    p = plan(np.int64(2), np.int32(4), 2, 256, 256, 128, sms=np.int64(100), BN=np.int64(64))
    assert p.grid == plan(2, 4, 2, 256, 256, 128, sms=100, BN=64).grid
    assert all(type(getattr(p, f)) is int for f in ("B", "H", "SQ", "BN"))


@pytest.mark.parametrize("scale", [-1.0, 0.0, float("nan"), float("inf"), 1e300, 10 ** 400, "0.1", True])
def test_the_factory_refuses_a_scale_its_softmax_cannot_use(scale):
    # the kernel takes the row max of unscaled scores: a scale <= 0 (or past float32) gives a wrong softmax
    from tirxpy_kernels.attention_sm90 import attention_sm90
    from tirxpy_kernels.errors import KernelConfigError

    with pytest.raises(KernelConfigError, match="scale must be a positive finite number"):
        attention_sm90(1, 1, 1, 128, 128, 64, scale=scale)
