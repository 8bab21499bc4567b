"""``python -m kernels.bench attention [--shapes 4096x128,...] [--reps 30] [--tune "BN=128,NC=2;STAGES=3"] [--sim]``

TFLOPS (``4 B H S^2 D``, halved when causal) of :func:`kernels.attention` and of
``torch.nn.functional.scaled_dot_product_attention`` with the cuDNN backend and with the flash
backend, measured in the same process on the same random bf16 inputs in ``(batch, seq, heads,
dim)`` layout (SDPA gets the ``(B, H, S, D)`` transposed views), each the median of ``--reps``
CUDA-event timings of 10 back-to-back calls after warm-up (as :mod:`kernels.bench` times GEMMs: the
first call's host time, before the GPU has work, is spread over ten kernels, not three), the three
sampled in turn (:func:`kernels.bench.median_ms`); ratios to cuDNN. ``--tune`` takes ``;``-separated
tunings of ``KEY=VALUE`` items, the tuning arguments of :func:`kernels.attention` (``BN=64,OSTAGE=kv;TAIL=0``:
integers as ints, other values as strings; an empty tuning is the default plan), each timed as its own
row. Default sweep: head dim 64 / 128 / 256 x seqlen 1k / 4k / 8k / 16k, batch x seqlen = 32k tokens,
16 heads, causal and not. ``--shapes`` takes ``SxD`` items. ``--sim`` runs the kernel through the CPU
simulator at a small shape.
"""
from __future__ import annotations

import time

SEQLENS = (1024, 4096, 8192, 16384)
HEAD_DIMS = (64, 128, 256)
TOKENS, HEADS = 32768, 16


def _sdpa(backend):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]

    def run(q, k, v, causal):
        with sdpa_kernel(be):
            return torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return run


def bench_attention(args):
    if args.sim:
        return sim_attention(args)
    import torch

    import kernels

    from .bench import _env, median_ms, parse_shapes, parse_tunings, warm_gpu

    shapes = parse_shapes(args.shapes, 2, "4096x128") if args.shapes else \
        [(s, d) for d in HEAD_DIMS for s in SEQLENS]
    tunings = parse_tunings(args.tune)
    from .prebuild import prebuild

    sms = torch.cuda.get_device_properties(0).multi_processor_count      # as kernels.attention builds them
    dt = prebuild([("attention", max(1, TOKENS // S), HEADS, HEADS, S, S, D, c, dict(t, sms=t.get("sms", sms)))
                   for S, D in shapes for c in (False, True) for t in tunings], args.jobs)
    print(_env() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else ""))
    warm_gpu()
    rows = []
    for S, D in shapes:
        B = max(1, TOKENS // S)
        q = torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16)
        k = torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16)
        v = torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16)
        for causal in (False, True):
            flop = 4 * B * HEADS * S * S * D / (2 if causal else 1)
            peers = {}
            for name in ("cudnn", "flash"):
                try:
                    f = _sdpa(name)
                    f(q, k, v, causal)
                    peers[name] = f
                except RuntimeError as e:  # a backend that does not take this shape
                    print(f"  {name}: {str(e).splitlines()[0]}")
            ref = _sdpa("flash")(q, k, v, causal).transpose(1, 2)
            for tuning in tunings:
                t0 = time.time()
                o = kernels.attention(q, k, v, causal=causal, **tuning)
                build = time.time() - t0
                fns = {name: (lambda q, k, v, f=f, c=causal: f(q, k, v, c)) for name, f in peers.items()}
                fns["tirxpy"] = lambda q, k, v, c=causal, t=tuning: kernels.attention(q, k, v, causal=c, **t)
                ms = median_ms(fns, [(q, k, v)], args.reps)      # sampled in turn: drift reaches all alike
                res = {name: flop / ms[name] / 1e9 if name in ms else float("nan")
                       for name in ("cudnn", "flash", "tirxpy")}
                err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
                r = res["tirxpy"] / res["cudnn"]
                tag = ",".join(f"{k}={v}" for k, v in tuning.items()) or "default"
                rows.append((S, D, B, causal, tag, res, r, err))
                print(f"S={S} D={D} B={B} H={HEADS} causal={causal} [{tag}]: tirxpy {res['tirxpy']:.0f}, "
                      f"cuDNN {res['cudnn']:.0f}, flash {res['flash']:.0f} TFLOPS; vs cuDNN {r:.3f} "
                      f"(relerr vs flash {err:.1e}, build {build:.1f} s)", flush=True)
    print("\n| seqlen | head dim | batch | causal | tuning | tirxpy TFLOPS | cuDNN TFLOPS | flash TFLOPS | tirxpy / cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for S, D, B, causal, tag, res, r, _ in rows:
        print(f"| {S} | {D} | {B} | {causal} | {tag} | {res['tirxpy']:.0f} | {res['cudnn']:.0f} | {res['flash']:.0f} "
              f"| {r:.3f} |")
    return rows


def sim_attention(args):
    """The kernel through tirxpy.sim at a small ragged causal GQA shape (``--shapes SxD``, default 150x64), against
    float64."""
    import torch

    from tirxpy.sim import run

    from .attention_sm90 import attention_sm90
    from .bench import SIM_ATTENTION, parse_shapes

    B, H, HKV = 1, 4, 2
    S, D = parse_shapes(args.shapes, 2, "150x64")[0] if args.shapes else (150, 64)
    kern = attention_sm90(B, H, HKV, S, S, D, causal=True, **SIM_ATTENTION)
    g = torch.Generator().manual_seed(int(time.time()))
    q = torch.randn(B, S, H, D, generator=g).bfloat16()
    k = torch.randn(B, S, HKV, D, generator=g).bfloat16()
    v = torch.randn(B, S, HKV, D, generator=g).bfloat16()
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S, 1), float("nan"))
    t0 = time.time()
    res = run(kern, q, k, v, o, lse)
    dt = time.time() - t0
    s = (q.double().transpose(1, 2) @ k.double().transpose(1, 2).repeat_interleave(H // HKV, 1).transpose(-1, -2)) * D ** -0.5
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    ref = (torch.softmax(s, -1) @ v.double().transpose(1, 2).repeat_interleave(H // HKV, 1)).transpose(1, 2)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    print(f"tirxpy.sim attention_sm90 B={B} H={H} HKV={HKV} S={S} D={D} causal: {dt:.1f} s, relerr vs float64 "
          f"{err:.2e}, problems: {res.problems or 'none'}")
    return err
