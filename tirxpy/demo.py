"""``python -m tirxpy demo [--out DIR]``: a short tour, one section per capability.

Later issues append sections (kernels, GEMM, ...) to :data:`SECTIONS`; each is a function
``(ctx) -> None`` that prints a few lines. ``ctx`` carries the output directory and shared
objects between sections.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

from .layout import R, S, TileLayout, laneid, warpid
from .layout.errors import LayoutError
from .lower.errors import LowerError
from .command_line import checked_argv
from .scope.errors import TirxError

DESIGN_SPEC = "S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] + R[2 : 4@warpid] + 5@warpid"


def _fmt(d):
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def section_layout(ctx):
    """The DESIGN.md section 2 layout and the owners of element (3, 9)."""
    L = TileLayout(S[(8, 2, 4, 2) : (4 @ laneid, 1 @ warpid, 1 @ laneid, 1)] + R[2 : 4 @ warpid] + 5 @ warpid)
    ctx["layout"] = L
    print(f"L = TileLayout({DESIGN_SPEC})")
    print(f"  size {L.size()}, spans " + ", ".join(f"{k}={v}" for k, v in L.span().items()))
    print("  owners of (3, 9) in the (8, 16) tile: " + ", ".join(_fmt(o) for o in L.owners(3, 9, shape=(8, 16))))


def section_table(ctx):
    """The tile as a grid of owners (lane L, warp W, register r; replicas after '/')."""
    print(ctx["layout"].table(shape=(8, 16)))


def section_plot(ctx):
    """PNG + SVG pictures of the same tile."""
    from .viz.pictures import plot

    stem = os.path.join(ctx["out"], "tirxpy_demo_layout")
    for p in plot(ctx["layout"], stem, shape=(8, 16)):
        print(f"  wrote {p}")


def section_atom(ctx):
    """A hardware atom is a layout too: the WGMMA m64n16k16 f32 accumulator."""
    from .layout.atoms import wgmma_accumulator

    A = wgmma_accumulator(16)
    print(f"wgmma_accumulator(16) = {A!r}")
    print("  owners of (37, 13) in the (64, 16) tile: " + ", ".join(_fmt(o) for o in A.owners(37, 13, shape=(64, 16))))


def section_codegen(ctx):
    """A small IR kernel built for Hopper and Blackwell on the CPU: its CUDA C++ and resources."""
    from .ir import T
    from .lower import build

    @T.prim_func
    def axpb(X: T.Tensor((1024,), "float32"), Y: T.Tensor((1024,), "float32"), a: T.float32):
        T.launch(grid=(8,), threads=128)
        i = T.cta_id(0) * 128 + T.thread_id()
        Y[i] = a * X[i] + T.float32(1)

    for arch in ("sm_90a", "sm_100a"):
        k = build(axpb, arch)
        s = k.summary()
        print(f"  {arch}: {s['registers']} registers, {s['spills']} B spilled, {s['smem']} B smem, {s['threads']} threads")
    src = k.cuda_source
    entry = src[src.index('extern "C"'):].splitlines()
    for line in entry[:5] + entry[-2:]:
        print("  | " + line)


def _silu_rows_kernel():
    """``Y[r, :] = silu(X[r, :])`` for 64 rows of 256 bf16, a warp per row, written only with
    tile primitives (each lane holds 8 contiguous elements: one 16-byte vector)."""
    from .ir import T, Tx

    row_tile = TileLayout(S[(32, 8) : (1 @ laneid, 1)])

    @T.prim_func
    def silu_rows(X: T.Tensor((64, 256), "bfloat16"), Y: T.Tensor((64, 256), "bfloat16")):
        T.launch(grid=(64,), threads=32)
        row = T.cta_id(0)
        x = T.alloc_local((256,), "bfloat16", layout=row_tile)
        xf = T.alloc_local((256,), "float32", layout=row_tile)
        Tx.warp.copy(x, X[row, :])
        Tx.warp.cast(xf, x)
        Tx.warp.silu(xf, xf)
        Tx.warp.copy(Y[row, :], xf)

    return silu_rows


def section_primitives(ctx):
    """Tile primitives dispatch by layout, scope and target: what each call became."""
    from .primitives import explain

    ctx["silu_rows"] = k = _silu_rows_kernel()
    lines = explain(k, "sm_90a").splitlines()
    keep = [ln for ln in lines if "Tx." in ln or "->" in ln or "emits:" in ln]
    for line in keep[:9]:
        print("  " + line.replace(os.path.dirname(os.path.abspath(__file__)) + os.sep, ""))


def _silu_reference(x):
    import numpy as np

    x = np.asarray(x, np.float64)
    return x / (1 + np.exp(-x))


def section_simulate(ctx):
    """The same kernel run on the CPU by the simulator (races, barriers, bounds checked), against float64."""
    import numpy as np

    from .sim import run

    rng = np.random.default_rng()
    x = rng.standard_normal((64, 256)).astype(np.float32) * 3
    y = np.full((64, 256), np.nan, np.float32)
    xs, ys = run(ctx["silu_rows"], x, y)
    ref = _silu_reference(xs)
    rel = float((np.abs(ys - ref) / (np.abs(ref) + 1e-3)).max())
    ok = rel <= 2 ** -7  # bf16 output: one rounding (2^-9) plus the SFU approximations, with margin
    print(f"  tirxpy.sim.run: 64 CTAs x 1 warp, no problems reported; max relative error vs float64 = "
          f"{rel:.1e} ({'ok' if ok else 'TOO LARGE'}: bf16 output)")
    if not ok:
        raise TirxError(f"the simulated kernel is off by {rel:.2e} relative to float64")


def section_gpu(ctx):
    """On a machine with a GPU: build for it, run on torch tensors, compare with float64."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("  no CUDA GPU here: skipped (on a GPU machine this section runs the kernel on torch tensors)")
        return
    from .lower import build
    from .lower.runtime import device_arch

    k = build(ctx["silu_rows"], device_arch())
    x = torch.randn(64, 256, device="cuda").to(torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    k(x, y)
    torch.cuda.synchronize()
    ref = torch.nn.functional.silu(x.double())
    rel = ((y.double() - ref).abs() / (ref.abs() + 1e-3)).max().item()
    print(f"  {torch.cuda.get_device_name()} ({device_arch()}): max relative error vs float64 = {rel:.1e} "
          f"({'ok' if rel <= 2 ** -7 else 'TOO LARGE'}: bf16 output)")
    if not rel <= 2 ** -7:
        raise TirxError(f"the kernel on the GPU is off by {rel:.2e} relative to float64")


SECTIONS = [
    ("Layouts: shard, replica, offset", section_layout),
    ("Table", section_table),
    ("Plot", section_plot),
    ("Hardware atoms", section_atom),
    ("Kernel -> CUDA C++ (built on the CPU)", section_codegen),
    ("Tile primitives -> native instructions (tirxpy.explain)", section_primitives),
    ("Verified on the CPU (tirxpy.sim)", section_simulate),
    ("On the GPU", section_gpu),
]


def out_error(out: str):
    """Why ``--out`` cannot take the demo's pictures, as one line naming the path (a usage error: exit 2), or None
    when it is a directory this process can write to (checked by creating a nameless temporary file there).

        >>> out_error(".") is None
        True
        >>> out_error("")
        "--out '' names no directory; pass one (such as --out .)"
        >>> out_error(os.path.join(__file__, "sub"))       # doctest: +ELLIPSIS
        "--out '.../demo.py/sub' is not a directory: '.../demo.py' is a file, so nothing can be created under it; ..."
    """
    if out == "":
        return f"--out {out!r} names no directory; pass one (such as --out .)"
    if not os.path.isdir(out):
        up = os.path.abspath(out)
        while not os.path.exists(up) and os.path.dirname(up) != up:
            up = os.path.dirname(up)
        if up == os.path.abspath(out):
            return f"--out {out!r} is a file, not a directory; pass a directory"
        if os.path.exists(up) and not os.path.isdir(up):
            return f"--out {out!r} is not a directory: {up!r} is a file, so nothing can be created under it; " \
                   "pass a directory"
        return f"--out {out!r} is not a directory; create it first (mkdir -p {out})"
    try:
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        return f"--out {out!r} is not writable ({e.strerror or e}); pass a directory you can write to"
    return None


def main(argv=None) -> int:
    argv = checked_argv(argv, "tirxpy demo")
    if argv is None:
        return 2
    parser = argparse.ArgumentParser(prog="python -m tirxpy demo", description="A short tour of tirxpy.")
    parser.add_argument("--out", default=".", help="directory for the pictures (default: current directory)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    bad = out_error(args.out)
    if bad is not None:
        print(f"tirxpy demo: error: {bad}", file=sys.stderr)
        return 2
    ctx = {"out": args.out}
    for k, (title, fn) in enumerate(SECTIONS, 1):
        print(f"== {k}. {title}")
        try:
            fn(ctx)
        except (LayoutError, OSError, TirxError, LowerError) as e:
            print(f"tirxpy demo: error in section {title!r}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
