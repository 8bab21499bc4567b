"""tirxpy.ir.trust: parsing runs no code from a script, and @T.prim_func source reaches only its own module.

Each injection payload would set ``builtins.<SENTINEL>`` or write a file if it ran; every test checks
that neither happened and that the error names the construct.
"""
import builtins
import importlib.util
import math
import os
import textwrap

import pytest

import tirxpy
from tirxpy import T
from tirxpy.errors import ArgumentError
from tirxpy.ir import ParseError
from tirxpy.ir import trust

SENTINEL = "_tirxpy_trust_test_ran"

HEAD = '''from tirxpy import T, Tx
@T.prim_func
def k(A: T.Tensor((8,), "int32")):
    T.launch(grid=(1,), threads=8)
'''


@pytest.fixture
def mark(tmp_path):
    """A path payloads write to; the test fails if it exists afterwards, or if the sentinel was set."""
    if hasattr(builtins, SENTINEL):
        delattr(builtins, SENTINEL)
    path = tmp_path / "ran"
    yield str(path)
    assert not path.exists(), "a payload wrote its file"
    assert not hasattr(builtins, SENTINEL), "a payload set the sentinel"


def script(*lines, head=HEAD):
    return head + "".join(f"    {ln}\n" for ln in lines)


def payloads(mark):
    """``(payload expression, a word the error must name)``."""
    setter = f"__import__('builtins').__setattr__('{SENTINEL}', 1)"
    return [
        (setter, "__"),
        (f"open('{mark}', 'w').write('x')", "'open' is not defined"),
        (f"(lambda: open('{mark}', 'w'))()", "a lambda"),
        (f"[open('{mark}', 'w') for _ in range(1)]", "list comprehension"),
        (f"list(open('{mark}', 'w') for _ in range(1))", "generator expression"),
        (f"{{k: open('{mark}', 'w') for k in (1,)}}", "dict comprehension"),
        (f"len(f\"{{open('{mark}', 'w')}}\")", "f-string"),
        ("T.__class__.__mro__", "attributes starting with `_`"),
        ("().__class__.__bases__[0].__subclasses__()", "attributes starting with `_`"),
        ("Tx.__dict__", "the attribute `.__dict__`"),
        (f'T.parse_script("{setter}")', "acts outside the kernel"),
        ("eval('1')", "'eval' is not defined"),
        ("getattr(T, 'launch')", "'getattr' is not defined"),
        ("'{0.__class__}'.format(T)", "reading `.format`"),
        ("(y := 1)", "assignment expression"),
    ]


@pytest.mark.parametrize("where", ["body", "launch", "annotation", "assert message", "dead branch", "index"])
def test_script_payloads_are_refused_naming_the_construct(mark, where):
    for payload, names in payloads(mark):
        text = {
            "body": script(f"x = {payload}"),
            "launch": HEAD.replace("threads=8", f"threads={payload}") + "    pass\n",
            "annotation": HEAD.replace('A: T.Tensor((8,), "int32")', f"A: {payload}") + "    pass\n",
            "assert message": script(f"assert True, {payload}"),
            "dead branch": script("if False:", f"    A[0] = {payload}"),
            "index": script(f"A[{payload}] = 1"),
        }[where]
        if where in ("assert message", "dead branch") and "format" in names:
            continue   # a str method in code that never runs: nothing is read, nothing to refuse
        with pytest.raises(ParseError) as e:
            T.parse_script(text)
        assert names in str(e.value), (where, payload, str(e.value))
        assert e.value.span is not None and e.value.span.line >= 1


