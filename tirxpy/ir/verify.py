"""The verifier: rules a parsed (or hand-built) kernel must satisfy.

Each failure raises :class:`~tirxpy.ir.errors.VerifyError` at the offending node's span:

- undefined variables / tensors (used outside the block that defines them);
- dtype mismatches (store value vs tensor, operands of an operator, non-bool conditions,
  loop bounds, let types, void intrinsics used as values);
- shape mismatches (index count, constant index out of range, primitive operand shapes);
- scope: a primitive or intrinsic whose scope needs whole warps / warpgroups / the CTA where
  fewer threads are active (e.g. ``Tx.wg.gemm_async`` under ``T.elect_one()``), unknown
  primitives, scopes outside the op's range, cluster ops without a cluster launch;
- storage: an operand in the wrong storage scope for the op, global allocations;
- launch configuration: threads per CTA in 1..1024, grid extents in [1, 2**31 - 1] (x) and
  [1, 65535] (y, z), cluster extents >= 1 dividing the static grid, at most 16 CTAs per cluster
  (8 portable), smem= within the limit;
- hardware limits: shared memory per CTA <= 227 KiB (232448 B), tensor memory <= 512 columns,
  registers per thread <= 255. With a ``target`` (:class:`tirxpy.target.Target` or ``"sm_90a"``), the
  target's own limits: its shared memory per CTA (163 KiB on sm_80, 99 KiB on sm_86 / sm_120), its
  largest cluster (none before sm_90), its tensor-memory columns (none before sm_100).
"""
from __future__ import annotations

from tirxpy.scope import Scope
from tirxpy.target import MAX_CLUSTER, MAX_GRID, MAX_THREADS, Target, as_target

from . import expr as E
from . import stmt as St
from .analysis import annotate_active_threads
from .buffer import MAX_REGISTERS, SMEM_LIMIT, TMEM_COLUMNS, Buffer, BufferRegion, storage_limit, tmem_columns
from .errors import VerifyError
from .intrin_sig import lookup_intrinsic_signature
from .op_spec import lookup_op_spec, op_names
from .visitor import shared_plan, smem_align, walk_exprs

def _spelling(op, scope: Scope) -> str:
    return f"Tx.{op}" if scope is Scope.THREAD else f"Tx.{scope.short}.{op}"


