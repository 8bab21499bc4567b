"""The float64 attention reference the attention tests (simulator and GPU) compare against."""
import torch


def reference(q, k, v, causal, scale):
    """float64 attention (B, SQ, H, D) and log-sum-exp (B, H, SQ) of (B, S, H, D) tensors; GQA by
    head groups; causal is top-left aligned (query row i sees keys 0..i, like torch's is_causal)."""
    G = q.shape[2] // k.shape[2]
    qd = q.double().transpose(1, 2)
    kd = k.double().transpose(1, 2).repeat_interleave(G, 1)
    vd = v.double().transpose(1, 2).repeat_interleave(G, 1)
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ vd).transpose(1, 2), torch.logsumexp(s, -1)