def test_script_decorators_top_level_and_return_annotations_are_refused(mark):
    cases = [
        (HEAD.replace("@T.prim_func", f"@T.prim_func\n@open('{mark}', 'w').close"), "decorator"),
        (f"open('{mark}', 'w')\n" + HEAD + "    pass\n", "not allowed at its top level"),
        ("import os\n" + HEAD + "    pass\n", "importing import os"),
        (HEAD.replace("):\n", f") -> open('{mark}', 'w'):\n", 1) + "    pass\n", "return annotation"),
        (HEAD.replace('"int32")', f'"int32") = open("{mark}", "w")', 1) + "    pass\n", "no defaults"),
        (script("def f():", "    pass"), "`FunctionDef` statements"),
        (script("with T:", "    pass"), "`With` statements"),
        (script("def f():", f"    open('{mark}', 'w')"), "'open' is not defined"),
        (script("import os"), "`Import` statements"),
        (script("xs = [1, 2]", "xs[0] = 5"), "a kernel changes no Python objects"),
    ]
    for text, names in cases:
        with pytest.raises(ParseError) as e:
            T.parse_script(text)
        assert names in str(e.value), (text, str(e.value))


def test_prim_func_source_payloads_are_refused(tmp_path, mark):
    """Payloads in a module's kernel body, launch, assert message, annotation and macro body: the module's
    own imports (os, subprocess, shutil) stay out of reach."""
    setter = f"__import__('builtins').__setattr__('{SENTINEL}', 1)"
    cases = [
        (f"os.system('touch {mark}')", "reading `.system` of the module 'os'"),
        (f"system('touch {mark}')", "calling `system`"),
        (f"rmtree('{tmp_path}')", "calling `rmtree`"),
        (f"subprocess.run(['touch', '{mark}'])", "reading `.run` of the module 'subprocess'"),
        (f"join_path('{mark}')", "calling `join_path`"),
        (setter, "__"),
        (f"open('{mark}', 'w')", "'open' is not defined"),
        (f"[open('{mark}', 'w') for _ in (1,)]", "list comprehension"),
        (f"helper.__globals__['os'].system('touch {mark}')", "`.__globals__`"),
    ]
    for k, (payload, names) in enumerate(cases):
        for where in ("body", "launch", "assert", "annotation", "macro"):
            body = {"body": f"x = {payload}", "assert": f"assert False, {payload}", "macro": "m(A)"}.get(where, "pass")
            ann = payload if where == "annotation" else 'T.Tensor((8,), "int32")'
            threads = payload if where == "launch" else "8"
            src = textwrap.dedent(f'''\
                from __future__ import annotations
                import os
                import subprocess
                from os import system
                from os.path import join as join_path
                from shutil import rmtree
                from tirxpy import T

                def helper(n):
                    return n + 1

                @T.macro
                def m(A):
                    x = {payload if where == "macro" else 0}

                @T.prim_func
                def kernel(A: {ann}):
                    T.launch(grid=(1,), threads={threads})
                    {body}
                ''')
            path = tmp_path / f"payload_{k}_{where}.py"
            path.write_text(src)
            spec = importlib.util.spec_from_file_location(f"payload_{k}_{where}", path)
            with pytest.raises(ParseError) as e:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            assert names in str(e.value), (where, payload, str(e.value))


