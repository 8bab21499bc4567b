"""Kernels: parameters, launch configuration and body.

    >>> from tirxpy.ir import Kernel, LaunchConfig, Buffer, SeqStmt
    >>> k = Kernel("empty", [Buffer("A", (4,), "float32")], LaunchConfig(grid=(1,), threads=32), SeqStmt())
    >>> print(k)
    @T.prim_func
    def empty(A: T.Tensor((4,), "float32")):
        T.launch(grid=(1,), threads=32)
"""
from __future__ import annotations
from tirxpy.errors import shown

from .errors import IRError
from .expr import Expr, Var
from .node import Node
from .stmt import as_seq


class LaunchConfig(Node):
    """``T.launch(grid=(gx, gy, gz), threads=n, cluster=(cx, cy, cz), smem=bytes, pdl=False, may_alias=())``.

    ``grid`` entries may be expressions of scalar parameters; ``threads`` (per CTA),
    ``cluster`` and ``smem`` (dynamic shared memory in bytes, ``None``: computed from the
    allocations) are static ints. ``pdl=True``: programmatic dependent launch, see :func:`tirxpy.T.launch`.
    ``may_alias``: pairs of tensor parameter names that may share memory (sorted pairs, in order).
    """

    _fields = ("grid", "threads", "cluster", "smem", "pdl", "may_alias")

    def __init__(self, grid=(1,), threads=128, cluster=None, smem=None, pdl=False, may_alias=(), span=None):
        super().__init__(span)
        from . import ops

        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        if not 1 <= len(grid) <= 3:
            raise IRError(f"grid has 1 to 3 dimensions, got {shown(grid)}")
        self.grid = tuple(ops.const(g) if not isinstance(g, Expr) else g for g in grid)
        self.threads = _static_int(threads, "threads")
        if cluster is not None:
            if not isinstance(cluster, (tuple, list)):
                cluster = (cluster,)
            if not 1 <= len(cluster) <= 3:
                raise IRError(f"cluster has 1 to 3 dimensions, got {shown(cluster)}")
            cluster = tuple(_static_int(c, "cluster") for c in cluster)
        self.cluster = cluster
        self.smem = None if smem is None else _static_int(smem, "smem")
        if not isinstance(pdl, bool):
            raise IRError(f"T.launch pdl= must be True or False, got {shown(pdl)}",
                          hint="pass a Python bool (closure, global or @tirxpy.jit argument)")
        self.pdl = pdl
        self.may_alias = _alias_pairs(may_alias)

    @property
    def cluster_size(self) -> int:
        n = 1
        for c in self.cluster or ():
            n *= c
        return n


def _alias_pairs(pairs) -> tuple:
    """``may_alias`` as a sorted tuple of sorted name pairs; IRError naming what is not a pair of two different
    parameter names.

        >>> _alias_pairs([("DL", "A"), ("A", "B")])
        (('A', 'B'), ('A', 'DL'))
    """
    hint = 'pass pairs of tensor parameter names, e.g. T.launch(..., may_alias=(("A", "A_landing"),))'
    if not isinstance(pairs, (tuple, list)):
        raise IRError(f"T.launch may_alias= must be a tuple of (name, name) pairs, got {shown(pairs, 80)}", hint=hint)
    out = set()
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(n, str) for n in pair)):
            raise IRError(f"T.launch may_alias= holds {shown(pair, 80)}, which is not a pair of parameter "
                          "names", hint=hint)
        if pair[0] == pair[1]:
            raise IRError(f"T.launch may_alias= pairs {shown(pair[0])} with itself; a parameter is always its own "
                          "memory",
                          hint=hint)
        out.add(tuple(sorted(pair)))
    return tuple(sorted(out))


def _static_int(v, what):
    from .expr import IntImm

    if isinstance(v, IntImm):
        return v.value
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise IRError(f"T.launch {what}= must be a compile-time int, got {shown(v)}",
                  hint="use a Python constant (closure, global or @tirxpy.jit argument)")


class Kernel(Node):
    """A ``@T.prim_func`` kernel: ``name``, ``params`` (buffers and scalar vars), ``launch``
    and ``body``. ``print(kernel)`` shows tirxpy script that parses back to an equal kernel."""

    _fields = ("name", "params", "launch", "body")

    def __init__(self, name: str, params, launch: LaunchConfig, body, span=None):
        super().__init__(span)
        from .buffer import Buffer

        self.name = name
        self.params = tuple(params)
        for p in self.params:
            if not isinstance(p, (Buffer, Var)):
                raise IRError(f"kernel parameters are tensors or scalar variables, got {shown(p)}")
        if not isinstance(launch, LaunchConfig):
            raise IRError("a kernel needs a launch configuration: T.launch(grid=..., threads=...)")
        self.launch = launch
        self.body = as_seq(body)

    def script(self) -> str:
        """The tirxpy script text of this kernel (what ``print`` shows)."""
        from .printer import script

        return script(self)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(p.name for p in self.params)})>"

    @property
    def threads(self) -> int:
        return self.launch.threads