class Verifier:
    def __init__(self, kernel, target=None):
        self.k = kernel
        self.active = None
        self.target: Target | None = None if target is None else as_target(target)

    # ---------------------------------------------------------------- launch configuration
    def launch(self, L):
        """Threads, grid, cluster and smem= of ``T.launch`` against the hardware's limits."""
        t = self.target
        if not 1 <= L.threads <= MAX_THREADS:
            self.fail(L, f"T.launch(threads={L.threads}): a CTA has 1 to {MAX_THREADS} threads",
                      "use at most 1024 threads per CTA (e.g. 128 per warpgroup) and more CTAs in the grid")
        static = []
        for d, g in enumerate(L.grid):
            if g.dtype is None or not g.dtype.is_int:
                self.fail(L, f"T.launch grid extent `{g}` must be an integer")
            device = next((x for x in walk_exprs(g) if isinstance(x, (E.ScopeId, E.BufferLoad, E.IntrinsicCall,
                                                                        E.ElectOne))), None)
            if device is not None:
                self.fail(L, f"T.launch grid extent `{g}` reads `{device}`, a value that exists only on the device",
                          "compute the grid from constants and the kernel's scalar parameters")
            hi = MAX_GRID[d]
            if isinstance(g, E.IntImm) and not 1 <= g.value <= hi:
                self.fail(L, f"T.launch grid extent {g.value} in dimension {'xyz'[d]} is outside [1, {hi}]",
                          "grid x has at most 2**31 - 1 CTAs, y and z at most 65535; loop over more tiles per CTA "
                          "(a persistent kernel) for larger problems")
            static.append(g.value if isinstance(g, E.IntImm) else None)
        if L.smem is not None and L.smem < 0:
            self.fail(L, f"T.launch(smem={L.smem}): dynamic shared memory is a byte count >= 0")
        if L.cluster is None:
            return
        c = L.cluster
        for d, n in enumerate(c):
            if n < 1:
                self.fail(L, f"T.launch(cluster={c}): cluster extent {n} in dimension {'xyz'[d]} must be >= 1")
        if t is not None and t.max_cluster == 0:
            self.fail(L, f"T.launch(cluster={c}): {t} has no thread-block clusters (sm_90 and newer do)",
                      "build for sm_90a or sm_100a, or drop cluster=")
        limit = MAX_CLUSTER if t is None else t.max_cluster
        if L.cluster_size > limit:
            where = "" if t is None else f" on {t}"
            self.fail(L, f"T.launch(cluster={c}): {L.cluster_size} CTAs per cluster exceeds the limit of {limit}{where}",
                      f"use at most {limit} CTAs per cluster (8 is the portable maximum)")
        for d, (g, n) in enumerate(zip(static + [1] * (3 - len(static)), c)):
            if g is not None and g % n:
                self.fail(L, f"T.launch(cluster={c}) does not divide the grid: {g} CTAs in dimension {'xyz'[d]} are "
                             f"not a multiple of the cluster extent {n}",
                          f"make the grid extent a multiple of {n} (round up and let the extra CTAs exit)")

    def may_alias(self, k):
        """Every name of ``T.launch(may_alias=...)`` is a tensor parameter of the kernel."""
        tensors = [p.name for p in k.params if isinstance(p, Buffer)]
        for pair in k.launch.may_alias:
            for n in pair:
                if n not in tensors:
                    self.fail(k.launch, f"T.launch(may_alias={pair!r}): {n!r} is not a tensor parameter of "
                                        f"{k.name}", f"name tensor parameters: {tensors}")

    def fail(self, node, msg, hint=None):
        span = getattr(node, "span", None) or self.k.span
        raise VerifyError(msg, span, hint)

    def run(self):
        k = self.k
        L = k.launch
        self.launch(L)
        self.may_alias(k)
        self.active = annotate_active_threads(k)
        scope = {"vars": set(), "bufs": set()}
        for p in k.params:
            (scope["bufs"] if isinstance(p, Buffer) else scope["vars"]).add(p)
        for g in L.grid:
            self.expr(g, scope, L)
        self.allocs = []
        self.gdc_wait = False
        self.seq(k.body, scope)
        if L.pdl and not self.gdc_wait:
            self.fail(L, "T.launch(pdl=True) lets the kernel start before the previous kernel in the stream has "
                         "finished, but the kernel never calls T.ptx.griddepcontrol_wait()",
                      "call T.ptx.griddepcontrol_wait() in every thread before its first global load or store, "
                      "or drop pdl=True")
        self.limits()

    # ---------------------------------------------------------------- statements
    def seq(self, seq, scope):
        scope = {"vars": set(scope["vars"]), "bufs": set(scope["bufs"])}
        for s in seq.stmts:
            self.stmt(s, scope)

    def stmt(self, s, scope):
        if isinstance(s, St.LetStmt):
            self.expr(s.value, scope, s)
            if s.var.dtype != s.value.dtype:
                self.fail(s, f"{s.var.name} is declared {s.var.dtype} but bound to a {s.value.dtype} value",
                          f"cast the value: T.cast(value, \"{s.var.dtype}\")")
            scope["vars"].add(s.var)
        elif isinstance(s, St.Allocate):
            b = s.buffer
            if b.storage == "global":
                self.fail(s, f"{b.name}: kernels cannot allocate global memory",
                          "pass global tensors as kernel parameters; allocate on chip with T.alloc_shared / T.alloc_local / T.alloc_tmem")
            self.allocs.append(s)
            scope["bufs"].add(b)
        elif isinstance(s, St.BufferStore):
            self.buffer_use(s.buffer, scope, s)
            self.indices(s.buffer, s.indices, scope, s)
            self.expr(s.value, scope, s)
            if s.value.dtype != s.buffer.dtype:
                self.fail(s, f"cannot store a {s.value.dtype} value into {s.buffer.name} ({s.buffer.dtype})",
                          f"cast it: {s.buffer.name}[...] = T.cast(value, \"{s.buffer.dtype}\")")
        elif isinstance(s, St.Evaluate):
            self.expr(s.expr, scope, s, void_ok=True)
            if isinstance(s.expr, E.IntrinsicCall):
                self.intrinsic_scope(s.expr, s)
                self.gdc_wait |= s.expr.name == "griddepcontrol_wait"
        elif isinstance(s, St.For):
            self.expr(s.start, scope, s)
            self.expr(s.stop, scope, s)
            for b in (s.start, s.stop):
                if b.dtype != s.var.dtype:
                    self.fail(s, f"loop {s.var.name} is {s.var.dtype} but a bound is {b.dtype}",
                              f"cast the bound: T.cast(n, \"{s.var.dtype}\")")
            inner = {"vars": scope["vars"] | {s.var}, "bufs": set(scope["bufs"])}
            self.seq(s.body, inner)
        elif isinstance(s, St.IfThenElse):
            self.cond(s.cond, scope, s)
            self.seq(s.then_body, scope)
            if s.else_body is not None:
                self.seq(s.else_body, scope)
        elif isinstance(s, St.While):
            self.cond(s.cond, scope, s)
            self.seq(s.body, scope)
        elif isinstance(s, St.PrimitiveCall):
            self.primitive(s, scope)
        elif isinstance(s, St.SeqStmt):
            self.seq(s, scope)
        else:
            self.fail(s, f"unknown statement {type(s).__name__}")

    def cond(self, c, scope, s):
        self.expr(c, scope, s)
        if c.dtype is None or not c.dtype.is_bool:
            self.fail(s, f"the condition `{c}` is {c.dtype}, not bool", f"compare explicitly: `{c} != 0`")

    def buffer_use(self, b, scope, node):
        b = b.root  # an alias (Buffer.alias) is defined where the storage it views is
        if b not in scope["bufs"]:
            self.fail(node, f"tensor {b.name!r} is used but not defined here",
                      f"pass {b.name} as a kernel parameter or allocate it (T.alloc_shared / T.alloc_local) before this point")

    def indices(self, b, idx, scope, node):
        if len(idx) != b.ndim:
            self.fail(node, f"{b.name} has shape {b.shape} ({b.ndim} dimensions) but is indexed with {len(idx)}",
                      f"give one index per dimension: {b.name}[{', '.join('i%d' % d for d in range(b.ndim))}]")
        for d, (i, n) in enumerate(zip(idx, b.shape)):
            self.expr(i, scope, node)
            if i.dtype is None or not i.dtype.is_int:
                self.fail(node, f"index {d} of {b.name} is {i.dtype}; indices are integers", "cast it: T.int32(x)")
            if isinstance(i, E.IntImm) and not 0 <= i.value < n:
                self.fail(node, f"index {i.value} is out of range [0, {n}) in dimension {d} of {b.name} {b.shape}")

    def region(self, r, scope, node):
        self.buffer_use(r.buffer, scope, node)
        for d, (s, e, n) in enumerate(zip(r.starts, r.extents, r.buffer.shape)):
            self.expr(s, scope, node)
            if isinstance(s, E.IntImm) and not (0 <= s.value and s.value + e <= n):
                self.fail(node, f"region [{s.value}, {s.value + e}) is outside [0, {n}) in dimension {d} of {r.buffer.name}")

    # ---------------------------------------------------------------- expressions
    def expr(self, e, scope, node, void_ok=False):
        if isinstance(e, E.Var):
            if e not in scope["vars"]:
                self.fail(node, f"variable {e.name!r} is used but not defined here",
                          f"define it before use ({e.name} = ...), bind it as a loop variable, or make it a kernel parameter")
            return
        if isinstance(e, (Buffer, BufferRegion)):
            if isinstance(e, Buffer):
                self.buffer_use(e, scope, node)
            else:
                self.region(e, scope, node)
            return
        if not isinstance(e, E.Expr):
            return
        if e.dtype is None and not void_ok:
            self.fail(node, f"`{e}` returns nothing but is used as a value", "call it as a statement on its own line")
        if isinstance(e, E.BufferLoad):
            self.buffer_use(e.buffer, scope, node)
            self.indices(e.buffer, e.indices, scope, node)
            return
        if isinstance(e, E.IntrinsicCall):
            sig = lookup_intrinsic_signature(e.name)
            if sig is None:
                self.fail(node, f"intrinsic {e.name!r} has no registered signature",
                          "register it (tirxpy.intrinsics.register_intrinsic) before building the kernel")
            if sig.n_args is not None and len(e.args) != sig.n_args:
                self.fail(node, sig.arity_message(len(e.args)))
            for a in e.args:
                self.expr(a, scope, node)
            return
        if isinstance(e, E.AddressOf):
            self.expr(e.target, scope, node)
            return
        if isinstance(e, E.BinaryOp):
            self.expr(e.a, scope, node)
            self.expr(e.b, scope, node)
            if e.a.dtype != e.b.dtype:
                self.fail(node, f"operands of `{e}` have different dtypes: {e.a.dtype} and {e.b.dtype}",
                          f"cast one side: T.cast(x, \"{e.a.dtype}\")")
            if isinstance(e, (E.And, E.Or)) and not e.a.dtype.is_bool:
                self.fail(node, f"`{e}` combines {e.a.dtype} values; `and` / `or` take bools")
            return
        if isinstance(e, E.Select):
            for x in (e.cond, e.t, e.f):
                self.expr(x, scope, node)
            if e.t.dtype != e.f.dtype:
                self.fail(node, f"T.select branches have different dtypes: {e.t.dtype} and {e.f.dtype}",
                          f"cast one: T.cast(x, \"{e.t.dtype}\")")
            if not e.cond.dtype.is_bool:
                self.fail(node, f"T.select condition is {e.cond.dtype}, not bool")
            return
        for _, v in e.fields():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, (E.Expr, Buffer, BufferRegion)):
                    self.expr(x, scope, node)

    # ---------------------------------------------------------------- scope checks
    def need_scope(self, node, scope: Scope, what: str):
        ts = self.active[node]
        if scope is Scope.THREAD:
            return
        if scope is Scope.CLUSTER and self.k.launch.cluster is None:
            self.fail(node, f"{what} runs at cluster scope but the kernel is not launched with a cluster",
                      "add cluster=(n,) to T.launch(...), or use the CTA form")
        if ts.whole(scope):
            return
        why = self.active.narrowed_by(node)
        where = ""
        if why is not None:
            where = f" (narrowed by `if {why.cond}` at {why.span})" if why.span else f" (narrowed by `if {why.cond}`)"
        unit = {Scope.WARP: "whole warps", Scope.WARPGROUP: "whole warpgroups", Scope.CTA: "the whole CTA",
                Scope.CLUSTER: "every thread of every CTA in the cluster"}[scope]
        if not ts.exact:
            msg = (f"{what} runs at {scope} scope and needs {unit}, but the enclosing branch depends on run-time "
                   f"values, so the active threads ({ts.describe()}) cannot be proven to be {unit}{where}")
        else:
            msg = f"{what} runs at {scope} scope and needs {unit}, but only {ts.describe()} are active here{where}"
        if ts.scope() is Scope.THREAD and len(ts) == 1:
            msg = msg.replace(" are active", " is active")
        narrow = ts.scope()
        hint = (f"move the call outside the branch that narrows the threads, or use the form for the active scope "
                f"({narrow})")
        if not ts.tids:
            msg = f"{what} runs at {scope} scope, but no thread can reach it{where}"
            hint = ("the branch conditions exclude every thread of the launch (a role with no warps?): remove the "
                    "branch, or decide it in Python (a constant condition) so that it is not built")
        self.fail(node, msg, hint)

    def intrinsic_scope(self, call, stmt):
        sig = lookup_intrinsic_signature(call.name)
        if sig is not None:
            self.need_scope(stmt, sig.scope, f"intrinsic {call.name}")

    def primitive(self, s, scope):
        spec = lookup_op_spec(s.op)
        what = _spelling(s.op, s.scope)
        if spec is None:
            import difflib

            close = difflib.get_close_matches(s.op, op_names(), n=3)
            self.fail(s, f"unknown primitive {s.op!r} in {what}(...)" + (f"; did you mean {', '.join(close)}?" if close else ""),
                      "register it with tirxpy.ir.register_op_spec (the primitives layer does this for its ops)")
        lo, hi = spec.n_operands
        n = len(s.operands)
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else f"{lo} to {hi if hi is not None else 'any'}"
            self.fail(s, f"{what} takes {want} operands, got {n}")
        unknown = spec.unknown_kwargs(s.attrs)
        if unknown:
            self.fail(s, f"{what}: unknown keyword argument(s) {', '.join(k + '=' for k in unknown)}; {s.op} takes "
                      + (", ".join(k + "=" for k in spec.kwargs) or "none") + " (and dispatch=)",
                      f"see help(Tx.{s.op}) for what each keyword argument means")
        if s.scope < spec.min_scope or s.scope > spec.max_scope:
            self.fail(s, f"{what}: primitive {s.op} runs at {spec.min_scope} to {spec.max_scope} scope, not {s.scope}",
                      f"write {_spelling(s.op, spec.min_scope)}(...)")
        for k, o in enumerate(s.operands):
            self.expr(o, scope, s)
            allowed = spec.operand_storage.get(k)
            if allowed and isinstance(o, (Buffer, BufferRegion)) and o.storage not in allowed:
                self.fail(s, f"{what}: operand {k} ({o.name}) is in {o.storage} memory, but {s.op} needs it in "
                          + " or ".join(allowed),
                          f"allocate {o.name} with " + {"shared": "T.alloc_shared", "local": "T.alloc_local",
                                                         "tmem": "T.alloc_tmem"}.get(allowed[0], "T.alloc_buffer") + "(...)")
        for v in s.attrs.values():
            for x in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(x, (E.Expr, Buffer, BufferRegion)):
                    self.expr(x, scope, s)
        tensors = [o for o in s.operands if isinstance(o, (Buffer, BufferRegion))]
        if spec.same_shape and len(tensors) >= 2:
            shapes = [tuple(d for d in o.shape if d != 1) for o in tensors]
            if any(sh != shapes[0] for sh in shapes[1:]):
                desc = ", ".join(f"{o.name} {o.shape}" for o in tensors)
                self.fail(s, f"{what}: operand shapes differ: {desc}",
                          "slice the operands to the same tile shape, e.g. A[m0:m0 + 128, k0:k0 + 64]")
        if spec.same_dtype and len(tensors) >= 2 and any(o.dtype != tensors[0].dtype for o in tensors):
            self.fail(s, f"{what}: operand dtypes differ: " + ", ".join(f"{o.name} {o.dtype}" for o in tensors),
                      "use Tx.cast to convert")
        self.need_scope(s, s.scope, what)

    # ---------------------------------------------------------------- limits
    def limits(self):
        t = self.target
        smem_limit = SMEM_LIMIT if t is None else t.smem_per_cta
        tmem_limit = TMEM_COLUMNS if t is None else t.tmem_columns
        where = "" if t is None else f" on {t}"
        smem, tmem, regs = [], [], []
        for a in self.allocs:
            b = a.buffer
            if b.storage in ("shared", "shared::cluster"):
                smem.append((a, b.bytes()))
            elif b.storage == "tmem":
                if t is not None and not t.tmem_columns:
                    self.fail(a, f"{b.name}: {t} has no tensor memory (sm_100a does)",
                              "build for sm_100a, or keep the tile in registers or shared memory")
                tmem.append((a, tmem_columns(b)))
            elif b.storage == "local":
                regs.append((a, storage_limit(b)[0]))
        total = 0
        for a, nbytes in smem:
            align = smem_align(a.buffer)
            total = -(-total // align) * align + nbytes
            if total > smem_limit:
                detail = ", ".join(f"{x.buffer.name} {n} B" for x, n in smem)
                self.fail(a, f"shared memory allocations need {total} bytes by {a.buffer.name}, over the "
                          f"{smem_limit} B ({smem_limit // 1024} KB) per-CTA limit{where} ({detail})",
                          "use fewer pipeline stages or smaller tiles")
        L = self.k.launch
        if L.smem is not None:
            if L.smem > smem_limit:
                self.fail(L, f"T.launch(smem={L.smem}) is over the {smem_limit} B ({smem_limit // 1024} KB) per-CTA limit "
                             f"of shared memory{where}")
            if L.smem < total:
                self.fail(L, f"T.launch(smem={L.smem}) is smaller than the {total} B the shared allocations need",
                          f"drop smem= (it is computed) or give smem={total}")
        cols = 0
        for a, c in tmem:
            cols += c
            if cols > tmem_limit:
                self.fail(a, f"tensor memory allocations need {cols} columns by {a.buffer.name}, over the "
                          f"{tmem_limit}-column limit{where}", "use fewer or narrower TMEM tiles")
        r = 0
        for a, n in regs:
            r += n
            if r > MAX_REGISTERS:
                self.fail(a, f"local allocations need {r} 32-bit registers per thread by {a.buffer.name}, over the "
                          f"{MAX_REGISTERS}-register limit",
                          "spread the tile over more threads with a layout on laneid / warpid, or use shared memory")


def verify(kernel, target=None) -> None:
    """Raise :class:`VerifyError` at the first rule ``kernel`` breaks; with ``target`` (a
    :class:`tirxpy.target.Target` or ``"sm_90a"``), also against that target's limits (shared memory
    per CTA, cluster size, tensor memory): a kernel that fits sm_90a but not sm_86 fails here, for
    sm_86, not at launch."""
    Verifier(kernel, target).run()


def shared_bytes(kernel) -> int:
    """Bytes of shared memory the kernel's allocations need (with 128 B / 1024 B alignment,
    :func:`tirxpy.ir.visitor.shared_plan`)."""
    return shared_plan(kernel.body)[1]
