"""The float64 attention reference the attention tests (simulator and GPU) compare against, and the
rounding bound a 16-bit kernel's output is held to."""
import torch

# unit roundoff of the 16-bit input / output types: half the distance from 1 to the next value
UNIT_ROUNDOFF = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
# half the distance between their subnormals: the absolute error of rounding a value below the smallest normal one
SUBNORMAL_HALF_STEP = {torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25}


def _heads(q, k, v):
    """(B, H, S, D) float64 copies of q, k, v, with k and v repeated over each group's query heads (GQA)."""
    G = q.shape[2] // k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(G, 1)
    vd = v.double().transpose(1, 2).repeat_interleave(G, 1)
    return qd, kd, vd


def _scores(qd, kd, causal, scale):
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s


def reference(q, k, v, causal, scale):
    """float64 attention (B, SQ, H, D) and log-sum-exp (B, H, SQ) of (B, S, H, D) tensors; GQA by
    head groups; causal is top-left aligned (query row i sees keys 0..i, like torch's is_causal)."""
    qd, kd, vd = _heads(q, k, v)
    s = _scores(qd, kd, causal, scale)
    return (torch.softmax(s, -1) @ vd).transpose(1, 2), torch.logsumexp(s, -1)


def output_bound(q, k, v, causal, scale):
    """Elementwise bound (B, SQ, H, D) on ``|O - reference|`` for a kernel that rounds P to the input type
    before ``P V`` and O to it at the end: ``u (2 |O| + P |V|) + e (1 + sum_j |v_j|)`` with ``u`` the type's unit
    roundoff and ``e`` half its subnormal step (the sum over the keys the row sees).

    Rounding each unnormalised ``p_j <= 1`` moves it by at most ``u p_j + e``, so ``O`` (divided by a row sum of at
    least 1) by at most ``u P |V| + e sum_j |v_j|``; normalising by a sum of the unrounded ``p_j`` moves it by at
    most ``u |O|``; rounding the result, ``u |O| + e`` again. The ``e`` terms matter only in float16, whose
    subnormals start below ``2**-14``. A fixed absolute tolerance is not a bound: where P is close to one-hot,
    ``|O|`` is ``|v_j|`` (4 and more for standard normal values), and its last rounding alone is ``2**-6`` in bf16.
    Example: bf16, one key, ``v = 5.0``: ``O = 5`` exactly and the bound is ``2**-8 (10 + 5) = 0.059``."""
    qd, kd, vd = _heads(q, k, v)
    s = _scores(qd, kd, causal, scale)
    p = torch.softmax(s, -1)
    o = (p @ vd).abs()
    seen = torch.isfinite(s).double() @ vd.abs()
    return (UNIT_ROUNDOFF[q.dtype] * (2 * o + p @ vd.abs()) + SUBNORMAL_HALF_STEP[q.dtype] * (1 + seen)).transpose(1, 2)
