"""The float64 attention backward reference the backward tests (simulator and GPU) compare against."""
import torch

from tests.kernels.attention_reference import reference


def reference_grads(q, k, v, dout, causal, scale):
    """``(dq, dk, dv)`` in float64: autograd through :func:`tests.kernels.attention_reference.reference` (a
    float64 math attention; GQA by head groups, causal top-left aligned) with output gradient ``dout``."""
    qd, kd, vd = (t.detach().double().requires_grad_(True) for t in (q, k, v))
    out, _ = reference(qd, kd, vd, causal, scale)
    return torch.autograd.grad(out, (qd, kd, vd), dout.double())