def test_prim_func_source_calls_its_own_helpers_and_objects(tmp_path):
    path = tmp_path / "own_helpers.py"
    path.write_text(textwrap.dedent('''\
        from tirxpy import T

        class Cfg:
            def __init__(self, rows):
                self.rows = rows

            def half(self):
                return self.rows // 2

        CFG = Cfg(8)

        def tile_at(t, n):
            return t * n + 1

        @T.prim_func
        def kernel(A: T.Tensor((CFG.rows,), "int32")):
            T.launch(grid=(1,), threads=CFG.half())
            A[T.thread_id()] = tile_at(T.thread_id(), CFG.rows) + len(range(3)) + min(4, 5)
        '''))
    spec = importlib.util.spec_from_file_location("own_helpers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.kernel.launch.threads == 4
    assert "A[T.thread_id()] = T.thread_id() * 8 + 8" in str(mod.kernel)


def test_origin_tells_tirxpy_user_and_foreign_apart():
    def mine():
        return 1

    assert trust.origin(T.launch) == "tirxpy" and trust.origin(T) == "tirxpy" and trust.origin(tirxpy) == "tirxpy"
    assert trust.origin(mine) == "user" and trust.origin(test_origin_tells_tirxpy_user_and_foreign_apart) == "user"
    assert trust.origin(os.system) == "foreign" and trust.origin(os.path.join) == "foreign"
    assert trust.origin(math) == "foreign" and trust.origin(open) == "foreign" and trust.origin({}) == "foreign"
    assert trust.origin(pytest.raises) == "foreign"


def test_safe_builtins_compute_and_refuse():
    ok = T.parse_script(script("xs = list(zip(range(2), reversed((7, 8))))", "a, b = xs[1]",
                               "q, r = divmod(17, 5)", "A[0] = a + b + q + r + abs(-3) + int(2.9) + len('abc') + max(xs)[1]"))
    assert "A[0] = 28" in str(ok)
    bad = [
        ("range(1.5)", "range takes integers"),
        ("range(1, 2, 0)", "step must not be zero"),
        ("min()", "at least one argument"),
        ("max(())", "empty sequence"),
        ("len(T)", "has no length"),
        ("int('x' * 500)", "short string"),
        ("int('zz')", "int('zz')"),
        ("float('1e999999') + int(float('inf'))", "int(inf)"),
        ("tuple(range(10 ** 9))", "MAX_ITEMS"),
        ("divmod(1, 0)", "divmod"),
        ("abs('x')", "abs"),
        ("abs(T.thread_id())", "on the device write T.abs(x)"),     # device values: the device form is named
        ("min(T.thread_id(), 3)", "T.min(a, b)"),
        ("max([1, T.thread_id()])", "T.max(a, b)"),
        ("int(T.thread_id())", 'T.cast(x, "int32")'),
        ("float(T.thread_id())", 'T.cast(x, "float32")'),
        ("bool(T.thread_id())", "x != 0"),
    ]
    for expr, names in bad:
        with pytest.raises(ParseError) as e:
            T.parse_script(script(f"x = {expr}"))
        assert names in str(e.value), (expr, str(e.value))


def test_parse_time_arithmetic_limits():
    for expr, names in [("2 ** 5000", "bits"), ("1 << 2000", "bits"), ("[0] * 100000", "items"),
                        ("'ab' * 40000", "items"), ("(1,) * 60000 + (2,) * 60000", "items"),
                        ("1 // 0", "`1 // 0` has no value at parse time"), ("1.0 / 0", "float division by zero"),
                        ("2.0 ** 5000", "no value at parse time"), ("'a' < 1", "cannot compare")]:
        with pytest.raises(ParseError) as e:
            T.parse_script(script(f"x = {expr}"))
        assert names in str(e.value), (expr, str(e.value))
    x = (1 << trust.MAX_INT_BITS) - 1                 # the largest integer allowed
    k = T.parse_script(script(f"x = {x} >> {trust.MAX_INT_BITS - 3}", "A[0] = x"))
    assert "A[0] = 7" in str(k)
    with pytest.raises(ParseError, match="result has 1025 bits"):
        T.parse_script(script(f"x = {x} + 1"))


def test_string_formatting_is_refused():
    """`%` on a string would build text of any length from a short literal ('%0999999999d' % 1: a gigabyte)."""
    for expr in ("'%0999999999d' % 1", "b'%0999999999d' % 1", "'%s' % 'a'", "'%*d' % (10 ** 9, 1)"):
        with pytest.raises(ParseError, match="`%` formatting of a string"):
            T.parse_script(script(f"x = {expr}"))
    assert "A[0] = 1" in str(T.parse_script(script("x = 7 % 3", "A[0] = x")))


def test_parse_time_values_are_bounded_in_depth_and_memory():
    """A value nested one level per loop trip made Python's comparison / repr raise RecursionError and its hash
    crash the process (a segfault); values built and kept one per trip (each under MAX_ITEMS) took gigabytes.
    Both are ParseErrors naming the limit, at the line that crosses it."""
    deep = ("a = ()", "b = ()", "for i in range(3000):", "    a = (a,)", "    b = (b,)")
    for tail in ("x = a == b", "assert False, a", "d = {a: 1}", "s = T.alloc_shared(a, 'float32')"):
        with pytest.raises(ParseError, match="MAX_VALUE_DEPTH") as e:
            T.parse_script(script(*deep, tail))
        assert e.value.span.line == 8, str(e.value)          # the `a = (a,)` line
    for grow in ("a = zip(a)", "a = enumerate(a)", "a = {1: a}", "a = [a] * 2", "a += (a,)"):
        with pytest.raises(ParseError, match="MAX_VALUE_DEPTH"):
            T.parse_script(script("a = (1,)", "for i in range(3000):", f"    {grow}", "x = a == a"))
    for keep in ("xs = xs + [[i] * 65536]", "xs += [[i] * 65536]", "xs = xs + [list(range(i, i + 65536))]",
                 "xs = xs + ['ab' * 30000]"):
        with pytest.raises(ParseError, match="MAX_HELD_ITEMS"):
            T.parse_script(script("xs = []", "for i in range(16384):", f"    {keep}"))
    with pytest.raises(ParseError, match="MAX_ITEMS"):       # one list built of many *-unpackings
        T.parse_script(script("x = (0,) * 65536", "y = [" + "*x, " * 150 + "]"))
    # at the limits: a value MAX_VALUE_DEPTH deep, and a table read in every trip of a long loop (counted once)
    k = T.parse_script(script("a = 1", f"for i in range({trust.MAX_VALUE_DEPTH}):", "    a = (a,)",
                              "A[0] = len(a)"))
    assert "A[0] = 1" in str(k)
    k = T.parse_script(script("tab = tuple(range(4096))", "x = 0", f"for i in range({trust.LOOP_CAP}):",
                              "    x = x + tab[i % 4096] % 2", "A[0] = x"))
    assert f"A[0] = {trust.LOOP_CAP // 2}" in str(k)


def test_parse_time_sharing_and_unrolling_are_bounded_in_ir_size():
    """An expression reused in itself doubles per parse-time trip (40 lines: a kernel of 2**40 nodes that
    verifying and printing never finish); a large expression stored in every trip of a long loop is a kernel
    that takes minutes. Both are refused while parsing, naming the limit."""
    doubling = ("xs = (A[0],)", "for i in range(40):", "    xs = (xs[0] + xs[0],)", "A[1] = xs[0]")
    with pytest.raises(ParseError, match="MAX_EXPR_NODES"):
        T.parse_script(script(*doubling))
    stores = ("xs = (A[0],)", "for i in range(12):", "    xs = (xs[0] + xs[0],)", "for i in range(8000):",
              "    A[1] = xs[0]")
    with pytest.raises(ParseError, match="MAX_KERNEL_NODES") as e:
        T.parse_script(script(*stores))
    assert e.value.span.line == 9, str(e.value)
    k = T.parse_script(script("for i in range(8000):", "    A[i % 8] = A[i % 8] + i"))   # many small statements
    assert len(k.body) == 8000

    cases = [
        script("for i in range(100000):", "    pass"),
        script("for i in range(300):", "    for j in range(300):", "        pass"),
        script("while True:", "    pass"),
        script("n = 0", "while n < 10 ** 6:", "    n = n + 1"),
    ]
    for text in cases:
        with pytest.raises(ParseError) as e:
            T.parse_script(text)
        msg = str(e.value)
        assert f"cap of {trust.LOOP_CAP}" in msg and "tirxpy.ir.trust.LOOP_CAP" in msg and "parse-time loop `" in msg
    with pytest.raises(ParseError, match=f"T.unroll loop of 100000 iterations, over the cap of {trust.LOOP_CAP}"):
        T.parse_script(script("for i in T.unroll(100000):", "    A[0] = i"))
    k = T.parse_script(script(f"for i in range({trust.LOOP_CAP - 1}):", "    pass", "for j in range(1):", "    A[j] = 1"))
    assert "A[0] = 1" in str(k)
    T.parse_script(script("for i in T.serial(10 ** 9):", "    A[0] = i"))   # device loops have no cap


def test_nesting_and_literal_limits():
    with pytest.raises(ParseError, match="MAX_NESTING") as e:
        T.parse_script(script("A[0] = " + " + ".join(["1"] * (trust.MAX_NESTING + 10))))
    assert e.value.span.line == 5
    with pytest.raises(ParseError, match="nests too deeply for Python's parser"):
        T.parse_script(script("A[0] = " + "+".join(["A[1]"] * 3000)))
    with pytest.raises(ParseError, match="integer literal of 2400 bits"):
        T.parse_script(script(f"A[0] = {hex(1 << 2399)}"))


def test_env_is_checked():
    text = script("A[0] = N")
    assert "A[0] = 3" in str(T.parse_script(text, env={"N": 3}))
    for env, names in [([("N", 3)], "env must be a dict"), ({3: 3}, "env key 3"), ({"__x": 1}, "env key '__x'"),
                       ({"N": open}, "env['N'] is `io.open`"), ({"N": os}, "the module 'os'"),
                       ({"N": lambda: 1}, "env['N']"), ({"N": [object()]}, "builtins.object"),
                       ({"N": T.parse_script}, "env['N']")]:
        with pytest.raises(ParseError) as e:
            T.parse_script(text, env=env)
        assert names in str(e.value), (env, str(e.value))


def test_script_text_is_checked():
    for text, names in [(None, "got NoneType"), (b"x", "got bytes"), (3, "got int"),
                        ("x" * (trust.MAX_SCRIPT_CHARS + 1), "MAX_SCRIPT_CHARS")]:
        with pytest.raises(ParseError, match=names):
            T.parse_script(text)


def test_explain_takes_a_kernel():
    for bad in (None, 3, "kernel", T):
        with pytest.raises(ArgumentError, match="explain\\(kernel\\) takes a kernel"):
            tirxpy.explain(bad)


def test_macro_expansions_count_against_the_loop_cap():
    @T.macro
    def twice(A, n):
        if n > 0:
            twice(A, n - 1)
            twice(A, n - 1)
        else:
            A[0] = 1

    with pytest.raises(ParseError, match=f"expanding macro 'twice' in `twice\\(A, n - 1\\)` takes the kernel past "
                                         f"the cap of {trust.LOOP_CAP}"):
        @T.prim_func
        def k(A: T.Tensor((8,), "int32")):
            T.launch(grid=(1,), threads=1)
            twice(A, 40)

    @T.prim_func
    def ok(A: T.Tensor((8,), "int32")):
        T.launch(grid=(1,), threads=1)
        twice(A, 3)

    assert str(ok).count("A[0] = 1") == 8


def test_a_trusted_parse_reaches_its_own_package_wherever_it_is_installed():
    """Kernels installed in site-packages still call their package's helpers (tirxpy_kernels.attention_walk for
    tirxpy_kernels.gemm_sm90); another installed package stays out of reach."""
    import tirxpy_kernels.attention_walk

    site_fn = pytest.raises          # an installed package's function
    assert trust.origin(site_fn) == "foreign"
    home = trust.Policy(True, "tirxpy_kernels.gemm_sm90")
    assert home.reachable(tirxpy_kernels.attention_walk.causal_tail) and home.reachable(tirxpy_kernels.attention_walk)
    assert not home.reachable(site_fn) and not home.reachable(os.system)
    other = trust.Policy(True, "_pytest.python")     # as if the kernel lived in pytest's own package
    assert other.reachable(site_fn)
    assert not trust.Policy(False, "_pytest.python").reachable(site_fn)   # a script has no home


def test_every_outside_effect_names_a_real_callable():
    """The refused entry points are named by qualified name: each must resolve, or a renamed function would
    silently become callable from kernel source."""
    import importlib

    for name in trust.OUTSIDE_EFFECTS:
        parts = name.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            break
        assert callable(obj) and trust.qualified_name(obj) == name, name
