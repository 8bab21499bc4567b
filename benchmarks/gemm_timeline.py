"""Where a cooperative ``kernels.gemm`` kernel spends its time, from ``%globaltimer`` stamps (GPU machine;
a diagnostic, not a test).

    python benchmarks/gemm_timeline.py MxNxK [KEY=VALUE,...]

Builds a copy of :func:`kernels.gemm_sm90.gemm_sm90` whose CTAs record, into an extra ``(CTAs, 80)`` uint64
tensor, the time at entry, after ``griddepcontrol.wait``, at each tile's start, before its first ``full``
wait, when its first stage has landed and when its accumulator is complete, around each store round of the
last tile, and at exit (plus ``%clock64`` for the SM clock). The copy is made by inserting those stores into
the kernel's source text; each insertion point must be found exactly once, so a change to the kernel that
moves one stops this script with the snippet it looked for. Runs 30 chains of 10 back-to-back launches (as
``kernels.bench`` does) and prints medians over the later chains. Cooperative schedule only (``PINGPONG``
tiles are refused: ask for ``BN=256``).
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

_STAMP = "if T.thread_id() == {tid}:\n{pad}    Tr[T.cta_id(0), {slot}] = T.ptx.globaltimer()\n"


def _stamp(pad, slot, tid=128):
    return pad + _STAMP.format(tid=tid, pad=pad, slot=slot)


def traced_module():
    """The kernel module with the stamps inserted (a copy in a temporary directory; ``kernels.gemm_sm90`` is
    untouched)."""
    import kernels.gemm_sm90 as base

    src = open(base.__file__).read()

    def put(anchor, new):
        """Replace the one copy of ``anchor`` in the kernel's source by ``new``."""
        nonlocal src
        if src.count(anchor) != 1:
            raise SystemExit(f"gemm_timeline: the kernel source has {src.count(anchor)} copies of {anchor!r}, "
                             "not one: update the insertion points to the kernel")
        src = src.replace(anchor, new)

    p8, p12, p16, p20 = " " * 8, " " * 12, " " * 16, " " * 20
    put("from .schedule import", "from kernels.schedule import")
    a = "C: T.Tensor((M, N), out_dtype)):"
    put(a, a[:-2] + ',\n                         Tr: T.Tensor((p["grid"], 80), "uint64")):')
    a = "        n_tiles = tiles_of_unit(unit, UNITS, TILES)\n"
    put(a, a + _stamp(p8, 0, tid=0))
    a = "            T.ptx.griddepcontrol_wait()\n"
    put(a, a + _stamp(p8, 1, tid=0) + p8 + "if T.thread_id() == 0:\n" + p12 + "Tr[T.cta_id(0), 60] = T.ptx.clock64()\n")
    a = "                if DEFER:       # the previous tile, whose bf16 / f16 values wait in pk\n"
    put(a, _stamp(p16, "4 + 3 * i") + a)
    # the k-loop is a macro (k_loop), which sees only its parameters: pass it the stamp tensor too
    a = "    def k_loop(acc, As, Bs, full, empty, C, Cs, pk, i, c, pm0, pn0, pwide, n):"
    put(a, a[:-2] + ", Tr):")
    calls = re.findall(r"k_loop\(acc, As, Bs, full, empty, C, Cs, [^\n]*\)\n", src)
    for call in set(calls):
        src = src.replace(call, call[:-2] + ", Tr)\n")
    a = ("            s = g % STAGES\n            if d != \"full_wait\":\n"
         "                T.ptx.mbarrier_wait_parity(full[s], (g // STAGES) % 2)\n"
         "            mma(acc, As, Bs, s, c * 64, k, W1, n)\n")
    put(a, a.replace(p12 + "if d", p12 + "if k == 0:\n" + _stamp(p12 + "    ", "64 + i") + p12 + "if d", 1))
    a = "(g // STAGES) % 2)\n            mma(acc, As, Bs, s, c * 64, k, W1, n)\n"
    put(a, a.replace(p12 + "mma(", p12 + "if k == 0:\n" + _stamp(p12 + "    ", "5 + 3 * i") + p12 + "mma("))
    a = "                    Tx.wg.gemm_wait(0, acc)\n                if T.thread_id_in_wg() == 0:\n"
    put(a, a.replace(p16 + "if", _stamp(p16, "6 + 3 * i") + p16 + "if"))
    a = ("                    for j in range(NR):\n"
         "                        store_round(C, Cs, pk, n_tiles - 1, j, c, lm0, ln0, lwide)\n")
    put(a, _stamp(p20, 52) + a + p20 + "    if j < 4:\n" + _stamp(p20 + "        ", "53 + j"))
    a = "        if CM > 1:\n            T.ptx.cluster_sync()     # no CTA leaves"
    put(a, _stamp(p8, 3) + p8 + "if T.thread_id() == 128:\n" + p12 + "Tr[T.cta_id(0), 61] = T.ptx.clock64()\n" + a)
    # the kernel parser reads a function's source from its file, so the copy lives in one
    path = os.path.join(tempfile.mkdtemp(prefix="gemm_timeline_"), "gemm_sm90_timeline.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location("gemm_sm90_timeline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def report(r, nt):
    """Print the phases from stamps ``r`` ``(chains, launches, CTAs, 80)`` of a kernel whose CTA ``u`` has
    ``nt[u]`` tiles (launches after the first of each chain, whose predecessor is known)."""
    G = len(nt)

    def show(name, x, scale=1e-3, unit="us"):
        x = np.asarray(x, dtype=np.float64).ravel() * scale
        print(f"  {name:42s} median {np.median(x):8.2f} {unit}   p10 {np.percentile(x, 10):8.2f}   "
              f"p90 {np.percentile(x, 90):8.2f}")

    t = r[:, 1:]                                       # launches after the first of each chain
    t0 = t[..., 0].min(axis=-1)
    show("kernel (first entry .. last exit)", t[..., 3].max(axis=-1) - t0)
    show("gap after the previous launch", t0 - r[:, :-1, :, 3].max(axis=-1))
    show("first stage landed, after the wait", t[..., 5] - t[..., 1])
    full = nt == nt.max()
    durs = np.concatenate([(t[..., u, 6 + 3 * i] - t[..., u, 5 + 3 * i]).ravel()
                           for u in range(G) for i in range(nt[u])])
    show("tile (first stage .. accumulator)", durs)
    gaps = [(t[..., u, 5 + 3 * i] - t[..., u, 6 + 3 * (i - 1)]).ravel() for u in range(G) for i in range(1, nt[u])]
    if gaps:
        show("between tiles (accumulator .. next stage)", np.concatenate(gaps))
        show("  accumulator .. first full wait", np.concatenate(
            [(t[..., u, 64 + i] - t[..., u, 6 + 3 * (i - 1)]).ravel() for u in range(G) for i in range(1, nt[u])]))
        show("  first full wait (next tile's stage 0)", np.concatenate(
            [(t[..., u, 5 + 3 * i] - t[..., u, 64 + i]).ravel() for u in range(G) for i in range(1, nt[u])]))
    last = np.stack([t[..., u, 6 + 3 * (nt[u] - 1)] for u in range(G)], axis=-1)
    show("last tile's stores (accumulator .. exit)", (t[..., 3] - last)[..., full])
    for j in range(4):
        if (t[..., 53 + j][..., full] > 0).all():      # the tile's store rounds (up to 4 stamped)
            show(f"  store round {j}", (t[..., 53 + j] - t[..., 52 + j])[..., full])
    show("exit, CTAs with the most tiles", (t[..., 3] - t0[..., None])[..., full])
    if (~full).any():
        show("exit, CTAs with one tile fewer", (t[..., 3] - t0[..., None])[..., ~full])
    show("SM clock (clock64 / globaltimer)", (t[..., 61] - t[..., 60]) / (t[..., 3] - t[..., 1]), 1e3, "MHz")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        raise SystemExit(__doc__.split("\n\n")[1])
    import torch

    import tirxpy
    from kernels.bench import parse_shapes, parse_tunings
    from kernels.gemm_api import _tile
    from kernels.gemm_sm90 import plan
    from tirxpy.lang.schedule import tiles_of_unit

    (M, N, K), = parse_shapes(argv[0], 3, "4096x4096x4096")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tuning = _tile(parse_tunings(argv[1] if len(argv) > 1 else "")[0], M, N, K, sms)
    if tuning.get("PINGPONG"):
        raise SystemExit(f"gemm_timeline: kernels.gemm runs {M}x{N}x{K} ping-pong ({tuning}); the stamps are in "
                         "the cooperative schedule: pass BN=256 (or PINGPONG=0)")
    k = traced_module().gemm_sm90(M, N, K, sms=sms, **tuning)
    G = int(k.launch.grid[0])
    tiles = plan(M, N, K, BN=tuning["BN"], sms=sms, split=tuning.get("SPLIT"))["tiles"]
    nt = np.array([tiles_of_unit(u, G, tiles) for u in range(G)])
    if nt.max() > 15:
        raise SystemExit(f"gemm_timeline: {nt.max()} tiles per CTA; the stamps have room for 15")
    ck = tirxpy.compile(k, arch="sm_90a")
    sets = [(torch.randn(M, K, device="cuda", dtype=torch.bfloat16),
             torch.randn(N, K, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    bias = torch.zeros(1, 1, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    trs = [torch.zeros(G, 80, dtype=torch.uint64, device="cuda") for _ in range(10)]
    runs = []
    for rep in range(30):
        for j in range(10):
            a, b = sets[(rep * 10 + j) % 4]
            ck(a, b, bias, out, trs[j])
        torch.cuda.synchronize()
        runs.append(torch.stack([t.view(torch.int64) for t in trs]).cpu().numpy())
    a, b = sets[(29 * 10 + 9) % 4]
    ref = a.float() @ b.float().t()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    print(f"{M}x{N}x{K} {tuning}: {G} CTAs, tiles per CTA {sorted(set(nt.tolist()))}, relerr {err:.1e}")
    report(np.stack(runs)[5:].astype(np.int64), nt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
