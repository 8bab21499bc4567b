"""``@T.prim_func``: parse a Python function's source (``ast``) into a Kernel.

Python values from the closure and globals are compile-time constants. Python-level ``if``
on constants, ``for`` over Python iterables (``range(4)``, lists) and ``while`` on constants
run at parse time (meta-programming); ``for i in T.serial(n)`` / ``T.unroll(n)`` / ``T.rolled(n)``,
``if`` / ``while`` on device values, ``x = <device expr>``, ``A[i] = v``, ``Tx.<scope>.<op>(...)``
and intrinsic calls become IR. Rebinding a device name makes a new variable (SSA), except across
a device ``for`` / ``if`` / ``while`` boundary, where it is an error (use a local buffer).

Parsing evaluates nothing with Python's ``eval``: expressions go through :mod:`tirxpy.ir.parse_expr`,
under the trust model of :mod:`tirxpy.ir.trust` (a script reaches tirxpy's API and its own names; a
function's source also its module's constants and its author's own functions). Parse-time loops share
one cap, :data:`tirxpy.ir.trust.LOOP_CAP`.
"""
from __future__ import annotations

import ast
import contextvars
import difflib
import inspect
import itertools
import linecache
import textwrap

from tirxpy.layout import LayoutError
from tirxpy.errors import shown

from . import ops
from . import script as Tmod
from . import trust
from .buffer import Buffer, BufferRegion
from .dtype import DataType
from .errors import ParseError, Span, TirxError, at_span
from .expr import Expr, IntImm, Var
from .kernel import Kernel, LaunchConfig
from .parse_expr import _BINOPS, ExprEvaluator, _is_ir
from .stmt import (Allocate, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimitiveCall, SeqStmt, Stmt,
                   While)

_in_parse: contextvars.ContextVar = contextvars.ContextVar("tirxpy_in_parse", default=None)   # the Parser at work
_script_counter = itertools.count()
_MACRO_DEPTH_LIMIT = 64


def in_parse() -> bool:
    return _in_parse.get() is not None


def current_launch() -> LaunchConfig | None:
    """The launch configuration of the kernel being parsed, for parse-time checks of helpers that expand inside
    it (a macro's Python calls); None outside a parse or before the kernel's ``T.launch(...)``."""
    parser = _in_parse.get()
    return None if parser is None else parser.launch


class _Block:
    """One lexical block of bindings. ``device`` blocks are bodies of IR for / if / while."""

    def __init__(self, device: bool):
        self.device = device
        self.names: dict = {}


