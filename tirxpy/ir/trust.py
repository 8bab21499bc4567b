"""What kernel source may do while it is parsed: the parser's trust model (see docs/trust.md).

The parser evaluates a kernel body's Python parts itself, construct by construct; nothing is handed
to Python's ``eval``. Two kinds of source go through it:

- **a script** (``T.parse_script(text)``) is data from anyone. Its names resolve to the script
  namespace (``T``, ``Tx``, the layout library's constructors and axes), the kernel's parameters and
  locals, constants passed in ``env=`` and the pure builtins of :data:`SAFE_BUILTINS`; it calls
  tirxpy's API only and reads attributes of tirxpy objects only.
- **a function's source** (``@T.prim_func``, ``@T.macro``) is its author's. Names also resolve to
  the function's closure and module globals, and it may also call (and read attributes of) functions,
  classes and objects the author wrote: those of the function's own top-level package, and those of
  any file outside the Python installation's standard library and site-packages. Those run as
  ordinary Python.

Either way these are refused with a :class:`ParseError` naming the construct: lambdas,
comprehensions, generator expressions, f-strings, ``:=``, set literals, names starting with ``__``,
attributes starting with ``_``, ``%`` formatting of strings, Python's builtins other than :data:`SAFE_BUILTINS`,
callables and attributes of the standard library or installed packages (``os.system``, ``open``, numpy), tirxpy
entry points with effects outside the kernel (:data:`OUTSIDE_EFFECTS`), integers over
:data:`MAX_INT_BITS` bits, sequences over :data:`MAX_ITEMS` items, nesting deeper than
:data:`MAX_NESTING` and more than :data:`LOOP_CAP` parse-time loop iterations.

    >>> from tirxpy import T
    >>> T.parse_script('''
    ... @T.prim_func
    ... def k(A: T.Tensor((4,), "int32")):
    ...     T.launch(grid=(1,), threads=4)
    ...     A[T.thread_id()] = __import__("os").getpid()
    ... ''')
    Traceback (most recent call last):
    ...
    tirxpy.ir.errors.ParseError: <tirxpy-script-...>:5:23: error: the name `__import__`: names starting with `__` are not available in a kernel
    ...
"""
from __future__ import annotations

import ast
import builtins
import io
import operator
import os
import site
import sys
import sysconfig
import tokenize
import types
import warnings

from tirxpy.errors import shown

from .errors import ParseError, Span
from .expr import MAX_EXPR_DEPTH

LOOP_CAP = 16384
"""Parse-time iterations one kernel parse may run, all together: trips of Python ``for`` loops over a
range / tuple / list and of ``while`` loops on Python values, and macro expansions. A ``T.unroll``
device loop (unrolled by the compiler) may have at most this many iterations too."""
MAX_NESTING = 2 * MAX_EXPR_DEPTH
"""Deepest nesting of a kernel's syntax tree (expressions and statements together): room for the printed
form of any expression tree :mod:`tirxpy.ir.expr` allows (:data:`~tirxpy.ir.expr.MAX_EXPR_DEPTH`)."""
MAX_INT_BITS = 1024
"""Largest Python integer (in bits) a literal or parse-time arithmetic may produce."""
MAX_ITEMS = 65536
"""Longest tuple, list or string parse-time arithmetic (``*``, ``+``) or a builtin may build."""
MAX_VALUE_DEPTH = MAX_EXPR_DEPTH
"""Deepest nesting of a parse-time tuple / list / dict value (``((x,),)`` is 2 deep): Python compares, hashes and
prints nested values by recursion, which a deeper value (built one level per loop trip) would overflow."""
MAX_HELD_ITEMS = 1 << 20
"""Items (elements, characters) of the distinct tuples, lists, dicts and strings one kernel parse holds, all
together, each value counted once: bounds a parse's memory as :data:`LOOP_CAP` bounds its time
(``xs = xs + [[0] * 65536]`` in a loop stops here)."""
MAX_KERNEL_NODES = 1 << 20
"""Most IR nodes one kernel parse may emit, statements and their expression trees together (each tree counted
as :data:`~tirxpy.ir.expr.MAX_EXPR_NODES` counts it): bounds the work of verifying, printing and lowering the
kernel, as a parse-time loop of 16384 trips storing a large expression would otherwise take minutes."""
MAX_SCRIPT_CHARS = 8 << 20
"""Longest script text :func:`T.parse_script` reads."""

