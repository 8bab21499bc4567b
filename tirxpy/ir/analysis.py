"""Active-thread analysis: for every statement, which threads of a CTA run it.

``annotate_active_threads(kernel)`` walks the kernel once; branches on thread ids
(``T.warpgroup_id() == 1``, ``T.warp_id() < 2``, ``tid_in_wg // 32 == 0``, ...) narrow the
set exactly; ``T.elect_one()`` narrows it to one thread; branches that do not depend on
thread ids keep it (the condition is uniform across the CTA); branches mixing thread ids with
run-time data give an upper bound (``exact=False``) that still knows its grain: a condition
that reads only ``T.warpgroup_id()`` of the thread ids keeps or drops whole warpgroups.

    >>> from tirxpy import T, Tx
    >>> from tirxpy.ir.analysis import annotate_active_threads
    >>> from tirxpy.ir import IfThenElse
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((256,), "float32")):
    ...     T.launch(grid=(1,), threads=256)
    ...     if T.warpgroup_id() == 1:
    ...         if T.elect_one():
    ...             A[0] = T.float32(1.0)
    ... ''')
    >>> info = annotate_active_threads(k)
    >>> outer = k.body.stmts[0]; inner = outer.then_body.stmts[0]; store = inner.then_body.stmts[0]
    >>> info.layout(outer.then_body.stmts[0])
    TileLayout(S[(4, 32) : (1@warpid, 1@laneid)] + 4@warpid)
    >>> info.scope(store), info[store].describe()
    (<Scope.THREAD: 0>, '1 thread (warp 4, lane 0)')
"""
from __future__ import annotations

from tirxpy.scope import Scope, ThreadSet
from tirxpy.errors import shown

from . import expr as E
from . import stmt as St
from .errors import IRError
from .visitor import sub_exprs, walk_stmts


class _Unknown(Exception):
    pass


class ActiveThreads:
    """Map from statement to its :class:`~tirxpy.scope.ThreadSet` (and the branch that narrowed it)."""

    def __init__(self, kernel):
        self.kernel = kernel
        self._sets: dict = {}
        self._why: dict = {}

    def _record(self, stmt, ts, why):
        self._sets[id(stmt)] = (stmt, ts)
        self._why[id(stmt)] = why

    def __getitem__(self, stmt) -> ThreadSet:
        ent = self._sets.get(id(stmt))
        if ent is None or ent[0] is not stmt:
            raise IRError(f"statement {shown(stmt)} is not part of kernel {self.kernel.name}")
        return ent[1]

    def get(self, stmt, default=None):
        ent = self._sets.get(id(stmt))
        return ent[1] if ent is not None and ent[0] is stmt else default

    def scope(self, stmt) -> Scope:
        """The widest scope whose units the statement's active set covers whole."""
        return self[stmt].scope()

    def layout(self, stmt):
        """The active set as a layout over ``(warpid, laneid)`` (``None`` if irregular)."""
        return self[stmt].layout()

    def narrowed_by(self, stmt):
        """The innermost branch condition that narrowed the active set (or ``None``)."""
        return self._why.get(id(stmt))


def active_threads(kernel, stmt) -> ThreadSet:
    """The threads that run ``stmt`` in ``kernel``."""
    return annotate_active_threads(kernel)[stmt]


def annotate_active_threads(kernel) -> ActiveThreads:
    """Compute the active set of every statement of ``kernel``."""
    res = ActiveThreads(kernel)
    n = kernel.launch.threads
    if not isinstance(n, int) or not 1 <= n <= 1024:
        raise IRError(f"cannot analyse threads: T.launch(threads={n}) is outside [1, 1024]")
    _Walker(res).seq(kernel.body, ThreadSet.full(n), None, {})
    return res


_THREAD_FN = {
    "lane_id": lambda t: t % 32, "warp_id": lambda t: t // 32, "warpgroup_id": lambda t: t // 128,
    "warp_id_in_wg": lambda t: (t // 32) % 4, "thread_id": lambda t: t, "thread_id_in_wg": lambda t: t % 128,
}


def _deps(e, lets, acc):
    """Collect dependency kinds of ``e``: 'thread', 'cta', 'data', 'elect'."""
    if isinstance(e, E.ScopeId):
        acc.add("thread" if e.is_thread_id else "cta")
    elif isinstance(e, E.ElectOne):
        acc.add("elect")
    elif isinstance(e, E.Var):
        if e in lets:
            _deps(lets[e], lets, acc)
        else:
            acc.add("data")
    else:
        if isinstance(e, (E.BufferLoad, E.IntrinsicCall, E.AddressOf)):
            acc.add("data")
        for x in sub_exprs(e):
            _deps(x, lets, acc)
    return acc


def _eval(e, tid, lets):
    if isinstance(e, (E.IntImm, E.BoolImm)):
        return e.value
    if isinstance(e, E.ScopeId):
        if not e.is_thread_id:
            raise _Unknown
        return _THREAD_FN[e.kind](tid)
    if isinstance(e, E.Var):
        if e in lets:
            return _eval(lets[e], tid, lets)
        raise _Unknown
    if isinstance(e, E.Not):
        return not _eval(e.a, tid, lets)
    if isinstance(e, E.Cast):
        v = _eval(e.value, tid, lets)
        return bool(v) if e.dtype.is_bool else (e.dtype.wrap(int(v)) if e.dtype.is_int else v)
    if isinstance(e, E.Select):
        return _eval(e.t, tid, lets) if _eval(e.cond, tid, lets) else _eval(e.f, tid, lets)
    if isinstance(e, E.BinaryOp):
        a, b = _eval(e.a, tid, lets), _eval(e.b, tid, lets)
        fn = _BIN.get(type(e))
        if fn is None:
            raise _Unknown
        return fn(a, b)
    raise _Unknown


_BIN = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
    E.Min: min, E.Max: max, E.Shl: lambda a, b: a << b, E.Shr: lambda a, b: a >> b,
    E.BitAnd: lambda a, b: a & b, E.BitOr: lambda a, b: a | b, E.BitXor: lambda a, b: a ^ b,
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b,
    E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b, E.And: lambda a, b: bool(a) and bool(b),
    E.Or: lambda a, b: bool(a) or bool(b),
}


