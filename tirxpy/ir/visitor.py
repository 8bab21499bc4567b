"""Walking and rebuilding IR: the one recursion over statements and expressions.

Every pass that looks at a whole kernel reaches its nodes through these functions instead of
writing the recursion again:

- :func:`sub_stmts` / :func:`walk_stmts`: the statements nested directly in one statement (a
  sequence's items, a loop's body, a branch's arms) / every statement under a node, pre-order,
  in source order;
- :func:`sub_exprs` / :func:`walk_exprs`: the expressions that are direct fields of a node /
  every expression under it, pre-order;
- :func:`walk_values`: every node and leaf value reachable through fields (layouts included);
- :func:`map_bodies`: a statement rebuilt with each nested body replaced by ``fn(body)`` (what a
  rewriting pass needs; statements without bodies come back unchanged);
- :func:`first` / :func:`shared_plan`: the first statement of a kind, and the byte offsets of the
  shared-memory allocations (the one placement codegen, the verifier and the simulator share).

The walks use an explicit stack, so nesting depth is bounded by memory, not by Python's recursion
limit.

    >>> from tirxpy.ir import T, PrimitiveCall
    >>> from tirxpy.ir.visitor import walk_stmts, walk_exprs, first
    >>> k = T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((256,), "float32")):
    ...     T.launch(grid=(1,), threads=128)
    ...     for i in T.serial(2):
    ...         if T.thread_id() < 64:
    ...             A[i * 128 + T.thread_id()] = T.float32(1.0)
    ... ''')
    >>> [type(s).__name__ for s in walk_stmts(k.body)]
    ['SeqStmt', 'For', 'SeqStmt', 'IfThenElse', 'SeqStmt', 'BufferStore']
    >>> sorted({type(e).__name__ for e in walk_exprs(k.body)})
    ['Add', 'FloatImm', 'IntImm', 'LT', 'Mul', 'ScopeId', 'Var']
    >>> first(k.body, PrimitiveCall) is None
    True
"""
from __future__ import annotations

from typing import Callable, Iterator

from . import expr as E
from . import stmt as St


def _flat(v):
    """The IR values of a field: a node, or the nodes inside a tuple / list / dict."""
    if isinstance(v, (tuple, list)):
        return v
    if isinstance(v, dict):
        return tuple(v.values())
    return (v,)


def sub_stmts(s) -> list:
    """The statements directly under ``s``: a SeqStmt's items, a For / While body, an IfThenElse's
    then and else sequences (in that order)."""
    return [x for _, v in s.fields() for x in _flat(v) if isinstance(x, St.Stmt)]


def walk_stmts(node) -> Iterator:
    """``node`` (a statement) and every statement nested in it, pre-order in source order."""
    stack = [node]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(sub_stmts(s)))


def sub_exprs(node) -> list:
    """The expressions that are direct fields of ``node`` (an Expr or a Stmt; tuples flattened)."""
    return [x for _, v in node.fields() for x in _flat(v) if isinstance(x, E.Expr)]


def walk_exprs(node) -> Iterator:
    """Every expression under ``node``, pre-order: ``node`` itself if it is one, those of every nested
    statement, and the sub-expressions of each (buffer operands of primitive calls are not expressions;
    their region starts are)."""
    stack = list(reversed(list(walk_stmts(node)))) if isinstance(node, St.Stmt) else [node]
    while stack:
        n = stack.pop()
        if isinstance(n, E.Expr):
            yield n
        if isinstance(n, (E.Expr, St.Stmt)):
            kids = [x for _, v in n.fields() for x in _flat(v)]
            if isinstance(n, St.Stmt):      # nested statements are already on the stack
                kids = [x for x in kids if not isinstance(x, St.Stmt)]
            stack.extend(reversed([_starts(x) for x in kids]))
        elif isinstance(n, tuple):
            stack.extend(reversed(n))


def _starts(x):
    """Region / load operands contribute their index expressions."""
    from .buffer import BufferRegion

    if isinstance(x, BufferRegion):
        return tuple(x.starts)
    return x


def walk_values(root) -> Iterator:
    """Every value reachable from ``root`` through node fields, pre-order in field order: each IR node
    (statement, expression, buffer, region, kernel) once, and the leaf values of its fields (layouts,
    dtypes, ints, strings). Tuples, lists and dicts are looked through, not yielded."""
    from .node import Node

    seen: set = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if isinstance(n, (tuple, list)):
            stack.extend(reversed(n))
        elif isinstance(n, dict):
            stack.extend(reversed(list(n.values())))
        elif isinstance(n, Node):
            if id(n) in seen:
                continue
            seen.add(id(n))
            yield n
            stack.extend(reversed([v for _, v in n.fields()]))
        else:
            yield n


def map_bodies(s, fn: Callable):
    """``s`` rebuilt with each nested statement sequence ``b`` replaced by ``fn(b)``: a SeqStmt's items
    (each passed to ``fn``), a For / While body, an IfThenElse's arms. Other statements come back as
    they are."""
    if isinstance(s, St.SeqStmt):
        return St.SeqStmt([fn(x) for x in s.stmts], span=s.span)
    if isinstance(s, St.For):
        return St.For(s.var, s.start, s.stop, s.kind, fn(s.body), span=s.span)
    if isinstance(s, St.IfThenElse):
        return St.IfThenElse(s.cond, fn(s.then_body), None if s.else_body is None else fn(s.else_body), span=s.span)
    if isinstance(s, St.While):
        return St.While(s.cond, fn(s.body), span=s.span)
    return s


def first(node, kind):
    """The first statement of type ``kind`` under ``node`` in source order, or None."""
    return next((s for s in walk_stmts(node) if isinstance(s, kind)), None)


def smem_align(buffer) -> int:
    """Alignment in bytes of a shared allocation: 1024 for a swizzled (ComposeLayout) tile, the
    period of the widest hardware swizzle, else 128."""
    return 1024 if type(buffer.layout).__name__ == "ComposeLayout" else 128


def shared_plan(node) -> tuple:
    """``({id(Allocate): byte offset}, total bytes)`` of the shared-memory allocations under ``node``,
    placed one after another in source order, each at its :func:`smem_align` boundary."""
    offs, total = {}, 0
    for s in walk_stmts(node):
        if isinstance(s, St.Allocate) and s.buffer.storage in ("shared", "shared::cluster"):
            start = -(-total // smem_align(s.buffer)) * smem_align(s.buffer)
            offs[id(s)] = start
            total = start + s.buffer.bytes()
    return offs, total


__all__ = ["sub_stmts", "walk_stmts", "sub_exprs", "walk_exprs", "walk_values", "map_bodies", "first", "smem_align", "shared_plan"]
