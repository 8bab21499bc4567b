"""Two simulated ranks for the dist kernels' CPU tests: symmetric buffers, arguments, float64 references."""
import numpy as np
import torch

from tirxpy.sim.ranks import Symmetric, run_ranks
from tirxpy_kernels.dist_ag_gemm import ag_gemm, need_table


def bf16(t):
    return t.bfloat16().float()


def run_ag(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, world=2, drop=None, check=True):
    """Simulate the all-gather GEMM on ``world`` ranks; returns (C per rank as float64, A_full, B, flags, need,
    problems)."""
    g = torch.Generator().manual_seed(seed)
    ms = M // world
    shards = [bf16(torch.randn(ms, K, generator=g)) for _ in range(world)]
    b = bf16(torch.randn(K, N, generator=g))
    need = need_table(M, world)
    rows = need.shape[1]
    slot = Symmetric("A_sym", (M, K), "bfloat16", world)
    flags = Symmetric("flags", (world, rows), "uint32", world)
    sig = Symmetric("sig", (world,), "uint32", world)
    for r in range(world):                      # what earlier calls left: every flag at Need * (epoch - 1)
        flags.set(r, need * np.uint32(epoch - 1))
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    outs = [torch.full((M, N), float("nan")) for _ in range(world)]
    ks = [ag_gemm(M, N, K, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=drop) for r in range(world)]
    args = [(slot.on(r), b, torch.zeros(1, 1), outs[r], shards[r].numpy(), slot.on(r), slot.on(1 - r),
             flags.on(r), flags.on(1 - r), sig.on(r), sig.on(1 - r), need, epoch) for r in range(world)]
    res = run_ranks(ks, args, seed=seed, late=late, check=check)
    return [o.double() for o in outs], torch.cat(shards), b, flags, need, res[0].problems


def close_to_float64(c, a, b):
    """bf16 output of a float32-accumulated product: within a bf16 rounding of the float64 result plus the
    accumulation's error bound."""
    ref = a.double() @ b.double()
    bound = 2.0 ** -8 * ref.abs() + a.shape[1] * 2.0 ** -22 * (a.double().abs() @ b.double().abs()) + 1e-30
    return bool(torch.all((c - ref).abs() <= bound))