class Parser(ExprEvaluator):
    """Statements of a kernel body become IR; expressions are evaluated by :class:`ExprEvaluator`."""

    def __init__(self, file: str, line_offset: int, col_offset: int, closure: dict, globals_: dict,
                 policy: trust.Policy):
        self.file = file
        self.policy = policy          # what names, calls and attributes this source may reach (tirxpy.ir.trust)
        self.loop_iters = 0           # parse-time loop iterations so far, all loops (at most trust.LOOP_CAP)
        self.values = trust.ValueLedger()   # parse-time values: nesting depth, items held (trust.MAX_HELD_ITEMS)
        self.ir_nodes = 0             # IR nodes emitted so far (at most trust.MAX_KERNEL_NODES)
        self.counted: set = set()     # ids of the statements counted in ir_nodes
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.closure = closure
        self.globals = globals_
        self.blocks: list[_Block] = []
        self.launch: LaunchConfig | None = None
        self.emitted = False
        self.macros: list[str] = []   # names of the macros being expanded, outermost first
        self.via: Span | None = None  # the innermost macro call being expanded (Span.via of what it builds)

    # ---------------------------------------------------------------- spans / errors
    def span(self, node) -> Span:
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset
        end = getattr(node, "end_col_offset", None)
        if end is not None and getattr(node, "end_lineno", None) == getattr(node, "lineno", None):
            end += self.col_offset
        else:
            end = None
        return Span(self.file, line, col, end, self.via)

    def error(self, node, msg, hint=None):
        return ParseError(msg, self.span(node), hint)

    # ---------------------------------------------------------------- names
    def lookup(self, name, node):
        for b in reversed(self.blocks):
            if name in b.names:
                return b.names[name]
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if name in trust.SAFE_BUILTINS:
            return trust.SAFE_BUILTINS[name]
        known = [n for b in self.blocks for n in b.names] + list(self.closure) + list(self.globals)
        close = difflib.get_close_matches(name, [k for k in known if not k.startswith("__")], n=3)
        where = ("a Python constant around the @T.prim_func" if self.policy.trusted else
                 "a constant passed in T.parse_script(text, env={...})")
        hint = (f"did you mean {', '.join(close)}?" if close else
                f"define it before use (in the kernel, or as {where}); of Python's builtins a kernel sees only "
                f"{', '.join(trust.SAFE_BUILTINS)}")
        raise self.error(node, f"name {shown(name)} is not defined", hint)

    def bind(self, name, value, node):
        cur = self.blocks[-1]
        crossed = False
        for b in reversed(self.blocks):
            if name in b.names:
                if crossed and (_is_ir(b.names[name]) or _is_ir(value)):
                    raise self.error(
                        node, f"{shown(name)} is bound outside this device loop / branch and cannot be reassigned "
                              "inside it",
                        f"device variables are immutable; for a value updated in a loop use a local buffer: "
                        f"{name} = T.alloc_local((1,), \"int32\") before the loop, then {name}[0] = ... and read {name}[0]",
                    )
                break
            if b.device:
                crossed = True
        cur.names[name] = value

    # ---------------------------------------------------------------- statements
    def visit_body(self, stmts, device: bool) -> SeqStmt:
        self.blocks.append(_Block(device))
        try:
            out: list = []
            for s in stmts:
                self.visit_stmt(s, out)
            return SeqStmt(out)
        finally:
            self.blocks.pop()

    def visit_inline(self, stmts, out):
        for s in stmts:
            self.visit_stmt(s, out)

    def visit_stmt(self, node, out: list):
        with at_span(self.span(node)):
            try:
                fn = getattr(self, "stmt_" + type(node).__name__, None)
                if fn is None:
                    raise self.error(node, f"`{type(node).__name__}` statements are not supported in a kernel body",
                                     _UNSUPPORTED.get(type(node).__name__, "write plain assignments, for / if / while, calls"))
                n0 = len(out)
                fn(node, out)
                if len(out) > n0:
                    self.emitted = True
                    for s in out[n0:]:       # statements a parse-time loop / if inlined were counted inside
                        if id(s) not in self.counted:
                            self.counted.add(id(s))
                            self.ir_nodes += _own_nodes(s)
                    if self.ir_nodes > trust.MAX_KERNEL_NODES:
                        raise self.error(node, f"the kernel has more than {trust.MAX_KERNEL_NODES} IR nodes "
                                         "(tirxpy.ir.trust.MAX_KERNEL_NODES)",
                                         "loop on the device (T.serial) instead of unrolling at parse time, and "
                                         "bind large expressions to names")
            except ParseError:
                raise
            except TirxError as e:
                raise ParseError(getattr(e, "msg", str(e)), getattr(e, "span", None) or self.span(node),
                                 getattr(e, "hint", None)) from None
            except LayoutError as e:
                raise ParseError(f"layout error: {e}", self.span(node)) from None

    def stmt_Pass(self, node, out):
        pass

    def stmt_Expr(self, node, out):
        v = self.eval(node.value, stmt=True)
        if isinstance(v, Stmt):
            out.append(v)
        elif isinstance(v, Tmod.LaunchRequest):
            self.set_launch(v, node)
        elif isinstance(v, Expr):
            out.append(Evaluate(v))
        elif isinstance(v, Tmod.AllocRequest):
            raise self.error(node, "an allocation must be assigned to a name", "write: buf = T.alloc_shared(...)")
        elif isinstance(v, (Buffer, BufferRegion)):
            raise self.error(node, "a tensor expression on its own does nothing",
                             "pass it to a primitive, e.g. Tx.copy(dst, src)")

    def set_launch(self, req, node):
        if self.macros:
            raise self.error(node, f"T.launch(...) inside macro {shown(self.macros[-1])}",
                             "the launch configuration belongs to the kernel: call T.launch(...) in the @T.prim_func body")
        if self.launch is not None:
            raise self.error(node, "T.launch(...) appears twice", "keep one T.launch(...) at the top of the kernel")
        if self.emitted or len(self.blocks) != 1:
            raise self.error(node, "T.launch(...) must be the first statement of the kernel body",
                             "move T.launch(grid=..., threads=...) to the top of the kernel")
        self.launch = LaunchConfig(**req.kw)

    def stmt_Assign(self, node, out):
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment a = b = ... is not supported", "assign each name separately")
        value = self.eval(node.value)
        self.assign(node.targets[0], value, out, node)

    def stmt_AnnAssign(self, node, out):
        if node.value is None:
            raise self.error(node, "a bare annotation declares nothing", "write name: T.int32 = value")
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "annotated assignment needs a plain name on the left")
        ann = self.eval(node.annotation)
        try:
            dt = DataType.get(ann)
        except TirxError:
            raise self.error(node.annotation, f"annotation {shown(ann)} is not a scalar type",
                             "annotate scalars with T.int32, T.float32, ...") from None
        value = self.eval(node.value)
        if not isinstance(value, Expr):
            value = ops.const(value, dt)
        if value.dtype != dt:
            raise self.error(node, f"{node.target.id}: annotated {dt} but the value is {value.dtype}",
                             f"cast the value: T.cast(value, \"{dt}\")")
        self.let(node.target.id, value, out, node)

    def stmt_AugAssign(self, node, out):
        op = _BINOPS.get(type(node.op))
        if isinstance(node.target, ast.Name):
            cur = self.lookup(node.target.id, node.target)
            value = self.apply_binop(op, cur, self.eval(node.value), node)
            self.values.note(value)
            self.assign(node.target, value, out, node)
        elif isinstance(node.target, ast.Subscript):
            cur = self.eval(node.target)
            self.assign(node.target, self.apply_binop(op, cur, self.eval(node.value), node), out, node)
        else:
            raise self.error(node, "augmented assignment needs a name or a buffer element on the left")

    def let(self, name, value, out, node):
        var = Var(name, value.dtype, span=self.span(node))
        out.append(LetStmt(var, value, span=self.span(node)))
        self.bind(name, var, node)

    def assign(self, target, value, out, node):
        if isinstance(target, ast.Name):
            name = target.id
            if isinstance(value, Tmod.AllocRequest):
                buf = Buffer(name, value.shape, value.dtype, value.storage, value.layout, span=self.span(node))
                out.append(Allocate(buf, span=self.span(node)))
                self.bind(name, buf, node)
            elif isinstance(value, Expr):
                if value.dtype is None:
                    raise self.error(node, f"{name}: this intrinsic returns nothing, so it has no value",
                                     "call it as a statement on its own line")
                self.let(name, value, out, node)
            else:
                self.bind(name, value, node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)):
                raise self.error(node, f"cannot unpack {trust.describe(value)} into {len(target.elts)} names",
                                 "unpack a tuple or list")
            vals = list(value)
            if len(vals) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, vals):
                self.assign(t, v, out, node)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            key = self.eval_slice(target.slice)
            if not isinstance(obj, Buffer):
                raise self.error(node, f"cannot store into {trust.describe(obj)}: a kernel changes no Python objects",
                                 "stores go to tensors: A[i, j] = value")
            self.store(obj, key, value, node, out)
        else:
            raise self.error(node, f"cannot assign to `{ast.unparse(target)}`",
                             "assign to a name (x = ...) or a tensor element (A[i] = ...)")

    def store(self, buf, key, value, node, out):
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != buf.ndim or any(isinstance(k, slice) for k in key):
            raise self.error(node, f"A store writes one element of {buf.name} {buf.shape}: give {buf.ndim} indices",
                             "to fill a region use a primitive: Tx.fill(A[a:b], value) or Tx.copy(dst, src)")
        load = buf[key]
        if isinstance(value, Tmod.AllocRequest) or not (isinstance(value, Expr) or isinstance(value, (bool, int, float))):
            raise self.error(node, f"cannot store {shown(value)} into {buf.name}")
        if not isinstance(value, Expr):
            value = ops.const(value, buf.dtype)
        if value.dtype != buf.dtype:
            raise self.error(node, f"cannot store a {value.dtype} value into {buf.name} ({buf.dtype})",
                             f"cast it: {buf.name}[...] = T.cast(value, \"{buf.dtype}\")")
        out.append(BufferStore(buf, load.indices, value, span=self.span(node)))

    def stmt_For(self, node, out):
        if node.orelse:
            raise self.error(node, "for ... else is not supported in a kernel")
        it = self.eval(node.iter)
        if isinstance(it, Tmod.LoopRange):
            if not isinstance(node.target, ast.Name):
                raise self.error(node.target, "a device loop binds one name", "write: for i in T.serial(n):")
            start, stop = ops.const(it.start), ops.const(it.stop)
            if not (start.dtype.is_int and stop.dtype.is_int):
                raise self.error(node.iter, f"loop bounds must be integers, got {start.dtype} and {stop.dtype}")
            start, stop = ops._pair(start, stop, "loop bounds")
            if it.kind == "unroll" and isinstance(start, IntImm) and isinstance(stop, IntImm) \
                    and stop.value - start.value > trust.LOOP_CAP:
                raise self.error(node.iter, f"T.unroll loop of {stop.value - start.value} iterations, over the cap of "
                                 f"{trust.LOOP_CAP} (tirxpy.ir.trust.LOOP_CAP)", "use T.serial for a long loop")
            var = Var(node.target.id, start.dtype, span=self.span(node.target))
            self.blocks.append(_Block(True))
            self.blocks[-1].names[node.target.id] = var
            try:
                body = []
                for s in node.body:
                    self.visit_stmt(s, body)
            finally:
                self.blocks.pop()
            out.append(For(var, start, stop, it.kind, body, span=self.span(node)))
            return
        if _is_ir(it):
            raise self.error(node.iter, "cannot loop over a device value at parse time",
                             "write: for i in T.serial(n):")
        if not isinstance(it, (tuple, list, range, str, dict)) and not self.policy.reachable(it):
            raise self.error(node.iter, f"cannot iterate over {trust.describe(it)} at parse time",
                             "write: for i in T.serial(n): (device loop) or for i in range(4): (unrolled at parse time)")
        if hasattr(it, "__len__"):
            self.count_iterations(len(it), node)
        try:
            items = iter(it)
        except TypeError:
            raise self.error(node.iter, "cannot iterate over "
                                        f"{shown(it)}", "write: for i in T.serial(n): (device loop) "
                             "or for i in range(4): (unrolled at parse time)") from None
        for v in items:
            if not hasattr(it, "__len__"):
                self.count_iterations(1, node)
            self.assign(node.target, v, out, node)
            self.visit_inline(node.body, out)

    def count_iterations(self, n, node, what="the parse-time loop"):
        """Charge ``n`` parse-time iterations (loop trips, macro expansions) to this parse; refuse past
        :data:`trust.LOOP_CAP`."""
        self.loop_iters += n
        if self.loop_iters > trust.LOOP_CAP:
            head = ast.unparse(node).splitlines()[0][:80]
            raise self.error(node, f"{what} `{head}` takes the kernel past the cap of {trust.LOOP_CAP} "
                             f"parse-time loop iterations (tirxpy.ir.trust.LOOP_CAP; {self.loop_iters} with this one)",
                             "loop on the device instead: for i in T.serial(n): (or T.unroll for a short loop)")

    def cond_value(self, node):
        c = self.eval(node)
        if isinstance(c, Expr):
            if c.dtype is None or not c.dtype.is_bool:
                raise self.error(node, f"the condition `{c}` has dtype {c.dtype}, not bool",
                                 f"compare explicitly, e.g. `{ast.unparse(node)} != 0`")
            return c
        if isinstance(c, (Buffer, BufferRegion)):
            raise self.error(node, "a tensor is not a condition", "compare an element: if A[i] > 0:")
        return bool(c)

    def stmt_If(self, node, out):
        c = self.cond_value(node.test)
        if isinstance(c, bool):
            self.visit_inline(node.body if c else node.orelse, out)
            return
        then = self.visit_body(node.body, True)
        other = self.visit_body(node.orelse, True) if node.orelse else None
        out.append(IfThenElse(c, then, other, span=self.span(node)))

    def stmt_While(self, node, out):
        if node.orelse:
            raise self.error(node, "while ... else is not supported in a kernel")
        c = self.cond_value(node.test)
        if isinstance(c, bool):
            while c:
                self.count_iterations(1, node)
                self.visit_inline(node.body, out)
                c = self.cond_value(node.test)
                if not isinstance(c, bool):
                    raise self.error(node.test, "the while condition changed from a Python value to a device value")
            return
        out.append(While(c, self.visit_body(node.body, True), span=self.span(node)))

    def stmt_Assert(self, node, out):
        c = self.eval(node.test)
        if _is_ir(c):
            raise self.error(node, "assert checks Python values at parse time; this condition is a device value",
                             "branch on it with if, or check it on the host")
        if not c:
            msg = self.eval(node.msg) if node.msg is not None else f"assertion failed: {ast.unparse(node.test)}"
            raise self.error(node, str(msg))

    def expand_macro(self, mac, args, kwargs, node) -> SeqStmt:
        """Parse the macro's body in its own scope (parameters, its closure and globals) into statements."""
        try:
            params = mac.bind(args, kwargs)
        except TypeError as e:
            raise self.error(node, f"macro {shown(mac.__name__)}: "
                                   f"{e}", f"its parameters are {mac.__name__}{mac.signature}") from None
        self.count_iterations(1, node, f"expanding macro {mac.__name__!r} in")
        if len(self.macros) >= _MACRO_DEPTH_LIMIT:
            raise self.error(node, f"macro expansion is {_MACRO_DEPTH_LIMIT} levels deep ({' -> '.join(self.macros[-3:])} -> "
                             f"{mac.__name__}): a macro calls itself without end",
                             "stop the recursion with a Python condition on a parameter")
        body, file, line_offset, col_offset, closure, globals_ = mac.parsed()
        for s in body:
            if isinstance(s, ast.Return):
                raise ParseError(f"macro {shown(mac.__name__)} has a return statement",
                                 Span(file, s.lineno + line_offset, s.col_offset + col_offset),
                                 "a macro expands to statements and returns nothing; write results into a buffer")
        call_span = self.span(node)
        saved = (self.file, self.line_offset, self.col_offset, self.closure, self.globals, self.blocks, self.policy, self.via)
        self.file, self.line_offset, self.col_offset, self.closure, self.globals = file, line_offset, col_offset, closure, globals_
        self.via = call_span
        self.policy = trust.Policy(True, mac.fn.__module__)   # a macro's body is its author's, like a @T.prim_func's
        self.blocks = [_Block(False)]
        self.blocks[0].names.update(params)
        self.macros.append(mac.__name__)
        out: list = []
        try:
            for s in body:
                self.visit_stmt(s, out)
        except ParseError as e:
            if getattr(e, "_macro_note", False):
                raise
            note = f"{e.msg} (in macro {mac.__name__!r}, expanded at {call_span.file}:{call_span.line})"
            err = ParseError(note, e.span, e.hint)
            err._macro_note = True
            raise err from None
        finally:
            self.macros.pop()
            self.file, self.line_offset, self.col_offset, self.closure, self.globals, self.blocks, self.policy, self.via = saved
        return SeqStmt(out)

    def primitive(self, marker, args, kwargs, node):
        dispatch = kwargs.pop("dispatch", None)
        operands = []
        for k, a in enumerate(args):
            if isinstance(a, (Buffer, BufferRegion, Expr)):
                operands.append(a)
            elif isinstance(a, (bool, int, float)):
                operands.append(ops.const(a))
            else:
                raise self.error(node, f"operand {k} of {shown(marker)} is {shown(a)} ({type(a).__name__})",
                                 "operands are tensors, regions (A[a:b]) or scalar expressions; options go in keywords")
        attrs = {k: _attr_value(k, v, self, node) for k, v in kwargs.items()}
        return PrimitiveCall(marker.op, operands, marker.scope, attrs, dispatch, span=self.span(node))

    # ---------------------------------------------------------------- kernel
    def parse_kernel(self, fdef: ast.FunctionDef, verify: bool) -> Kernel:
        for part in (fdef.args, *fdef.body):
            trust.check_tree(part, self.span)
        with at_span(self.span(fdef)):
            a = fdef.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
                raise self.error(fdef, "kernel parameters are plain annotated names (no defaults, *args or **kwargs)",
                                 "specialize on Python values with @tirxpy.jit around a kernel factory")
            self.blocks.append(_Block(False))
            params = []
            for arg in a.args:
                if arg.annotation is None:
                    raise self.error(arg, f"parameter {shown(arg.arg)} needs a type annotation",
                                     f"write {arg.arg}: T.Tensor((M, N), \"float32\") or {arg.arg}: T.int32")
                ann = self.eval(arg.annotation)
                if ann is None:  # this specialization of a jit factory has no such parameter
                    continue
                if isinstance(ann, Tmod.TensorSpec):
                    p = ann.make(arg.arg, span=self.span(arg))
                else:
                    try:
                        p = Var(arg.arg, DataType.get(ann), span=self.span(arg))
                    except TirxError:
                        raise self.error(arg.annotation, f"parameter {shown(arg.arg)} has annotation {shown(ann)}",
                                         "annotate with T.Tensor(shape, dtype) or a scalar type like T.int32") from None
                self.blocks[-1].names[arg.arg] = p
                params.append(p)
            body_nodes = body_without_docstring(fdef)
            out: list = []
            for s in body_nodes:
                self.visit_stmt(s, out)
            self.blocks.pop()
            if self.launch is None:
                raise self.error(fdef, f"kernel {shown(fdef.name)} has no launch configuration",
                                 "add T.launch(grid=(..., ), threads=...) as the first statement of the body")
            kernel = Kernel(fdef.name, params, self.launch, out, span=self.span(fdef))
        if verify:
            from .verify import verify as run_verify

            run_verify(kernel)
        return kernel


