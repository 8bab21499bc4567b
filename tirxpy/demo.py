"""``python -m tirxpy demo [--out DIR]``: a short tour, one section per capability.

Later issues append sections (kernels, GEMM, ...) to :data:`SECTIONS`; each is a function
``(ctx) -> None`` that prints a few lines. ``ctx`` carries the output directory and shared
objects between sections.
"""
from __future__ import annotations

import argparse
import os
import sys

from .layout import R, S, TileLayout, laneid, warpid
from .layout.errors import LayoutError
from .lower.errors import LowerError
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
    from .layout.pictures import plot

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


SECTIONS = [
    ("Layouts: shard, replica, offset", section_layout),
    ("Table", section_table),
    ("Plot", section_plot),
    ("Hardware atoms", section_atom),
    ("Kernel -> CUDA C++ (built on the CPU)", section_codegen),
]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m tirxpy demo", description="A short tour of tirxpy.")
    parser.add_argument("--out", default=".", help="directory for the pictures (default: current directory)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not os.path.isdir(args.out):
        print(f"tirxpy demo: error: --out {args.out!r} is not a directory; create it first", file=sys.stderr)
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
