"""Rendezvous for instructions a whole warpgroup (or CTA) issues together (``.sync.aligned``):
every member warp arrives, the last one runs the model once for all, the others wait."""
from __future__ import annotations

from .interp import Block


def warpgroup_members(w):
    return [x.wid for x in w.cta.warps if x.wid // 4 == w.wid // 4 and x.alive.any()]


def collective(ctx, kind, members, fn, what):
    w = ctx.w
    seq = w.coll_seq.get(kind, 0)
    w.coll_seq[kind] = seq + 1
    key = (kind, tuple(members), seq)
    st = ctx.cta.collectives.setdefault(key, {"parts": {}, "done": False, "result": None})
    st["parts"][w.wid] = ctx
    if len(st["parts"]) == len(members):
        st["result"] = fn(st["parts"])
        st["done"] = True
        ctx.cta.collectives.pop(key, None)
    else:
        yield Block(lambda: st["done"], f"warps {sorted(set(members) - set(st['parts']))} to issue {what} too",
                    ctx.span)
    return st["result"]
