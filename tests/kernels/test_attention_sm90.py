"""tirxpy_kernels/attention_sm90.py on the CPU: NVRTC compile for sm_90a with zero local-memory spills for
every head dim, what the kernel's calls dispatch to, its SASS where the schedule depends on it, and
the schedule options that change the kernel (the plan's own checks: test_attention_plan.py)."""
import pytest

import tirxpy
from tirxpy_kernels.attention_plan import plan
from tirxpy_kernels.attention_sm90 import attention_sm90


@pytest.mark.parametrize("D,causal,S,kw", [(64, False, 4096, {}), (128, True, 4096, {}), (256, False, 4096, {}),
                                            (256, False, 1024, {}), (256, True, 2048, {}), (64, True, 4096, {}),
                                            (128, True, 1024, dict(CHAIN=False)), (256, True, 1024, {}),
                                            # persistent head dim 128 with O over K / V or Q: the producer's
                                            # walk spilled with 24 registers
                                            (128, False, 1024, dict(OSTAGE="kv")),
                                            (128, True, 600, dict(OSTAGE="q", CHAIN=False, PINGPONG=False, TRIM=True,
                                                                  BN=32, PERSIST=True, sms=5))])
def test_compiles_for_sm90a_without_spills(D, causal, S, kw):
    # ptxas keeps the wgmmas pipelined in every build (no `perf_warnings` such as C7515 / C7511, which
    # serialize all of them)
    c = tirxpy.compile(attention_sm90(2, 16, 4, S, S, D, causal=causal, **kw), arch="sm_90a")
    assert c.resources.spills == 0
    assert c.resources.stack_bytes == 0
    assert c.resources.perf_warnings == ()
    ptx = c.ptx
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.4d" in ptx and "ex2.approx.ftz.f32" in ptx
    assert "setmaxnreg.inc" in ptx


def test_dispatch_choices():
    text = tirxpy.explain(attention_sm90(1, 2, 1, 200, 200, 64, causal=True, BN=64), "sm_90a")
    for variant in ("tma_load", "tma_store", "wgmma", "local_mask", "warp_shuffle", "stmatrix"):
        assert variant in text


def test_tensors_shorter_than_a_tile_are_refused():
    with pytest.raises(ValueError, match="shorter than one tile"):
        attention_sm90(1, 2, 2, 40, 200, 64)


def test_pingpong_needs_two_consumers():
    """PINGPONG schedules turns between two consumer warpgroups; with one it is refused."""
    assert attention_sm90(1, 2, 2, 200, 200, 64, causal=False, NC=1).launch.threads == 256
    with pytest.raises(ValueError, match="PINGPONG schedules two consumer warpgroups"):
        attention_sm90(1, 2, 2, 200, 200, 64, causal=False, NC=1, PINGPONG=True)


def _long(D, causal):
    """The S = 4096 kernel whose SASS the loop tests read: the shape test_compiles_for_sm90a_without_spills
    builds (grouped heads, HKV = 4), so that where both test one (D, causal) it is built once per process
    (attention_sm90 and tirxpy.compile memoize it). The key-block loop's body does not depend on the head
    grouping (only the K / V head index does: the plan differs in ``group`` alone)."""
    return attention_sm90(2, 16, 4, 4096, 4096, D, causal=causal)


@pytest.mark.parametrize("D,causal", [(64, False), (128, False), (128, True), (256, True)])
def test_softmax_runs_while_p_v_is_in_flight_in_sass(D, causal):
    """In the SASS of the overlapped loop, the block's exponentials (``MUFU.EX2``) lie between the
    wait for ``S`` (``WARPGROUP.DEPBAR.LE gsb0, 0x1``) and the next wait for ``P V`` (``... 0x0``).
    With that wait at the end of the loop body, ptxas may hoist it above the softmax, and this
    count is 0. Needs a disassembler (cuobjdump / nvdisasm)."""
    from tirxpy.lower.build import ToolchainError

    k = tirxpy.compile(_long(D, causal), arch="sm_90a")
    try:
        sass = k.sass
    except ToolchainError:
        pytest.skip("no SASS disassembler (pip install nvidia-cuda-nvdisasm, or the CUDA toolkit on PATH)")
    lines = sass.splitlines()
    waits_for_s = [i for i, ln in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ln]
    assert waits_for_s, "no wait_group 1 in the SASS: the overlapped loop is missing"
    BN = plan(2, 16, 4, 4096, 4096, D)["BN"]
    for i in waits_for_s:
        j = next(j for j in range(i + 1, len(lines)) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in lines[j])
        ex2 = sum("MUFU.EX2" in ln for ln in lines[i:j])
        assert ex2 >= BN // 2, f"only {ex2} of the block's {BN // 2} exponentials per thread run before P V is waited for"


