"""``python -m tirxpy layout "<spec>" [--shape 8,16] [--owners 3,9] [--table] [--plot out.png]``.

The spec is TIRx layout syntax, ``S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] +
R[2 : 4@warpid] + 5@warpid``, or a full expression such as ``TileLayout(...)``,
``ComposeLayout(...)`` or an atom call (``wgmma_accumulator(64)``). It is parsed with
:mod:`ast` and evaluated by a small interpreter that knows only integers, strings, booleans,
tuples, slices, ``+``, ``@``, the axis names, ``S`` / ``R`` and an allow-list of layout
functions; anything else is refused with a message (exit code 2), never executed.
"""
from __future__ import annotations

import argparse
import ast
import math
import operator
import sys

from tirxpy.errors import shown
from tirxpy.command_line import checked_argv

from . import atoms
from .axis import Axis
from .errors import MAX_TABLE, LayoutError
from .iters import R, S
from .swizzle import ComposeLayout, SwizzleLayout, swizzle_32B, swizzle_64B, swizzle_128B, swizzle_for
from .tile import Layout, TileLayout

MAX_SPEC_CHARS = 4000

CALLABLES = {
    "TileLayout": TileLayout,
    "ComposeLayout": ComposeLayout,
    "SwizzleLayout": SwizzleLayout,
    "swizzle_for": swizzle_for,
    "swizzle_32B": swizzle_32B,
    "swizzle_64B": swizzle_64B,
    "swizzle_128B": swizzle_128B,
}
for _name in ("ldmatrix_layout", "mma_m16n8k16_a", "mma_m16n8k16_b", "mma_m16n8k16_c", "mma_smem_layout",
              "wgmma_smem_layout", "tcgen05_smem_layout", "tmem_accumulator", "tmem_ld_layout",
              "tmem_ld_tmem_layout", "tmem_warpx4_layout", "wgmma_a_fragment", "wgmma_accumulator"):
    CALLABLES[_name] = getattr(atoms, _name)


class SpecError(LayoutError):
    """The layout spec uses syntax or names the CLI does not allow."""


def _names():
    names = {"S": S, "R": R, "True": True, "False": False, "None": None}
    names.update(Axis.all())
    return names


_ALLOWED_TEXT = "integers, strings, tuples, S[...] / R[...], +, k@axis, and calls to " + ", ".join(sorted(CALLABLES))