_UNSUPPORTED = {
    "Return": "kernels return nothing; write results to an output tensor",
    "With": "there are no context managers in kernels; use T.* calls and if / for",
    "Try": "there is no exception handling on the device",
    "Break": "device loops have fixed trip counts; use while with a condition",
    "Continue": "guard the rest of the loop body with if",
    "FunctionDef": "define helpers as Python functions outside the kernel (they run at parse time)",
    "Import": "import at module level",
    "ImportFrom": "import at module level",
    "Global": "read globals directly; kernels cannot assign them",
    "Nonlocal": "kernels cannot assign enclosing Python variables",
    "Delete": "names cannot be deleted in a kernel",
    "Raise": "use assert on Python values for parse-time checks",
}


def _own_nodes(s) -> int:
    """IR nodes of statement ``s`` itself: 1 plus its expression trees (``Expr.nodes``, regions' starts); the
    statements in its bodies count where they are visited."""
    n = 1
    for _, v in s.fields():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, Expr):
                n += x.nodes
            elif isinstance(x, BufferRegion):
                n += sum(e.nodes for e in x.starts)
    return n


def _attr_value(key, v, parser, node):
    from tirxpy.layout import Layout

    if isinstance(v, Tmod.DTypeCtor):
        return v.dtype
    if isinstance(v, (Expr, Buffer, BufferRegion, DataType, Layout)) or v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return type(v)(_attr_value(key, x, parser, node) for x in v)
    if isinstance(v, dict):
        return {k: _attr_value(key, x, parser, node) for k, x in v.items()}
    raise parser.error(node, f"attribute {key}={shown(v)} ({type(v).__name__}) cannot be printed or compared",
                       "attribute values are Python literals, dtypes, layouts, tensors or expressions")


