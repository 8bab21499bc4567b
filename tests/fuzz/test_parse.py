"""Fuzz the kernel parser (area "kernel authoring"): scripts are data, parsing runs no code.

Bad scripts (random token soups, mutations of a valid kernel's printed script, injection payloads in
every position: body, annotations, defaults, launch arguments, assert messages, decorators, the top
level, f-strings, comprehensions, lambdas, dunder attribute chains; huge literals, deep nesting,
3000-term sums, runaway parse-time loops) must be refused with a typed error, and no payload may
run (each would set ``builtins.<SENTINEL>`` or write a file). A mutated script that still parses
must print and parse back to an equal kernel. Valid edge cases (at each limit) are accepted.
"""
from __future__ import annotations

import builtins
import os

from harness import EXAMPLES, SENTINEL, Hostile, accept, classify, refuse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tirxpy import T
from tirxpy.ir import Kernel, structural_equal
from tirxpy.ir import trust
from tirxpy.ir.expr import MAX_EXPR_DEPTH

A = "kernel authoring"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
MARK = f"/tmp/tirxpy_fuzz_parse_{os.getpid()}"   # payloads that write files write here

HEAD = '''from tirxpy import T, Tx
@T.prim_func
def k(A: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads=64)
    t = T.thread_id()
'''


def body(*lines) -> str:
    return HEAD + "".join(f"    {ln}\n" for ln in lines)


VALID = body(
    "s = T.alloc_shared((2, 32), \"float32\")",
    "acc = T.alloc_local((4,), \"int32\")",
    "v = s.alias((64,), \"float32\", name=\"v\")",
    "for i in T.serial(4):",
    "    acc[i] = Y[t] * i + T.int32(-2**31)",
    "for j in range(2):",
    "    s[j, t % 32] = A[t] * T.float32(0.5)",
    "if t < 32:",
    "    Y[t] = T.max(acc[0], acc[1]) // 3",
    "else:",
    "    A[t] = T.exp(v[t]) + T.float32(\"inf\")",
    "Tx.cta.fill(s, T.float32(0))",
)


def round_trips(k) -> bool:
    """An accepted script's kernel prints and parses back to an equal kernel."""
    if not isinstance(k, Kernel):
        return False
    again = T.parse_script(str(k), verify=False)
    return structural_equal(k, again)


def nothing_ran() -> bool:
    return not hasattr(builtins, SENTINEL) and not os.path.exists(MARK)


def refuse_script(text, names=(), env=None):
    out = refuse(A, lambda: T.parse_script(text, env=env), names=names, allow=round_trips)
    assert nothing_ran(), text
    return out


# ---------------------------------------------------------------- injection payloads, each in every position
SET = f"__import__('builtins').__setattr__('{SENTINEL}', 1)"
PAYLOADS = [   # (expression, words the error names)
    (SET, ["__import__", "__setattr__"]),
    (f"open('{MARK}', 'w').write('x')", ["open"]),
    (f"(lambda: open('{MARK}', 'w'))()", ["lambda"]),
    (f"[open('{MARK}', 'w') for _ in range(1)]", ["comprehension"]),
    (f"len(f\"{{open('{MARK}', 'w')}}\")", ["f-string"]),
    (f"{{open('{MARK}', 'w') for _ in (1,)}}", ["comprehension"]),
    (f"{{k: open('{MARK}', 'w') for k in (1,)}}", ["comprehension"]),
    (f"list(open('{MARK}', 'w') for _ in (1,))", ["generator"]),
    ("T.__class__.__mro__", ["__class__"]),
    ("().__class__.__bases__[0].__subclasses__()", ["__class__"]),
    ("T.ptx.__getattr__('x')", ["__getattr__"]),
    ("Tx.__dict__", ["__dict__"]),
    ("T.Tensor.__init__.__globals__", ["__init__"]),
    (f'T.parse_script("{SET}")', ["outside the kernel"]),
    ("T.prim_func(T.launch)", ["outside the kernel"]),
    ("T.macro(T.launch)", ["outside the kernel"]),
    ("plot(TileLayout(S[4]), '/tmp/x.png')", ["plot", "not defined"]),
    (f"getattr(T, 'x')", ["getattr"]),
    ("eval('1')", ["eval"]),
    ("exec('x = 1')", ["exec"]),
    ("globals()", ["globals"]),
    ("vars()", ["vars"]),
    ("breakpoint()", ["breakpoint"]),
    ("print('x')", ["print"]),
    ("type(T)", ["type"]),
    ("'{0.__class__}'.format(T)", ["format"]),
    ("(y := 1)", ["assignment expression"]),
    ("10 ** 10 ** 10", ["bits"]),
    ("1 << 100000", ["bits"]),
    ("[0] * 10 ** 9", ["items"]),
    ("'a' * 10 ** 10", ["items"]),
    ("0x" + "f" * 600, ["bits"]),
    ("tuple(range(10 ** 12))", ["items"]),
    ("int('9' * 5000)", ["int"]),
    ("1 // 0", ["division", "zero"]),
    ("{1, 2}", ["set literal"]),
    ("T.ptx.x_" + "a" * 50, ["intrinsic", "x_"]),
]