OUTSIDE_EFFECTS = frozenset({
    "tirxpy.ir.jit_hooks.prim_func", "tirxpy.ir.jit_hooks.macro", "tirxpy.ir.jit_hooks.parse_script",
    "tirxpy.viz.pictures.plot", "tirxpy.layout.axis.Axis.register", "tirxpy.jit.jit",
    "tirxpy.intrinsics.register.register_intrinsic", "tirxpy.sim.registry.register_model",
})
"""tirxpy callables a kernel body may not call: they act outside the kernel (parse, register, write files)."""

# ---------------------------------------------------------------- static check of the syntax tree
_REFUSED_NODES = {
    ast.Lambda: ("a lambda", "define helpers as Python functions outside the kernel"),
    ast.ListComp: ("a list comprehension", "unroll with a parse-time `for` loop, or build the list outside the kernel"),
    ast.SetComp: ("a set comprehension", "build the value outside the kernel"),
    ast.DictComp: ("a dict comprehension", "build the value outside the kernel"),
    ast.GeneratorExp: ("a generator expression", "unroll with a parse-time `for` loop"),
    ast.JoinedStr: ("an f-string", "kernels carry no formatted text; write a plain string"),
    ast.NamedExpr: ("an assignment expression (:=)", "assign on its own line"),
    ast.Await: ("await", "kernels are not coroutines"),
    ast.Yield: ("yield", "kernels are not generators"),
    ast.YieldFrom: ("yield from", "kernels are not generators"),
    ast.Set: ("a set literal", "use a tuple"),
}


def check_tree(root: ast.AST, span_of) -> None:
    """Refuse what no kernel source may contain, anywhere (dead branches too): the constructs of
    ``_REFUSED_NODES``, ``__`` names, ``_`` attributes, integer literals over :data:`MAX_INT_BITS` bits,
    nesting deeper than :data:`MAX_NESTING`. ``span_of(node)`` locates errors."""
    stack = [(root, 0, root)]
    while stack:
        node, depth, at = stack.pop()
        if hasattr(node, "lineno"):
            at = node                     # the nearest node with a source position
        if depth > MAX_NESTING:
            raise ParseError(f"the source nests more than {MAX_NESTING} levels deep (tirxpy.ir.trust.MAX_NESTING)",
                             span_of(at), "split the expression with intermediate names")
        what = _REFUSED_NODES.get(type(node))
        if what is not None:
            raise ParseError(f"{what[0]} is not allowed in a kernel (parsing evaluates no such code)", span_of(node),
                             what[1])
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise ParseError(f"the name `{node.id}`: names starting with `__` are not available in a kernel",
                             span_of(node), "kernels see tirxpy's namespaces, their own names and the constants given to them")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ParseError(f"the attribute `.{node.attr}`: attributes starting with `_` are not reachable in a kernel",
                             span_of(node), "use the public API (T.*, Tx.*, layouts, tensors)")
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value.bit_length() > MAX_INT_BITS:
            raise ParseError(f"an integer literal of {node.value.bit_length()} bits, over the limit of {MAX_INT_BITS} "
                             "(tirxpy.ir.trust.MAX_INT_BITS)", span_of(node), "device integers have at most 64 bits")
        stack.extend((c, depth + 1, at) for c in ast.iter_child_nodes(node))


