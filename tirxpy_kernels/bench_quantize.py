"""``python -m tirxpy_kernels.bench quantize [--shapes MxK,...] [--granularity token,1x128,128x128] [--tune "div=rcp;vecs=8"] [--sim]``

Bandwidth of the FP8 quantization kernel (:mod:`tirxpy_kernels.quantize_sm90`, bf16 -> e4m3) against a
device-to-device copy of the same bytes (``torch.Tensor.copy_`` of a byte buffer, the peer: what a memory-bound
kernel can reach). The kernel reads ``2 M K`` bytes and writes ``M K`` bytes of ``x_q`` and 4 per scale; the
copy moves as many (it reads and writes half of them each). Before timing, each kernel's output is checked
bit for bit against :func:`tirxpy_kernels.quantize_api.reference` (a difference is printed and the exit status is 1). Every tuning (``vecs``:
vectors of 8 elements per thread; ``lanes``: lanes to a group row, 1 x 128 and 128 x 128; ``div``: ``exact``, ``ieee`` or
``rcp``; ``pow2``: 0 / 1) and the copy
take their samples in turn (:func:`tirxpy_kernels.bench_tools.median_ms`); printed: GB/s of each and the ratio
copy time / kernel time. ``--sim`` runs a small case of each granularity through the CPU simulator.
"""
from __future__ import annotations

import sys
import time

from .bench_tools import (BenchArgumentError, add_common_arguments, check_sim_args, check_sim_grid, environment,
                          median_ms, parse_shapes, parse_tunings, print_table, relative_error, seed_of, sim_verdict,
                          warm_gpu)

SHAPES = [(8192, 7168), (4096, 7168), (4096, 16384), (16384, 2048)]
SIM_SHAPE = (136, 200)
SIM_MOST = 2 ** 20        # the largest M * K of --sim --shapes: about 10 s a granularity
TUNING = ("vecs", "lanes", "div", "pow2")
SIM_TOLERANCE = 2.0 ** -4   # e4m3 rounds to 3 mantissa bits: a relative error of at most 2^-4 per element


def add_arguments(p):
    add_common_arguments(p, 30, "comma-separated MxK items (default: " + ", ".join("x".join(map(str, s))
                         for s in SHAPES) + "; with --sim one item, default " + "x".join(map(str, SIM_SHAPE)) + ")",
                         SIM_TOLERANCE, TUNING, "MxK,...")
    p.add_argument("--granularity", default="token,1x128,128x128", help="comma-separated granularities to time "
                   "(default: all three)")


def _tuning(t, g, M, K):
    """The kernel's keywords for tuning ``t`` at granularity ``g`` (``lanes`` dropped for ``"token"``, which has
    none), checked for the padded ``M x K``."""
    from .errors import KernelConfigError
    from .quantize_sm90 import check_config, padded_shape

    kw = {k: v for k, v in t.items() if not (k == "lanes" and g == "token")}
    try:
        check_config(g, *padded_shape(g, M, K), **kw)
    except KernelConfigError as e:
        raise BenchArgumentError(f"--shapes {M}x{K} --granularity {g}{' ' + str(t) if t else ''}: {e}") from None
    return kw