def positions(payload):
    """``(position, script)`` with the payload placed there."""
    yield "body", body(f"x = {payload}")
    yield "statement", body(f"{payload}")
    yield "store", body(f"Y[t] = {payload}")
    yield "condition", body(f"if {payload}:", "    Y[t] = 0")
    yield "annotation", HEAD.replace('Y: T.Tensor((64,), "int32")', f"Y: {payload}") + "    pass\n"
    yield "default", HEAD.replace('Y: T.Tensor((64,), "int32")', f'Y: T.Tensor((64,), "int32") = {payload}') + "    pass\n"
    yield "launch", HEAD.replace("threads=64", f"threads={payload}") + "    pass\n"
    yield "assert message", body(f"assert False, {payload}")
    yield "assert message (passing)", body(f"assert True, {payload}")
    yield "dead branch", body("if False:", f"    x = {payload}")
    yield "decorator", HEAD.replace("@T.prim_func", f"@T.prim_func\n@{payload}")
    yield "top level", f"{payload}\n" + HEAD + "    pass\n"
    yield "primitive keyword", body(f"Tx.cta.fill(A, T.float32(0), extra={payload})")
    yield "index", body(f"Y[{payload}] = 1")


def test_every_payload_in_every_position_is_refused_and_runs_nothing():
    for payload, names in PAYLOADS:
        for where, text in positions(payload):
            outcome = classify(A, lambda: T.parse_script(text), allow=round_trips)
            assert nothing_ran(), (where, payload)
            assert outcome in ("refused", "accepted"), (where, payload, outcome)
            if where in ("body", "store", "launch", "index"):
                # the named construct is what the error names (positions where nothing else fails first)
                refuse(A, lambda: T.parse_script(text), names=names + ["no default", "not defined"])


@SETTINGS
@given(st.sampled_from(PAYLOADS), st.integers(0, 13))
def test_random_payload_position(payload, k):
    where, text = list(positions(payload[0]))[k]
    refuse_script(text)


# ---------------------------------------------------------------- token soups and mutations
TOKENS = ["T", "Tx", ".", "(", ")", "[", "]", ",", ":", "=", "+", "-", "*", "//", "%", "**", "<<", "@", "not",
          "and", "if", "else", "for", "in", "lambda", "A", "Y", "t", "i", "0", "1", "-1", "2**31", "1e308",
          "'s'", "f'x'", "__class__", "__import__", "range", "len", "open", "T.serial", "T.launch", "alloc_local",
          "T.float32", "T.int32", "Tx.cta.fill", "S", "TileLayout", "laneid", "m", "\n    ", "...", "None", "yield",
          "await", "*", "**", "{", "}", ":=", "lambda:", "[x for x in A]", "A.alias", "T.ptx", "inf", "1j"]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=24))
def test_token_soup_in_a_body_line(tokens):
    refuse_script(body(" ".join(tokens)))


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=12), st.integers(0, len(VALID)))
def test_token_soup_spliced_into_the_valid_kernel(tokens, at):
    refuse_script(VALID[:at] + " ".join(tokens) + VALID[at:])


@SETTINGS
@given(st.data())
def test_mutated_printed_kernel(data):
    text = str(T.parse_script(VALID))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text) - 1))
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        c = data.draw(st.sampled_from(list("()[]{},.:=+-*/%<>@'\"_ 0123456789Tatxm\n#")))
        if kind == "delete":
            text = text[:i] + text[i + 1:]
        elif kind == "insert":
            text = text[:i] + c + text[i:]
        elif kind == "replace":
            text = text[:i] + c + text[i + 1:]
        else:
            j = data.draw(st.integers(i, min(len(text), i + 40)))
            text = text[:j] + text[i:j] + text[j:]
    refuse_script(text)


# ---------------------------------------------------------------- explicit bad scripts
def test_size_and_nesting_limits_are_refused():
    sum3000 = "+".join(["Y[t]"] * 3000)
    cases = [
        (body(f"Y[t] = {sum3000}"), ["nest"]),
        (body("Y[t] = " + "(" * 150 + "1" + ")" * 150), ["nest"]),
        (body("Y[t] = " + "-" * 100000 + "1"), ["nest"]),
        (body("Y[t] = " + "T.max(" * 120 + "Y[t]" + ", 1)" * 120), ["nest"]),
        (body("Y[t] = " + "1" * 5000), ["digits", "syntax"]),
        (body("xs = (Y[t],)", f"for i in range({MAX_EXPR_DEPTH + 5}):", "    xs = (xs[0] * Y[t] + 1,)",
              "Y[t] = xs[0]"), ["MAX_EXPR_DEPTH"]),
        (body("while True:", "    pass"), ["LOOP_CAP"]),
        (body("for i in range(10 ** 12):", "    pass"), ["LOOP_CAP"]),
        (body("for i in range(300):", "    for j in range(300):", "        pass"), ["LOOP_CAP"]),
        (body("for i in T.unroll(10 ** 9):", "    Y[t] = i"), ["LOOP_CAP"]),
        ("x" * (trust.MAX_SCRIPT_CHARS + 1), ["characters"]),
        (body("for i in T.serial(" + "9" * 30 + "):", "    pass"), ["fit"]),
    ]
    for text, names in cases:
        refuse_script(text, names=names)


