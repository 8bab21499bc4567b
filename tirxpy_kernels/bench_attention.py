"""``python -m tirxpy_kernels.bench attention [--shapes SxD,...] [--tune "BN=128,NC=2;STAGES=3"] [--reps 30] [--sim]``

TFLOPS (``4 B H S^2 D``, halved when causal) of :func:`tirxpy_kernels.attention` and of
``torch.nn.functional.scaled_dot_product_attention`` with the cuDNN backend and with the flash backend
(:func:`sdpa`), on the same random bf16 inputs in ``(batch, seq, heads, dim)`` layout (SDPA gets the
``(B, H, S, D)`` transposed views); every tuning and the peers take their samples in turn
(:func:`tirxpy_kernels.bench_tools.median_ms`); ratios to cuDNN. Default sweep: head dim 64 / 128 / 256 x seqlen
1k / 4k / 8k / 16k, batch x seqlen = 32k tokens, 16 heads, causal and not. ``--sim`` runs the kernel through
the CPU simulator at a small ragged causal GQA shape against float64.
"""
from __future__ import annotations

import sys
import time

from .bench_tools import (BenchArgumentError, add_common_arguments, check_sim_args, environment, median_ms,
                          meta_tensor, parse_shapes, parse_tunings, print_table, relative_error, seed_of, sim_verdict,
                          warm_gpu)

SEQLENS = (1024, 4096, 8192, 16384)
HEAD_DIMS = (64, 128, 256)
TOKENS, HEADS = 32768, 16
SIM_SHAPE = (150, 64)
SIM_MOST = 2 ** 16        # the largest S * D of --sim --shapes: about 20 s at 1024x64
SIM_ATTENTION = dict(BN=64, STAGES=2, NC=2)
SIM_TOLERANCE = 1e-2        # bf16 output (relative rounding 2^-9) of a float32 computation
GPU_TOLERANCE = 2e-2        # bf16 output against the flash backend's bf16 output


def add_arguments(p):
    from .attention_api import TUNING

    add_common_arguments(p, 30, "comma-separated SxD items: sequence length x head dim, batch = 32768 // S, "
                         f"{HEADS} heads, each causal and not (default: S in {'/'.join(map(str, SEQLENS))} x D in "
                         f"{'/'.join(map(str, HEAD_DIMS))}; with --sim one item, default "
                         f"{'x'.join(map(str, SIM_SHAPE))}, causal, 4 query heads on 2 KV heads)",
                         SIM_TOLERANCE, TUNING, "SxD,...")