def check(args):
    """Check ``quantize``'s arguments before any GPU work; returns ``(shapes, tunings, granularities)``."""
    from .quantize_sm90 import GRANULARITIES, padded_shape, plan

    grans = [g.strip() for g in args.granularity.split(",") if g.strip()]
    bad = [g for g in grans if g not in GRANULARITIES]
    if bad or not grans:
        raise BenchArgumentError(f"--granularity: {bad[0] if bad else args.granularity!r} is not one of "
                                 f"{', '.join(GRANULARITIES)}")
    if args.sim:
        shape = check_sim_args(args, "136x200", SIM_MOST) or SIM_SHAPE
        for g in grans:         # the kernel each granularity's run builds, and its grid
            _tuning({}, g, *shape)
            Mp, Kp = padded_shape(g, *shape)
            p = plan(g, Mp, Kp)
            ctas = Mp if g == "token" else -(-Kp // p.cols) * -(-Mp // p.rows)
            check_sim_grid(f"{shape[0]}x{shape[1]} --granularity {g}", ctas, ctas * p.warps, "136x200")
        return [shape], [{}], grans
    shapes = parse_shapes(args.shapes, 2, "8192x7168") if args.shapes else SHAPES
    tunings = parse_tunings(args.tune, TUNING)
    for M, K in shapes:
        if M * K >= 1 << 31:
            raise BenchArgumentError(f"--shapes: {M}x{K} has 2^31 or more elements; the kernel indexes with int32")
        for g in grans:
            for t in tunings:
                _tuning(t, g, M, K)
    return shapes, tunings, grans


def bench_quantize(args):
    """Time the kernel (each granularity and tuning) and the copy at each shape; returns the exit status."""
    import torch

    import tirxpy

    from .quantize_api import reference
    from .quantize_sm90 import padded_shape, quantize_fp8_kernel, scales_shape, scales_storage, scales_view

    shapes, tunings, grans = check(args)
    torch.manual_seed(seed_of(args))
    print(environment() + f", seed {args.seed}")
    warm_gpu()
    rows, status = [], 0
    for M, K in shapes:
        x = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        x[torch.randint(0, M, (64,)), torch.randint(0, K, (64,))] = 1000.0     # outliers
        for g in grans:
            nbytes = 3 * M * K + 4 * scales_shape(g, M, K)[0] * scales_shape(g, M, K)[1]
            src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            fns = {"copy": lambda: dst.copy_(src)}
            q = torch.empty(M, K, dtype=torch.float8_e4m3fn, device="cuda")
            s = torch.empty(scales_storage(g, M, K), dtype=torch.float32, device="cuda")
            for i, t in enumerate(tunings):
                if padded_shape(g, M, K) != (M, K):
                    print(f"{M}x{K} {g}: smaller than one tile; not timed", file=sys.stderr)
                    break
                ck = tirxpy.compile(quantize_fp8_kernel(g, M, K, **_tuning(t, g, M, K)), arch="sm_90a")
                q.fill_(float("nan"))
                s.fill_(float("nan"))
                ck(x, q, s)
                rq, rs = reference(x, g, pow2_scales=bool(t.get("pow2", False)), rcp=t.get("div") == "rcp")
                bad_q = int((q.view(torch.uint8) != rq.view(torch.uint8)).sum())
                bad_s = int((scales_view(s, g) != rs).sum())
                if bad_q or bad_s:       # reported, and the exit status says so; the timing still runs
                    print(f"FAILED: {M}x{K} {g} {t or 'defaults'}: {bad_q} elements and {bad_s} scales differ from "
                          f"the reference", file=sys.stderr)
                    status = 1
                fns[i] = ck.bind(x, q, s)
            ms = median_ms(fns, [()], args.reps)
            copy = nbytes / ms["copy"] / 1e6
            for i, t in enumerate(tunings):
                if i not in ms:
                    continue
                gbs = nbytes / ms[i] / 1e6
                rows.append([f"{M}x{K}", g, t or "defaults", f"{ms[i] * 1e3:.1f}", f"{gbs:.0f}", f"{copy:.0f}",
                             f"{gbs / copy:.3f}"])
                print(f"{M}x{K} {g} {t or 'defaults'}: quantize {ms[i] * 1e3:.1f} us {gbs:.0f} GB/s | D2D copy "
                      f"{ms['copy'] * 1e3:.1f} us {copy:.0f} GB/s | ratio {gbs / copy:.3f}", flush=True)
    print_table(["M x K", "granularity", "tuning", "us", "quantize GB/s", "copy GB/s", "ratio"], rows)
    return status


def sim_quantize(args):
    """A small kernel of each granularity through tirxpy.sim: bit-exact against the reference, and the
    dequantized values against float64 ``x``; returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .quantize_api import expand_scales, reference
    from .quantize_sm90 import padded_shape, quantize_fp8_kernel, scales_shape, scales_storage, scales_view

    (shape,), _, grans = check(args)
    M, K = shape
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(M, K, generator=g) * 3).bfloat16()
    x[M // 2, K // 3] = 2000.0
    status = 0
    for gran in grans:
        Mp, Kp = padded_shape(gran, M, K)
        xp = torch.zeros(Mp, Kp, dtype=torch.bfloat16)
        xp[:M, :K] = x
        q = torch.full((Mp, Kp), float("nan")).to(torch.float8_e4m3fn)
        s = torch.full(scales_storage(gran, Mp, Kp), float("nan"))
        t0 = time.time()
        res = run(quantize_fp8_kernel(gran, Mp, Kp), xp, q, s, seed=seed)
        s = scales_view(s, gran)
        rq, rs = reference(xp, gran)
        exact = torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and torch.equal(s, rs)
        deq = q.double() * expand_scales(s.double(), gran, Mp, Kp)
        err = relative_error(deq[:M, :K], x.double()) if exact else float("inf")
        status |= sim_verdict(f"quantize_fp8 {gran} {M}x{K} (bit-exact vs reference: {exact})", err, SIM_TOLERANCE,
                              seed, time.time() - t0, res.problems)
    return status