def _closure_of(fn) -> dict:
    out = {}
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def _find_def(tree, name=None):
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (name is None or n.name == name):
            return n
    return None


def function_source(fn, what: str, hint: str):
    """``(def node, file, line offset, column offset)`` of a Python function's source (``what`` and
    ``hint`` word the error when it cannot be read)."""
    try:
        lines, first = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError):
        raise ParseError(f"cannot read the source of {shown(what)}", hint=hint) from None
    src = "".join(lines)
    dedented = textwrap.dedent(src)
    indent = len(lines[0]) - len(lines[0].lstrip())
    if indent and not dedented.startswith(lines[0][indent:indent + 1]):
        indent = 0
    fdef = _find_def(ast.parse(dedented), fn.__name__)
    if fdef is None:
        raise ParseError(f"cannot find the definition of {shown(what)} in its source")
    if linecache.getline(file, first) == "" and file.startswith("<"):
        linecache.cache[file] = (len(src), None, [""] * (first - 1) + lines, file)
    return fdef, file, first - 1, indent


def body_without_docstring(fdef) -> list:
    """The statements of a def, less a leading docstring."""
    body = list(fdef.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _check_verify(verify) -> None:
    if type(verify) is not bool:
        raise ParseError(f"verify= is True (run the verifier on the kernel) or False, got {shown(verify, 60)}")


def parse_function(fn, verify: bool = True, outer: dict | None = None) -> Kernel:
    """Parse a Python function into a Kernel (what ``@T.prim_func`` does). ``outer``: the
    defining frame's locals (names used only in annotations are not in the closure)."""
    if not callable(fn) or not hasattr(fn, "__code__"):
        raise ParseError(f"@T.prim_func decorates a function, got {shown(fn)}")
    _check_verify(verify)
    fdef, file, line_offset, indent = function_source(
        fn, fn.__name__, "define kernels in a .py file (or parse text with T.parse_script)")
    closure = dict(outer or {})
    closure.update(_closure_of(fn))
    parser = Parser(file, line_offset, indent, closure, fn.__globals__, trust.Policy(True, fn.__module__))
    tok = _in_parse.set(parser)
    try:
        return parser.parse_kernel(fdef, verify)
    finally:
        _in_parse.reset(tok)


def script_env() -> dict:
    """Names a printed script refers to: ``T``, ``Tx`` and the layout library's constructors, axes and
    pure functions (no modules, nothing that writes files or registers anything)."""
    import types

    import tirxpy.layout as L
    from tirxpy.scope import Tx

    env = {k: v for k, v in vars(L).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)
           and trust.qualified_name(v) not in trust.OUTSIDE_EFFECTS}
    env.update(T=Tmod.T, Tx=Tx)
    return env


