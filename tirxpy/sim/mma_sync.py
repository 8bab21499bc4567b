"""mma.sync.aligned.m16n8k16 (f16 / bf16 inputs, f32 or f16 accumulators) with the fragment
layouts of ``tirxpy.layout.atoms`` (PTX ISA Figures 79, 81, 83). Other shapes are reported as
unsupported by name."""
from __future__ import annotations

import numpy as np

from tirxpy.layout.atoms import mma_m16n8k16_a, mma_m16n8k16_b, mma_m16n8k16_c

from .registry import register_model
from .values import from_bits

WARP = 32


def _place(L, shape):
    names, t = L.owner_table()
    return t[:, 0, names.index("laneid")].reshape(shape), t[:, 0, names.index("m")].reshape(shape)


def _mma(ab, acc_f32):
    def model(ctx):
        if not ctx.mask.all():
            ctx.report("mma_sync_misuse", "mma.sync is .aligned: all 32 lanes of the warp must issue it")
        a = np.ascontiguousarray(ctx.arg("a").read(ctx.mask).astype(np.uint32)).view(np.uint16)  # (32, 8)
        b = np.ascontiguousarray(ctx.arg("b").read(ctx.mask).astype(np.uint32)).view(np.uint16)  # (32, 4)
        la, ma = _place(mma_m16n8k16_a(), (16, 16))
        lb, mb = _place(mma_m16n8k16_b(), (16, 8))
        lc, mc = _place(mma_m16n8k16_c(), (16, 8))
        A = from_bits(a[la, ma], ab).astype(np.float64)
        B = from_bits(b[lb, mb], ab).astype(np.float64)
        c = ctx.arg("c").read(ctx.mask)
        if acc_f32:
            C = c.astype(np.float64)[lc, mc]
        else:
            C = np.ascontiguousarray(c.astype(np.uint32)).view(np.float16).astype(np.float64)[lc, mc]
        D = A @ B + C
        if acc_f32:
            out = np.zeros((WARP, 4), np.float32)
            out[lc, mc] = D.astype(np.float32)
        else:
            h = np.zeros((WARP, 4), np.float16)
            h[lc, mc] = D.astype(np.float16)
            out = np.ascontiguousarray(h).view(np.uint32)
        ctx.arg("d").write(ctx.mask, out, ordinary=True)
    return model


register_model("mma_sync_m16n8k16_f32_f16_f16_f32", _mma("float16", True))
register_model("mma_sync_m16n8k16_f32_bf16_bf16_f32", _mma("bfloat16", True))
register_model("mma_sync_m16n8k16_f16_f16_f16_f16", _mma("float16", False))