def check(args):
    """Check ``attention``'s arguments before any GPU work; returns ``(shapes, tunings)``."""
    if args.sim:
        shape = check_sim_args(args, "150x64", SIM_MOST)
        if shape is not None:
            from .attention_plan import plan
            from .errors import KernelConfigError

            try:
                plan(1, 4, 2, shape[0], shape[0], shape[1], causal=True, **SIM_ATTENTION)
            except KernelConfigError as e:
                raise BenchArgumentError(f"--sim --shapes {'x'.join(map(str, shape))}: {e}") from None
        return [shape or SIM_SHAPE], [{}]
    from .attention_api import TUNING
    from .attention_api import check as check_call
    from .attention_api import check_tuning

    shapes = parse_shapes(args.shapes, 2, "4096x128") if args.shapes else [(s, d) for d in HEAD_DIMS for s in SEQLENS]
    tunings = parse_tunings(args.tune, TUNING)
    for t in tunings:
        check_tuning(t)
    for t in tunings:
        for S, D in shapes:
            q = meta_tensor(max(1, TOKENS // S), S, HEADS, D)
            for causal in (False, True):
                check_call(q, q, q, causal=causal, **t)
    return shapes, tunings


def sdpa(backend):
    """``run(q, k, v, causal)``: torch's SDPA on ``(B, S, H, D)`` tensors with one backend (``"cudnn"`` or
    ``"flash"``), as a model calls it."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]

    def run(q, k, v, causal):
        with sdpa_kernel(be):
            return torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return run


def _peers(q, k, v, causal):
    peers = {}
    for name in ("cudnn", "flash"):
        try:
            f = sdpa(name)
            f(q, k, v, causal)
            peers[name] = (lambda q, k, v, f=f: f(q, k, v, causal))
        except RuntimeError as e:  # a backend that does not take this shape
            print(f"  {name}: {str(e).splitlines()[0]}")
    return peers


def bench_attention(args):
    """Time ``tirxpy_kernels.attention`` (each tuning) and SDPA at each shape; returns the exit status (1 when a result
    is past ``GPU_TOLERANCE``)."""
    import torch

    import tirxpy_kernels

    from .prebuild import prebuild

    shapes, tunings = check(args)
    torch.manual_seed(seed_of(args))
    sms = torch.cuda.get_device_properties(0).multi_processor_count      # as tirxpy_kernels.attention builds them
    dt = prebuild([("attention", max(1, TOKENS // S), HEADS, HEADS, S, S, D, c, dict(t, sms=t.get("sms", sms)))
                   for S, D in shapes for c in (False, True) for t in tunings], args.jobs)
    print(environment() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else "") + f", seed {args.seed}")
    warm_gpu()
    rows = []
    for S, D in shapes:
        B = max(1, TOKENS // S)
        q, k, v = (torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flop = 4 * B * HEADS * S * S * D / (2 if causal else 1)
            fns = _peers(q, k, v, causal)
            ref = sdpa("flash")(q, k, v, causal).transpose(1, 2).float()
            for i, t in enumerate(tunings):
                t0 = time.time()
                err = relative_error(tirxpy_kernels.attention(q, k, v, causal=causal, **t), ref)
                tag = ",".join(f"{a}={b}" for a, b in t.items()) or "default"
                print(f"S={S} D={D} causal={causal} [{tag}]: relerr vs flash {err:.1e}, build {time.time() - t0:.1f} s")
                if not err < GPU_TOLERANCE:
                    print(f"FAILED: S={S} D={D} causal={causal} [{tag}]: relative error {err:.1e} is past "
                          f"{GPU_TOLERANCE:.0e}", file=sys.stderr)
                    return 1
                fns[i] = (lambda q, k, v, c=causal, tt=t: tirxpy_kernels.attention(q, k, v, causal=c, **tt))
            ms = median_ms(fns, [(q, k, v)], args.reps)
            res = {name: flop / ms[name] / 1e9 if name in ms else float("nan") for name in ("cudnn", "flash")}
            for i, t in enumerate(tunings):
                tt = flop / ms[i] / 1e9
                tag = ",".join(f"{a}={b}" for a, b in t.items()) or "default"
                rows.append([S, D, B, causal, tag, f"{tt:.0f}", f"{res['cudnn']:.0f}", f"{res['flash']:.0f}",
                             f"{tt / res['cudnn']:.3f}"])
                print(f"S={S} D={D} B={B} H={HEADS} causal={causal} [{tag}]: tirxpy {tt:.0f}, cuDNN "
                      f"{res['cudnn']:.0f}, flash {res['flash']:.0f} TFLOPS; vs cuDNN {tt / res['cudnn']:.3f}",
                      flush=True)
    print_table(["seqlen", "head dim", "batch", "causal", "tuning", "tirxpy TFLOPS", "cuDNN TFLOPS", "flash TFLOPS",
                 "tirxpy / cuDNN"], rows)
    return 0


def reference(q, k, v, causal=True):
    """Float64 attention of ``(B, S, H, D)`` tensors (``k``, ``v`` may have fewer heads: grouped queries), the
    scale ``D ** -0.5``."""
    import torch

    B, S, H, D = q.shape
    rep = H // k.shape[2]
    kk, vv = (x.double().transpose(1, 2).repeat_interleave(rep, 1) for x in (k, v))
    s = (q.double().transpose(1, 2) @ kk.transpose(-1, -2)) * D ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(S, k.shape[1], dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ vv).transpose(1, 2)


def sim_attention(args):
    """The kernel through tirxpy.sim at a small ragged causal GQA shape (``--shapes SxD``, default 150x64; a sequence
    shorter than one tile is zero-padded to it, as :func:`tirxpy_kernels.attention` pads it), against float64;
    returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .attention_plan import plan
    from .attention_sm90 import attention_sm90

    B, H, HKV = 1, 4, 2
    (S, D), = check(args)[0]
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, S, H, D, generator=g).bfloat16()
    k = torch.randn(B, S, HKV, D, generator=g).bfloat16()
    v = torch.randn(B, S, HKV, D, generator=g).bfloat16()
    p = plan(B, H, HKV, S, S, D, causal=True, **SIM_ATTENTION)
    SQT, SKT = max(S, p.BM), max(S, p.BN)       # a sequence shorter than a tile is padded (as the API does)
    pad = (lambda x, n: torch.cat([x, x.new_zeros((B, n - S) + tuple(x.shape[2:]))], 1))
    o = torch.full((B, SQT, H, D), float("nan")).bfloat16()
    lse = torch.full((B, H, SQT, 1), float("nan"))
    t0 = time.time()
    res = run(attention_sm90(B, H, HKV, S, S, D, causal=True, SQT=SQT, SKT=SKT, **SIM_ATTENTION), pad(q, SQT),
              pad(k, SKT), pad(v, SKT), o, lse, seed=seed)
    o = o[:, :S]
    err = relative_error(o.double(), reference(q, k, v))
    return sim_verdict(f"attention_sm90 B={B} H={H} HKV={HKV} S={S} D={D} causal", err, SIM_TOLERANCE, seed,
                       time.time() - t0, res.problems)
