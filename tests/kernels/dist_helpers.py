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


def run_rs(M, N, K, *, BN=128, sms=2, seed=0, epoch=1, late=None, drop=None, check=True, world=2):
    """Simulate the GEMM + reduce-scatter on ``world`` ranks: rank r holds A[:, K shard r], B[K shard r, :];
    returns (OUT per rank as float64, A, B, problems)."""
    from tirxpy_kernels.dist_rs_gemm import rs_gemm, rs_need

    g = torch.Generator().manual_seed(seed)
    kr = K // world
    a = bf16(torch.randn(M, K, generator=g))
    b = bf16(torch.randn(K, N, generator=g))
    rows = -(-M // 128)
    tile_cols = -(-N // BN)
    recv = [Symmetric(f"R{q}", (M, N), "bfloat16", world) for q in range(world)]
    flags = Symmetric("flags", (world, rows), "uint32", world)
    sig = Symmetric("sig", (world,), "uint32", world)
    needs = [rs_need(M, world, tile_cols, r) for r in range(world)]
    for r in range(world):
        flags.set(r, needs[r] * np.uint32(epoch - 1))
        sig.set(r, np.full(world, epoch - 1, np.uint32))
    outs = [torch.full((M // world, N), float("nan")) for _ in range(world)]
    ks = [rs_gemm(M, N, kr, me=r, world=world, BN=BN, STAGES=2, sms=sms, drop=drop) for r in range(world)]
    args = [(a[:, r * kr:(r + 1) * kr].contiguous(), b[r * kr:(r + 1) * kr].contiguous(), torch.zeros(1, 1), outs[r],
             recv[r].on(r), recv[r].on(1 - r), recv[0].on(r), recv[1].on(r), flags.on(r), flags.on(1 - r),
             sig.on(r), sig.on(1 - r), needs[r], epoch) for r in range(world)]
    res = run_ranks(ks, args, seed=seed, late=late, check=check)
    return [o.double() for o in outs], a, b, res[0].problems


def rs_close_to_float64(out, a, b, r, world=2):
    """Rows of rank ``r`` of ``sum_q A_q B_q``: each partial rounded to bf16, their sum rounded again."""
    M, K = a.shape
    ms, kr = M // world, K // world
    rows = slice(r * ms, (r + 1) * ms)
    parts = [a[rows, q * kr:(q + 1) * kr].double() @ b[q * kr:(q + 1) * kr].double() for q in range(world)]
    mags = sum((a[rows, q * kr:(q + 1) * kr].double().abs() @ b[q * kr:(q + 1) * kr].double().abs())
               for q in range(world))
    ref = sum(parts)
    bound = 2.0 ** -7 * (sum(p.abs() for p in parts) + ref.abs()) + K * 2.0 ** -22 * mags + 1e-30
    return bool(torch.all((out - ref).abs() <= bound))
