"""``python -m tirxpy_kernels.bench attention-bwd [--shapes SxDxC,...] [--tune K=V,...;...] [--reps 20] [--sim]``

TFLOPS of the attention backward (``2.5 x 4 B H S^2 D``, halved when causal: the five products of the
backward against the forward's two) of :func:`tirxpy_kernels.attention_backward` (all three steps, and the
kernel alone) and of ``torch.nn.functional.scaled_dot_product_attention``'s backward with the cuDNN backend
(``torch.autograd.grad`` of its output), on the same bf16 inputs, in turn (:func:`tirxpy_kernels.bench_tools.median_ms`);
ratios to cuDNN. The gradients are checked against cuDNN's first. Default cells: head dim 128 at S = 4k
(causal and not) and 8k causal, head dim 64 at 2k causal and 4k non-causal, head dim 256 at 4k (causal and not);
batch x seqlen = 32k tokens, 16 heads. ``--tune``: kernel options (:func:`tirxpy_kernels.attention_bwd_plan.plan`'s,
such as ``TRAIL=0;TRAIL=1``), each timed as a row of the kernel alone on the same prepared tensors, its gradients
checked against the defaults' first; the end-to-end column is the defaults' (the row of the empty tuning). ``--sim``
runs the kernel through the CPU simulator at a small ragged causal GQA shape against float64.
"""
from __future__ import annotations

import sys
import time

from .bench_tools import (BenchArgumentError, add_common_arguments, check_sim_args, environment, median_ms,
                          meta_tensor, parse_tunings, print_table, relative_error, seed_of, sim_verdict, warm_gpu, worst)

TUNING = ("BM", "STAGES", "DQ_SPLIT", "FOLD", "TAIL", "ROTATE", "TRAIL", "FUSE_DQ")
CELLS = ((4096, 128, False), (4096, 128, True), (8192, 128, True), (2048, 64, True), (4096, 64, False),
         (4096, 256, False), (4096, 256, True))
TOKENS, HEADS = 32768, 16
SIM_SHAPE = (150, 64)
SIM_MOST = 2 ** 16        # the largest S * D of --sim --shapes: about 50 s at 1024x64
SIM_TOLERANCE = 2e-2        # bf16 P and dS (relative rounding 2^-9) in a float32 computation
GPU_TOLERANCE = 3e-2        # bf16 gradients against cuDNN's bf16 gradients


def add_arguments(p):
    add_common_arguments(p, 20, "comma-separated SxDxC items: sequence length x head dim x causal (0 / 1), batch = "
                         f"32768 // S, {HEADS} heads (default: "
                         f"{', '.join(f'{s}x{d}x{int(c)}' for s, d, c in CELLS)}; with --sim one SxD item, default "
                         f"{'x'.join(map(str, SIM_SHAPE))}, causal, 4 query heads on 2 KV heads)",
                         SIM_TOLERANCE, TUNING, "SxDxC,...")


def _cells(text):
    cells = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) != 3 or not all(x.isdigit() for x in parts) or parts[2] not in ("0", "1"):
            raise BenchArgumentError(f"--shapes: {item.strip()!r} is not SxDxC (for example 4096x128x1)")
        S, D, C = map(int, parts)
        if S < 1:
            raise BenchArgumentError(f"--shapes: {item.strip()!r}: the sequence length must be positive")
        cells.append((S, D, bool(C)))
    return cells