def test_bad_arguments_and_envs_are_refused():
    refuse(A, lambda: T.parse_script(None), names=["str"])
    refuse(A, lambda: T.parse_script(b"@T.prim_func"), names=["str"])
    refuse(A, lambda: T.parse_script(VALID, env=[1]), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={1: 2}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"__builtins__": {}}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"f": open}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"os": os}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"x": [[[]]] * 3 + [object()]}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"x": 1 << 5000}), names=["env"])
    refuse(A, lambda: T.parse_script(Hostile()), names=["str"])
    refuse(A, lambda: T.parse_script(VALID, env=Hostile()), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"x": Hostile()}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, env={"x": [1, (Hostile(),)]}), names=["env"])
    refuse(A, lambda: T.parse_script(VALID, verify=Hostile()), names=["verify"])
    refuse(A, lambda: T.parse_script(""), names=["exactly one"])
    refuse(A, lambda: T.parse_script(HEAD + "    pass\n" + HEAD + "    pass\n"), names=["exactly one"])


# ---------------------------------------------------------------- good input at the edges
def test_valid_edge_cases_are_accepted():
    accept(A, lambda: T.parse_script(VALID), round_trips)
    accept(A, lambda: T.parse_script(body("Y[t] = Y[t] + T.int32(-2**31)")), round_trips)
    accept(A, lambda: T.parse_script(body("Y[t] = T.int32(2**31 - 1) + Y[t] - T.int32(-2**31 + 1)")), round_trips)
    accept(A, lambda: T.parse_script(body("xs = (Y[t],)", f"for i in range({MAX_EXPR_DEPTH // 2 - 2}):",
                                          "    xs = (xs[0] * Y[t] + 1,)", "Y[t] = xs[0]")), round_trips)
    accept(A, lambda: T.parse_script(body(f"for i in range({trust.LOOP_CAP}):", "    pass", "Y[t] = 1")),
           lambda k: isinstance(k, Kernel), seconds=20)
    accept(A, lambda: T.parse_script(body(f"for i in T.unroll({trust.LOOP_CAP}):", "    Y[t] = i")), round_trips)
    accept(A, lambda: T.parse_script(body(f"x = {(1 << trust.MAX_INT_BITS) - 1} >> {trust.MAX_INT_BITS - 3}",
                                          "Y[t] = x")), lambda k: "Y[t] = 7" in str(k))
    accept(A, lambda: T.parse_script(body("Y[t] = " + "+".join(["Y[t]"] * 60))), round_trips)
    accept(A, lambda: T.parse_script(body("Y[t] = N * len(SHAPE) + max(SHAPE) + sum2"),
                                     env={"N": 3, "SHAPE": (4, 8), "sum2": -1}), lambda k: "Y[t] = 13" in str(k))
    accept(A, lambda: T.parse_script(body("for i, (a, b) in enumerate(zip(range(2), reversed([5, 6]))):",
                                          "    Y[i] = a * 10 + b + i")), lambda k: "Y[1] = 16" in str(k))
    accept(A, lambda: T.parse_script(body("A[t] = T.float32(float('-inf')) + A[t]")), round_trips)


# ---------------------------------------------------------------- the same payloads in @T.prim_func source
MODULE = '''from __future__ import annotations
import os
import subprocess
from os import system
from shutil import rmtree
from tirxpy import T, Tx

@T.macro
def m(A):
    x = {macro}

@T.prim_func
def k(A: {ann}, Y: T.Tensor((64,), "int32")):
    T.launch(grid=(1,), threads={threads})
    t = T.thread_id()
    {body}
'''
MODULE_PAYLOADS = PAYLOADS + [
    (f"os.system('touch {MARK}')", ["os"]),
    (f"system('touch {MARK}')", ["system"]),
    (f"subprocess.run(['touch', '{MARK}'])", ["subprocess"]),
    (f"rmtree('{MARK}')", ["rmtree"]),
]


def test_payloads_in_prim_func_source_are_refused_and_run_nothing(tmp_path):
    import importlib.util

    for n, (payload, names) in enumerate(MODULE_PAYLOADS):
        for where in ("body", "launch", "assert message", "annotation", "macro"):
            if where == "annotation" and ":=" in payload:
                continue   # Python's own compiler refuses := in an annotation, before tirxpy sees the module
            src = MODULE.format(
                macro=payload if where == "macro" else 0,
                ann=payload if where == "annotation" else 'T.Tensor((64,), "float32")',
                threads=payload if where == "launch" else 64,
                body={"body": f"x = {payload}", "assert message": f"assert False, {payload}",
                      "macro": "m(A)"}.get(where, "pass"))
            path = tmp_path / f"payload_{n}_{where.replace(' ', '_')}.py"
            path.write_text(src)

            def load(path=path):
                spec = importlib.util.spec_from_file_location(path.stem, path)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))

            refuse(A, load, names=names + ["not defined", "calling", "reading"])
            assert nothing_ran(), (where, payload)
