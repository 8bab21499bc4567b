"""``python -m tirxpy_kernels.bench train``: a training step of a small transformer block on the kernel library
against the same block on torch's defaults, and packed variable-length attention against the padded kernel.

The block (:class:`Block`, pre-norm, bf16): ``x + Wo attn(Wqkv rmsnorm(x))``, then ``x + W2 relu(W1 rmsnorm(x))``,
causal attention of ``heads`` heads of 128. ``impl="tirxpy"`` runs its matrix products through
:func:`tirxpy_kernels.gemm`, the MLP's two as :func:`tirxpy_kernels.mlp` (the ReLU fused into ``W1``'s epilogue, its
backward into the GEMM that makes its incoming gradient), and its attention through
:func:`tirxpy_kernels.attention_qkvpacked` (forward and backward kernels; the projection's gradient written packed);
``impl="torch"`` through ``torch.nn.functional.linear`` (cuBLAS) and ``scaled_dot_product_attention`` (the backend torch
picks). Both are ``torch.compile(fullgraph=True)``d, and a step is the forward and the backward (``y.backward(dy)`` for
a fixed random ``dy``), timed in one process, the two in turn (:func:`tirxpy_kernels.bench_tools.median_ms`), 3 steps
a sample: as a training loop runs them (the speedup), and queued behind a sleep kernel
(:func:`tirxpy_kernels.bench_tools.queue_sleep`: the GPU's time alone, "device only"). The difference between the
two is where the GPU waits for the host (the forward's launches, the turn from the forward to the backward).

The varlen tables pack sequences of random lengths in ``[512, 8192]`` (``--tokens`` real tokens in all). The first
times the ``VARLEN`` kernel, the dense kernel on the batch padded to the longest sequence, and SDPA's cuDNN backend
on that padded batch (unmasked padding: the peer's speed, not a result to use); TFLOPS count the real work
(``4 * lq * lk * heads * dim`` per sequence, half when causal), and the padded kernel's own rate (its padded work
over its time) is the speed to match at equal work. ``relerr``: the varlen output against the dense kernel on each
sequence alone. The second times the backward the same way (:func:`bench_varlen_backward`).

``--sim`` runs a small packed batch through the ``VARLEN`` kernel in the CPU simulator against float64.
"""
from __future__ import annotations

import time

from .bench_tools import (BenchArgumentError, check_sim_args, count, positive, print_table, relative_error, seed,
                          seed_of, sim_verdict, worst)

SIM_TOLERANCE = 2e-2
SIZES = dict(batch=4, seq=2048, dim=2048, mlp=8192, tokens=32768)
MAX_TOKENS = 2 ** 24
"""The largest token count (varlen ``--tokens``, ``--batch x --seq``) and width the bench takes."""
"""The block's sizes when their options are left out (``--batch`` ...): a timing run's defaults."""


class Block:
    """The benchmark's transformer block as a plain function of its weights (module docstring): ``block(x)`` for
    ``x`` ``(batch, seq, dim)`` bf16 on the weights' device; ``block.params`` are the weights (requires_grad).

        >>> import torch
        >>> b = Block(64, 2, 128, impl="torch", device="cpu", dtype=torch.float32)
        >>> b(torch.randn(2, 8, 64)).shape
        torch.Size([2, 8, 64])
    """

    def __init__(self, dim, heads, mlp, impl="tirxpy", device="cuda", dtype=None, seed=0):
        import torch

        if impl not in ("tirxpy", "torch"):
            raise BenchArgumentError(f"Block: impl must be 'tirxpy' or 'torch', got {impl!r}")
        if dim % heads:
            raise BenchArgumentError(f"Block: dim {dim} does not split into {heads} heads")
        g = torch.Generator().manual_seed(seed)
        dtype = dtype or torch.bfloat16

        def w(n, k):
            return (torch.randn(n, k, generator=g) / k ** 0.5).to(device=device, dtype=dtype).requires_grad_()

        self.dim, self.heads, self.impl = dim, heads, impl
        self.wqkv, self.wo, self.w1, self.w2 = w(3 * dim, dim), w(dim, dim), w(mlp, dim), w(dim, mlp)
        self.params = [self.wqkv, self.wo, self.w1, self.w2]

    def __call__(self, x):
        import torch
        import torch.nn.functional as F

        import tirxpy_kernels as tk

        B, S, Dm = x.shape
        H, D = self.heads, Dm // self.heads
        tx = self.impl == "tirxpy"

        def linear(t, w, act=None):
            if tx:
                return tk.gemm(t, w.t(), activation=act)
            y = F.linear(t, w)
            return torch.relu(y) if act == "relu" else y

        h = F.rms_norm(x, (Dm,)).reshape(B * S, Dm)
        qkv = linear(h, self.wqkv).view(B, S, 3, H, D)
        if tx:
            a = tk.attention_qkvpacked(qkv, causal=True)
        else:
            q, k, v = qkv.unbind(2)
            a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True).transpose(1, 2)
        x = x + linear(a.reshape(B * S, Dm), self.wo).view(B, S, Dm)
        h = F.rms_norm(x, (Dm,)).reshape(B * S, Dm)
        if tx:
            return x + tk.mlp(h, self.w1.t(), self.w2.t()).view(B, S, Dm)
        return x + linear(linear(h, self.w1, "relu"), self.w2).view(B, S, Dm)