def check_script_names(fdef: ast.FunctionDef, namespace: dict, span_of) -> None:
    """A script's names, checked before anything is evaluated (dead branches too): each name it reads is
    bound in the def (a parameter, an assignment or loop target) or is in ``namespace`` / :data:`SAFE_BUILTINS`,
    and no ``T.<entry>`` it names is in :data:`OUTSIDE_EFFECTS`."""
    params = fdef.args.args + fdef.args.posonlyargs + fdef.args.kwonlyargs
    bound = {a.arg for a in params}
    bound.update(n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    roots = [a.annotation for a in params if a.annotation is not None] + fdef.body   # defaults are refused later
    for n in (n for r in roots for n in ast.walk(r)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound \
                and n.id not in namespace and n.id not in SAFE_BUILTINS:
            raise ParseError(f"name {shown(n.id)} is not defined", span_of(n),
                             f"a script sees its own names, T, Tx, the layout library, constants passed in env= and "
                             f"the builtins {', '.join(SAFE_BUILTINS)}")
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id not in bound:
            owner = namespace.get(n.value.id)
            target = owner.__dict__.get(n.attr) if hasattr(owner, "__dict__") else None
            if target is not None and qualified_name(target) in OUTSIDE_EFFECTS:
                raise ParseError(f"`{n.value.id}.{n.attr}` ({qualified_name(target)}) acts outside the kernel and "
                                 "cannot be called in a kernel body", span_of(n), "call it outside the kernel")


def parse_source(text: str, fname: str) -> ast.Module:
    """``ast.parse`` with its failures (syntax, a tree too deep for Python's own parser) as ParseError."""
    try:
        with warnings.catch_warnings():   # "invalid escape sequence" and the like: the text is data, not code to lint
            warnings.simplefilter("ignore")
            return ast.parse(text, fname)
    except SyntaxError as e:
        raise ParseError(f"syntax error: {e.msg}", Span(fname, e.lineno or 1, max(0, (e.offset or 1) - 1))) from None
    except (RecursionError, MemoryError):
        raise ParseError(f"the source nests too deeply for Python's parser (tirxpy reads at most {MAX_NESTING} levels)",
                         Span(fname, _busiest_line(text), 0), "split long expressions with intermediate names") from None


def _busiest_line(text: str) -> int:
    """The line with the most operator tokens (where a too-deep expression most likely is), 1 if unknown."""
    counts: dict = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.OP:
                counts[tok.start[0]] = counts.get(tok.start[0], 0) + 1
    except (tokenize.TokenError, SyntaxError):
        pass
    return max(counts, key=counts.get) if counts else 1


# ---------------------------------------------------------------- where a value comes from
def _install_dirs() -> tuple:
    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        paths.update(site.getsitepackages())
        paths.add(site.getusersitepackages())
    except AttributeError:
        pass
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


_INSTALL_DIRS = _install_dirs()
_file_cache: dict = {}


def _is_user_file(path) -> bool:
    """True for source the author wrote: not the standard library's, not an installed package's."""
    if not isinstance(path, str) or path.startswith("<frozen"):
        return False
    hit = _file_cache.get(path)
    if hit is None:
        if path.startswith("<"):          # <stdin>, <string>, <doctest ...>: code typed or exec'd by the author
            hit = True
        else:
            real = os.path.realpath(path)
            hit = not any(real.startswith(d) for d in _INSTALL_DIRS)
            _file_cache[path] = hit
    return hit


def _is_tirxpy(module) -> bool:
    return isinstance(module, str) and (module == "tirxpy" or module.startswith("tirxpy."))


def _module_is_user(name) -> bool:
    if name == "__main__":
        return True
    mod = sys.modules.get(name) if isinstance(name, str) else None
    return mod is not None and _is_user_file(getattr(mod, "__file__", None))


def origin(x) -> str:
    """``"tirxpy"``, ``"user"`` (the author's own source files) or ``"foreign"`` for a value."""
    if isinstance(x, types.ModuleType):
        name = x.__name__
        if _is_tirxpy(name):
            return "tirxpy"
        return "user" if _is_user_file(getattr(x, "__file__", None)) else "foreign"
    if isinstance(x, types.MethodType):
        return origin(x.__func__)
    if isinstance(x, types.FunctionType):
        if _is_tirxpy(x.__module__):
            return "tirxpy"
        return "user" if _is_user_file(x.__code__.co_filename) else "foreign"
    if isinstance(x, (types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
                      types.WrapperDescriptorType, types.MethodDescriptorType)):
        return "foreign"
    cls = x if isinstance(x, type) else type(x)
    if _is_tirxpy(cls.__module__):
        return "tirxpy"
    if cls.__module__ in sys.modules or cls.__module__ == "__main__":
        return "user" if _module_is_user(cls.__module__) else "foreign"
    # a module loaded without sys.modules (importlib's spec_from_file_location): where its methods live
    files = {f.__code__.co_filename for f in vars(cls).values() if isinstance(f, types.FunctionType)}
    return "user" if files and all(_is_user_file(f) for f in files) else "foreign"


def qualified_name(fn) -> str:
    f = getattr(fn, "__func__", fn)
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', type(f).__name__)}"


def describe(x) -> str:
    """A short phrase naming a value's kind and home, for error messages."""
    if isinstance(x, types.ModuleType):
        return f"the module {x.__name__!r}"
    if callable(x) and hasattr(x, "__qualname__"):
        return f"`{qualified_name(x)}`"
    return f"a {type(x).__module__}.{type(x).__qualname__} value"


_CONTAINERS = (tuple, list, dict, str, bytes, range, type({}.keys()), type({}.values()), type({}.items()))


def _module_name(x):
    if isinstance(x, types.ModuleType):
        return x.__name__
    f = getattr(x, "__func__", x)
    if isinstance(f, (types.FunctionType, type)):
        return f.__module__
    return type(x).__module__


class Policy:
    """What one parse may reach: ``trusted`` for a function's source (its author's), else a script.

    A trusted parse also reaches what the author wrote: values from files outside the Python installation
    (:func:`origin` ``"user"``) and values of ``home``, the top-level package of the function's module
    (``tirxpy_kernels`` for ``tirxpy_kernels.gemm_sm90``), wherever it is installed."""

    def __init__(self, trusted: bool, home: str | None = None):
        self.trusted = trusted
        self.home = home.split(".")[0] if trusted and isinstance(home, str) and home else None

    def reachable(self, x) -> bool:
        o = origin(x)
        if o == "tirxpy":
            return True
        if not self.trusted:
            return False
        if o == "user":
            return True
        name = _module_name(x)
        return self.home is not None and isinstance(name, str) and name.split(".")[0] == self.home

    def _where(self) -> str:
        return ("tirxpy's API, the builtins of tirxpy.ir.trust.SAFE_BUILTINS and your own module's functions"
                if self.trusted else "tirxpy's API (T, Tx, layouts) and the builtins of tirxpy.ir.trust.SAFE_BUILTINS")

    def check_call(self, fn, text: str, span) -> None:
        """Refuse calling ``fn`` (written ``text``) unless it is tirxpy's, a safe builtin, or (trusted) the author's."""
        if isinstance(fn, SafeBuiltin):
            return
        if qualified_name(fn) in OUTSIDE_EFFECTS:
            raise ParseError(f"`{text}` ({qualified_name(fn)}) acts outside the kernel and cannot be called in a kernel body",
                             span, "call it outside the kernel, at module level")
        if not callable(fn):
            raise ParseError(f"`{text}` is {describe(fn)}, which cannot be called", span)
        if not self.reachable(fn):
            raise ParseError(f"calling `{text}` ({describe(fn)}) is not allowed in a kernel: a kernel body calls "
                             f"{self._where()}", span,
                             "compute the value outside the kernel and use the result as a constant")

    def check_attr(self, obj, name: str, span) -> None:
        if not self.reachable(obj):
            raise ParseError(f"reading `.{name}` of {describe(obj)} is not allowed in a kernel: attributes are read "
                             f"from tirxpy objects{' and your own module' if self.trusted else ''} only", span,
                             "compute the value outside the kernel and use the result as a constant")

    def check_container(self, obj, what: str, span) -> None:
        """``what`` (index, iterate, unpack, len) is allowed on Python containers and reachable objects."""
        if isinstance(obj, _CONTAINERS) or self.reachable(obj):
            return
        raise ParseError(f"cannot {what} {describe(obj)} in a kernel: only tuples, lists, dicts, strings, ranges "
                         f"and tirxpy objects{' (and your own objects)' if self.trusted else ''}", span)


# ---------------------------------------------------------------- Python arithmetic with limits
def _size(v):
    return len(v) if isinstance(v, (str, bytes, tuple, list)) else None


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_py_binop(op, a, b) -> str | None:
    """Why ``op(a, b)`` on Python values would exceed the limits (None when it would not)."""
    if op is operator.pow and _int(a) and _int(b) and b > 0 and abs(a) > 1 and (a.bit_length() - 1) * b > MAX_INT_BITS:
        return f"{a} ** {b} has more than {MAX_INT_BITS} bits (tirxpy.ir.trust.MAX_INT_BITS)"
    if op is operator.lshift and _int(a) and _int(b) and a and a.bit_length() + b > MAX_INT_BITS:
        return f"{a} << {b} has more than {MAX_INT_BITS} bits (tirxpy.ir.trust.MAX_INT_BITS)"
    if op is operator.mod and isinstance(a, (str, bytes)):
        return "`%` formatting of a string: kernels carry no formatted text (a field width such as '%099999999d' " \
               "alone would build a string of that many characters)"
    if op is operator.mul:
        for s, n in ((a, b), (b, a)):
            if _size(s) is not None and _int(n) and _size(s) * n > MAX_ITEMS:
                return f"repeating a {type(s).__name__} of {_size(s)} items {n} times is over {MAX_ITEMS} items " \
                       "(tirxpy.ir.trust.MAX_ITEMS)"
    if op is operator.add and _size(a) is not None and _size(b) is not None and _size(a) + _size(b) > MAX_ITEMS:
        return f"joining {_size(a)} and {_size(b)} items is over {MAX_ITEMS} items (tirxpy.ir.trust.MAX_ITEMS)"
    return None


_NESTED = (tuple, list, dict)
_HELD = (tuple, list, dict, str, bytes)


class ValueLedger:
    """The parse-time values (tuples, lists, dicts, strings) one parse has made or read: each one's nesting depth,
    and their items all together. :meth:`note` refuses a value deeper than :data:`MAX_VALUE_DEPTH` or one that
    takes the parse past :data:`MAX_HELD_ITEMS`. Noted values are kept until the parse ends, so an ``id`` stays
    its value's and each value is counted once (kernel values are never changed in place).

        >>> led = ValueLedger()
        >>> led.note(((1, 2), "ab")), led.items
        (2, 6)
    """

    def __init__(self):
        self.depths: dict = {}    # id(value) -> nesting depth
        self.held: list = []      # the noted values, alive while the parse runs
        self.items = 0

    def note(self, v, level: int = 0) -> int:
        """``v``'s nesting depth (0 for a non-container, 1 for a tuple of numbers); a value not seen before is
        charged its length (at least 1). Raises :class:`ParseError` past the limits."""
        if not isinstance(v, _HELD):
            return 0
        d = self.depths.get(id(v))
        if d is not None:
            return d
        if level > MAX_VALUE_DEPTH:
            raise ParseError(f"a parse-time value nested more than {MAX_VALUE_DEPTH} levels deep "
                             "(tirxpy.ir.trust.MAX_VALUE_DEPTH)", hint="keep parse-time tuples and lists flat")
        d = 0
        if isinstance(v, _NESTED):
            parts = [x for kv in v.items() for x in kv] if isinstance(v, dict) else v
            d = 1 + max((self.note(x, level + 1) for x in parts if isinstance(x, _HELD)), default=0)
            if d > MAX_VALUE_DEPTH:
                raise ParseError(f"a parse-time value nested {d} levels deep, over {MAX_VALUE_DEPTH} "
                                 "(tirxpy.ir.trust.MAX_VALUE_DEPTH)", hint="keep parse-time tuples and lists flat")
        self.items += max(1, len(v))
        if self.items > MAX_HELD_ITEMS:
            raise ParseError(f"the kernel's parse-time tuples, lists and strings hold more than {MAX_HELD_ITEMS} "
                             "items together (tirxpy.ir.trust.MAX_HELD_ITEMS)",
                             hint="parse-time values are small: sizes, counts, tile indices; build tables outside "
                                  "the kernel or loop on the device")
        self.depths[id(v)] = d
        self.held.append(v)
        return d


def check_int_result(v) -> str | None:
    if _int(v) and v.bit_length() > MAX_INT_BITS:
        return f"the result has {v.bit_length()} bits, over {MAX_INT_BITS} (tirxpy.ir.trust.MAX_INT_BITS)"
    return None


# ---------------------------------------------------------------- builtins a kernel may use
class SafeBuiltin:
    """A pure builtin the parser offers in every kernel (inputs checked, outputs bounded)."""

    def __init__(self, name, fn, doc):
        self.__name__ = self.__qualname__ = name
        self.fn = fn
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"<kernel builtin {self.__name__}>"


class BuiltinError(ParseError):
    """A safe builtin was called with arguments it refuses."""


def _items(x, what):
    if isinstance(x, range) or isinstance(x, (tuple, list, str, bytes, dict)):
        if len(x) > MAX_ITEMS:
            raise BuiltinError(f"{what} of {len(x)} items is over {MAX_ITEMS} (tirxpy.ir.trust.MAX_ITEMS)")
        return list(x)
    if isinstance(x, _CONTAINERS) or origin(x) == "tirxpy":
        out = []
        for v in x:
            out.append(v)
            if len(out) > MAX_ITEMS:
                raise BuiltinError(f"{what} of more than {MAX_ITEMS} items (tirxpy.ir.trust.MAX_ITEMS)")
        return out
    raise BuiltinError(f"{what}: cannot iterate over {describe(x)} in a kernel",
                       hint="iterate over a tuple, list or range")


def _range(*args):
    if not 1 <= len(args) <= 3:
        raise BuiltinError(f"range takes 1 to 3 integers, got {len(args)}")
    try:
        vals = [operator.index(a) for a in args]
    except TypeError:
        raise BuiltinError(f"range takes integers, got {', '.join(type(a).__name__ for a in args)}",
                           hint="for a device loop bound write `for i in T.serial(n):`") from None
    if vals[2:] == [0]:
        raise BuiltinError("range() step must not be zero")
    return range(*vals)


def _len(x):
    if isinstance(x, _CONTAINERS) or origin(x) == "tirxpy":
        try:
            return len(x)
        except TypeError:
            pass
    raise BuiltinError(f"len: {describe(x)} has no length in a kernel")


_DEVICE_FORM = {"abs": "T.abs(x)", "min": "T.min(a, b)", "max": "T.max(a, b)", "int": 'T.cast(x, "int32")',
                "float": 'T.cast(x, "float32")', "bool": "a comparison such as `x != 0`"}


def _no_device(name, args):
    """Refuse a device value in a Python builtin (it computes on Python values at parse time), naming the
    device form."""
    from .expr import Expr

    for a in args:
        if isinstance(a, Expr):
            raise BuiltinError(f"{name}: `{a}` is a device value; Python's {name}() works on Python values while "
                               "the kernel is parsed", hint=f"on the device write {_DEVICE_FORM[name]}")


def _minmax(fn):
    def run(*args):
        if not args:
            raise BuiltinError(f"{fn.__name__} needs at least one argument")
        vals = _items(args[0], fn.__name__) if len(args) == 1 else list(args)
        if not vals:
            raise BuiltinError(f"{fn.__name__} of an empty sequence")
        _no_device(fn.__name__, vals)
        return fn(vals)
    return run


def _abs(x):
    _no_device("abs", (x,))
    return abs(x) if isinstance(x, (int, float)) else _bad("abs", x)


def _convert(kind):
    def run(*args):
        _no_device(kind.__name__, args)
        if len(args) > 1 or (args and isinstance(args[0], (str, bytes)) and len(args[0]) > 400):
            raise BuiltinError(f"{kind.__name__}() takes one number (or a short string)")
        try:
            return kind(*args)
        except (ValueError, OverflowError, TypeError) as e:
            raise BuiltinError(f"{kind.__name__}({', '.join(map(repr, args))}): {e}") from None
    return run


SAFE_BUILTINS = {s.__name__: s for s in (
    SafeBuiltin("range", _range, "range(stop) / range(start, stop[, step]) of Python ints"),
    SafeBuiltin("len", _len, "len of a tuple, list, dict, string, range or tirxpy object"),
    SafeBuiltin("min", _minmax(builtins.min), "smallest Python value (T.min for device values)"),
    SafeBuiltin("max", _minmax(builtins.max), "largest Python value (T.max for device values)"),
    SafeBuiltin("abs", _abs, "absolute value of a number (T.abs for device values)"),
    SafeBuiltin("int", _convert(int), "int of a number or short string"),
    SafeBuiltin("float", _convert(float), "float of a number or a short string such as 'inf'"),
    SafeBuiltin("bool", _convert(bool), "bool of a Python value"),
    SafeBuiltin("tuple", lambda *x: tuple(_items(x[0], "tuple")) if x else (), "tuple of a sequence"),
    SafeBuiltin("list", lambda *x: _items(x[0], "list") if x else [], "list of a sequence"),
    SafeBuiltin("zip", lambda *xs: list(zip(*(_items(x, "zip") for x in xs))), "list of tuples"),
    SafeBuiltin("enumerate", lambda x, start=0: list(enumerate(_items(x, "enumerate"), operator.index(start))),
                "list of (index, item)"),
    SafeBuiltin("reversed", lambda x: _items(x, "reversed")[::-1], "list in reverse order"),
    SafeBuiltin("divmod", lambda a, b: divmod(a, b) if _int(a) and _int(b) and b else _bad("divmod", (a, b)),
                "(a // b, a % b) of Python ints, b non-zero"),
)}
"""Python builtins a kernel body may use, in checked versions (nothing else of ``builtins`` is visible)."""


def _bad(name, x):
    raise BuiltinError(f"{name}: {shown(x)} is not a valid argument in a kernel")


def check_env(env) -> dict:
    """The ``env=`` of :func:`T.parse_script`: a dict from identifiers to constants (numbers, strings,
    None, tuples / lists / dicts of them, tirxpy objects such as layouts and dtypes)."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise ParseError(f"env must be a dict of name -> constant, got {type(env).__name__}",
                         hint="T.parse_script(text, env={\"TILE\": 64})")
    for k, v in env.items():
        if not isinstance(k, str) or not k.isidentifier() or k.startswith("__"):
            raise ParseError(f"env key {shown(k)} is not a usable "
                             "name", hint="keys are identifiers not starting with '__'")
        why = _constant_fault(v, 0)
        if why is not None:
            raise ParseError(f"env[{shown(k)}] is {why}: env holds constants only (numbers, strings, None, tuples / "
                             "lists / dicts of them, layouts, dtypes and other tirxpy values)",
                             hint="a script cannot call your functions; compute values before parsing")
    return dict(env)


def _constant_fault(v, depth) -> str | None:
    if depth > 16:
        return "nested more than 16 levels deep"
    if v is None or isinstance(v, (bool, float, complex)):
        return None
    if isinstance(v, int):
        return None if v.bit_length() <= MAX_INT_BITS else f"an integer of {v.bit_length()} bits"
    if isinstance(v, (str, bytes)):
        return None if len(v) <= MAX_ITEMS else f"a string of {len(v)} characters"
    if isinstance(v, (tuple, list)):
        if len(v) > MAX_ITEMS:
            return f"a sequence of {len(v)} items"
        return next((f for f in (_constant_fault(x, depth + 1) for x in v) if f), None)
    if isinstance(v, dict):
        if len(v) > MAX_ITEMS:
            return f"a dict of {len(v)} items"
        return next((f for f in (_constant_fault(x, depth + 1) for kv in v.items() for x in kv) if f), None)
    if origin(v) == "tirxpy" and qualified_name(v) not in OUTSIDE_EFFECTS and not isinstance(v, types.ModuleType):
        return None
    return describe(v)
