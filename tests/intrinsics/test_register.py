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
