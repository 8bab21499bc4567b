"""register_intrinsic: one call, usable immediately (with an instruction not in the table)."""
import pytest

import tirxpy.intrinsics as I
from tirxpy.intrinsics import register_intrinsic
from tirxpy.intrinsics.exercise import exercise_source
from tirxpy.lower.nvrtc import compile_cuda


def test_register_and_compile_new_instruction():
    assert I.lookup("test_brev") is None
    brev = register_intrinsic("test_brev", "brev.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                              ret="r", memory=False, doc="bit reverse")
    assert I.get("test_brev") is brev and brev.__tirx_intrinsic__ == "test_brev"
    assert brev.render_call(["v"]) == "tx_test_brev(v)"
    mod = compile_cuda(exercise_source([brev]), "sm_80")
    assert "tx_exercise" in mod.resources


def test_register_announces_signature_to_ir():
    from tirxpy.ir.intrin_sig import lookup_intrinsic_signature

    assert I.sync_ir_signatures() >= 200

    register_intrinsic("test_lop3", "lop3.b32 {r}, {a}, {b}, {c}, {lut};",
                       [("r", "reg", "uint32", "w"), ("a", "reg", "uint32"), ("b", "reg", "uint32"),
                        ("c", "reg", "uint32"), {"name": "lut", "kind": "imm", "values": tuple(range(256))}],
                       ret="r", memory=False, scope="thread")
    sig = lookup_intrinsic_signature("test_lop3")
    assert sig is not None and sig.n_args == 4 and str(sig.ret_dtype) == "uint32"
    assert lookup_intrinsic_signature("mbarrier_init").n_args == 2


def test_register_target_and_duplicates():
    e = register_intrinsic("test_bw_only", "tcgen05.fence::before_thread_sync;", lowest="sm_100a")
    with pytest.raises(I.TargetError, match="needs sm_100a"):
        e.check_target("sm_90a")
    with pytest.raises(I.RegistrationError, match="already exists"):
        register_intrinsic("test_bw_only", "trap;")
    assert register_intrinsic("test_bw_only", "trap;", replace=True).template == "trap;"


@pytest.mark.parametrize("args, msg", [
    (("test_x", ""), "non-empty PTX string"),
    (("test_x", "a {y};", [42]), "give an Operand"),
    (("test_x", "@"), "'@' is a predicate guard with no instruction"),                  # found by the fuzz
    (("test_x", "setp.ne.u32 p, 1, 0;\n@!p ;"), "'@!p' is a predicate guard with no instruction"),
    # without the ';' ptxas reports a syntax error at the *next* instruction of the kernel, not this entry
    (("test_x", "popc.b32 {r}, {x}", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")]),
     "template statement 'popc.b32 {r}, {x}' has no ';' after it"),
    (("test_x", "membar.gl;\n  trap"), "statement 'trap' has no ';'"),
])
def test_register_errors(args, msg):
    with pytest.raises(I.RegistrationError, match=msg):
        register_intrinsic(*args)


def test_register_then_use_in_a_kernel_on_the_next_line():
    from tirxpy.ir import T

    popc = register_intrinsic("test_popc", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                              ret="r", memory=False)

    @T.prim_func
    def k(A: T.Tensor((128,), "uint32"), B: T.Tensor((128,), "uint32")):
        T.launch(grid=(1,), threads=128)
        i = T.thread_id()
        B[i] = popc(A[i]) + T.ptx.test_popc(A[i])

    text = str(k)
    assert text.count("test_popc(") == 2


_R = [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")]


@pytest.mark.parametrize("args, kw, msg", [
    (("t_bad", "popc.b32 {r}, {x};", "rx"), dict(ret="r"), r"operands must be a list of operands, got str"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", checks="abc"), r"checks= must be a list"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", checks=[5]), r"checks= holds 5, which is not callable"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", lowest="sm_100a", highest="sm_90a"),
     r"highest='sm_90a' is below lowest='sm_100a'"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", lowest="sm_91"), r"lowest='sm_91' is not a target NVRTC"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", lowest=90), r"lowest=90 is not a target"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", highest="sm_101a"), r"highest='sm_101a' is not a target"),
    (("t_bad", "popc.b32 {r}, {x};", [("r", ["reg"], "uint32", "w"), ("x", "reg", "uint32")]), dict(ret="r"),
     r"operand 'r': unknown kind \['reg'\]"),
    (("t_bad", "popc.b32 {r}, {x};", [("r", "reg", {"u": 1}, "w"), ("x", "reg", "uint32")]), dict(ret="r"),
     r"operand 'r': dtype \{'u': 1\} has no register form"),
    (("t_bad", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w", 10**9), ("x", "reg", "uint32")]), dict(ret="r"),
     r"count must be an int in \[1, 128\]"),
    (("t_bad", "popc.b32 {r}, {x};", [("r", "reg", "uint32", "w", True), ("x", "reg", "uint32")]), dict(ret="r"),
     r"count must be an int"),
    (("t_bad", "x {int};", [("int", "reg", "uint32")]), {}, r"operand name 'int' is not a C identifier"),
    (("t_bad", "x {a};", [{"name": "a", "kind": "reg", "dtype": "uint32", "colour": 1}]), {},
     r"operand 0 .*unknown field\(s\) \['colour'\]"),
    (("t_bad", "x {a};", [{"kind": "reg"}]), {}, r"needs at least 'name' and 'kind'"),
    (("t_bad", "x {a};", [{"name": "a", "kind": "imm", "values": (1.5,)}]), {}, r"values must be a tuple of at most 65536 ints"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", scope="grid"), r"scope must be one of"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", scope=["thread"]), r"scope must be one of"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="z"), r"ret='z' names no operand"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", memory="yes"), r"memory= must be True or False"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", colour=1), r"unknown keyword 'colour'"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", doc=5), r"doc= must be a str"),
    (("t_bad", "popc.b32 {r}, {x};", _R), dict(ret="r", replace="no"), r"replace= must be True or False"),
    (("t_bad", "popc.b32 {r}, {x}, {y};", _R), dict(ret="r"), r"template names \['y'\] that are not operands"),
    (("t_bad", "popc.b32 {r};", _R), dict(ret="r"), r"operands \['x'\] do not appear in the template"),
    (("t_bad", 'trap;\\"); evil(); asm("', []), {}, r"template contains '\\\\'"),
    (("t_bad", "trap;\x00", []), {}, r"template contains '\\x00'"),
    (("t_bad", "trap; \u00e9", []), {}, r"template contains '\u00e9'; PTX text is printable ASCII"),
    (("t_bad", "trap; \ud800", []), {}, r"template contains '\\ud800'"),      # a lone surrogate (no UTF-8)
    (("t_bad", "add.u32 {r}, {x}, {x};", _R), dict(ret="r", memory=False, cxx="{x} + \ud800"), r"no '\\ud800'"),
    (("t_bad", "add.u32 {r}, {x}, {x};", _R), dict(ret="r", memory=False, cxx="{x}; } void evil() { return 0"),
     r"cxx=\) is one C\+\+ expression of the operands in ASCII: no ';'"),
    (("t_bad", "add.u32 {r}, {x}, {x};", _R), dict(ret="r", memory=False, cxx="{x} // c"), r"no '//'"),
    (("1bad", "trap;", []), {}, r"intrinsic name '1bad' must be a Python and C identifier"),
    (("class", "trap;", []), {}, r"intrinsic name 'class' must be a Python and C identifier"),
    (("a" * 65, "trap;", []), {}, r"must be a Python and C identifier of at most 64"),
    ((5, "trap;", []), {}, r"name must be a str, got int"),
    (("mbarrier_init", "trap;", []), dict(replace=True), r"'mbarrier_init' is a built-in entry"),
    (("mbarrier_init", "trap;", []), {}, r"already exists"),
    (("wgmma_m64n64k16_f32_bf16_bf16_ss", "trap;", []), {}, r"generated family 'wgmma_m64'"),
])
def test_register_validates_every_field(args, kw, msg):
    with pytest.raises(I.RegistrationError, match=msg):
        register_intrinsic(*args, **kw)
    assert I.lookup("t_bad") is None


def test_register_edge_cases_that_are_fine():
    e = register_intrinsic("t_edge", "popc.b32 {r}, {x};", _R, ret="r", lowest="sm_100a", highest="sm_100a",
                           memory=False, replace=True)
    assert str(e.requirement) == "sm_100a..sm_100a"
    assert register_intrinsic("t_edge", "popc.b32 {r}, {x};", _R, ret="r", replace=True).lowest == "sm_80"
    v = register_intrinsic("t_vec", "mov.b32 {d}, 0;", [("d", "reg", "uint32", "w", 128)], replace=True)
    assert v.operand("d").count == 128 and "(&d)[128]" in v.render_helper()


def test_numpy_ints_are_ints_in_operand_fields_and_imm_arguments():
    import numpy as np

    e = register_intrinsic("t_np", "mov.b32 {r}, {x};", [("r", "reg", "uint32", "w", np.int64(1)),
                           {"name": "x", "kind": "imm", "values": (np.int32(1), 2)}], ret="r", replace=True)
    assert e.operand("r").count == 1 and e.operand("x").values == (1, 2) and type(e.operand("x").values[0]) is int
    e.check_args([np.int64(2)])
    for bad in (True, 2**40, 1.0):
        with pytest.raises(I.OperandError, match=r"operand 'x' must be an int in \[-2\*\*31, 2\*\*31\)"):
            e.check_args([bad])


def test_imm_values_are_bounded_before_they_are_walked():
    for values in (range(10**12), (2**40,)):   # range(10**12) used to be walked element by element (a hang)
        with pytest.raises(I.RegistrationError, match="values must be a tuple of at most 65536 ints"):
            register_intrinsic("t_vals", "mov.b32 {r}, {x};", [("r", "reg", "uint32", "w"),
                               {"name": "x", "kind": "imm", "values": values}], ret="r")


def test_operand_named_like_a_predicate_outputs_local_is_refused():
    with pytest.raises(I.RegistrationError, match=r"\['p_u32'\] are the helper's local"):
        register_intrinsic("t_pred", "setp.eq.u32 {p}, {p_u32}, 0;", [("p", "pred", "bool", "w"), ("p_u32", "reg", "uint32")])


def test_a_check_that_raises_and_a_name_that_is_no_str_are_named():
    e = register_intrinsic("t_chk", "mov.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "imm")], ret="r",
                           checks=[lambda k: 1 // 0], replace=True)
    with pytest.raises(I.OperandError, match="raised ZeroDivisionError"):
        e.check_args([3])
    with pytest.raises(I.IntrinsicError, match="an intrinsic is named by a str, got int"):
        I.get(5)
    assert I.lookup(None) is None


class _Unprintable:
    def __repr__(self):
        raise ZeroDivisionError("the value's own __repr__ ran")

    __str__ = __format__ = __repr__


class _OpaqueCheck:
    """A check that is a callable object whose attribute lookups (``__name__`` among them) raise."""

    def __call__(self, known):
        raise ValueError("no")

    def __getattr__(self, name):
        raise ZeroDivisionError("the check's own __getattr__ ran")


def test_a_failing_check_is_named_without_running_its_arguments_or_its_own_code():
    e = register_intrinsic("t_chk_opaque", "mov.b32 {r}, {x};", [("r", "reg", "uint32", "w"), ("x", "reg", "uint32")],
                           ret="r", checks=[_OpaqueCheck()], replace=True)
    with pytest.raises(I.OperandError, match=r"the check <[\w.]*_OpaqueCheck object at \w* raised ValueError: no on "
                                             r"the arguments \{'x': <_Unprintable object>\}"):
        e.check_args([_Unprintable()])
