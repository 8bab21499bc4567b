"""Mutation tests for the Hopper GEMM (tirxpy_kernels/gemm_sm90.py): deleting one protocol step with
``drop=`` makes the simulator report that specific problem, at the kernel line where it shows.

Each case runs a small ragged problem (one CTA, two tiles, a 2-stage ring turning over) on fresh
random inputs; the unmutated kernel on the same shape reports nothing and matches float64."""
import pytest
import torch

from tirxpy_kernels.gemm_sm90 import DROPS, gemm_sm90
from tirxpy.sim import SimReportError, run

M, N, K = 130, 128, 72      # 2 tiles of 128 x 64 (ragged M), 2 k-blocks (ragged K)


def _run(drop, CM=1, seed=0, M=M, N=N, K=K, out_dtype="float32", **kw):
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
    a = torch.randn(M, K, generator=g).bfloat16()
    b = torch.randn(N, K, generator=g).bfloat16()
    c = torch.full((M, N), float("nan"))       # poisoned: every element must be written
    if out_dtype == "bfloat16":
        c = c.bfloat16()
    kw = dict(dict(sms=2), **kw)
    k = gemm_sm90(M, N, K, BN=64 if CM == 1 else 128, STAGES=2, CM=CM, out_dtype=out_dtype, drop=drop, **kw)
    return a, b, c, run(k, a, b, torch.zeros(1, 1), c, seed=seed)


def test_unmutated_kernel_is_clean_and_correct():
    a, b, c, res = _run(None)
    assert res.problems == []
    ref = a.double() @ b.double().t()
    assert torch.all((c.double() - ref).abs() <= K * 2.0 ** -23 * (a.double().abs() @ b.double().abs().t()) + 1e-30)


# drop -> (the kind that must be reported, the kernel source lines it may name)
CASES = {
    # wgmma reads a stage the TMA unit is still writing
    "full_wait": ("race", ("Tx.wg.gemm_async(", "Tx.copy_async(")),
    # the producer laps the ring: TMA overwrites a stage wgmma is still reading
    "empty_wait": ("race", ("Tx.copy_async(", "Tx.wg.gemm_async(")),
    # bytes land on a phase that never announced them
    "expect_tx": ("tx_underflow", ("Tx.copy_async(",)),
    # a stage is released (empty arrive) while the wgmma reading it is in flight
    "wgmma_wait": ("race", ("Tx.copy_async(", "Tx.wg.gemm_async(")),
    # the epilogue reads the accumulator before wgmma.wait_group 0
    "acc_wait": ("wgmma_accumulator_before_wait", ("Tx.wg.cast(out, chunk)",)),
    # stmatrix / st.shared -> TMA store without fence.proxy.async
    "fence_proxy_async": ("missing_fence_proxy_async", ("Tx.copy_async(C[",)),
    # the staging buffer is rewritten while the TMA store of two chunks ago still reads it
    "store_wait": ("race", ("Tx.wg.copy(Cs[", "Tx.copy_async(C[")),
}


def test_every_drop_has_a_case():
    assert set(CASES) | set(PINGPONG) == set(DROPS)
    with pytest.raises(ValueError, match="unknown drop"):
        gemm_sm90(M, N, K, BN=64, CM=1, drop="nothing")


def _found(err, kind, lines):
    """Does the report name a ``kind`` problem at a kernel line starting with one of ``lines``?"""
    found = [p for p in err.problems if p.kind == kind]
    sites = [(str(p.span), p.span.source_line().strip()) for p in found if p.span is not None]
    return any("gemm_sm90.py" in where and src.startswith(lines) for where, src in sites)


def _reported(drop, kind, lines, seeds=4, **kw):
    """The simulator reports ``kind`` at one of ``lines`` for the kernel without ``drop``, under one of its
    first ``seeds`` random schedules. A race shows only in the interleavings that hit it: one more
    statement anywhere in the kernel (PDL's ``griddepcontrol.wait``) moved the dropped turn's race from
    schedule 0 to schedules 1-4."""
    reports = []
    for seed in range(seeds):
        try:
            _run(drop, seed=seed, **kw)
        except SimReportError as e:
            if _found(e, kind, lines):
                return
            reports.append(f"seed {seed}: {sorted(set(e.kinds()))}")
        else:
            reports.append(f"seed {seed}: nothing reported")
    raise AssertionError(f"drop={drop!r}: no {kind} at {lines} in {seeds} schedules ({'; '.join(reports)})")


# PINGPONG: one consumer per tile; "turn": no turns between the consumers' k-loops, so a consumer's parity
# wait for round r of a stage passes while round r - 1 (the other consumer's) is still loading
PINGPONG = {"turn": ("race", ("Tx.wg.gemm_async(", "Tx.copy_async("))}


@pytest.mark.parametrize("drop", sorted(CASES))
def test_dropped_step_is_reported(drop):
    _reported(drop, *CASES[drop])


@pytest.mark.parametrize("drop", ["expect_tx", "empty_wait"])
def test_dropped_step_is_reported_with_multicast(drop):
    # a 2-CTA cluster taking 2 tiles of 256 x 128: B slices multicast into both CTAs, remote
    # expect_tx / empty arrivals, 2 k-blocks per tile through the 2-stage ring
    _reported(drop, *CASES[drop], CM=2, M=200, N=136, K=104)


def test_public_wrapper_cannot_drop():
    import tirxpy_kernels

    x = torch.zeros(128, 256, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="drop"):
        tirxpy_kernels.gemm(x, x.t(), drop="full_wait")


# with a bf16 output the epilogue is deferred: the tile's converted values wait in registers and
# are stored during the next tile's k-loop (the accumulator is read by the bulk conversion)
DEFERRED = {
    "acc_wait": ("wgmma_accumulator_before_wait", ("Tx.wg.cast(pk, acc)",)),
    "fence_proxy_async": CASES["fence_proxy_async"],
    "store_wait": CASES["store_wait"],
}


@pytest.mark.parametrize("drop", sorted(DEFERRED))
def test_dropped_epilogue_step_is_reported_when_deferred(drop):
    # 6 tiles of 128 x 64 on two CTAs (3 each), one chunk each: stores overlap the next tile's k-loop
    a, b, c, res = _run(None, M=300, out_dtype="bfloat16")
    assert res.problems == [] and not torch.isnan(c).any()
    _reported(drop, *DEFERRED[drop], M=300, out_dtype="bfloat16")


@pytest.mark.parametrize("drop", ["turn", "full_wait", "wgmma_wait", "acc_wait", "fence_proxy_async", "store_wait"])
def test_dropped_step_is_reported_with_pingpong(drop):
    # 6 tiles of 128 x 64 on one CTA (3 per consumer), 3 k-blocks each through the 2-stage ring
    shape = dict(M=300, K=136, sms=1, PINGPONG=True)
    a, b, c, res = _run(None, **shape)
    assert res.problems == [] and not torch.isnan(c).any()
    _reported(drop, *(PINGPONG.get(drop) or CASES[drop]), **shape)
