"""The README / tutorial example kernel (examples/ir_example.py): it round-trips, verifies,
dispatches every primitive on sm_90a, compiles, and computes A @ B^T in the simulator."""
import importlib.util
import pathlib

import torch

import tirxpy
from tirxpy import T, sim
from tirxpy.ir import Scope, Stmt, annotate_active_threads, structural_equal

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = (ROOT / "examples" / "ir_example.py").read_text()


def load_example(size=None):
    """The example module; ``size`` rewrites its ``M, N, K = 1024, 1024, 1024`` line (same kernel text)."""
    src = SRC if size is None else SRC.replace("M, N, K = 1024, 1024, 1024", "M, N, K = %d, %d, %d" % size)
    path = ROOT / "examples" / "ir_example.py"
    spec = importlib.util.spec_from_loader("ir_example", loader=None, origin=str(path))
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(path)
    import linecache
    fname = f"<ir_example {size}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    exec(compile(src, fname, "exec"), mod.__dict__)
    return mod


def test_example_kernel_round_trips_and_verifies():
    k = load_example().gemm
    again = T.parse_script(str(k))
    assert structural_equal(again, k)
    info = annotate_active_threads(again)
    calls = {}
    for node in _walk(again.body):
        if type(node).__name__ == "PrimitiveCall":
            calls.setdefault(node.op, node)
    assert info.scope(calls["copy_async"]) is Scope.THREAD
    assert info[calls["copy_async"]].describe() == "1 thread (warp 0, lane 0)"
    assert info.scope(calls["gemm_async"]) is Scope.WARPGROUP
    kernel_lines = SRC[SRC.index("@T.prim_func"):SRC.index("if __name__")].strip().splitlines()
    assert len(kernel_lines) <= 36


def _walk(stmt):
    yield stmt
    for name in ("stmts", "body", "then_body", "else_body"):
        child = getattr(stmt, name, None)
        for c in child if isinstance(child, (list, tuple)) else [child]:
            if isinstance(c, Stmt):
                yield from _walk(c)


def test_every_call_dispatches_and_the_kernel_compiles_for_sm90a():
    k = load_example().gemm
    text = tirxpy.explain(k, "sm_90a")
    assert "copy_async/tma_load" in text and "gemm_async/wgmma" in text
    ck = tirxpy.compile(k, arch="sm_90a")
    assert "wgmma.mma_async" in ck.cuda_source and ck.resources.spills == 0 and not ck.resources.perf_warnings


def test_the_kernel_computes_a_times_b_transposed_in_the_simulator():
    mod = load_example((256, 256, 256))
    a = torch.randn(256, 256).bfloat16()
    b = torch.randn(256, 256).bfloat16()
    c = torch.full((256, 256), float("nan"))
    sim.run(mod.gemm, a, b, c)
    ref = a.double() @ b.double().t()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_readme_and_tutorial_show_the_example_kernel():
    body = SRC[SRC.index("M, N, K"):SRC.index("if __name__")].strip()
    assert body in (ROOT / "README.md").read_text()
    assert body in (ROOT / "docs" / "tutorial" / "02-kernels.md").read_text()