_GRAIN = {"warpgroup_id": Scope.WARPGROUP, "warp_id": Scope.WARP, "warp_id_in_wg": Scope.WARP}


def _thread_grain(e, lets) -> Scope:
    """The widest scope whose units every thread id read by ``e`` is constant over."""
    if isinstance(e, E.ScopeId):
        return _GRAIN.get(e.kind, Scope.THREAD) if e.is_thread_id else Scope.KERNEL
    if isinstance(e, E.Var):
        return _thread_grain(lets[e], lets) if e in lets else Scope.KERNEL
    return min((_thread_grain(x, lets) for x in sub_exprs(e)), default=Scope.KERNEL)


def _conjuncts(e):
    if isinstance(e, E.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def branch_sets(cond, cur: ThreadSet, lets) -> tuple:
    """``(then_set, else_set)`` of a branch on ``cond`` entered by ``cur``.

    Each conjunct of ``cond`` (``a and b and ...``) is read on its own: one on thread ids only filters the set
    exactly; one on CTA / cluster ids or run-time data but no thread id keeps or drops a whole CTA (the set is
    marked CTA-narrowed for CTA ids); one mixing thread ids with either makes the set an upper bound whose grain
    is the widest scope those thread ids are constant over; ``T.elect_one()`` picks one thread of the rest.
    ``T.warp_id() == 1 and T.cluster_rank() == 0`` is warp 1 (in some CTAs), exactly."""
    terms = _conjuncts(cond)
    elect = [t for t in terms if isinstance(t, E.ElectOne)]
    kinds = [(t, _deps(t, lets, set())) for t in terms if not isinstance(t, E.ElectOne)]
    if any("elect" in d for _, d in kinds):  # elect_one nested in or / not: only an upper bound
        return cur.inexact(), cur.inexact()
    exact = [t for t, d in kinds if "thread" in d and not d & {"data", "cta"}]
    mixed = [t for t, d in kinds if "thread" in d and d & {"data", "cta"}]
    uniform = len(kinds) - len(exact) - len(mixed)      # terms every thread of a CTA evaluates alike
    narrowed = any("cta" in d for _, d in kinds)
    then = cur.filter(lambda t: all(_eval(x, t, lets) for x in exact)) if exact else cur
    if narrowed:
        then = then.narrow_ctas()
    if mixed:
        grain = min(_thread_grain(t, lets) for t in mixed)
        then = then.inexact(grain)
        other = (cur.narrow_ctas() if narrowed else cur).inexact(grain)
    elif uniform:
        other = cur.narrow_ctas() if narrowed else cur
    else:
        other = None
    if elect:
        one = then.elect_one()
        return one, (other if other is not None else cur.minus(one) if cur.exact else cur)
    return then, (other if other is not None else cur.minus(then))


class _Walker:
    def __init__(self, res: ActiveThreads):
        self.res = res

    def seq(self, seq, cur, why, lets):
        self.res._record(seq, cur, why)
        lets = dict(lets)
        for s in seq.stmts:
            self.stmt(s, cur, why, lets)

    def stmt(self, s, cur, why, lets):
        self.res._record(s, cur, why)
        if isinstance(s, St.LetStmt):
            lets[s.var] = s.value
        elif isinstance(s, St.IfThenElse):
            then, other = branch_sets(s.cond, cur, lets)
            self.seq(s.then_body, then, s, lets)
            if s.else_body is not None:
                self.seq(s.else_body, other, s, lets)
        elif isinstance(s, St.For):
            self.seq(s.body, cur, why, lets)
        elif isinstance(s, St.While):
            deps = _deps(s.cond, lets, set())
            self.seq(s.body, cur.inexact() if deps & {"thread", "elect"} else cur, why, lets)
        elif isinstance(s, St.SeqStmt):
            self.seq(s, cur, why, lets)


def let_values(kernel) -> dict:
    """``{var: value}`` for every name the kernel binds once (``x = expr``, a :class:`~tirxpy.ir.stmt.LetStmt`), so
    that an analysis can see through the name to its expression (a name bound by more than one statement is left
    out). The parser gives each assignment of a name its own variable, so in parsed kernels every binding is kept.

        >>> from tirxpy import T
        >>> k = T.parse_script('''
        ... @T.prim_func
        ... def k(A: T.Tensor((256,), "float32")):
        ...     T.launch(grid=(4,), threads=64)
        ...     c0 = T.cta_id(0) * 64
        ...     A[c0] = T.float32(1.0)
        ... ''')
        >>> {v.name: str(e) for v, e in let_values(k).items()}
        {'c0': 'T.cta_id(0) * 64'}
    """
    out, seen = {}, set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, St.LetStmt):
            if s.var in seen:
                out.pop(s.var, None)
            else:
                out[s.var] = s.value
            seen.add(s.var)
    return out