def _script_tree(text, fname) -> ast.FunctionDef:
    """The one kernel def of a script; anything else at its top level but tirxpy imports and a docstring is refused."""
    if not isinstance(text, str):
        raise ParseError(f"T.parse_script takes the script text (a str), got {type(text).__name__}",
                         hint="pass print(kernel)'s text, or kernel.script()")
    if len(text) > trust.MAX_SCRIPT_CHARS:
        raise ParseError(f"the script has {len(text)} characters, over the limit of {trust.MAX_SCRIPT_CHARS} "
                         "(tirxpy.ir.trust.MAX_SCRIPT_CHARS)")
    tree = trust.parse_source(text, fname)
    fdefs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(fdefs) != 1:
        raise ParseError(f"a script holds exactly one @T.prim_func def, found {len(fdefs)}", Span(fname, 1, 0))
    for k, n in enumerate(tree.body):
        span = Span(fname, n.lineno, n.col_offset)
        if isinstance(n, ast.FunctionDef):
            continue
        elif isinstance(n, ast.Import) and all(_tirxpy_module(a.name) for a in n.names):
            continue
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and _tirxpy_module(n.module):
            continue
        elif k == 0 and isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            continue
        else:
            what = ast.unparse(n).splitlines()[0][:60] if not isinstance(n, (ast.Import, ast.ImportFrom)) else \
                f"importing {ast.unparse(n)[:60]}"
            raise ParseError(f"a script holds tirxpy imports and one @T.prim_func def; `{what}` "
                             f"({type(n).__name__}) is not allowed at its top level", span,
                             "scripts are data: nothing at their top level runs")
    fdef = fdefs[0]
    for d in fdef.decorator_list:
        if not (isinstance(d, ast.Attribute) and d.attr == "prim_func" and isinstance(d.value, ast.Name)
                and d.value.id == "T"):
            raise ParseError(f"the decorator `@{ast.unparse(d)[:60]}` is not allowed in a script",
                             Span(fname, d.lineno, d.col_offset), "a script's def is decorated with @T.prim_func only")
    if fdef.returns is not None:
        raise ParseError(f"a return annotation (`-> {ast.unparse(fdef.returns)[:60]}`) is not allowed on a kernel",
                         Span(fname, fdef.returns.lineno, fdef.returns.col_offset), "kernels return nothing; drop it")
    return fdef


def _tirxpy_module(name) -> bool:
    return isinstance(name, str) and (name == "tirxpy" or name.startswith("tirxpy."))


def parse_text(text: str, env: dict | None = None, verify: bool = True) -> Kernel:
    """Parse script text: one ``@T.prim_func`` def (tirxpy import lines are ignored), evaluating nothing
    from the text beyond what :mod:`tirxpy.ir.trust` allows a script."""
    _check_verify(verify)
    env = trust.check_env(env)
    fname = f"<tirxpy-script-{next(_script_counter)}>"
    if isinstance(text, str):
        linecache.cache[fname] = (len(text), None, text.splitlines(keepends=True), fname)
    fdef = _script_tree(text, fname)
    g = script_env()
    g.update(env)
    parser = Parser(fname, 0, 0, {}, g, trust.Policy(trusted=False))
    for part in (fdef.args, *fdef.body):
        trust.check_tree(part, parser.span)
    trust.check_script_names(fdef, g, parser.span)
    tok = _in_parse.set(parser)
    try:
        return parser.parse_kernel(fdef, verify)
    finally:
        _in_parse.reset(tok)
