"""Compile the kernels a benchmark will launch, in parallel worker processes, before timing.

Each worker builds one kernel (``tirxpy.compile``), which stores the cubin in the disk cache
(:mod:`tirxpy.lower.cache`); the benchmark's own build of the same kernel is then a cache hit.
NVRTC compiles of these kernels take seconds each and run on one core, so a machine with many
cores builds a whole benchmark sweep in the time of a few kernels.

    >>> specs = [("gemm", 256, 256, 128, {"BN": 128}, 132)]
    >>> [prebuild_one(s)[0] for s in specs]   # doctest: +SKIP
    ['gemm']
"""
from __future__ import annotations

import os
import time

from .errors import KernelConfigError, shown


def prebuild_one(spec):
    """Build one kernel: ``("gemm", M, N, K, tuning, sms)`` as :func:`tirxpy_kernels.gemm` builds it for
    row-major bf16 ``a`` and ``b = w.t()``, or ``("attention", B, H, HKV, SQ, SK, D, causal,
    tuning)`` as :func:`tirxpy_kernels.attention` builds it for bf16 tensors, ``("gemm_fp8", M, N, K, scaling,
    tuning, sms)`` as :func:`tirxpy_kernels.gemm_fp8` builds it for e4m3 operands and a bf16 output, or
    ``("factory", module, name, args, kwargs)``: the kernel factory ``module.name(*args, **kwargs)`` (for example
    ``("factory", "tirxpy_kernels.attention_bwd_sm90", "attention_bwd_sm90", (8, 16, 16, 4096, 4096, 128), {})``).
    Returns ``(kind, seconds)``."""
    import tirxpy

    t0 = time.time()
    if spec[0] == "gemm":
        from .gemm_api import _tile
        from .gemm_plan import TARGET as target
        from .gemm_sm90 import gemm_sm90

        _, M, N, K, tuning, sms = spec
        tuning = _tile(tuning, M, N, K, sms)          # as tirxpy_kernels.gemm chooses it
        k = gemm_sm90(M, N, K, a_major="K", b_major="K", dtype="bfloat16", out_dtype="bfloat16", bias=False,
                      activation=None, sms=sms, **tuning)
    elif spec[0] == "attention":
        from .attention_plan import TARGET as target
        from .attention_plan import plan
        from .attention_sm90 import attention_sm90

        _, B, H, HKV, SQ, SK, D, causal, tuning = spec
        p = plan(B, H, HKV, SQ, SK, D, "bfloat16", causal=causal, **tuning)
        k = attention_sm90(B, H, HKV, SQ, SK, D, causal=causal, scale=None, dtype="bfloat16",
                           SQT=max(SQ, p["BM"]), SKT=max(SK, p["BN"]), **tuning)
    elif spec[0] == "factory":
        import importlib

        _, mod, name, a, kw = spec
        if not (isinstance(mod, str) and mod.startswith(f"{__package__}.") and isinstance(name, str)):
            raise KernelConfigError(f"prebuild: a factory spec names a kernel factory of {__package__} (module "
                                    f"'{__package__}.<name>'), got module {shown(mod, 60)}")
        from tirxpy.jit import JitFunction

        f = getattr(importlib.import_module(mod), name, None)
        if not isinstance(f, JitFunction):
            raise KernelConfigError(f"prebuild: {mod}.{name:.60} is not a kernel factory (a @tirxpy.jit function)")
        if not (isinstance(a, (tuple, list)) and isinstance(kw, dict)):
            raise KernelConfigError(f"prebuild: a factory spec's arguments are a tuple and a dict of keywords, got "
                                    f"{type(a).__name__} and {type(kw).__name__}")
        target = "sm_90a"
        k = f(*a, **kw)
    elif spec[0] == "gemm_fp8":
        from .gemm_fp8_api import kernel_for
        from .gemm_plan import TARGET as target

        _, M, N, K, scaling, tuning, sms = spec
        k = kernel_for(M, N, K, scaling, sms=sms, **tuning)[0]
    else:
        raise KernelConfigError(f"prebuild: unknown kernel kind {shown(spec[0])}; 'gemm', 'gemm_fp8', 'attention' or "
                                "'factory'")
    tirxpy.compile(k, arch=target)
    return spec[0], time.time() - t0


def prebuild(specs, jobs=None):
    """Build ``specs`` in ``jobs`` spawned processes (default: one per core, at most 16); returns
    the wall seconds. ``jobs <= 1`` does nothing (the benchmark then builds as it goes)."""
    jobs = min(16, os.cpu_count() or 1) if jobs is None else jobs
    if jobs <= 1 or not specs:
        return 0.0
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    t0 = time.time()
    with ProcessPoolExecutor(max_workers=min(jobs, len(specs)), mp_context=mp.get_context("spawn")) as ex:
        list(ex.map(prebuild_one, specs))
    return time.time() - t0