def _eval(node, names):
    if isinstance(node, ast.Expression):
        return _eval(node.body, names)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, str, bool)) or node.value is None:
            return node.value
        raise SpecError(f"constant {shown(node.value)} is not allowed in a layout spec; use integers")
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        if node.id in CALLABLES:
            raise SpecError(f"{node.id} must be called, e.g. {node.id}(...)")
        raise SpecError(f"name {shown(node.id)} is not allowed in a layout spec; use axis names "
                        f"({', '.join(sorted(Axis.all()))}), S, R or {', '.join(sorted(CALLABLES))}")
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, names) for e in node.elts)
    if isinstance(node, ast.Slice):
        if node.step is not None:
            raise SpecError("write S[extents : strides] with one colon")
        lo = _eval(node.lower, names) if node.lower is not None else None
        hi = _eval(node.upper, names) if node.upper is not None else None
        return slice(lo, hi)
    if isinstance(node, ast.Subscript):
        if not (isinstance(node.value, ast.Name) and node.value.id in ("S", "R")):
            raise SpecError("only S[...] and R[...] may be indexed in a layout spec")
        key = _eval(node.slice, names)
        return names[node.value.id][key]
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: operator.add, ast.MatMult: operator.matmul}
        op = ops.get(type(node.op))
        if op is None:
            raise SpecError(f"operator {type(node.op).__name__} is not allowed in a layout spec; only + and @ are")
        return op(_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in CALLABLES:
            what = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise SpecError(f"calling {shown(what)} is not allowed in a layout spec; allowed calls: "
                            f"{', '.join(sorted(CALLABLES))}")
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise SpecError("*args are not allowed in a layout spec")
            args.append(_eval(a, names))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise SpecError("**kwargs are not allowed in a layout spec")
            kwargs[kw.arg] = _eval(kw.value, names)
        try:
            return CALLABLES[node.func.id](*args, **kwargs)
        except TypeError as e:
            raise SpecError(f"bad arguments to {node.func.id}: {e}") from None
    raise SpecError(f"{type(node).__name__} is not allowed in a layout spec; allowed: {_ALLOWED_TEXT}")


def parse_spec(text: str) -> Layout:
    """Evaluate a layout spec safely (see the module docstring) and return the layout.

        >>> parse_spec("S[(8, 4) : (4@laneid, 1@laneid)] + 2@warpid")
        TileLayout(S[(8, 4) : (4@laneid, 1@laneid)] + 2@warpid)
        >>> parse_spec("__import__('os')")
        Traceback (most recent call last):
        ...
        tirxpy.layout.cli.SpecError: calling '__import__' is not allowed in a layout spec; allowed calls: ...
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError('give a layout spec, e.g. "S[(8, 4) : (4@laneid, 1@laneid)]"')
    if len(text) > MAX_SPEC_CHARS:
        raise SpecError(f"layout spec is {len(text)} characters; the limit is {MAX_SPEC_CHARS}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise SpecError(f"cannot parse the layout spec: {e.msg} at column {e.offset}") from None
    except (RecursionError, MemoryError, ValueError) as e:
        raise SpecError(f"cannot parse the layout spec: {type(e).__name__}: {e}") from None
    try:
        value = _eval(tree, _names())
    except RecursionError:
        raise SpecError("layout spec is nested too deeply") from None
    if hasattr(value, "shard") and not isinstance(value, Layout):
        value = TileLayout(value)
    if not isinstance(value, Layout):
        raise SpecError(f"the spec evaluates to {shown(value)} ({type(value).__name__}), not a layout")
    return value


def _ints(text, what):
    try:
        vals = tuple(int(v) for v in text.replace("(", "").replace(")", "").split(",") if v.strip())
    except ValueError:
        raise LayoutError(f"{what} must be comma-separated integers like 8,16; got {shown(text)}") from None
    if not vals:
        raise LayoutError(f"{what} must be comma-separated integers like 8,16; got {shown(text)}")
    return vals


def _fmt_owner(d):
    return "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"


def _build_parser():
    p = argparse.ArgumentParser(prog="python -m tirxpy layout", description="Inspect a layout: size, spans, owners, table, plot.")
    p.add_argument("spec", help='TIRx layout, e.g. "S[(8, 2, 4, 2) : (4@laneid, 1@warpid, 1@laneid, 1)] + R[2 : 4@warpid] + 5@warpid"')
    p.add_argument("--shape", help="logical tile shape, e.g. 8,16 (default: the 1-D size)")
    p.add_argument("--owners", metavar="COORD", help="print the owners of this logical coordinate, e.g. 3,9")
    p.add_argument("--table", action="store_true", help="print the tile as a grid of owners")
    p.add_argument("--plot", metavar="PATH", help="write a picture: PATH.png, PATH.svg, or both for a stem")
    return p


def main(argv=None) -> int:
    argv = checked_argv(argv, "tirxpy layout")
    if argv is None:
        return 2
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed usage / help
        return int(e.code or 0)
    try:
        layout = parse_spec(args.spec)
        shape = _ints(args.shape, "--shape") if args.shape is not None else None
        size = layout.size()
        if shape is not None and math.prod(shape) != size:
            raise LayoutError(
                f"--shape {','.join(map(str, shape))} has {math.prod(shape)} elements but the layout has {size}; "
                f"give a shape whose product is {size}"
            )
        print(f"layout: {layout!r}")
        print(f"size:   {size}" + (f"  shape: {shape}" if shape else ""))
        print(f"axes:   {', '.join(layout.axes())}")
        owners_total = size * layout.replica_count_total()    # every owner counts, replicas included
        if isinstance(layout, TileLayout) or owners_total <= MAX_TABLE:   # closed form, or a table in bounds
            spans = layout.span()
            print("spans:  " + ", ".join(f"{k}={v}" for k, v in spans.items()))
        else:
            print(f"spans:  (skipped: {owners_total} owners, past the table limit of {MAX_TABLE})")
        if args.owners is not None:
            coord = _ints(args.owners, "--owners")
            owners = layout.owners(*coord, shape=shape)
            where = f"{coord}" if len(coord) > 1 else f"{coord[0]}"
            print(f"owners of {where}: " + ", ".join(_fmt_owner(o) for o in owners))
        if args.table:
            from .grid import table

            print(table(layout, shape=shape))
        if args.plot is not None:
            from tirxpy.viz.pictures import plot

            for p in plot(layout, args.plot, shape=shape):
                print(f"wrote {p}")
    except (LayoutError, ValueError, TypeError) as e:
        print(f"tirxpy layout: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tirxpy layout: error: cannot write the plot: {e}", file=sys.stderr)
        return 2
    return 0