def block_flops(batch, seq, dim, heads, mlp):
    """FLOPs of one training step of :class:`Block` (forward and backward, 3x the forward's): the matrix
    products ``2 * tokens * (4 dim^2 + 2 dim mlp)`` and causal attention ``2 * batch * heads * seq^2 * dim``."""
    t = batch * seq
    return 3 * (2 * t * (4 * dim * dim + 2 * dim * mlp) + 2 * batch * seq * seq * dim)


def add_arguments(p):
    p.add_argument("--batch", type=positive, default=None, help="sequences per step (default 4)")
    p.add_argument("--seq", type=positive, default=None, help="tokens per sequence (default 2048)")
    p.add_argument("--dim", type=positive, default=None, help="model width (default 2048; heads of 128)")
    p.add_argument("--mlp", type=positive, default=None, help="MLP hidden width (default 8192)")
    p.add_argument("--tokens", type=positive, default=None, help="real tokens of the varlen batch (default 32768)")
    p.add_argument("--reps", type=positive, default=None, help="timed samples (default 20)")
    p.add_argument("--jobs", type=count, default=None, help="processes that compile the kernels before timing "
                   "(default: one per core, at most 16; 0 or 1: build as the benchmark goes)")
    p.add_argument("--sim", action="store_true", help="instead of timing, run a fixed small packed batch (three "
                   "sequences) through the VARLEN kernel in the CPU simulator (the size and timing options do not "
                   f"apply); exits 1 when the relative error is not below {SIM_TOLERANCE:.0e}")
    p.add_argument("--seed", type=seed, default=None, help="seed of the random inputs, an int in [0, 2**32 - 1] "
                   "(default: from the clock)")


def check(args):
    """Shapes that the kernels take: ``dim`` a multiple of 128 (heads of 128), ``seq`` at least 128 and ``tokens``
    at least 8192; options left out take :data:`SIZES`. ``--sim`` runs a fixed packed batch and takes none of the
    size and timing options (each is refused)."""
    if args.sim:
        check_sim_args(args, "", 0, [(f"--{k}", getattr(args, k)) for k in SIZES],
                       "the VARLEN attention kernel on three fixed packed sequences in the CPU simulator")
        return
    for k, v in SIZES.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.dim % 128:
        raise BenchArgumentError(f"--dim {args.dim}: the block uses heads of 128; pass a multiple of 128")
    if args.seq < 128 or args.tokens < 8192:
        raise BenchArgumentError("--seq must be at least 128 and --tokens at least 8192 (sequences of 512 to 8192)")
    for what, n in (("--tokens", args.tokens), ("--batch x --seq", args.batch * args.seq), ("--dim", args.dim),
                    ("--mlp", args.mlp)):
        if n > MAX_TOKENS:
            raise BenchArgumentError(f"{what} = {n} is past {MAX_TOKENS} (2**24): a batch that size does not fit one "
                                     "GPU's memory at the block's widths; pass a smaller one")