@pytest.mark.parametrize("D,causal", [(64, False), (128, True), (256, False)])
def test_key_block_loop_shuffles_only_for_the_row_max(D, causal):
    """Each lane keeps its share of the row sums (``QUAD``) and the quad's shares are summed in the
    epilogue, so the loop's softmax (from the wait for ``S`` to the next wait for ``P V``) shuffles
    only for the row max: 2 rows per thread x 2 butterfly steps (summing every block would take 8)."""
    from tirxpy.lower.build import ToolchainError

    k = tirxpy.compile(_long(D, causal), arch="sm_90a")
    try:
        lines = k.sass.splitlines()
    except ToolchainError:
        pytest.skip("no SASS disassembler (pip install nvidia-cuda-nvdisasm, or the CUDA toolkit on PATH)")
    i = next(i for i, ln in enumerate(lines) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ln)
    j = next(j for j in range(i + 1, len(lines)) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in lines[j])
    assert sum("SHFL.BFLY" in ln for ln in lines[i:j]) == 4


def test_fold_cuts_the_loops_descriptor_arithmetic_in_sass():
    """``FOLD`` (the head-dim-256 causal default) builds each wgmma descriptor with one uniform add: the
    key-block loop's uniform-datapath instructions drop by more than two per wgmma. The folded kernel is the
    default build of test_compiles_for_sm90a_without_spills's (256, causal, 1024) shape, built once per
    process (batch and head grouping do not change the loop body)."""
    import re

    from tirxpy.lower.build import ToolchainError

    assert plan(2, 16, 4, 1024, 1024, 256, causal=True)["fold"] is True

    def loop(fold):
        kw = {} if fold else dict(FOLD=False)          # FOLD=True: the default
        k = tirxpy.compile(attention_sm90(2, 16, 4, 1024, 1024, 256, causal=True, **kw), arch="sm_90a")
        try:
            lines = k.sass.splitlines()
        except ToolchainError:
            pytest.skip("no SASS disassembler (pip install nvidia-cuda-nvdisasm, or the CUDA toolkit on PATH)")
        # a loop is a backward branch: nvdisasm names its target with a label (.L_x_N), cuobjdump with the address
        labels = {m.group(1): n for n, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
        labels.update({int(m.group(1), 16): n for n, ln in enumerate(lines) if (m := re.match(r"\s*/\*([0-9a-f]{4,})\*/", ln))})
        targets = ((n, m.group(1) or int(m.group(2), 16)) for n, ln in enumerate(lines)
                   if (m := re.search(r"BRA (?:`\((\.L_x_\d+)\)|0x([0-9a-f]+))", ln)))
        bodies = [lines[labels[t]:n] for n, t in targets if labels.get(t, n) < n]
        body = min((b for b in bodies if any("HGMMA" in ln for ln in b)), key=len)
        ops = [ln.split("*/", 1)[1].split()[0] for ln in body if re.search(r"/\*[0-9a-f]{4}\*/", ln)]
        return sum(o.startswith("U") for o in ops), sum(o.startswith("HGMMA") for o in ops)

    (u_fold, n), (u_plain, n2) = loop(True), loop(False)
    assert n == n2 > 0
    assert u_fold < u_plain - 2 * n, (u_fold, u_plain, n)


def test_fold_is_checked():
    """A ``FOLD`` that is not a bool is refused by the plan (and so by the kernel); the plan resolves the default."""
    with pytest.raises(ValueError, match="FOLD must be True or False"):
        attention_sm90(1, 2, 2, 200, 200, 64, FOLD="yes")
    assert plan(1, 2, 2, 1024, 1024, 256, causal=True)["fold"] and not plan(1, 2, 2, 1024, 1024, 256)["fold"]
    assert plan(1, 2, 2, 1024, 1024, 64, causal=True, FOLD=True)["fold"]


def test_quad_view_is_the_accumulator_seen_per_lane():
    """``quad_view(n)[r, q, j]`` is the register of accumulator element ``(r, 8 (j // 2) + 2 q + j % 2)``:
    the same owner (warp, lane, slot) for every element, at every wgmma width the kernel uses."""
    from tirxpy_kernels.attention_sm90 import quad_view
    from tirxpy.layout.atoms import wgmma_accumulator

    for n in (64, 80, 128):
        acc, qv = wgmma_accumulator(n), quad_view(n)
        for r in range(64):
            for col in range(n):
                q, j = (col // 2) % 4, 2 * (col // 8) + col % 2
                assert qv.apply(r, q, j, shape=(64, 4, n // 4)) == acc.apply(r, col, shape=(64, n))


def test_lazy_rescale_is_the_head_dim_256_default_and_is_checked():
    """``LAZY`` defaults on at head dim 256 only: its kernel branches around O's rescale (a ``resc`` flag
    per thread); other head dims multiply O every block. A value that is not a bool is refused."""
    lazy = str(attention_sm90(1, 2, 1, 256, 256, 256, BN=64))
    eager = str(attention_sm90(1, 2, 1, 256, 256, 128))
    assert "resc[0]" in lazy and "resc[0]" not in eager
    assert "resc[0]" in str(attention_sm90(1, 2, 1, 256, 256, 128, LAZY=True))
    with pytest.raises(ValueError, match="LAZY must be True or False"):
        attention_sm90(1, 2, 1, 256, 256, 64, LAZY="yes")


def test_trim_is_the_short_causal_head_dim_256_default_and_needs_its_own_schedule():
    """``TRIM`` (each consumer stops at its own rows' last key block) comes with the short causal head dim
    256 plan (64-key blocks, no turns, no CHAIN); asking for it with ping-pong turns or CHAIN is refused with what to pass instead."""
    from tirxpy_kernels.attention_plan import default_trim

    short = (2, 16, 16, 1024, 1024, 256)
    assert str(attention_sm90(*short, causal=True)) == str(attention_sm90(*short, causal=True, TRIM=True))
    assert str(attention_sm90(*short, causal=True)) != str(attention_sm90(*short, causal=True, TRIM=False))
    assert default_trim(256, True, 1024, 64, False, False)
    assert not default_trim(256, True, 2048, 80, True, False) and not default_trim(256, False, 1024, 80, True, False)
    assert not default_trim(128, True, 1024, 128, True, False)
    for kw in (dict(PINGPONG=True), dict(D=64, CHAIN=True, PERSIST=True)):
        args = dict(B=1, H=2, HKV=1, SQ=256, SK=256, D=256, causal=True, BN=64, TRIM=True)
        args.update(kw)
        with pytest.raises(ValueError, match="TRIM lets each consumer stop at its own rows' last key block"):
            attention_sm90(**args)
    with pytest.raises(ValueError, match="TRIM must be True or False"):
        attention_sm90(1, 2, 1, 256, 256, 256, causal=True, TRIM="yes")


def test_tail_is_the_default_for_long_causal_walks_and_is_checked():
    """``TAIL`` (the last pairs of a persistent causal walk dealt as single tiles) defaults on from 32 query
    tiles, and up to 8 at head dims 64 and 256; it changes the kernel only for persistent causal CTAs; a value
    that is not a bool is refused."""
    from tirxpy_kernels.attention_plan import default_tail

    assert default_tail(32, 128) and default_tail(32, 64) and not default_tail(31, 128) and not default_tail(9, 64)
    assert default_tail(8, 64) and default_tail(8, 256) and not default_tail(8, 128)
    assert plan(8, 16, 16, 4096, 4096, 128, causal=True)["tail"]          # 32 query tiles, persistent
    assert not plan(32, 16, 16, 1024, 1024, 128, causal=True)["tail"]     # 8 query tiles, head dim 128
    assert plan(32, 16, 16, 1024, 1024, 64, causal=True)["tail"]          # 8 query tiles, head dim 64
    assert not plan(16, 16, 16, 2048, 2048, 64, causal=True)["tail"]      # 16 query tiles
    assert not plan(8, 16, 16, 4096, 4096, 128)["tail"]                   # no causal walk of pairs
    assert not plan(8, 16, 16, 4096, 4096, 128, causal=True, PERSIST=False, TAIL=True)["tail"]
    causal = (1, 4, 2, 700, 700, 64)
    assert str(attention_sm90(*causal, causal=True, sms=5, TAIL=True)) != \
        str(attention_sm90(*causal, causal=True, sms=5, TAIL=False))
    assert str(attention_sm90(*causal, sms=5, TAIL=True)) == str(attention_sm90(*causal, sms=5, TAIL=False))
    with pytest.raises(ValueError, match="TAIL must be True or False"):
        plan(1, 4, 2, 700, 700, 64, causal=True, TAIL="yes")


def test_pdl_is_the_default_and_waits_before_any_global_access():
    """``PDL`` (default on): launched with programmatic stream serialization, every thread runs
    ``griddepcontrol.wait`` after the barrier setup and before the first TMA load; ``PDL=False`` has neither."""
    k = attention_sm90(2, 4, 4, 1024, 1024, 64, causal=True)
    assert k.launch.pdl is True
    body = tirxpy.compile(k, arch="sm_90a").cuda_source.split("__global__", 1)[1]
    assert body.count("tx_griddepcontrol_wait();") == 1 and "launch_dependents" not in body
    assert body.index("tx_mbarrier_init") < body.index("tx_griddepcontrol_wait();") < body.index("tx_tma_load")
    k = attention_sm90(2, 4, 4, 1024, 1024, 64, causal=True, PDL=False)
    assert k.launch.pdl is False and "griddepcontrol" not in tirxpy.compile(k, arch="sm_90a").cuda_source
    with pytest.raises(ValueError, match="attention_sm90: PDL must be True or False, got 'yes'"):
        attention_sm90(2, 4, 4, 1024, 1024, 64, PDL="yes")
