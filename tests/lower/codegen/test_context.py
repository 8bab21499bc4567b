"""tirxpy/lower/codegen/context.py: unique C names, buffer and intrinsic bookkeeping."""
from tirxpy.intrinsics import get
from tirxpy.ir import Buffer, Kernel, LaunchConfig, Var
from tirxpy.lower.codegen.context import BufferInfo, Context
from tirxpy.lower.codegen.ranges import Ranges
from tirxpy.target import as_target


def _ctx():
    return Context(Kernel("k", [], LaunchConfig(), []), as_target("sm_90a"), Ranges())


def test_names_are_unique_and_stable_per_object():
    c = _ctx()
    a, b = Var("x"), Var("x")
    assert c.name(a, "x") == "x" and c.name(b, "x") == "x_1" and c.name(a, "anything") == "x"
    assert c.name(Var("y"), "x") == "x_2"


def test_names_avoid_cpp_words_and_reserved_prefixes():
    c = _ctx()
    assert c.name(object(), "int") == "int_"
    assert c.name(object(), "tx_smem") == "tx_smem_"
    assert c.name(object(), "__x") == "__x_"
    assert c.name(object(), "not an id") == "v"
    assert c.name(object(), "class") == "v_1"        # Python keyword: falls back to v


def test_buffer_lookup_by_identity_and_intrinsic_use_order():
    c = _ctx()
    A, B = Buffer("A", (4,), "float32"), Buffer("A", (4,), "float32")
    c.buffers[id(A)] = BufferInfo(A, "A", "global")
    assert c.buffer(A).cname == "A" and c.buffer(B) is None
    c.use(get("mbarrier_init"))
    c.use(get("fence_proxy_async"))
    c.use(get("mbarrier_init"))
    assert list(c.intrinsics) == ["mbarrier_init", "fence_proxy_async"]
