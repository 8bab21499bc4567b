"""Two simulated ranks for the dist kernels' CPU tests (the drivers are the kernels' ``simulate``) and the
float64 checks."""
import torch

from tirxpy_kernels.dist_ag_gemm import simulate as _sim_ag
from tirxpy_kernels.dist_rs_gemm import simulate as _sim_rs


def run_ag(M, N, K, **kw):
    """(C per rank as float64, A_full, B, flags, Need, problems)."""
    outs, a, b, flags, need, probs = _sim_ag(M, N, K, **kw)
    return [o.double() for o in outs], a, b, flags, need, probs


def run_rs(M, N, K, **kw):
    """(OUT per rank as float64, A, B, problems)."""
    outs, a, b, probs = _sim_rs(M, N, K, **kw)
    return [o.double() for o in outs], a, b, probs


def close_to_float64(c, a, b):
    """bf16 output of a float32-accumulated product: within a bf16 rounding of the float64 result plus the
    accumulation's error bound."""
    ref = a.double() @ b.double()
    bound = 2.0 ** -8 * ref.abs() + a.shape[1] * 2.0 ** -22 * (a.double().abs() @ b.double().abs()) + 1e-30
    return bool(torch.all((c - ref).abs() <= bound))


def rs_close_to_float64(out, a, b, r, world=2):
    """Rows of rank ``r`` of ``sum_q A_q B_q``: each partial rounded to bf16, their sum rounded again."""
    M, K = a.shape
    ms, kr = M // world, K // world
    rows = slice(r * ms, (r + 1) * ms)
    parts = [a[rows, q * kr:(q + 1) * kr].double() @ b[q * kr:(q + 1) * kr].double() for q in range(world)]
    mags = sum((a[rows, q * kr:(q + 1) * kr].double().abs() @ b[q * kr:(q + 1) * kr].double().abs())
               for q in range(world))
    ref = sum(parts)
    bound = 2.0 ** -8 * (sum(p.abs() for p in parts) + ref.abs()) + K * 2.0 ** -22 * mags + 1e-30
    return bool(torch.all((out - ref).abs() <= bound))