def varlen_lengths(tokens, seed, lo=512, hi=8192):
    """Random sequence lengths in ``[lo, hi]`` summing to ``tokens`` (the last one is what remains, at least
    ``lo`` where ``tokens`` allows).

        >>> ls = varlen_lengths(32768, 1)
        >>> sum(ls), min(ls) >= 512, max(ls) <= 8192
        (32768, True, True)
    """
    import random

    r, out, left = random.Random(seed), [], tokens
    while left > hi:
        n = r.randint(lo, min(hi, left - lo))
        out.append(n)
        left -= n
    return out + [left]


def padded_batch(t, lens, cu):
    """The packed rows ``t`` ``(total, ...)`` of sequences of ``lens`` (offsets ``cu``, a list) as a ``(batch, longest,
    ...)`` batch, zero rows past each sequence (the benchmarks' padded form; a loop of copies, outside the timing).

        >>> import torch
        >>> padded_batch(torch.arange(1., 6.), [2, 3], [0, 2, 5]).tolist()
        [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]]
    """
    out = t.new_zeros((len(lens), max(lens)) + tuple(t.shape[1:]))
    for b, n in enumerate(lens):
        out[b, :n] = t[cu[b]:cu[b] + n]
    return out


def bench_varlen(args, heads=16, D=128):
    """Rows of the varlen table: causal and not, the VARLEN kernel, the padded dense kernel and cuDNN padded."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tirxpy_kernels as tk

    from .attention_plan import TARGET, plan, varlen_window
    from .attention_sm90 import attention_sm90
    from .attention_varlen_api import empty_outputs, kernel_args
    from .bench_tools import median_ms
    from .launch_cache import compiled

    lens = varlen_lengths(args.tokens, args.seed)
    T, B, S = sum(lens), len(lens), max(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(T, heads, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    qp, kp, vp = (padded_batch(t, lens, cu.tolist()) for t in (q, k, v))
    rows = []
    for causal in (False, True):
        real = sum(4 * n * n * heads * D for n in lens) / (2 if causal else 1)
        padded = 4 * B * S * S * heads * D / (2 if causal else 1)
        W = varlen_window(S)
        kern = attention_sm90(B, heads, heads, W, W, D, causal=causal, SQT=T, SKT=T, VARLEN=True)
        ck = compiled(kern, TARGET)
        out, lse = empty_outputs(q, W)
        vp_ = plan(B, heads, heads, W, W, D, causal=causal, VARLEN=True)
        vargs = kernel_args(q, k, v, cu, cu, W, out, lse, vp_.BM, per=vp_.per_cta)
        # the same kernel with one tile a CTA (PAIRS=False), for comparison; its output must be the same bits
        ck1 = compiled(attention_sm90(B, heads, heads, W, W, D, causal=causal, SQT=T, SKT=T, VARLEN=True,
                                      PAIRS=False), TARGET)
        out1, lse1 = empty_outputs(q, W)
        vargs1 = kernel_args(q, k, v, cu, cu, W, out1, lse1, vp_.BM)
        got = tk.attention_varlen(q, k, v, cu, cu, S, S, causal=causal)
        ck1(*vargs1)
        if not torch.equal(out1, got):
            raise AssertionError("bench train: the one-tile-a-CTA varlen kernel's output differs from "
                                 "attention_varlen's")
        c0 = cu.tolist()        # each sequence against the dense kernel on that sequence alone
        err = worst(relative_error(got[c0[b]:c0[b + 1]].float(), tk.attention(
            *(t[None, c0[b]:c0[b + 1]] for t in (q, k, v)), causal=causal).float()[0]) for b in range(B))
        qs, ks, vs = (t.transpose(1, 2) for t in (qp, kp, vp))

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)

        ms = median_ms({"varlen": lambda: ck(*vargs), "one": lambda: ck1(*vargs1),
                        "padded": lambda: tk.attention(qp, kp, vp, causal=causal), "cudnn": cudnn},
                       [()], args.reps or 20)
        tf = {n: real / (t * 1e9) for n, t in ms.items()}
        rows.append([causal, B, S, T, f"{tf['varlen']:.0f}", f"{tf['one']:.0f}",
                     f"{tf['padded']:.0f} ({padded / (ms['padded'] * 1e9):.0f})",
                     f"{tf['cudnn']:.0f}", f"{ms['padded'] / ms['varlen'] * real / padded:.2f}",
                     f"{ms['cudnn'] / ms['varlen']:.2f}", f"{err:.1e}"])
    return rows


def bench_varlen_backward(args, heads=16, D=128):
    """Rows of the varlen backward table: causal and not, :func:`tirxpy_kernels.attention_varlen_backward` end to end
    (the packed kernel), :func:`tirxpy_kernels.attention_backward` on the batch padded to the longest sequence (its
    own rate: padded work over its time, the speed to match at equal work) and cuDNN's backward on that padded batch
    (SDPA; unmasked padding: the peer's speed). TFLOPS count 2.5x the forward's FLOPs. ``relerr``: each sequence's
    gradients against the padded backward's rows of it."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import tirxpy_kernels as tk

    from .bench_tools import median_ms

    lens = varlen_lengths(args.tokens, args.seed)
    T, B, S = sum(lens), len(lens), max(lens)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    c0 = cu.tolist()
    q, k, v, do = (torch.randn(T, heads, D, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    rows = []
    for causal in (False, True):
        real = 2.5 * sum(4 * n * n * heads * D for n in lens) / (2 if causal else 1)
        padded = 2.5 * 4 * B * S * S * heads * D / (2 if causal else 1)
        o, lse = tk.attention_varlen(q, k, v, cu, cu, S, S, causal=causal, return_lse=True)
        qp, kp, vp, op, dop = (padded_batch(t, lens, c0) for t in (q, k, v, o, do))
        lp = padded_batch(lse.t(), lens, c0).transpose(1, 2).contiguous()
        got = tk.attention_varlen_backward(q, k, v, o, do, lse, cu, cu, S, S, causal=causal)
        ref = tk.attention_backward(qp, kp, vp, op, dop, lp, causal=causal)
        err = worst(relative_error(g[c0[b]:c0[b + 1]].float(), r[b, :n].float())
                  for g, r in zip(got, ref) for b, n in enumerate(lens) if n)
        qc, kc, vc = (t.transpose(1, 2).detach().requires_grad_(True) for t in (qp, kp, vp))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            oc = torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
        gc = dop.transpose(1, 2)
        args_ = (q, k, v, o, do, lse, cu, cu, S, S)
        ms = median_ms({"varlen": lambda: tk.attention_varlen_backward(*args_, causal=causal),
                        "padded": lambda: tk.attention_backward(qp, kp, vp, op, dop, lp, causal=causal),
                        "cudnn": lambda: torch.autograd.grad(oc, (qc, kc, vc), gc, retain_graph=True)},
                       [()], args.reps or 20)
        tv, tp = real / (ms["varlen"] * 1e9), padded / (ms["padded"] * 1e9)
        rows.append([causal, B, S, T, f"{tv:.0f}", f"{tp:.0f}", f"{padded / (ms['cudnn'] * 1e9):.0f}",
                     f"{tv / tp:.2f}", f"{ms['cudnn'] / ms['varlen']:.2f}", f"{err:.1e}"])
    return rows


_FACTORIES = (("gemm_api", "gemm_sm90"), ("attention_api", "attention_sm90"), ("attention_varlen_api", "attention_sm90"),
              ("attention_bwd_api", "attention_bwd_sm90"), ("attention_bwd_api", "attention_bwd_preprocess"),
              ("attention_bwd_api", "attention_bwd_preprocess_packed"),
              ("attention_bwd_post", "attention_bwd_dq_store"))


class _NoLaunch:
    """A compiled kernel's stand-in while :func:`record_kernels` runs: launches nothing."""

    def __call__(self, *args, **kw):
        return None

    def bind(self, *args, **kw):
        return lambda: None


def record_kernels(fn):
    """The kernels ``fn()`` builds through the kernel APIs, as ``(module, factory, args, kwargs)`` (picklable),
    found by running ``fn`` once with each API's factory recorded and its compile replaced by a launch that does
    nothing (the results are garbage; the launch caches it filled are emptied again)."""
    import importlib

    specs, saved = [], []
    for mod_name, fac in _FACTORIES:
        mod = importlib.import_module(f"{__package__}.{mod_name}")
        f = getattr(mod, fac, None)
        if f is None:
            continue

        def wrapper(*a, _f=f, _m=f"{__package__}.{mod_name}", _n=fac, **kw):
            specs.append((_m, _n, a, kw))
            return _f(*a, **kw)
        saved += [(mod, fac, f), (mod, "compiled", mod.compiled)]
        setattr(mod, fac, wrapper)
        mod.compiled = lambda k, target: _NoLaunch()
    try:
        fn()
    finally:
        for mod, name, f in reversed(saved):
            setattr(mod, name, f)
        from .launch_cache import clear_all
        clear_all()
    out = []
    for s in specs:
        if s not in out:
            out.append(s)
    return out


def prebuild_kernels(fn, jobs=None):
    """Compile the kernels ``fn()`` launches in ``jobs`` processes (default one per core, at most 16) before it
    runs for real (:func:`tirxpy_kernels.prebuild.prebuild`); returns ``(kernels, seconds)``."""
    from .prebuild import prebuild

    t0 = time.time()
    specs = record_kernels(fn)
    prebuild([("factory",) + tuple(s) for s in specs], jobs)
    return len(specs), time.time() - t0


def bench_train(args):
    """Time the training step of both blocks and the varlen table; print both tables. Returns 0."""
    import torch

    from .bench_tools import environment, median_ms, queue_sleep, warm_gpu

    seed = seed_of(args)
    print(environment(), f"seed {seed}", flush=True)
    B, S, Dm, M = args.batch, args.seq, args.dim, args.mlp
    blocks = {impl: Block(Dm, Dm // 128, M, impl=impl, seed=seed) for impl in ("tirxpy", "torch")}
    for p, q in zip(blocks["tirxpy"].params, blocks["torch"].params):
        q.data.copy_(p.data)
    x = torch.randn(B, S, Dm, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(B, S, Dm, device="cuda", dtype=torch.bfloat16)
    try:
        n, sec = prebuild_kernels(lambda: _warm_calls(blocks["tirxpy"], x, dy, args), args.jobs)
        print(f"prebuilt {n} kernels in {sec:.1f} s", flush=True)
    except Exception as e:      # noqa: BLE001  (an optimisation only: the kernels then build as the run goes)
        print(f"prebuild failed ({type(e).__name__}: {e}); building as the run goes", flush=True)
        for p in blocks["tirxpy"].params:
            p.grad = None
    steps, grads = {}, {}
    for impl, blk in blocks.items():
        fwd = torch.compile(blk, fullgraph=True)

        def step(fwd=fwd, blk=blk):
            for p in blk.params:
                p.grad = None
            fwd(x).backward(dy)

        t0 = time.time()
        step()
        torch.cuda.synchronize()
        print(f"{impl}: first step (compile) {time.time() - t0:.1f} s", flush=True)
        steps[impl] = step
        grads[impl] = [p.grad.float() for p in blk.params]
    errs = [relative_error(a, b.double()) for a, b in zip(grads["tirxpy"], grads["torch"])]
    warm_gpu()
    ms = median_ms(steps, [()], args.reps or 20, inner=3)
    dev = median_ms(steps, [()], args.reps or 20, inner=3, before=queue_sleep())
    fl = block_flops(B, S, Dm, Dm // 128, M)
    print_table(["batch x seq", "dim / mlp", "tirxpy ms", "torch ms", "speedup", "tirxpy TFLOPS",
                 "device only: tirxpy / torch ms (speedup)", "grad relerr vs torch"],
                [[f"{B}x{S}", f"{Dm}/{M}", f"{ms['tirxpy']:.3f}", f"{ms['torch']:.3f}",
                  f"{ms['torch'] / ms['tirxpy']:.2f}", f"{fl / (ms['tirxpy'] * 1e9):.0f}",
                  f"{dev['tirxpy']:.3f} / {dev['torch']:.3f} ({dev['torch'] / dev['tirxpy']:.2f})",
                  f"{worst(errs):.1e}"]])
    print_table(["causal", "seqs", "longest", "tokens", "varlen TFLOPS", "one tile a CTA", "padded TFLOPS (own rate)",
                 "cuDNN padded", "varlen / padded rate", "varlen / cuDNN", "relerr"], bench_varlen(args))
    print_table(["causal", "seqs", "longest", "tokens", "varlen backward TFLOPS", "padded backward (own rate)",
                 "cuDNN padded backward (own rate)", "varlen / padded rate", "cuDNN time / varlen time", "relerr"],
                bench_varlen_backward(args))
    return 0


def _warm_calls(blk, x, dy, args, heads=16, D=128):
    """One eager training step of ``blk`` and the varlen table's attention calls (for :func:`prebuild_kernels`)."""
    import torch

    import tirxpy_kernels as tk

    blk(x).backward(dy)
    for p in blk.params:
        p.grad = None
    lens = varlen_lengths(args.tokens, args.seed)
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
    q = torch.empty(sum(lens), heads, D, device="cuda", dtype=torch.bfloat16)
    qp = torch.empty(len(lens), max(lens), heads, D, device="cuda", dtype=torch.bfloat16)
    lse, lp = torch.empty(heads, sum(lens), device="cuda"), torch.empty(len(lens), heads, max(lens), device="cuda")
    for causal in (False, True):
        tk.attention_varlen(q, q, q, cu, cu, max(lens), max(lens), causal=causal)
        tk.attention(qp, qp, qp, causal=causal)
        tk.attention_varlen_backward(q, q, q, q, q, lse, cu, cu, max(lens), max(lens), causal=causal)
        tk.attention_backward(qp, qp, qp, qp, qp, lp, causal=causal)


def sim_train(args):
    """The ``VARLEN`` kernel on three packed sequences (ragged, GQA, causal) in the simulator, vs float64."""
    import torch

    from tirxpy.sim import run

    from .attention_plan import plan
    from .attention_sm90 import attention_sm90
    from .attention_varlen_api import tile_map
    from .attention_walk import varlen_slots

    seed = seed_of(args)
    g = torch.Generator().manual_seed(seed)
    lq, lk, H, HKV, D, XQ = [70, 20, 100], [50, 90, 33], 2, 1, 64, 128
    cq = torch.tensor([0, 70, 90, 190], dtype=torch.int32)
    ck = torch.tensor([0, 50, 140, 173], dtype=torch.int32)
    q = torch.randn(190, H, D, generator=g).bfloat16()
    k, v = (torch.randn(173, HKV, D, generator=g).bfloat16() for _ in range(2))
    opts = dict(causal=True, BN=32, STAGES=2, NC=1, VARLEN=True)
    kern = attention_sm90(3, H, HKV, XQ, XQ, D, SQT=190, SKT=173, **opts)
    per = plan(3, H, HKV, XQ, XQ, D, **opts).per_cta
    O = torch.full((191, XQ, H, D), float("nan")).bfloat16()
    t0 = time.time()
    tiles = tile_map(cq, ck, 64, varlen_slots(190, 64, 3, per), per=per)      # the longest sequence's tiles first
    res = run(kern, q[None], k[None], v[None], O, torch.zeros(191 * H * XQ).view(191, H, XQ, 1), cq, ck, tiles,
              seed=seed)
    errs, rows = [], O.view(-1, H, D)      # O's view overlaps: packed row r is the storage's row XQ + r
    for b in range(3):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        s = (q[qs].double().transpose(0, 1) @ k[ks].double().permute(1, 2, 0).repeat_interleave(H // HKV, 0)) * D ** -0.5
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        ref = (torch.softmax(s, -1) @ v[ks].double().transpose(0, 1).repeat_interleave(H // HKV, 0)).transpose(0, 1)
        errs.append(relative_error(rows[XQ + cq[b]:XQ + cq[b + 1]], ref))
    return sim_verdict("attention_sm90 VARLEN, 3 sequences (causal, GQA 2/1, d64)", worst(errs), SIM_TOLERANCE, seed,
                       time.time() - t0, res.problems)


__all__ = ["Block", "add_arguments", "bench_train", "bench_varlen", "block_flops", "check", "sim_train",
           "varlen_lengths"]
