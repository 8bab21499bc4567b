"""The README / tutorial example kernel parses, verifies, prints and round-trips."""
import pathlib
import importlib.util

from tirxpy import T
from tirxpy.ir import Scope, annotate_active_threads

from .helpers import round_trip

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_example():
    spec = importlib.util.spec_from_file_location("ir_example", ROOT / "examples" / "ir_example.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_kernel_round_trips_and_verifies():
    mod = load_example()
    k = mod.gemm
    again = round_trip(k)
    T.parse_script(str(k))  # verifies too
    info = annotate_active_threads(again)
    role = again.body.stmts[7]
    tma = role.then_body.stmts[0].then_body.stmts[0].body.stmts[1]
    assert info.scope(tma) is Scope.THREAD and info[tma].describe() == "1 thread (warp 0, lane 0)"
    gemm = role.else_body.stmts[1].body.stmts[1]
    assert gemm.op == "gemm_async" and info.scope(gemm) is Scope.WARPGROUP
    src = (ROOT / "examples" / "ir_example.py").read_text()
    kernel_lines = src[src.index("@T.prim_func"):src.index('if __name__')].strip().splitlines()
    assert len(kernel_lines) <= 30


def test_tutorial_example_is_the_same_kernel():
    text = (ROOT / "docs" / "tutorial" / "02-kernels.md").read_text()
    src = (ROOT / "examples" / "ir_example.py").read_text()
    body = src[src.index("M, N, K"):src.index('if __name__')].strip()
    assert body in text