def check(args):
    """Check the arguments before any GPU work; returns ``(cells, tunings)``: the cells ``(S, D, causal)`` and the
    kernel tunings (``[{}]``, the defaults, without ``--tune``), each checked at each cell by the kernel's plan."""
    if args.sim:
        shape = check_sim_args(args, "150x64", SIM_MOST)
        if shape is not None:
            from .attention_bwd_plan import plan
            from .errors import KernelConfigError

            if shape[0] < 2:        # one causal row: its softmax is constant, so dQ is exactly 0 (no relative error)
                raise BenchArgumentError(f"--sim --shapes {args.shapes.strip()}: a sequence of 1 has dQ = 0 exactly, "
                                         "against which the run's relative error is undefined; pass S >= 2 (for "
                                         "example 150x64)")
            try:
                plan(1, 4, 2, shape[0], shape[0], shape[1], causal=True)
            except KernelConfigError as e:
                raise BenchArgumentError(f"--sim --shapes {args.shapes.strip()}: {e}") from None
        return [(shape or SIM_SHAPE) + (True,)], [{}]
    from .attention_bwd_api import check as check_call
    from .attention_bwd_plan import plan
    from .errors import KernelConfigError

    cells = _cells(args.shapes) if args.shapes else list(CELLS)
    tunings = parse_tunings(args.tune, TUNING)
    for S, D, causal in cells:
        q = meta_tensor(max(1, TOKENS // S), S, HEADS, D)
        lse = meta_tensor(max(1, TOKENS // S), HEADS, S).float()
        check_call(q, q, q, q, q, lse, causal=causal)
        for t in tunings:
            try:
                plan(max(1, TOKENS // S), HEADS, HEADS, S, S, D, causal, **t)
            except KernelConfigError as e:
                raise BenchArgumentError(f"--tune {_tag(t)} at {S}x{D}x{int(causal)}: {e}") from None
    return cells, tunings


def _tag(t):
    return ",".join(f"{k}={v}" for k, v in t.items()) or "defaults"


def _kernel(B, S, D, causal, t, sms):
    """``(module, factory, args, kwargs)`` of the backward kernel that
    :func:`tirxpy_kernels.attention_bwd_api.prepare` builds for a cell's contiguous inputs, with tuning ``t``."""
    from .attention_bwd_plan import fused_by_default, plan

    t = {"FUSE_DQ": fused_by_default(B, HEADS, HEADS, S, S, D, causal), **t}
    p = plan(B, HEADS, HEADS, S, S, D, causal, **t)
    return ("tirxpy_kernels.attention_bwd_sm90", "attention_bwd_sm90", (B, HEADS, HEADS, S, S, D),
            dict(causal=causal, scale=D ** -0.5, SQT=max(S, p.BM), SKT=max(S, p.BN), sms=sms, **t))


def _args_for(kargs, fused):
    """The prepared tensors ``kargs`` (the defaults' kernel's) as a kernel that does (``fused``) or does not convert
    ``dQ`` itself takes them: ``dQ`` dropped, or a fresh one appended."""
    import torch

    if fused == (len(kargs) == 11):
        return kargs
    return kargs[:10] if not fused else kargs + (torch.empty_like(kargs[0]),)


def _cudnn(q, k, v, causal):
    """``(grad(), out)``: cuDNN's backward of SDPA as a training step runs it (``torch.autograd.grad`` of the
    output, graph kept) and its output, on ``(B, S, H, D)`` tensors."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (x.detach().transpose(1, 2).requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    do = torch.randn_like(o)

    def grad():
        return torch.autograd.grad(o, (qt, kt, vt), do, retain_graph=True)
    return grad, o.detach().transpose(1, 2), do.transpose(1, 2).contiguous()


def bench_attention_bwd(args):
    """Time the backward at each cell (each tuning of the kernel alone); returns the exit status (1 when a gradient
    is past ``GPU_TOLERANCE``)."""
    import importlib

    import torch

    import tirxpy_kernels

    from .attention_bwd_api import prepare
    from .attention_bwd_plan import TARGET
    from .launch_cache import compiled
    from .prebuild import prebuild

    cells, tunings = check(args)
    torch.manual_seed(seed_of(args))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    specs = [("factory",) + _kernel(max(1, TOKENS // S), S, D, c, t, sms) for S, D, c in cells for t in tunings]
    specs += [("attention", max(1, TOKENS // S), HEADS, HEADS, S, S, D, c, {"sms": sms}) for S, D, c in cells]
    dt = prebuild(specs, args.jobs)
    print(environment() + (f" (kernels prebuilt in {dt:.0f} s)" if dt else "") + f", seed {args.seed}")
    warm_gpu()
    rows = []
    for S, D, causal in cells:
        B = max(1, TOKENS // S)
        q, k, v = (torch.randn(B, S, HEADS, D, device="cuda").to(torch.bfloat16) for _ in range(3))
        flop = 2.5 * 4 * B * HEADS * S * S * D / (2 if causal else 1)
        grad, _, do = _cudnn(q, k, v, causal)
        t0 = time.time()
        out, lse = tirxpy_kernels.attention(q, k, v, causal=causal, return_lse=True)
        mine = tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal)
        ref = [g.transpose(1, 2) for g in grad()]
        errs = [relative_error(a, r.float()) for a, r in zip(mine, ref)]
        print(f"S={S} D={D} causal={causal}: relerr vs cuDNN dq {errs[0]:.1e} dk {errs[1]:.1e} dv {errs[2]:.1e}, "
              f"build {time.time() - t0:.1f} s", flush=True)
        if not worst(errs) < GPU_TOLERANCE:
            print(f"FAILED: S={S} D={D} causal={causal}: relative error {worst(errs):.1e} past {GPU_TOLERANCE:.0e}",
                  file=sys.stderr)
            return 1
        _, kargs, _ = prepare(q, k, v, out, do, lse, causal=causal)
        kerns, kas = {}, {}
        for t in tunings:
            mod, fac, a, kw = _kernel(B, S, D, causal, t, sms)
            kerns[_tag(t)] = kk = compiled(getattr(importlib.import_module(mod), fac)(*a, **kw), TARGET)
            kas[_tag(t)] = ka = _args_for(kargs, kw["FUSE_DQ"])
            err = _tuned_error(kk, ka, mine)
            if not err < GPU_TOLERANCE:
                print(f"FAILED: S={S} D={D} causal={causal} [{_tag(t)}]: gradients {err:.1e} from the defaults'",
                      file=sys.stderr)
                return 1
        fns = {"cudnn": lambda *a: grad()}
        if {} in tunings:       # end to end: the defaults' three steps
            fns["tirxpy"] = lambda *a: tirxpy_kernels.attention_backward(q, k, v, out, do, lse, causal=causal)
        fns.update({tag: (lambda *a, kk=kk, ka=kas[tag]: kk(*ka)) for tag, kk in kerns.items()})
        ms = median_ms(fns, [()], args.reps)
        tf = {n: flop / ms[n] / 1e9 for n in fns}
        for t in tunings:
            tag = _tag(t)
            e2e = f"{tf['tirxpy']:.0f}" if not t else "-"
            e2r = f"{tf['tirxpy'] / tf['cudnn']:.3f}" if not t else "-"
            rows.append([S, D, B, causal, tag, e2e, f"{tf[tag]:.0f}", f"{tf['cudnn']:.0f}", e2r,
                         f"{tf[tag] / tf['cudnn']:.3f}"])
            print(f"S={S} D={D} B={B} H={HEADS} causal={causal} [{tag}]: " + (
                f"tirxpy {tf['tirxpy']:.0f} (kernel alone {tf[tag]:.0f})" if not t else f"kernel alone {tf[tag]:.0f}")
                + f", cuDNN {tf['cudnn']:.0f} TFLOPS; kernel alone vs cuDNN {tf[tag] / tf['cudnn']:.3f}", flush=True)
        del grad
    print_table(["seqlen", "head dim", "batch", "causal", "tuning", "tirxpy TFLOPS", "kernel TFLOPS", "cuDNN TFLOPS",
                 "tirxpy / cuDNN", "kernel / cuDNN"], rows)
    return 0


def _tuned_error(kk, kargs, mine):
    """The largest relative error of kernel ``kk``'s gradients, launched on the prepared tensors ``kargs`` (the
    accumulator and counters zeroed, dK / dV and a ``dQ`` the kernel writes NaN-poisoned first), against the
    defaults' ``mine``."""
    import torch

    dk, dv, dqa, sem = kargs[6:10]
    dqa.zero_()
    sem.zero_()
    for t in (dk, dv) + tuple(kargs[10:]):
        t.fill_(float("nan"))
    kk(*kargs)
    torch.cuda.synchronize()
    S = mine[0].shape[1]
    dq = kargs[10] if len(kargs) == 11 else dqa[:, :S]
    return worst(relative_error(a, r.float()) for a, r in zip((dq, dk[:, :S], dv[:, :S]), mine))


def sim_attention_bwd(args):
    """The kernel through tirxpy.sim at a small ragged causal GQA shape (``--shapes SxD``, default 150x64)
    against float64 autograd; returns the exit status."""
    import torch

    from tirxpy.sim import run

    from .attention_bwd_sm90 import attention_bwd_sm90

    B, H, HKV = 1, 4, 2
    ((S, D, _),), _ = check(args)
    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    q, do = (torch.randn(B, S, H, D, generator=g).bfloat16() for _ in range(2))
    k, v = (torch.randn(B, S, HKV, D, generator=g).bfloat16() for _ in range(2))
    qd, kd, vd = (x.double().requires_grad_(True) for x in (q, k, v))
    kk, vv = (x.transpose(1, 2).repeat_interleave(H // HKV, 1) for x in (kd, vd))
    s = (qd.transpose(1, 2) @ kk.transpose(-1, -2)) * D ** -0.5
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    o = (torch.softmax(s, -1) @ vv).transpose(1, 2)
    ref = torch.autograd.grad(o, (qd, kd, vd), do.double())
    SQP, SKT = -(-S // 64) * 64, max(S, 128)
    lse = torch.zeros(B, H, SQP)
    lse[:, :, :S] = torch.logsumexp(s, -1).detach().float()
    dl = torch.zeros(B, H, SQP)
    dl[:, :, :S] = (do.float() * o.detach().bfloat16().float()).sum(-1).transpose(1, 2)
    SQT = max(S, 64)
    pad = (lambda x, n: torch.cat([x, x.new_zeros((B, n - S) + tuple(x.shape[2:]))], 1))
    dk, dv = (torch.full((B, SKT, HKV, D), float("nan")).bfloat16() for _ in range(2))
    dqa = torch.zeros(B, SQT, H, D)
    t0 = time.time()
    res = run(attention_bwd_sm90(B, H, HKV, S, S, D, causal=True, SQT=SQT, SKT=SKT), pad(q, SQT), pad(k, SKT),
              pad(v, SKT), pad(do, SQT), lse, dl, dk, dv, dqa, torch.zeros(B, H, SQP // 64, 2, dtype=torch.int32),
              seed=seed)
    got = (dqa[:, :S], dk[:, :S], dv[:, :S])
    err = worst(relative_error(a.double(), r) for a, r in zip(got, ref))
    return sim_verdict(f"attention_bwd_sm90 B={B} H={H} HKV={HKV} S={S} D={D} causal", err, SIM_TOLERANCE, seed,
                       time.time() - t0, res.problems)
