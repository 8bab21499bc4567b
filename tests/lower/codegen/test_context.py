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


def test_non_ascii_python_names_become_ascii_c_names():
    """Python identifiers may hold non-ASCII letters; C names are ASCII: each such letter becomes _u<hex>."""
    c = _ctx()
    assert c.name(object(), "\u03b1") == "_u3b1"
    assert c.name(object(), "k\u00e9rnel") == "k_ue9rnel"
    assert c.name(object(), "k_ue9rnel") == "k_ue9rnel_1"      # a clash with a spelled-out name stays unique


def test_a_kernel_with_non_ascii_names_compiles_and_runs(tmp_path):
    """Kernel, parameter and loop names outside ASCII (valid Python) compile for sm_90a under their C names and give
    the same values in the simulator as the kernel written with ASCII names."""
    import importlib.util

    import torch

    import tirxpy
    from tirxpy.sim import run

    src = tmp_path / "unicode_kernel.py"
    src.write_text(
        "from tirxpy import T\n\n\n"
        "@T.prim_func\n"
        "def k\u00e9rnel(\u00c4: T.Tensor((128,), 'float32'), \u03b2: T.Tensor((128,), 'float32')):\n"
        "    T.launch(grid=(1,), threads=128)\n"
        "    for \u00ef in range(3):\n"
        "        \u03b2[T.thread_id()] = \u00c4[T.thread_id()] * T.float32(2) + T.float32(\u00ef)\n",
        encoding="utf-8")
    spec = importlib.util.spec_from_file_location("unicode_kernel", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = mod.__dict__["k\u00e9rnel"]
    assert tirxpy.compile(k, arch="sm_90a").resources.name == "k_ue9rnel"
    a = torch.randn(128)
    b = torch.full((128,), float("nan"))
    assert run(k, a, b).problems == []
    assert torch.equal(b, a * 2 + 2)
